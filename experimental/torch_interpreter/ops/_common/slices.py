"""Writing into a slice and the gradient of a slice, shared by the real converters (``slice_scatter``,
``slice_backward``) and their complex twins, which apply them to real pairs (one more axis, last)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from .shapes import concat_shape, dim_of, dims_of, expand_to, int_op, unsqueeze_axes
from .tensors import pad_axis
from .types import INT64


def slice_start(ctx: NodeContext, start: int | ir.Value | None, size: int | ir.Value) -> int | ir.Value:
    """``start`` as ``slice`` reads it on an axis of ``size`` elements: counted from the end when negative, then
    clamped to ``[0, size]``."""
    if start is None:
        return 0
    if isinstance(start, int) and isinstance(size, int):
        return min(max(start + size if start < 0 else start, 0), size)
    zero = ctx.const(0, INT64)
    if isinstance(start, int):
        if start < 0:
            return ctx.op("Max", int_op(ctx, "Add", size, start), zero)
        return ctx.op("Min", ctx.const(start, INT64), ctx.operand(size, INT64)) if start else 0
    start, size = ctx.cast(start, INT64), ctx.operand(size, INT64)
    start = ctx.op("Where", ctx.op("Less", start, zero), ctx.op("Add", start, size), start)
    return ctx.op("Min", ctx.op("Max", start, zero), size)


def slice_positions(ctx: NodeContext, src: ir.Value, axis: int, start: int | ir.Value, step: int) -> ir.Value:
    """``start + step * i`` along ``axis`` of ``src``, expanded to its shape (indices of ScatterElements)."""
    rank = ctx.rank(src)
    n = dim_of(ctx, src, axis)
    if isinstance(n, int) and isinstance(start, int):
        index = ctx.const(np.arange(start, start + step * n, step, dtype=np.int64) if n else np.zeros(0, np.int64))
    else:
        begin = ctx.operand(start, INT64)
        index = ctx.op(
            "Range",
            begin,
            ctx.op("Add", begin, ctx.op("Mul", ctx.operand(n, INT64), ctx.const(step, INT64))),
            ctx.const(step, INT64),
        )
    shape = [1] * rank
    shape[axis] = -1
    return expand_to(ctx, ctx.op("Reshape", index, ctx.const(shape, INT64)), ctx.op("Shape", src))


def scatter_slice(
    ctx: NodeContext, self: ir.Value, src: ir.Value, axis: int, start: int | ir.Value | None, step: int,
    size: int | None,
) -> ir.Value:
    """``self`` with ``src`` written into ``self[start::step]`` along ``axis`` (of ``size`` elements, None when
    dynamic; ``axis`` counted from the front, so that a real pair's last axis is left alone)."""
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        if size is None:
            raise NotImplementedError("slice_scatter with a negative start on a dynamic dimension")
        start += size
    if isinstance(start, int) and size is not None:
        start = min(max(start, 0), size)
    index = slice_positions(ctx, src, axis, start, step)
    return ctx.op("ScatterElements", self, index, ctx.cast(src, self.dtype), axis=axis)


def slice_gradient(
    ctx: NodeContext, grad_output: ir.Value, input_sizes: Sequence[int | ir.Value], axis: int,
    start: int | ir.Value, step: int,
) -> ir.Value:
    """The gradient of ``x[start::step]`` along ``axis`` for an ``x`` of ``input_sizes``: ``step - 1`` zeros after
    each element of ``grad_output`` along ``axis`` (a ``Pad`` of a new axis, merged), then ``start`` zeros in front
    and the rest of the axis behind (a crop of the last padding zeros when negative)."""
    if not isinstance(step, int):
        raise NotImplementedError(f"slice_backward with a dynamic step {step!r}")
    size = input_sizes[axis]
    begin = slice_start(ctx, start, size)
    n = dim_of(ctx, grad_output, axis)
    taken = int_op(ctx, "Mul", n, step)
    x = grad_output
    if step > 1:
        x = pad_axis(ctx, unsqueeze_axes(ctx, x, [axis + 1]), len(input_sizes) + 1, axis + 1, 0, step - 1)
        merged = [*dims_of(ctx, grad_output, 0, axis), taken, *dims_of(ctx, grad_output, axis + 1)]
        x = ctx.op("Reshape", x, concat_shape(ctx, merged))
    return pad_axis(ctx, x, len(input_sizes), axis, begin, int_op(ctx, "Sub", int_op(ctx, "Sub", size, begin), taken))
