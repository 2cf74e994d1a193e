"""Resampling: upsample/interpolate (nearest, linear, bilinear, bicubic, trilinear) to ONNX ``Resize``, and
``grid_sampler`` to ONNX ``GridSample``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..context import NodeContext
from ..registry import register
from ._common import FLOAT, kernel_op, spatial_dims


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
    compute = dtype if dtype in (FLOAT, ir.DataType.FLOAT16) else FLOAT
    if mode == "nearest" and dtype in (ir.DataType.INT32, ir.DataType.INT8, ir.DataType.UINT8):
        compute = dtype
    y = ctx.op("Resize", ctx.cast(input, compute), *roi_scales_sizes, **attrs)
    return ctx.cast(y, dtype)


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
