"""Resampling: upsample/interpolate (nearest, linear, bilinear, bicubic, trilinear) to ONNX ``Resize``, and
``grid_sampler`` to ONNX ``GridSample``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BF16, DOUBLE, F16, FLOAT, INT64, dim_of, kernel_op, spatial_dims


def _scale(size: int | None, out: int | None, factor: float) -> float:
    """``factor`` as float32, moved by a few ulps when needed so that ``floor(size * scale) == out`` in
    float32 and float64 (onnxruntime and ONNX shape inference) as it is for PyTorch in float64."""
    scale = np.float32(factor)
    if size is None or out is None:
        return float(scale)
    for _ in range(16):
        got = {math.floor(np.float32(size) * scale), math.floor(float(size) * float(scale))}
        if got == {out}:
            break
        scale = np.nextafter(scale, np.float32(np.inf if min(got) < out else -np.inf), dtype=np.float32)
    return float(scale)


def _resize(
    ctx: NodeContext,
    input: ir.Value,
    output_size: Any,
    scales: Sequence[float | None] | None,
    mode: str,
    align_corners: bool | None = None,
    antialias: bool = False,
) -> ir.Value:
    """ONNX Resize as PyTorch's ``upsample_*``: it maps output coordinates with the scale factors when
    given (``1 / scale``), else with ``input / output`` sizes."""
    n = ctx.rank(input) - 2
    given = scales
    attrs: dict[str, Any] = {"axes": list(range(2, n + 2))}
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        attrs.update(
            mode="nearest",
            coordinate_transformation_mode="half_pixel" if exact else "asymmetric",
            nearest_mode="round_prefer_ceil" if exact else "floor",
        )
    else:
        attrs.update(mode=mode, coordinate_transformation_mode="align_corners" if align_corners else "half_pixel")
        if mode == "cubic":
            attrs["cubic_coeff_a"] = -0.5 if antialias else -0.75
    if antialias:
        attrs.update(antialias=1, exclude_outside=1)
    dims = spatial_dims(input, n)
    outs = [d if isinstance(d, int) else None for d in ctx.val.shape[2:]]
    if scales is not None:
        scales = list(scales) * n if len(scales) == 1 else list(scales)
        if any(s is None for s in scales):
            scales = None
    if scales is not None and output_size is not None:
        # both given (the .default overloads): keep the scales if they give the same sizes
        if any(d is None or o is None or math.floor(d * s) != o for d, o, s in zip(dims, outs, scales)):
            scales = None
    if scales is not None:
        values = [_scale(d, o, s) for d, o, s in zip(dims, outs, scales)]
        roi_scales_sizes: list[ir.Value | None] = [None, ctx.const(values, FLOAT)]
    elif output_size is not None:
        roi_scales_sizes = [None, None, ctx.int64s(list(output_size))]
    else:
        raise ValueError("upsample: neither output_size nor scale_factors is given")
    dtype = ctx.out_dtype
    if dtype in _WIDE and not antialias:
        # onnxruntime's Resize has no double nor 64-bit integer kernel: through float32 it rounds the values
        return _wide(ctx, input, output_size, given, mode, bool(align_corners))
    compute = dtype if dtype in (FLOAT, ir.DataType.FLOAT16) else FLOAT
    if mode == "nearest" and dtype in (ir.DataType.INT32, ir.DataType.INT8, ir.DataType.UINT8):
        compute = dtype
    y = ctx.op("Resize", ctx.cast(input, compute), *roi_scales_sizes, **attrs)
    if mode in ("linear", "cubic") and not antialias and dtype in (FLOAT, DOUBLE, F16, BF16):
        return _unless_finite(ctx, input, y, given, mode == "cubic", bool(align_corners))
    return ctx.cast(y, dtype)


#: types onnxruntime's Resize cannot take whose values float32 does not hold exactly
_WIDE = (DOUBLE, INT64, ir.DataType.UINT32, ir.DataType.UINT64)


def _output_size(ctx: NodeContext, input: ir.Value, axis: int, size: Any, scale: float | None) -> int | ir.Value:
    """The output size of one spatial axis: static, the node's size, or ``floor(input_size * scale)`` in double
    as PyTorch computes it."""
    out = ctx.val.shape[axis]
    if isinstance(out, int):
        return out
    if size is not None:
        return size
    real = ctx.cast(dim_of(ctx, input, axis), DOUBLE)
    return ctx.cast(ctx.op("Floor", ctx.op("Mul", real, ctx.const(float(scale), DOUBLE))), INT64)


def _nearest_index(ctx: NodeContext, size: int | ir.Value, out: int | ir.Value, scale: float | None,
                   exact: bool) -> ir.Value:
    """The source index of each output along one axis as PyTorch's CPU kernels compute it (``nearest_idx``:
    the output itself when the size is kept, half of it when doubled, else ``floor(dst * ratio)`` in float;
    ``nearest_exact_idx``: ``(dst + 0.5) * ratio`` in double rounded to float), at most ``size - 1``."""
    size, out = ctx.operand(size, INT64), ctx.operand(out, INT64)
    dst = ctx.op("Range", ctx.const(0, INT64), out, ctx.const(1, INT64))
    if scale is not None and scale > 0:
        ratio = ctx.const(np.float32(1.0 / scale), FLOAT)
    else:
        ratio = ctx.op("Div", ctx.cast(size, FLOAT), ctx.cast(out, FLOAT))
    if exact:
        half = ctx.op("Add", ctx.cast(dst, DOUBLE), ctx.const(0.5, DOUBLE))
        source = ctx.cast(ctx.op("Mul", half, ctx.cast(ratio, DOUBLE)), FLOAT)
    else:
        source = ctx.op("Mul", ctx.cast(dst, FLOAT), ratio)
    last = ctx.op("Sub", size, ctx.const(1, INT64))
    index = ctx.op("Min", ctx.cast(ctx.op("Floor", source), INT64), last)
    if exact:
        return index
    doubled = ctx.op("Equal", out, ctx.op("Mul", size, ctx.const(2, INT64)))
    index = ctx.op("Where", doubled, ctx.op("Div", dst, ctx.const(2, INT64)), index)
    return ctx.op("Where", ctx.op("Equal", out, size), dst, index)


def _wide(
    ctx: NodeContext, input: ir.Value, output_size: Any, scales: Sequence[float | None] | None, mode: str,
    align_corners: bool,
) -> ir.Value:
    """Resampling of a float64 or 64-bit integer tensor without rounding its values to float32: nearest modes
    gather the source indices of :func:`_nearest_index`; linear and cubic ones compute PyTorch's taps and
    weights in double (:func:`_taps`) and sum the gathered taps."""
    n = ctx.rank(input) - 2
    scales = list(scales or [None]) * n if len(scales or [None]) == 1 else list(scales)
    sizes = list(output_size) if output_size is not None else [None] * n
    y, taps = input, []
    for k, axis in enumerate(range(2, n + 2)):
        size = dim_of(ctx, input, axis)
        out = _output_size(ctx, input, axis, sizes[k], scales[k])
        if mode in ("nearest", "nearest-exact"):
            y = ctx.op("Gather", y, _nearest_index(ctx, size, out, scales[k], mode == "nearest-exact"), axis=axis)
        else:
            taps.append((axis, *_taps(ctx, size, out, mode == "cubic", align_corners, scales[k], DOUBLE)))
    return _sum_of_taps(ctx, input, taps, mode == "cubic") if taps else y


def _sum_of_taps(builder: Any, x: ir.Value, taps: list, cubic: bool) -> ir.Value:
    """Per axis (the last first, as PyTorch), the gathered taps of ``x`` times their weights, summed."""
    n = len(taps)
    y = x
    for axis, index, weights in reversed(taps):
        w = builder.op("Reshape", weights, builder.const([-1, 4 if cubic else 2] + [1] * (n + 1 - axis), INT64))
        taps_x = builder.op("Mul", builder.op("Gather", y, index, axis=axis), w)
        y = builder.op("ReduceSum", taps_x, builder.const([axis + 1], INT64), keepdims=0)
    return y


def _taps(
    ctx: NodeContext, size: int | ir.Value, out: int | ir.Value, cubic: bool, align_corners: bool, scale: float | None,
    dtype: ir.DataType,
) -> tuple[ir.Value, ir.Value]:
    """The source indices and weights, both ``[out, K]`` (K = 2 or 4 taps), of one axis as PyTorch's CPU
    kernels compute them (``compute_source_index_and_lambda``, ``HelperInterpCubic``: ``ratio`` and source
    index in float, or double for float64, where the FMA is not reproduced): weights of exactly 0 included
    (a tap on a clamped or duplicated index, the copy when ``size == out``); static sizes give constants
    once folded."""
    real = np.float64 if dtype == DOUBLE else np.float32

    def f(v: int | float | ir.Value) -> ir.Value:
        return ctx.cast(v, dtype) if isinstance(v, ir.Value) else ctx.const(real(v), dtype)

    if align_corners:  # (size - 1) / (out - 1), 0 for out == 1
        more = ctx.op("Greater", ctx.operand(out, INT64), ctx.const(1, INT64))
        steps = ctx.op("Max", ctx.op("Sub", f(out), f(1)), f(1))
        ratio = ctx.op("Where", more, ctx.op("Div", ctx.op("Sub", f(size), f(1)), steps), f(0))
    elif scale is not None and scale > 0:
        ratio = f(1.0 / scale)
    else:
        ratio = ctx.op("Div", f(size), f(out))
    last = ctx.op("Sub", ctx.operand(size, INT64), ctx.const(1, INT64))
    dst = ctx.op("Range", ctx.const(0, INT64), ctx.operand(out, INT64), ctx.const(1, INT64))
    if align_corners:
        src = ctx.op("Mul", ratio, ctx.cast(dst, dtype))
    else:  # ratio * (dst + 0.5) - 0.5 rounded once, in double: PyTorch's kernels are compiled with FMA
        half = ctx.const(0.5, DOUBLE)
        src = ctx.op("Mul", ctx.cast(ratio, DOUBLE), ctx.op("Add", ctx.cast(dst, DOUBLE), half))
        src = ctx.cast(ctx.op("Sub", src, half), dtype)
        if not cubic:
            src = ctx.op("Max", src, f(0))
    i0 = ctx.op("Min", ctx.cast(ctx.op("Floor", src), INT64), last)
    lam = ctx.op("Min", ctx.op("Max", ctx.op("Sub", src, ctx.cast(i0, dtype)), f(0)), f(1))
    one = ctx.const([1], INT64)
    if cubic:
        def horner(x: ir.Value, *coefficients: float) -> ir.Value:
            y = f(coefficients[0])
            for c in coefficients[1:]:
                y = ctx.op("Mul", y, x)
                y = ctx.op("Add", y, f(c)) if c else y
            return y

        a = -0.75  # cubic_convolution1 and 2
        conv1 = lambda x: horner(x, a + 2, -(a + 3), 0, 1)  # noqa: E731
        conv2 = lambda x: horner(x, a, -5 * a, 8 * a, -4 * a)  # noqa: E731
        rest = ctx.op("Sub", f(1), lam)
        weights = [conv2(ctx.op("Add", lam, f(1))), conv1(lam), conv1(rest), conv2(ctx.op("Add", rest, f(1)))]
        zero = ctx.const(0, INT64)
        index = [ctx.op("Clip", ctx.op("Add", i0, ctx.const(j - 1, INT64)), zero, last) for j in range(4)]
    else:
        i1 = ctx.op("Add", i0, ctx.cast(ctx.op("Less", i0, last), INT64))
        index, weights = [i0, i1], [ctx.op("Sub", f(1), lam), lam]
        same = ctx.op("Equal", ctx.operand(size, INT64), ctx.operand(out, INT64))  # PyTorch copies: weights 1, 0
        index = [ctx.op("Where", same, dst, i) for i in index]
        weights = [ctx.op("Where", same, f(w), v) for w, v in zip((1, 0), weights)]
    stack = lambda vs: ctx.op("Concat", *(ctx.op("Unsqueeze", v, one) for v in vs), axis=1)  # noqa: E731
    return stack(index), stack(weights)


def _unless_finite(
    ctx: NodeContext, input: ir.Value, fast: ir.Value, scales: Sequence[float | None], cubic: bool, align_corners: bool
) -> ir.Value:
    """``fast`` (Resize) where ``input`` is finite, else the interpolation computed as PyTorch's CPU kernels
    do: per axis, a Gather of the 2 (4 for cubic) source taps times their weights, summed.

    onnxruntime's Resize does not give PyTorch's infinities and NaN: it computes ``x0 + w * (x1 - x0)``
    (NaN between two -inf), leaves out taps of weight 0, and mixes in a neighbouring row or channel when an
    axis keeps its size, where PyTorch's ``w0 * x0 + w1 * x1`` gives -inf between two -inf and NaN for an
    infinity on a tap of weight 0. The exact computation is several times slower than Resize, so an ``If``
    runs it only for an input with an infinity or NaN (``ReduceSum(x)`` is not finite); finite inputs pay one
    reduction. Antialiased modes (a window of taps per output) keep Resize alone."""
    n = ctx.rank(input) - 2
    dtype = ctx.out_dtype
    compute = DOUBLE if dtype == DOUBLE else FLOAT
    x = ctx.cast(input, compute)
    scales = list(scales or [None]) * n if len(scales or [None]) == 1 else list(scales)
    taps = []
    for k, axis in enumerate(range(2, n + 2)):
        size = dim_of(ctx, input, axis)
        out = dim_of(ctx, fast, axis, size=ctx.val.shape[axis])
        taps.append((axis, *_taps(ctx, size, out, cubic, align_corners, scales[k], compute)))
    # the sum is NaN or infinite (times 0: NaN) when x holds an infinity or a NaN; finite values that overflow
    # take the exact branch too, which gives the same values
    total = ctx.op("ReduceSum", x, keepdims=0)
    bad = ctx.op("IsNaN", ctx.op("Mul", total, ctx.const(0, compute)))
    exact = ctx.new_subgraph()
    y = _sum_of_taps(exact, x, taps, cubic)
    exact.outputs([exact.op("Cast", y, to=dtype)], [ctx.val])
    same = ctx.new_subgraph()
    same.outputs([same.op("Cast", fast, to=dtype)], [ctx.val])
    y = ctx.op("If", bad, then_branch=exact.graph("exact"), else_branch=same.graph("resize"))
    y.dtype = dtype
    return y


_NEAREST = {
    "upsample_nearest1d": "nearest",
    "upsample_nearest2d": "nearest",
    "upsample_nearest3d": "nearest",
    "_upsample_nearest_exact1d": "nearest-exact",
    "_upsample_nearest_exact2d": "nearest-exact",
    "_upsample_nearest_exact3d": "nearest-exact",
}


_LINEAR = {
    "upsample_linear1d": ("linear", False),
    "upsample_bilinear2d": ("linear", False),
    "upsample_trilinear3d": ("linear", False),
    "upsample_bicubic2d": ("cubic", False),
    "_upsample_bilinear2d_aa": ("linear", True),
    "_upsample_bicubic2d_aa": ("cubic", True),
}


@register(*(f"aten::{name}.vec" for name in _NEAREST))
def aten_upsample_nearest_vec(
    ctx: NodeContext, input: ir.Value, output_size: Any, scale_factors: Sequence[float] | None
) -> ir.Value:
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _resize(ctx, input, output_size, scale_factors, _NEAREST[ctx.op_name])


@register(*(f"aten::{name}.default" for name in _NEAREST))
def aten_upsample_nearest(ctx: NodeContext, self: ir.Value, output_size: Any, *scales: float | None) -> ir.Value:
    """upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor"""
    n = ctx.rank(self) - 2
    given = list(scales) + [None] * (n - len(scales))
    return _resize(ctx, self, output_size, given, _NEAREST[ctx.op_name])


@register(*(f"aten::{name}.vec" for name in _LINEAR))
def aten_upsample_linear_vec(
    ctx: NodeContext,
    input: ir.Value,
    output_size: Any,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> ir.Value:
    """upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners,
    float[]? scale_factors) -> Tensor"""
    mode, antialias = _LINEAR[ctx.op_name]
    return _resize(ctx, input, output_size, scale_factors, mode, align_corners, antialias)


@register(*(f"aten::{name}.default" for name in _LINEAR))
def aten_upsample_linear(
    ctx: NodeContext, self: ir.Value, output_size: Any, align_corners: bool, *scales: float | None
) -> ir.Value:
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None,
    float? scales_w=None) -> Tensor"""
    mode, antialias = _LINEAR[ctx.op_name]
    n = ctx.rank(self) - 2
    given = list(scales) + [None] * (n - len(scales))
    return _resize(ctx, self, output_size, given, mode, align_corners, antialias)


_INTERPOLATION = {0: "bilinear", 1: "nearest", 2: "bicubic"}


_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@register("aten::grid_sampler.default", "aten::grid_sampler_2d.default", "aten::grid_sampler_3d.default")
def aten_grid_sampler(
    ctx: NodeContext, input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners)
    -> Tensor: ONNX GridSample (5-D inputs need opset 20)."""
    rank = ctx.rank(input)
    if rank == 5 and ctx.opset < 20:
        raise NotImplementedError("grid_sampler on 5-D inputs needs GridSample from opset 20 (target_opset=20)")
    mode = _INTERPOLATION[interpolation_mode]
    if ctx.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    dtype = ctx.out_dtype
    return kernel_op(
        ctx,
        "GridSample",
        input,
        grid,
        dtype=dtype,
        mode=mode,
        padding_mode=_PADDING[padding_mode],
        align_corners=int(align_corners),
    )
