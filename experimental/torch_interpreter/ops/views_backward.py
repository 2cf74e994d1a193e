"""Gradients of views and of reads by index, as AOTAutograd's backward graphs call them: select/slice/diagonal/
unfold_backward, index_select_backward and embedding_dense_backward.

Each builds the gradient of the viewed tensor from the gradient of the view: ``zeros(input_sizes)`` with the view's
elements written back (``Pad`` for select and slice, a masked ``Gather`` for diagonal) or added back where one input
element feeds several outputs (``ScatterElements``/``ScatterND`` with ``reduction="add"``: overlapping windows,
repeated indices). ``input_sizes`` is a list of ints and 0-D INT64 values (dynamic sizes), as in ``views.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    concat_shape,
    dims_of,
    expand_to,
    filled,
    int_op,
    normalize_dim,
    opmath_dtype,
    pad_axis,
    scatter_elements,
    slice_gradient,
    static_ints,
    unsqueeze_axes,
    where_typed,
)


@register("aten::select_backward.default")
def aten_select_backward(
    ctx: NodeContext, grad_output: ir.Value, input_sizes: Sequence[int | ir.Value], dim: int, index: int | ir.Value
) -> ir.Value:
    """select_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt index) -> Tensor

    The gradient unsqueezed on ``dim`` and padded with zeros around position ``index`` (negative: from the end).
    """
    axis = normalize_dim(dim, len(input_sizes))
    size = input_sizes[axis]
    if not (isinstance(index, int) and index >= 0):
        index = int_op(ctx, "Mod", index, size)
    x = unsqueeze_axes(ctx, grad_output, [axis])
    return pad_axis(ctx, x, len(input_sizes), axis, index, int_op(ctx, "Sub", int_op(ctx, "Sub", size, index), 1))


@register("aten::slice_backward.default")
def aten_slice_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    input_sizes: Sequence[int | ir.Value],
    dim: int,
    start: int | ir.Value,
    end: int | ir.Value,
    step: int,
) -> ir.Value:
    """slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, SymInt step)
    -> Tensor

    ``step - 1`` zeros after each element of the gradient along ``dim`` (a ``Pad`` of a new axis, merged), then
    ``start`` zeros in front and the rest of the axis behind (a crop of the last padding zeros when negative).
    ``end`` is implied by the gradient's length.
    """
    return slice_gradient(ctx, grad_output, input_sizes, normalize_dim(dim, len(input_sizes)), start, step)


@register("aten::diagonal_backward.default")
def aten_diagonal_backward(
    ctx: NodeContext, grad_output: ir.Value, input_sizes: Sequence[int | ir.Value], offset: int, dim1: int, dim2: int
) -> ir.Value:
    """diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1, int dim2) -> Tensor

    The gradient (diagonal last) gathered onto ``[..., n, m]`` planes, zeros off the diagonal, the two axes
    moved back to ``dim1`` and ``dim2``; the plane's sizes must be static, the other axes may be dynamic.
    """
    rank = len(input_sizes)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    n, m = static_ints(ctx, [input_sizes[d1], input_sizes[d2]], "diagonal_backward")
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    on_diagonal = cols - rows == offset
    if not on_diagonal.any():  # an empty diagonal: no gradient flows
        return filled(ctx, concat_shape(ctx, list(input_sizes)), grad_output.dtype)
    position = np.where(on_diagonal, rows if offset >= 0 else cols, 0).astype(np.int64)
    planes = ctx.op("Gather", grad_output, ctx.const(position), axis=rank - 2)
    out = where_typed(ctx, ctx.const(on_diagonal), planes, ctx.const(0, grad_output.dtype))
    order = [*(i for i in range(rank) if i not in (d1, d2)), d1, d2]
    perm = [order.index(i) for i in range(rank)]
    return out if perm == list(range(rank)) else ctx.op("Transpose", out, perm=perm)


@register("aten::unfold_backward.default")
def aten_unfold_backward(
    ctx: NodeContext, grad_in: ir.Value, input_sizes: Sequence[int | ir.Value], dim: int, size: int, step: int
) -> ir.Value:
    """unfold_backward(Tensor grad_in, SymInt[] input_sizes, int dim, int size, int step) -> Tensor

    The windows (last axis) moved next to ``dim`` and merged with it, then added at their positions
    ``w * step + k`` into zeros (overlapping windows sum); the length of ``dim`` must be static.
    """
    rank = len(input_sizes)
    if rank == 0:  # unfold of a 0-D tensor is its value in one window
        return ctx.op("Reshape", grad_in, ctx.const([], INT64))
    axis = normalize_dim(dim, rank)
    length = static_ints(ctx, [input_sizes[axis]], "unfold_backward")[0]
    windows = (length - size) // step + 1
    perm = [*range(axis + 1), rank, *range(axis + 1, rank)]
    x = grad_in if perm == list(range(rank + 1)) else ctx.op("Transpose", grad_in, perm=perm)
    merged = [*dims_of(ctx, grad_in, 0, axis), windows * size, *dims_of(ctx, grad_in, axis + 1, rank)]
    x = ctx.op("Reshape", x, concat_shape(ctx, merged))
    shape = [1] * rank
    shape[axis] = windows * size
    index = (np.arange(windows)[:, None] * step + np.arange(size)[None, :]).astype(np.int64).reshape(shape)
    index = expand_to(ctx, ctx.const(index), ctx.op("Shape", x))
    zeros = filled(ctx, concat_shape(ctx, list(input_sizes)), grad_in.dtype)
    return scatter_elements(ctx, "ScatterElements", zeros, index, x, "add", axis=axis)


@register("aten::index_select_backward.default")
def aten_index_select_backward(
    ctx: NodeContext, grad: ir.Value, self_sizes: Sequence[int | ir.Value], dim: int, index: ir.Value
) -> ir.Value:
    """index_select_backward(Tensor grad, SymInt[] self_sizes, int dim, Tensor index) -> Tensor

    ``zeros(self_sizes).index_add_(dim, index, grad)``: repeated indices sum.
    """
    rank = len(self_sizes)
    if rank == 0:
        return ctx.op("Reshape", grad, ctx.const([], INT64))
    axis = normalize_dim(dim, rank)
    shape = [1] * rank
    shape[axis] = -1
    along = ctx.op("Reshape", ctx.cast(index, INT64), ctx.const(shape, INT64))
    along = ctx.op("Expand", along, ctx.op("Shape", grad))
    zeros = filled(ctx, concat_shape(ctx, list(self_sizes)), grad.dtype)
    return scatter_elements(ctx, "ScatterElements", zeros, along, grad, "add", axis=axis)


@register("aten::embedding_dense_backward.default")
def aten_embedding_dense_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    indices: ir.Value,
    num_weights: int | ir.Value,
    padding_idx: int | ir.Value,
    scale_grad_by_freq: bool,
) -> ir.Value:
    """embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx,
    bool scale_grad_by_freq) -> Tensor

    One gradient row per index added into ``zeros(num_weights, D)`` (``ScatterND``, reduction add: repeated
    indices accumulate), in float32 for float16/bfloat16. Rows of index ``padding_idx`` add nothing (-1, as
    ``F.embedding`` passes for none, matches no index); ``scale_grad_by_freq`` divides each row by the count of
    its index, as PyTorch multiplies by ``1 / count``.
    """
    dtype = grad_output.dtype
    c = opmath_dtype(dtype)
    rank = ctx.rank(grad_output)
    width = dims_of(ctx, grad_output, rank - 1)
    grad = ctx.op("Reshape", ctx.cast(grad_output, c), concat_shape(ctx, [-1, *width]))
    index = ctx.op("Reshape", ctx.cast(indices, INT64), ctx.const([-1], INT64))
    rows = ctx.op("Unsqueeze", index, ctx.const([1], INT64))
    if scale_grad_by_freq:
        ones = filled(ctx, ctx.op("Shape", index), c, 1)
        counts = scatter_elements(
            ctx, "ScatterElements", filled(ctx, ctx.int64s([num_weights]), c), index, ones, "add", axis=0
        )
        scale = ctx.op("Gather", ctx.op("Reciprocal", counts), rows, axis=0)
        grad = ctx.op("Mul", grad, scale)
    if not (isinstance(padding_idx, int) and padding_idx < 0):
        padded = ctx.op("Equal", rows, ctx.operand(padding_idx, INT64))
        grad = ctx.op("Where", padded, ctx.const(0.0, c), grad)
    zeros = filled(ctx, concat_shape(ctx, [num_weights, *width]), c)
    return ctx.cast(scatter_elements(ctx, "ScatterND", zeros, rows, grad, "add"), dtype)
