"""Joining and splitting along an axis: cat/stack and their h/v/d/column variants, split/chunk/tensor_split,
unbind, ``_chunk_cat``, and the products of several tensors (meshgrid, cartesian_prod, combinations).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    INT64_MAX,
    atleast,
    concat_shape,
    dim_of,
    expand_to,
    int_op,
    list_vals,
    normalize_dim,
    pad_axes,
    static_dim,
    static_ints,
    unsqueeze_axes,
)


# -- concatenation ----------------------------------------------------------------------------------------
def _is_empty_1d(x: ir.Value) -> bool:
    return x.shape is not None and len(x.shape) == 1 and isinstance(x.shape[0], int) and x.shape[0] == 0


@register("aten::cat.default", "aten::concat.default", "aten::concatenate.default")
def aten_cat(ctx: NodeContext, tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor: inputs of shape (0,) are skipped, as PyTorch does."""
    dtype = ctx.out_dtype
    kept = [t for t in tensors if not _is_empty_1d(t)] or list(tensors[:1])
    kept = [ctx.cast(t, dtype) for t in kept]
    if len(kept) == 1:
        return kept[0]
    return ctx.op("Concat", *kept, axis=normalize_dim(dim, ctx.out_rank))


@register("aten::stack.default")
def aten_stack(ctx: NodeContext, tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    axis = ctx.const([normalize_dim(dim, ctx.out_rank)], INT64)
    parts = [ctx.op("Unsqueeze", ctx.cast(t, ctx.out_dtype), axis) for t in tensors]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=normalize_dim(dim, ctx.out_rank))


# -- splits -----------------------------------------------------------------------------------------------
def _split(ctx: NodeContext, x: ir.Value, axis: int, sizes: Any) -> tuple[ir.Value, ...]:
    """Splits ``x`` along ``axis`` into the node's outputs: their sizes when static, else ``sizes()``
    (a list of ints and dynamic sizes, or one 1-D INT64 value)."""
    n = len(ctx.val)
    if n == 1:
        return (x,)
    static = [static_dim(v.shape[axis]) for v in ctx.val]
    if all(s is not None for s in static):
        split = ctx.const(static, INT64)
    else:
        split = sizes()
        split = split if isinstance(split, ir.Value) else concat_shape(ctx, split)
    return ctx.op("Split", x, split, axis=axis, num_outputs=n)


def _even_sizes(ctx: NodeContext, x: ir.Value, axis: int, chunk: int | ir.Value) -> list[Any]:
    """``n`` chunks of size ``chunk``, the last one taking what remains."""
    n = len(ctx.val)
    last = int_op(ctx, "Sub", dim_of(ctx, x, axis), int_op(ctx, "Mul", chunk, n - 1))
    return [chunk] * (n - 1) + [last]


@register("aten::split.Tensor", "aten::unsafe_split.Tensor", "aten::split_copy.Tensor")
def aten_split(ctx: NodeContext, self: ir.Value, split_size: int | ir.Value, dim: int = 0) -> tuple[ir.Value, ...]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, ctx.rank(self))
    return _split(ctx, self, axis, lambda: _even_sizes(ctx, self, axis, split_size))


