"""Backward of the convolutions: ``convolution_backward`` of 1-D, 2-D and 3-D convolutions, plain or transposed,
with groups, strides, padding and dilation.

For ``y = Conv(x, w)``: ``grad_input`` is the transposed convolution of ``grad_output`` by ``w`` (ConvTranspose,
its ``output_padding`` giving back the input positions the stride left out), ``grad_weight`` the products of the
windows of the input (one strided Slice per kernel offset) by ``grad_output`` (im2col, as PyTorch's CPU kernels;
one ``Gemm`` or batched ``MatMul``), else (depthwise-like groups, more than 64 kernel offsets, a weight of dynamic
shape) a convolution of the input by ``grad_output`` with the batch as channels (stride and dilation swapped, cut
to the kernel size), ``grad_bias`` the sum of ``grad_output`` over every axis but the channels. A transposed
convolution swaps the roles: its ``grad_input`` is the convolution of ``grad_output`` by ``w``, its
``grad_weight`` the same as above with ``grad_output`` and the input exchanged.

Computed in float32 (float16 and bfloat16 as PyTorch does; onnxruntime has no double Conv); each result is cast
to PyTorch's type. Kernel, stride, padding, dilation and groups must be static; batch and spatial sizes may be
dynamic. An output whose ``output_mask`` entry is False (or that the graph does not read) is None.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from ..dtypes import onnx_dtype
from ..errors import ConversionError
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import FLOAT, INT64, Ints, concat_shape, dim_of, dims_of, int_op, spatial_dims, spatial_ints, uses_output


def _spatial_slice(ctx: NodeContext, x: ir.Value, n: int, ends: list[int] | ir.Value) -> ir.Value:
    """``x[:, :, :ends[0], ..., :ends[n - 1]]``."""
    ends_ = ctx.const(ends, INT64) if isinstance(ends, list) else ends
    return ctx.op("Slice", x, ctx.const([0] * n, INT64), ends_, ctx.const(list(range(2, n + 2)), INT64))


def _spatial_sizes(ctx: NodeContext, x: ir.Value, n: int) -> list[int] | ir.Value:
    """The spatial sizes of ``x``: ints where all static, else a 1-D INT64 value."""
    sizes = spatial_dims(x, n)
    return ctx.op("Shape", x, start=2) if None in sizes else sizes


def _transposed_to(
    ctx: NodeContext, dy: ir.Value, w: ir.Value, x: ir.Value, attrs: dict[str, Any], n: int
) -> ir.Value:
    """The gradient of ``Conv(x, w)`` for ``x``: ``ConvTranspose(dy, w)`` of the spatial size of ``x``, its
    ``output_padding`` (less than the stride) the positions of ``x`` the last window did not reach."""
    strides, pads, dilations = attrs["strides"], attrs["pads"][:n], attrs["dilations"]
    kernel = spatial_ints(list(w.shape)[2:], n, "kernel size")
    sizes, out = spatial_dims(x, n), spatial_dims(dy, n)
    if None not in sizes and None not in out:
        extra = [i + 2 * p - d * (k - 1) - 1 - s * (o - 1)
                 for i, o, p, d, k, s in zip(sizes, out, pads, dilations, kernel, strides)]
        if any(extra):
            return ctx.op("ConvTranspose", dy, w, output_padding=extra, **attrs)
        return ctx.op("ConvTranspose", dy, w, **attrs)
    if all(s == 1 for s in strides):  # nothing left out: the sizes match
        return ctx.op("ConvTranspose", dy, w, **attrs)
    # dynamic sizes: the full transposed convolution, stride - 1 zeros after it, then the window of x
    full = ctx.op("ConvTranspose", dy, w, **{**attrs, "pads": [0] * (2 * n)})
    full = ctx.op("Pad", full, ctx.const([0] * (n + 2) + [0, 0] + [s - 1 for s in strides], INT64))
    begin = ctx.const(pads, INT64)
    end = ctx.op("Add", ctx.op("Shape", x, start=2), begin)
    return ctx.op("Slice", full, begin, end, ctx.const(list(range(2, n + 2)), INT64))


#: the gradient of the weight by im2col (:func:`_im2col_weight_grad`) up to this many kernel offsets (one
#: ``Slice`` and one product each), and for grouped convolutions from this many weights per group
#: (``C_out / g * C_in / g``): below, depthwise-like, onnxruntime's grouped ``Conv`` of :func:`_weight_grad` is as
#: fast or faster (the products are too small to pay for copying the windows)
_MAX_OFFSETS = 64
_MIN_GROUP_WEIGHTS = 16
#: from this many input channels, one product per offset (no copy of the ``k`` windows into one matrix); below,
#: one product of the stacked windows (a product of a few columns is slow)
_MIN_CHANNELS_PER_OFFSET = 16


def _im2col_fits(shape: list[Any], groups: int) -> bool:
    """Whether :func:`_im2col_weight_grad` computes the gradient of a weight of shape ``shape``."""
    if not all(isinstance(d, int) for d in shape) or math.prod(shape[2:]) > _MAX_OFFSETS:
        return False
    return groups == 1 or shape[0] // groups * shape[1] >= _MIN_GROUP_WEIGHTS


def _im2col_weight_grad(
    ctx: NodeContext, x: ir.Value, dy: ir.Value, shape: list[int], attrs: dict[str, Any], n: int
) -> ir.Value:
    """The gradient of ``Conv(x, w)`` for ``w`` of static shape ``shape`` ``(C_out, C_in / g, *kernel)`` as
    PyTorch's CPU kernels compute it (im2col): matrix products of the windows of ``x`` by ``dy``.

    ``x`` ``(N, C_in, *s)`` becomes ``(C_in, N, *s)``, padded; its window for kernel offset ``j`` (from
    ``j * dilation``, ``stride`` apart, as many positions as ``dy`` has) is ``(C_in, N, *o)``, ``dy`` becomes
    ``(C_out, N, *o)``: the gradient at offset ``j`` is their product over the ``N * L`` positions, group by
    group. Wide inputs have one ``Gemm`` (``MatMul`` with groups) per offset, narrow ones one of the
    ``k = prod(kernel)`` windows stacked: ``(C_in / g * k, N * L)``.
    """
    groups, strides, dilations, pads = attrs["group"], attrs["strides"], attrs["dilations"], attrs["pads"]
    c_out, per_group, kernel = shape[0], shape[1], shape[2:]
    rows, spatial = c_out // groups, list(range(2, n + 2))
    xs = ctx.op("Transpose", x, perm=[1, 0, *spatial])
    if any(pads):
        xs = ctx.op("Pad", xs, ctx.const([0, 0, *pads[:n], 0, 0, *pads[n:]], INT64))
    out = spatial_dims(dy, n)
    if None in out:  # the end of the first window: stride * (o - 1) + 1
        span = ctx.op("Add", ctx.op("Mul", ctx.op("Shape", dy, start=2), ctx.const(strides, INT64)),
                      ctx.const([1 - s for s in strides], INT64))
    axes = ctx.const(spatial, INT64)
    steps = [ctx.const(strides, INT64)] if any(s != 1 for s in strides) else []
    padded = [None if i is None else i + 2 * p for i, p in zip(spatial_dims(x, n), pads)]
    windows = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        starts = [j * d for j, d in zip(offset, dilations)]
        if not (steps or any(starts)) and None not in out and out == padded:  # all of it (1 x 1 kernels)
            windows.append(xs)
            continue
        if None in out:
            ends = ctx.op("Add", span, ctx.const(starts, INT64))
        else:
            ends = ctx.const([b + s * (o - 1) + 1 for b, s, o in zip(starts, strides, out)], INT64)
        windows.append(ctx.op("Slice", xs, ctx.const(starts, INT64), ends, axes, *steps))
    width = per_group
    if len(windows) > 1 and groups * per_group < _MIN_CHANNELS_PER_OFFSET:  # (C_in, k, N, *o)
        one = ctx.const([1], INT64)
        windows = [ctx.op("Concat", *(ctx.op("Unsqueeze", w, one) for w in windows), axis=1)]
        width *= math.prod(kernel)
    dys = ctx.op("Transpose", dy, perm=[1, 0, *spatial])
    if groups == 1:  # (C_out, N * L) by (width, N * L) transposed
        dys = ctx.op("Reshape", dys, ctx.const([c_out, -1], INT64))
        flat = ctx.const([width, -1], INT64)
        grads = [ctx.op("Gemm", dys, ctx.op("Reshape", w, flat), transB=1) for w in windows]
    else:  # (g, width, N * L) by (g, N * L, C_out / g), transposed
        if rows == 1:
            dys = ctx.op("Reshape", dys, ctx.const([groups, -1, 1], INT64))
        else:
            dys = ctx.op("Transpose", ctx.op("Reshape", dys, ctx.const([groups, rows, -1], INT64)), perm=[0, 2, 1])
        flat = ctx.const([groups, width, -1], INT64)
        grads = [ctx.op("Transpose", ctx.op("MatMul", ctx.op("Reshape", w, flat), dys), perm=[0, 2, 1])
                 for w in windows]
    if len(grads) > 1:  # offset by offset: (C_out, C_in / g, k)
        pair = ctx.const([c_out, per_group, 1], INT64)
        grads = [ctx.op("Concat", *(ctx.op("Reshape", g, pair) for g in grads), axis=-1)]
    return ctx.op("Reshape", grads[0], ctx.const(shape, INT64))


def _weight_grad(
    ctx: NodeContext, x: ir.Value, dy: ir.Value, kernel: list[int], attrs: dict[str, Any], n: int
) -> ir.Value:
    """The gradient of ``Conv(x, w)`` for ``w`` (``(C_out, C_in / groups, *kernel)``): the convolution of ``x``
    by ``dy`` with the batch as channels, grouped, stride and dilation swapped, cut to ``kernel``.

    ``x`` ``(N, C_in, *s)`` becomes ``(C_in / g, g * N, *s)`` (channel ``j * N + b`` of row ``i`` holds
    ``x[b, j * C_in / g + i]``), ``dy`` ``(N, C_out, *o)`` the weight ``(C_out, N, *o)``: the convolution gives
    ``(C_in / g, C_out, *k')``, transposed.
    """
    groups = attrs["group"]
    spatial = list(range(2, n + 2))
    if groups == 1:
        xs = ctx.op("Transpose", x, perm=[1, 0, *spatial])
    else:
        batch = dim_of(ctx, x, 0)
        per_group = int_op(ctx, "Div", dim_of(ctx, x, 1), groups)
        sizes = dims_of(ctx, x, 2)
        xs = ctx.op("Reshape", x, concat_shape(ctx, [batch, groups, per_group, *sizes]), allowzero=1)
        xs = ctx.op("Transpose", xs, perm=[2, 1, 0, *(a + 1 for a in spatial)])
        rows = concat_shape(ctx, [per_group, int_op(ctx, "Mul", batch, groups), *sizes])
        xs = ctx.op("Reshape", xs, rows, allowzero=1)
    ws = ctx.op("Transpose", dy, perm=[1, 0, *spatial])
    grad = ctx.op(
        "Conv", xs, ws, strides=attrs["dilations"], dilations=attrs["strides"], pads=attrs["pads"], group=groups
    )
    grad = ctx.op("Transpose", grad, perm=[1, 0, *spatial])
    sizes, out = spatial_dims(x, n), spatial_dims(dy, n)
    if None not in sizes and None not in out:
        pads = attrs["pads"][:n]
        got = [(i + 2 * p - s * (o - 1) - 1) // d + 1
               for i, o, p, s, d in zip(sizes, out, pads, attrs["strides"], attrs["dilations"])]
        if got == kernel:
            return grad
    return _spatial_slice(ctx, grad, n, kernel)


@register("aten::convolution_backward.default")
def aten_convolution_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    input: ir.Value,
    weight: ir.Value,
    bias_sizes: Sequence[Any] | None,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    transposed: bool,
    output_padding: Ints,
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[ir.Value | None, ir.Value | None, ir.Value | None]:
    """convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes,
    SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,
    SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)"""
    n = ctx.rank(weight) - 2
    if not isinstance(groups, int):
        raise ConversionError("convolution_backward: groups must be static")
    if ctx.rank(input) != n + 2:
        raise ConversionError(f"convolution_backward: expected an input of rank {n + 2}, got {ctx.rank(input)}")
    attrs: dict[str, Any] = {
        "strides": spatial_ints(stride, n, "stride"),
        "pads": spatial_ints(padding, n, "padding") * 2,
        "dilations": spatial_ints(dilation, n, "dilation"),
        "group": groups,
    }
    kernel = spatial_ints(list(weight.shape)[2:], n, "kernel size")
    dy, x, w = (ctx.cast(v, FLOAT) for v in (grad_output, input, weight))
    need = [bool(m) and uses_output(ctx, i) for i, m in enumerate(output_mask)]
    grads: list[ir.Value | None] = [None, None, None]
    if need[0]:
        if transposed:  # the forward convolution; output_padding >= stride (< dilation) adds a last position
            grads[0] = ctx.op("Conv", dy, w, **attrs)
            out_pad = spatial_ints(output_padding, n, "output_padding", [0] * n)
            if any(o >= s for o, s in zip(out_pad, attrs["strides"])):
                grads[0] = _spatial_slice(ctx, grads[0], n, _spatial_sizes(ctx, x, n))
        else:
            grads[0] = _transposed_to(ctx, dy, w, x, attrs, n)
    if need[1]:
        a, b = (dy, x) if transposed else (x, dy)
        shape = list(weight.shape)
        if _im2col_fits(shape, groups):
            grads[1] = _im2col_weight_grad(ctx, a, b, shape, attrs, n)
        else:
            grads[1] = _weight_grad(ctx, a, b, kernel, attrs, n)
    if need[2]:
        grads[2] = ctx.op("ReduceSum", dy, ctx.const([0, *range(2, n + 2)], INT64), keepdims=0)
    return tuple(None if v is None else ctx.cast(v, onnx_dtype(ctx.val[i].dtype)) for i, v in enumerate(grads))
