"""``torchvision.ops.deform_conv2d``: ONNX ``DeformConv`` from opset 19; before it, the bilinear samples gathered and
multiplied by the weight."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from ...translation.registry import register
from .._common import BOOL, INT64, dim_of, int_op, int_range, opmath_dtype, static_dim, widen


def _checked(ctx: NodeContext, tensors: dict[str, ir.Value], ints: dict[str, int], use_mask: bool,
             ) -> tuple[int, int, int, int]:
    """``(out_channels, in_channels, kh, kw)`` after the checks of torchvision's kernel, which its meta function
    leaves out."""
    for name, x in tensors.items():
        rank = 1 if name == "bias" else 4
        if (name != "mask" or use_mask) and ctx.rank(x) != rank:
            raise ValueError(f"deform_conv2d: {name} has rank {ctx.rank(x)}, expected {rank}")
    for name, value in ints.items():
        if not isinstance(value, int):
            raise NotImplementedError(f"deform_conv2d: {name} must be known at export time, got a dynamic size")
        lowest = 0 if name.startswith("pad") else 1
        if value < lowest:
            raise ValueError(f"deform_conv2d: {name}={value}, expected {lowest} or more")
    out_channels, per_group, kh, kw = (static_dim(d) for d in ctx.arg_val(1).shape)
    if None in (out_channels, per_group, kh, kw):
        raise NotImplementedError("deform_conv2d: the weight's shape must be known at export time")
    channels, taps, groups = per_group * ints["groups"], kh * kw, ints["offset_groups"]
    expected = {
        "input.shape[1] (weight.shape[1] * groups)": (dim_of(ctx, tensors["input"], 1), channels),
        "weight.shape[0] % groups": (out_channels % ints["groups"], 0),
        "input.shape[1] % offset_groups": (channels % groups, 0),
        "offset.shape[1] (2 * offset_groups * kh * kw)": (dim_of(ctx, tensors["offset"], 1), 2 * groups * taps),
    }
    if use_mask:
        expected["mask.shape[1] (offset_groups * kh * kw)"] = (dim_of(ctx, tensors["mask"], 1), groups * taps)
    for axis, k, side in ((2, kh, "h"), (3, kw, "w")):
        size = dim_of(ctx, tensors["input"], axis)
        if isinstance(size, int):
            s, p, d = (ints[f"{name}_{side}"] for name in ("stride", "pad", "dilation"))
            expected[f"offset.shape[{axis}] (the output size)"] = (dim_of(ctx, tensors["offset"], axis),
                                                                  (size + 2 * p - d * (k - 1) - 1) // s + 1)
    for what, (got, want) in expected.items():
        if isinstance(got, int) and got != want:
            raise ValueError(f"deform_conv2d: {what} is {got}, expected {want}")
    return out_channels, channels, kh, kw


def _base(ctx: NodeContext, n: int | ir.Value, k: int, stride: int, pad: int, dilation: int, t: ir.DataType,
          ) -> ir.Value:
    """``[n, k]``: the position output ``o`` samples for kernel tap ``i`` without offset, ``o * stride - pad + i *
    dilation``."""
    start = ctx.op("Sub", ctx.op("Mul", int_range(ctx, n), ctx.const(stride, INT64)), ctx.const(pad, INT64))
    start = ctx.op("Unsqueeze", ctx.cast(start, t), ctx.const([1], INT64))
    return ctx.op("Add", start, ctx.const(np.arange(k) * dilation, t))


def _corners(ctx: NodeContext, values: Sequence[int], dtype: ir.DataType) -> ir.Value:
    """A constant ``[4, 1, 1, 1, 1]`` along the corner axis of the samples ``[N, G, 4, Ho, kh, Wo, kw]``."""
    return ctx.const(np.array(values).reshape(4, 1, 1, 1, 1), dtype)


def _composition(ctx: NodeContext, input: ir.Value, weight: ir.Value, offset: ir.Value, mask: ir.Value | None,
                 bias: ir.Value, ints: dict[str, int], out_channels: int, channels: int, kh: int, kw: int,
                 ) -> ir.Value:
    """torchvision's deformable im2col, then the grouped product with the weight: each sample is the bilinear
    interpolation of its 4 neighbours, a neighbour outside the image read as 0 and a sample at -1 or beyond the
    image 0 (``bilinear_interpolate``); one GatherND reads the 4 corners of every sample."""
    t = opmath_dtype(ctx.out_dtype)
    g, groups = ints["offset_groups"], ints["groups"]
    h, w = dim_of(ctx, input, 2), dim_of(ctx, input, 3)
    ho, wo = dim_of(ctx, offset, 2), dim_of(ctx, offset, 3)
    # offset [N, G * kh * kw * 2, Ho, Wo] -> dy, dx [N, G, 1, Ho, kh, Wo, kw]
    off = ctx.op("Reshape", ctx.cast(offset, t), ctx.int64s([0, g, kh, kw, 2, ho, wo]))
    off = ctx.op("Transpose", off, perm=[0, 1, 4, 5, 2, 6, 3])
    one = ctx.const([2], INT64)
    dy, dx = (ctx.op("Unsqueeze", ctx.op("Gather", off, ctx.const(i, INT64), axis=2), one) for i in (0, 1))
    base_y = ctx.op("Reshape", _base(ctx, ho, kh, ints["stride_h"], ints["pad_h"], ints["dilation_h"], t),
                    ctx.const([-1, kh, 1, 1], INT64))
    y = ctx.op("Add", dy, base_y)
    x = ctx.op("Add", dx, _base(ctx, wo, kw, ints["stride_w"], ints["pad_w"], ints["dilation_w"], t))
    height, width = ctx.operand(h, t), ctx.operand(w, t)
    inside = ctx.op("And", ctx.op("And", ctx.op("Greater", y, ctx.const(-1, t)), ctx.op("Less", y, height)),
                    ctx.op("And", ctx.op("Greater", x, ctx.const(-1, t)), ctx.op("Less", x, width)))
    y0, x0 = ctx.op("Floor", y), ctx.op("Floor", x)
    ly, lx = ctx.op("Sub", y, y0), ctx.op("Sub", x, x0)
    hy, hx = (ctx.op("Sub", ctx.const(1, t), v) for v in (ly, lx))
    # the 4 corners on axis 2: (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)
    yc, xc = ctx.op("Add", y0, _corners(ctx, [0, 0, 1, 1], t)), ctx.op("Add", x0, _corners(ctx, [0, 1, 0, 1], t))
    wy = ctx.op("Where", _corners(ctx, [0, 0, 1, 1], BOOL), ly, hy)
    wx = ctx.op("Where", _corners(ctx, [0, 1, 0, 1], BOOL), lx, hx)
    valid = inside
    for v, size in ((yc, height), (xc, width)):
        in_image = ctx.op("And", ctx.op("GreaterOrEqual", v, ctx.const(0, t)),
                          ctx.op("LessOrEqual", v, ctx.op("Sub", size, ctx.const(1, t))))
        valid = ctx.op("And", valid, in_image)
    zero = ctx.const(0, t)
    weights = ctx.op("Where", valid, ctx.op("Mul", wy, wx), zero)
    if mask is not None:
        m = ctx.op("Reshape", ctx.cast(mask, t), ctx.int64s([0, g, kh, kw, ho, wo]))
        m = ctx.op("Unsqueeze", ctx.op("Transpose", m, perm=[0, 1, 4, 2, 5, 3]), one)
        weights = ctx.op("Mul", weights, m)
    # a sample out of the image reads pixel 0 with weight 0: no index out of range, NaN offsets included
    index = ctx.op("Add", ctx.op("Mul", ctx.op("Where", valid, yc, zero), width), ctx.op("Where", valid, xc, zero))
    last = ctx.const([-1], INT64)
    index = ctx.op("Unsqueeze", ctx.op("Flatten", ctx.cast(index, INT64), axis=2), last)
    per_group = channels // g
    image = ctx.op("Reshape", ctx.cast(input, t), ctx.int64s([-1, per_group, int_op(ctx, "Mul", h, w)]))
    samples = ctx.op("GatherND", ctx.op("Transpose", image, perm=[0, 2, 1]), index, batch_dims=1)
    samples = ctx.op("Mul", samples, ctx.op("Unsqueeze", ctx.op("Flatten", weights, axis=2), last))
    taps = int_op(ctx, "Mul", int_op(ctx, "Mul", ho, wo), kh * kw)
    columns = ctx.op("ReduceSum", ctx.op("Reshape", samples, ctx.int64s([-1, 4, taps, per_group])),
                     ctx.const([1], INT64), keepdims=0)
    # [N * G, Ho * kh * Wo * kw, C / G] -> [N, groups, C / groups * kh * kw, Ho * Wo], times the weight
    columns = ctx.op("Reshape", columns, ctx.int64s([-1, g, ho, kh, wo, kw, per_group]))
    columns = ctx.op("Transpose", columns, perm=[0, 1, 6, 3, 5, 2, 4])
    pixels = int_op(ctx, "Mul", ho, wo)
    columns = ctx.op("Reshape", columns, ctx.int64s([-1, groups, channels // groups * kh * kw, pixels]))
    kernel = ctx.op("Reshape", ctx.cast(weight, t), ctx.const([groups, out_channels // groups, -1], INT64))
    out = ctx.op("Reshape", ctx.op("MatMul", kernel, columns), ctx.int64s([-1, out_channels, ho, wo]))
    out = ctx.op("Add", out, ctx.op("Reshape", ctx.cast(bias, t), ctx.const([-1, 1, 1], INT64)))
    return ctx.cast(out, ctx.out_dtype)


@register("torchvision::deform_conv2d.default")
def torchvision_deform_conv2d(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    offset: ir.Value,
    mask: ir.Value,
    bias: ir.Value,
    stride_h: int,
    stride_w: int,
    pad_h: int,
    pad_w: int,
    dilation_h: int,
    dilation_w: int,
    groups: int,
    offset_groups: int,
    use_mask: bool,
) -> ir.Value:
    """deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h,
    SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups,
    SymInt offset_groups, bool use_mask) -> Tensor: ONNX DeformConv with opset 19 or more (to_onnx(...,
    target_opset=19)); at opset 18 the bilinear samples (one GatherND) times the weight (MatMul)"""
    tensors = {"input": input, "weight": weight, "offset": offset, "mask": mask, "bias": bias}
    ints = {"stride_h": stride_h, "stride_w": stride_w, "pad_h": pad_h, "pad_w": pad_w, "dilation_h": dilation_h,
            "dilation_w": dilation_w, "groups": groups, "offset_groups": offset_groups}
    out_channels, channels, kh, kw = _checked(ctx, tensors, ints, use_mask)
    if ctx.opset < 19:
        return _composition(ctx, input, weight, offset, mask if use_mask else None, bias, ints, out_channels, channels,
                            kh, kw)
    x = widen(ctx, input, "DeformConv")
    inputs = [ctx.cast(v, x.dtype) for v in (weight, offset, bias, *([mask] if use_mask else []))]
    y = ctx.op("DeformConv", x, *inputs, kernel_shape=[kh, kw], strides=[stride_h, stride_w],
               pads=[pad_h, pad_w, pad_h, pad_w], dilations=[dilation_h, dilation_w], group=groups,
               offset_group=offset_groups)
    return ctx.cast(y, ctx.out_dtype)