@register(
    "aten::split_with_sizes.default",
    "aten::unsafe_split_with_sizes.default",
    "aten::split.sizes",
    "aten::split_with_sizes_copy.default",
)
def aten_split_with_sizes(
    ctx: NodeContext, self: ir.Value, split_sizes: Sequence[int | ir.Value], dim: int = 0
) -> tuple[ir.Value, ...]:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]"""
    return _split(ctx, self, normalize_dim(dim, ctx.rank(self)), lambda: split_sizes)


@register("aten::chunk.default", "aten::unsafe_chunk.default")
def aten_chunk(ctx: NodeContext, self: ir.Value, chunks: int, dim: int = 0) -> tuple[ir.Value, ...]:
    """chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]: chunks of ceil(size / chunks)."""
    axis = normalize_dim(dim, ctx.rank(self))

    def sizes() -> list[Any]:
        size = int_op(ctx, "Div", int_op(ctx, "Add", dim_of(ctx, self, axis), chunks - 1), chunks)
        return _even_sizes(ctx, self, axis, size)

    return _split(ctx, self, axis, sizes)


def _sections(ctx: NodeContext, self: ir.Value, sections: int, axis: int) -> tuple[ir.Value, ...]:
    """``sections`` parts, the first ``size % sections`` one element longer."""

    def sizes() -> ir.Value:
        size = dim_of(ctx, self, axis)
        q, r = int_op(ctx, "Div", size, sections), int_op(ctx, "Mod", size, sections)
        longer = ctx.op("Cast", ctx.op("Less", ctx.const(list(range(sections)), INT64), ctx.operand(r, INT64)), to=INT64)
        return ctx.op("Add", longer, ctx.operand(q, INT64))

    return _split(ctx, self, axis, sizes)


def _indices(ctx: NodeContext, self: ir.Value, indices: Sequence[int | ir.Value], axis: int) -> tuple[ir.Value, ...]:
    """One ``Slice`` per part, between consecutive indices (Python slicing semantics, as PyTorch)."""
    bounds = [0, *indices, INT64_MAX]
    axes = ctx.const([axis], INT64)
    return tuple(
        ctx.op("Slice", self, ctx.int64s([a]), ctx.int64s([b]), axes) for a, b in zip(bounds[:-1], bounds[1:])
    )


@register("aten::tensor_split.sections")
def aten_tensor_split_sections(ctx: NodeContext, self: ir.Value, sections: int, dim: int = 0) -> tuple[ir.Value, ...]:
    """tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]"""
    return _sections(ctx, self, sections, normalize_dim(dim, ctx.rank(self)))


@register("aten::tensor_split.indices")
def aten_tensor_split_indices(
    ctx: NodeContext, self: ir.Value, indices: Sequence[int | ir.Value], dim: int = 0
) -> tuple[ir.Value, ...]:
    """tensor_split.indices(Tensor(a -> *) self, SymInt[] indices, int dim=0) -> Tensor(a)[]"""
    return _indices(ctx, self, indices, normalize_dim(dim, ctx.rank(self)))


def _hvd_axis(ctx: NodeContext, self: ir.Value) -> int:
    name = ctx.op_name
    return {"vsplit": 0, "dsplit": 2}.get(name, 1 if ctx.rank(self) > 1 else 0)


@register("aten::hsplit.int", "aten::vsplit.int", "aten::dsplit.int")
def aten_hsplit_int(ctx: NodeContext, self: ir.Value, sections: int) -> tuple[ir.Value, ...]:
    """hsplit.int(Tensor(a -> *) self, int sections) -> Tensor(a)[] (vsplit: dim 0, dsplit: dim 2)"""
    return _sections(ctx, self, sections, _hvd_axis(ctx, self))


@register("aten::hsplit.array", "aten::vsplit.array", "aten::dsplit.array")
def aten_hsplit_array(ctx: NodeContext, self: ir.Value, indices: Sequence[int]) -> tuple[ir.Value, ...]:
    """hsplit.array(Tensor(a -> *) self, int[] indices) -> Tensor(a)[]"""
    return _indices(ctx, self, indices, _hvd_axis(ctx, self))


@register("aten::unbind.int", "aten::unbind_copy.int")
def aten_unbind(ctx: NodeContext, self: ir.Value, dim: int = 0) -> tuple[ir.Value, ...]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, ctx.rank(self))
    n = len(ctx.val)
    axes = ctx.const([axis], INT64)
    parts = (self,) if n == 1 else ctx.op("Split", self, ctx.const([1] * n, INT64), axis=axis, num_outputs=n)
    return tuple(ctx.op("Squeeze", p, axes) for p in parts)


@register("aten::meshgrid.default", "aten::meshgrid.indexing")
def aten_meshgrid(ctx: NodeContext, tensors: Sequence[ir.Value], *, indexing: str = "ij") -> list[ir.Value]:
    """meshgrid.indexing(Tensor[] tensors, *, str indexing) -> Tensor[]: ``xy`` swaps the first two axes."""
    n = len(tensors)
    sizes = [dim_of(ctx, t, 0) if ctx.rank(t) else 1 for t in tensors]
    order = list(range(n))
    if indexing == "xy" and n > 1:
        order[0], order[1] = 1, 0
    shape = concat_shape(ctx, [sizes[i] for i in order])
    out = []
    for i, t in enumerate(tensors):
        position = order.index(i)
        axes = [a for a in range(n) if a != position]
        flat = ctx.op("Reshape", t, ctx.const([-1], INT64)) if ctx.rank(t) != 1 else t
        out.append(expand_to(ctx, unsqueeze_axes(ctx, flat, axes), shape))
    return out


@register("aten::cartesian_prod.default")
def aten_cartesian_prod(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """cartesian_prod(Tensor[] tensors) -> Tensor: the meshgrid flattened and stacked as columns."""
    if len(tensors) == 1:
        return tensors[0]
    grids = aten_meshgrid(ctx, tensors)
    last = ctx.const([-1, 1], INT64)
    return ctx.op("Concat", *[ctx.op("Reshape", g, last) for g in grids], axis=1)


def _concat(ctx: NodeContext, parts: Sequence[ir.Value], axis: int) -> ir.Value:
    parts = [ctx.cast(p, ctx.out_dtype) for p in parts]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=axis)


@register("aten::hstack.default")
def aten_hstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """hstack(Tensor[] tensors) -> Tensor"""
    parts = [atleast(ctx, t, 1) for t in tensors]
    return _concat(ctx, parts, 0 if ctx.rank(parts[0]) == 1 else 1)


@register("aten::vstack.default", "aten::row_stack.default")
def aten_vstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """vstack(Tensor[] tensors) -> Tensor"""
    return _concat(ctx, [atleast(ctx, t, 2) for t in tensors], 0)


@register("aten::dstack.default")
def aten_dstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """dstack(Tensor[] tensors) -> Tensor"""
    return _concat(ctx, [atleast(ctx, t, 3) for t in tensors], 2)


@register("aten::column_stack.default")
def aten_column_stack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """column_stack(Tensor[] tensors) -> Tensor: 0-D and 1-D tensors become columns."""
    column = ctx.const([-1, 1], INT64)
    parts = [ctx.op("Reshape", t, column) if ctx.rank(t) < 2 else t for t in tensors]
    return _concat(ctx, parts, 1)


@register("aten::_chunk_cat.default")
def aten__chunk_cat(ctx: NodeContext, tensors: Sequence[ir.Value], dim: int, num_chunks: int) -> ir.Value:
    """_chunk_cat(Tensor[] tensors, int dim, int num_chunks) -> Tensor

    Each tensor padded along ``dim`` to a multiple of ``num_chunks``, reshaped to ``[..., num_chunks, -1]``,
    and the pieces concatenated on the last axis.
    """
    dtype = ctx.out_dtype
    parts = []
    for t, val in zip(tensors, list_vals(ctx, 0)):
        shape = static_ints(ctx, val.shape, "_chunk_cat")
        axis = normalize_dim(dim, len(shape))
        size = shape[axis]
        chunk = -(-size // num_chunks)
        x = ctx.cast(t, dtype)
        if chunk * num_chunks != size:
            x = pad_axes(
                ctx, x, [0, 0] * (len(shape) - 1 - axis) + [0, chunk * num_chunks - size], "constant", 0, len(shape)
            )
        parts.append(ctx.op("Reshape", x, ctx.const([*shape[:axis], num_chunks, -1], INT64)))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=-1)


@register("aten::tensor_split.tensor_indices_or_sections")
def aten_tensor_split_tensor(
    ctx: NodeContext, self: ir.Value, tensor_indices_or_sections: ir.Value, dim: int = 0
) -> tuple[ir.Value, ...]:
    """tensor_split.tensor_indices_or_sections(Tensor(a -> *) self, Tensor tensor_indices_or_sections, int dim=0)
    -> Tensor(a)[]: one ``Slice`` per part between the indices the tensor holds."""
    axis = normalize_dim(dim, ctx.rank(self))
    n = len(ctx.val)
    if ctx.rank(tensor_indices_or_sections) == 0:

        return aten_tensor_split_sections(ctx, self, n, dim)
    indices = ctx.cast(tensor_indices_or_sections, INT64)
    axes = ctx.const([axis], INT64)
    bounds = [ctx.const([0], INT64)]
    bounds += [ctx.op("Slice", indices, ctx.const([i], INT64), ctx.const([i + 1], INT64)) for i in range(n - 1)]
    bounds.append(ctx.const([INT64_MAX], INT64))
    return tuple(ctx.op("Slice", self, a, b, axes) for a, b in zip(bounds[:-1], bounds[1:]))


@register("aten::combinations.default")
def aten_combinations(ctx: NodeContext, self: ir.Value, r: int = 2, with_replacement: bool = False) -> ir.Value:
    """combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor: a ``Gather`` of the index
    combinations computed at export time."""
    n = static_ints(ctx, ctx.arg_val(0).shape, "combinations")[0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    return ctx.op("Gather", self, ctx.const(index), axis=0)
