"""``torchvision.ops.ps_roi_align`` and ``ps_roi_pool``, the position-sensitive pools of R-FCN: bin ``(ph, pw)`` of
output channel ``c`` pools input channel ``(c * PH + ph) * PW + pw``. No ONNX op does it: compositions."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from ...translation.registry import register
from .._common import DOUBLE, INT64, dim_of, int_range, kernel_dtype, uses_output
from ._rois import align, batch_indices, boxes, channel_mapping, checked_sizes, position_sensitive


def _checked(ctx: NodeContext, input: ir.Value, rois: ir.Value, pooled_height: int, pooled_width: int,
             ) -> tuple[int, int]:
    ph, pw = checked_sizes(ctx, input, rois, pooled_height, pooled_width)
    channels = dim_of(ctx, input, 1)
    if isinstance(channels, int) and channels % (ph * pw):
        raise ValueError(f"{ctx.op_name}: the input's {channels} channels are not a multiple of pooled_height * "
                         f"pooled_width = {ph * pw}")
    return ph, pw


@register("torchvision::ps_roi_align.default")
def torchvision_ps_roi_align(
    ctx: NodeContext, input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int, pooled_width: int,
    sampling_ratio: int,
) -> tuple[ir.Value, ir.Value | None]:
    """ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,
    int sampling_ratio) -> (Tensor, Tensor): ONNX RoiAlign (half_pixel, torchvision's sampling) of every channel,
    then the channel of each bin (PH * PW times the work of the op itself); NaN where the adaptive sampling grid of a
    roi is empty, as torchvision's 0 / 0"""
    ph, pw = _checked(ctx, input, rois, pooled_height, pooled_width)
    pooled = align(ctx, input, rois, spatial_scale, ph, pw, sampling_ratio, True)
    y = position_sensitive(ctx, pooled, dim_of(ctx, input, 1), ph, pw)
    if sampling_ratio <= 0:  # count = ceil(roi_height / PH) * ceil(roi_width / PW), not raised to 1 as roi_align's
        corners = ctx.op("Sub", ctx.op("Mul", ctx.cast(boxes(ctx, rois), y.dtype), ctx.const(spatial_scale, y.dtype)),
                         ctx.const(0.5, y.dtype))
        ends, starts = (ctx.op("Slice", corners, ctx.const([a], INT64), ctx.const([a + 2], INT64),
                               ctx.const([1], INT64)) for a in (2, 0))
        grid = ctx.op("Ceil", ctx.op("Div", ctx.op("Sub", ends, starts), ctx.const([pw, ph], y.dtype)))
        empty = ctx.op("Equal", ctx.op("ReduceProd", grid, ctx.const([1], INT64), keepdims=1), ctx.const(0, y.dtype))
        empty = ctx.op("Unsqueeze", empty, ctx.const([2, 3], INT64))
        y = ctx.op("Where", empty, ctx.const(math.nan, y.dtype), y)
    mapping = channel_mapping(ctx, input, rois, ph, pw) if uses_output(ctx, 1) else None
    return ctx.cast(y, ctx.out_dtype), mapping


def _round(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """C's ``round``: half away from zero (ONNX Round rounds half to even)."""
    magnitude = ctx.op("Abs", x)
    floor = ctx.op("Floor", magnitude)
    up = ctx.op("GreaterOrEqual", ctx.op("Sub", magnitude, floor), ctx.const(0.5, x.dtype))
    rounded = ctx.op("Add", floor, ctx.op("Cast", up, to=x.dtype))
    return ctx.op("Where", ctx.op("Less", x, ctx.const(0, x.dtype)), ctx.op("Neg", rounded), rounded)


def _bins(ctx: NodeContext, start: ir.Value, end: ir.Value, n: int, size: int | ir.Value) -> tuple[ir.Value, ir.Value]:
    """The first and the last + 1 row (column) of each of the ``n`` bins of each roi, INT64 ``[K, n]``, from the
    rounded ``start`` and ``end`` (``[K, 1]``) as torchvision's ``ps_roi_pool`` cuts them, in the rois' type: a roi
    at least 1 long, ``floor(i * length / n)`` to ``ceil((i + 1) * length / n)``, clipped to ``[0, size - 1]``."""
    t = start.dtype
    step = ctx.op("Div", ctx.op("Max", ctx.op("Sub", end, start), ctx.const(1, t)), ctx.const(n, t))
    first = ctx.op("Add", ctx.op("Floor", ctx.op("Mul", ctx.const(np.arange(n), t), step)), start)
    last = ctx.op("Add", ctx.op("Ceil", ctx.op("Mul", ctx.const(np.arange(1, n + 1), t), step)), start)
    top = ctx.op("Sub", ctx.operand(size, INT64), ctx.const(1, INT64))
    return tuple(ctx.op("Clip", ctx.cast(v, INT64), ctx.const(0, INT64), top) for v in (first, last))


@register("torchvision::ps_roi_pool.default")
def torchvision_ps_roi_pool(
    ctx: NodeContext, input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int, pooled_width: int
) -> tuple[ir.Value, ir.Value | None]:
    """ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)
    -> (Tensor, Tensor): the mean of each bin as four reads of the feature map's integral image (CumSum in float64),
    the bins cut as torchvision's CPU kernel cuts them; a NaN or an infinity of the feature map reaches the bins below
    and right of it too"""
    ph, pw = _checked(ctx, input, rois, pooled_height, pooled_width)
    channels, height, width = (dim_of(ctx, input, axis) for axis in (1, 2, 3))
    t = kernel_dtype("Floor", ctx.out_dtype, ctx.providers)  # the bins are cut in the rois' type, as torchvision
    corners = _round(ctx, ctx.op("Mul", ctx.cast(boxes(ctx, rois), t), ctx.const(spatial_scale, t)))
    x1, y1, x2, y2 = (ctx.op("Slice", corners, ctx.const([a], INT64), ctx.const([a + 1], INT64),
                             ctx.const([1], INT64)) for a in range(4))
    rows, cols = _bins(ctx, y1, y2, ph, height), _bins(ctx, x1, x2, pw, width)
    # integral[n, c, i, j]: the sum of x[n, c, :i, :j]
    integral = ctx.op("CumSum", ctx.op("CumSum", ctx.cast(input, DOUBLE), ctx.const(2, INT64)), ctx.const(3, INT64))
    integral = ctx.op("Pad", integral, ctx.const([0, 0, 1, 1, 0, 0, 0, 0], INT64))
    # flat index of (batch, channel, row, column) in the integral image: [K, C_out, PH, PW] for each corner
    stride_row = ctx.op("Add", ctx.operand(width, INT64), ctx.const(1, INT64))
    stride_channel = ctx.op("Mul", ctx.op("Add", ctx.operand(height, INT64), ctx.const(1, INT64)), stride_row)
    channel = ctx.op("Reshape", int_range(ctx, channels), ctx.const([1, -1, ph, pw], INT64))
    image = ctx.op("Mul", ctx.op("Reshape", batch_indices(ctx, rois), ctx.const([-1, 1, 1, 1], INT64)),
                   ctx.operand(channels, INT64))
    plane = ctx.op("Mul", ctx.op("Add", image, channel), stride_channel)
    row = [ctx.op("Mul", ctx.op("Unsqueeze", r, ctx.const([1, 3], INT64)), stride_row) for r in rows]
    col = [ctx.op("Unsqueeze", c, ctx.const([1, 2], INT64)) for c in cols]
    flat = ctx.op("Reshape", integral, ctx.const([-1], INT64))

    def read(r: ir.Value, c: ir.Value) -> ir.Value:
        return ctx.op("Gather", flat, ctx.op("Add", ctx.op("Add", plane, r), c), axis=0)

    total = ctx.op("Add", ctx.op("Sub", ctx.op("Sub", read(row[1], col[1]), read(row[0], col[1])),
                                 read(row[1], col[0])), read(row[0], col[0]))
    area = ctx.op("Mul", ctx.op("Sub", *(ctx.op("Unsqueeze", r, ctx.const([1, 3], INT64)) for r in rows[::-1])),
                  ctx.op("Sub", *(ctx.op("Unsqueeze", c, ctx.const([1, 2], INT64)) for c in cols[::-1])))
    empty = ctx.op("LessOrEqual", area, ctx.const(0, INT64))
    mean = ctx.op("Div", total, ctx.op("Cast", ctx.op("Max", area, ctx.const(1, INT64)), to=DOUBLE))
    y = ctx.op("Where", empty, ctx.const(0.0, DOUBLE), mean)
    mapping = channel_mapping(ctx, input, rois, ph, pw) if uses_output(ctx, 1) else None
    return ctx.cast(y, ctx.out_dtype), mapping
