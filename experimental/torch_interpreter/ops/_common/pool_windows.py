"""Windows shared by the poolings and their gradients: PyTorch's adaptive windows, one spatial axis at a time,
and values scattered to positions of each plane (max unpooling, max-pool gradients)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from .shapes import dim_of, int_op
from .spatial import spatial_dims
from .tensors import scatter_elements
from .types import INT64


def adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows ``[floor(i*size/out), ceil((i+1)*size/out))`` along an axis of ``size`` elements."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_run_time_bounds(ctx: NodeContext, size: ir.Value, out: int) -> tuple[ir.Value, ir.Value]:
    """:func:`adaptive_bounds` of an axis whose ``size`` (0-D INT64) is known at run time only: ``(start, end)``,
    each ``[out, 1]``."""
    i = ctx.const(np.arange(out, dtype=np.int64).reshape(out, 1))
    o = ctx.const(out, INT64)
    start = ctx.op("Div", ctx.op("Mul", i, size), o)
    end = ctx.op("Div", ctx.op("Add", ctx.op("Mul", ctx.op("Add", i, ctx.const(1, INT64)), size),
                              ctx.const(out - 1, INT64)), o)
    return start, end


def adaptive_windows(ctx: NodeContext, size: int | ir.Value, out: int) -> tuple[ir.Value, ir.Value]:
    """The adaptive windows along an axis of ``size`` elements: ``(mask [out, size], lengths [out])``, constants
    when ``size`` is an int, else from Range and comparisons."""
    if isinstance(size, int):
        bounds = adaptive_bounds(size, out)
        mask = np.array([[s <= j < e for j in range(size)] for s, e in bounds])
        return ctx.const(mask), ctx.const(np.array([e - s for s, e in bounds], dtype=np.int64))
    start, end = adaptive_run_time_bounds(ctx, size, out)
    j = ctx.op("Range", ctx.const(0, INT64), size, ctx.const(1, INT64))  # [size]
    mask = ctx.op("And", ctx.op("GreaterOrEqual", j, start), ctx.op("Less", j, end))  # [out, size]
    lengths = ctx.op("Squeeze", ctx.op("Sub", end, start), ctx.const([1], INT64))
    return mask, lengths


def separable(ctx: NodeContext, x: ir.Value, output_size: Sequence[int], reduce: Any) -> ir.Value:
    """``reduce(moved, size, out)`` applied to each spatial axis of ``x`` (rank ``n + 2``) moved last, one at a time
    (adaptive means and maxima are separable: a window is a product of one window per axis)."""
    n = len(output_size)
    dims = spatial_dims(x, n)
    y = x
    for i, (size, out) in enumerate(zip(dims, output_size)):
        if size == out:
            continue
        axis = 2 + i
        perm = [a for a in range(n + 2) if a != axis] + [axis]
        moved = ctx.op("Transpose", y, perm=perm) if axis != n + 1 else y
        moved = reduce(moved, size, out)
        y = ctx.op("Transpose", moved, perm=[perm.index(a) for a in range(n + 2)]) if axis != n + 1 else moved
    return y


def unpool(
    ctx: NodeContext, values: ir.Value, indices: ir.Value, out_spatial: Sequence[int | ir.Value], reduction: str | None
):
    """Scatters ``values`` at the plane positions ``indices`` (both ``[N, C, *in]`` or ``[C, *in]``) into zeros
    of shape ``[N, C, *out_spatial]`` (sizes as ints, or 0-D INT64 values when dynamic)."""
    k = len(out_spatial)
    lead = [dim_of(ctx, values, i) for i in range(ctx.rank(values) - k)]
    flat_shape = ctx.int64s([*lead, -1])
    plane: int | ir.Value = 1
    for size in out_spatial:
        plane = int_op(ctx, "Mul", plane, size)
    dtype = ctx.out_dtype
    c = ir.DataType.FLOAT if dtype == ir.DataType.BFLOAT16 else dtype  # no bfloat16 ConstantOfShape before opset 20
    zeros = ctx.op(
        "ConstantOfShape", ctx.int64s([*lead, plane]), value=ir.tensor(np.zeros(1, dtype=c.numpy()), dtype=c)
    )
    out = scatter_elements(
        ctx,
        "ScatterElements",
        zeros,
        ctx.op("Reshape", indices, flat_shape),
        ctx.op("Reshape", ctx.cast(values, c), flat_shape),
        reduction,
        axis=len(lead),
    )
    return ctx.cast(ctx.op("Reshape", out, ctx.int64s([*lead, *out_spatial])), dtype)
