"""Diagonals and triangles: diagonal/diag/diagflat/diag_embed, block_diag, triu/tril, diagonal_scatter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    concat_shape,
    dim_of,
    expand_to,
    list_vals,
    normalize_dim,
    static_ints,
    unsqueeze_axes,
    where_typed,
    widen,
)


@register("aten::triu.default", "aten::tril.default")
def aten_triu(ctx: NodeContext, self: ir.Value, diagonal: int | ir.Value = 0) -> ir.Value:
    """triu(Tensor self, int diagonal=0) -> Tensor (tril: lower part)"""
    upper = 1 if ctx.op_name == "triu" else 0
    x = widen(ctx, self, "Trilu")
    return ctx.cast(ctx.op("Trilu", x, ctx.operand(diagonal, INT64), upper=upper), self.dtype)


#: element types onnxruntime's CPU kernels of Where, Expand and Pad lack
def _move_last_two(ctx: NodeContext, x: ir.Value, rank: int, dim1: int, dim2: int) -> ir.Value:
    """Moves the last two axes of ``x`` (of rank ``rank``) to positions ``dim1`` and ``dim2`` (normalized)."""
    perm: list[int | None] = [None] * rank
    perm[dim1], perm[dim2] = rank - 2, rank - 1
    rest = iter(range(rank - 2))
    perm = [p if p is not None else next(rest) for p in perm]
    return x if perm == list(range(rank)) else ctx.op("Transpose", x, perm=perm)


@register("aten::block_diag.default")
def aten_block_diag(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """block_diag(Tensor[] tensors) -> Tensor: each block padded with zeros to the full width, stacked."""
    dtype = ctx.out_dtype
    blocks = []
    for t, val in zip(tensors, list_vals(ctx, 0)):
        shape = static_ints(ctx, val.shape, "block_diag")
        matrix = [1, 1] if len(shape) == 0 else [1, shape[0]] if len(shape) == 1 else shape
        blocks.append((ctx.op("Reshape", ctx.cast(t, dtype), ctx.const(matrix, INT64)), matrix))
    width = sum(m[1] for _, m in blocks)
    rows, before = [], 0
    for block, (_, cols) in blocks:
        pads = ctx.const([0, before, 0, width - before - cols], INT64)
        rows.append(ctx.cast(ctx.op("Pad", widen(ctx, block, "Pad"), pads), dtype))
        before += cols
    return rows[0] if len(rows) == 1 else ctx.op("Concat", *rows, axis=0)


# -- diagonals --------------------------------------------------------------------------------------------
def _diagonal(ctx: NodeContext, x: ir.Value, shape: Sequence[Any], offset: int, dim1: int, dim2: int) -> ir.Value:
    """The diagonal ``offset`` of the planes ``(dim1, dim2)`` of ``x`` (of shape ``shape``), as the last axis."""
    rank = len(shape)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    n, m = static_ints(ctx, [shape[d1], shape[d2]], "diagonal")
    others = [i for i in range(rank) if i not in (d1, d2)]
    xt = ctx.op("Transpose", x, perm=[*others, d1, d2]) if [*others, d1, d2] != list(range(rank)) else x
    flat = ctx.op("Reshape", xt, concat_shape(ctx, [*[dim_of(ctx, x, i) for i in others], n * m]))
    return ctx.op("Gather", flat, ctx.const(_diagonal_index(n, m, offset)), axis=rank - 2)


@register("aten::diagonal.default", "aten::diagonal_copy.default")
def aten_diagonal(ctx: NodeContext, self: ir.Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    return _diagonal(ctx, self, ctx.arg_val(0).shape, offset, dim1, dim2)


@register("aten::linalg_diagonal.default")
def aten_linalg_diagonal(ctx: NodeContext, A: ir.Value, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> ir.Value:
    """linalg_diagonal(Tensor(a) A, *, int offset=0, int dim1=-2, int dim2=-1) -> Tensor(a)"""
    return _diagonal(ctx, A, ctx.arg_val(0).shape, offset, dim1, dim2)


def _embed(ctx: NodeContext, x: ir.Value, rank: int, n: int, offset: int) -> ir.Value:
    """``x`` (``[..., n]``, of rank ``rank``) on the diagonal ``offset`` of ``[..., N, N]`` matrices of zeros,
    ``N = n + |offset|``."""
    k = abs(offset)
    size = n + k
    if k:
        pads = ctx.const([0] * rank + [0] * (rank - 1) + [k], INT64)
        x = ctx.cast(ctx.op("Pad", widen(ctx, x, "Pad"), pads), x.dtype)
    mask = np.eye(size, size, k=offset, dtype=np.bool_)
    values = unsqueeze_axes(ctx, x, [rank] if offset >= 0 else [rank - 1])
    return where_typed(ctx, ctx.const(mask), values, ctx.const(0, x.dtype))


@register("aten::diag_embed.default")
def aten_diag_embed(ctx: NodeContext, self: ir.Value, offset: int = 0, dim1: int = -2, dim2: int = -1) -> ir.Value:
    """diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor"""
    n = static_ints(ctx, ctx.arg_val(0).shape[-1:], "diag_embed")[0]
    out = _embed(ctx, self, ctx.rank(self), n, offset)
    rank = ctx.rank(self) + 1
    return _move_last_two(ctx, out, rank, normalize_dim(dim1, rank), normalize_dim(dim2, rank))


@register("aten::diag.default")
def aten_diag(ctx: NodeContext, self: ir.Value, diagonal: int = 0) -> ir.Value:
    """diag(Tensor self, int diagonal=0) -> Tensor: a matrix from a vector, the diagonal of a matrix."""
    shape = ctx.arg_val(0).shape
    if len(shape) == 1:
        return _embed(ctx, self, 1, static_ints(ctx, shape, "diag")[0], diagonal)
    return _diagonal(ctx, self, shape, diagonal, 0, 1)


@register("aten::diagflat.default")
def aten_diagflat(ctx: NodeContext, self: ir.Value, offset: int = 0) -> ir.Value:
    """diagflat(Tensor self, int offset=0) -> Tensor"""
    n = static_ints(ctx, [ctx.arg_val(0).numel()], "diagflat")[0]
    return _embed(ctx, ctx.op("Reshape", self, ctx.const([-1], INT64)), 1, n, offset)


def _diagonal_index(n: int, m: int, offset: int) -> np.ndarray:
    """Positions of the diagonal ``offset`` in an ``n x m`` matrix flattened."""
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    row0, col0 = max(0, -offset), max(0, offset)
    return np.array([(row0 + i) * m + col0 + i for i in range(length)], dtype=np.int64)


@register("aten::diagonal_scatter.default")
def aten_diagonal_scatter(
    ctx: NodeContext, self: ir.Value, src: ir.Value, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> ir.Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor

    ``ScatterElements`` on the planes ``(dim1, dim2)`` moved last and flattened.
    """
    shape = ctx.arg_val(0).shape
    rank = len(shape)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    n, m = static_ints(ctx, [shape[d1], shape[d2]], "diagonal_scatter")
    others = [i for i in range(rank) if i not in (d1, d2)]
    perm = [*others, d1, d2]
    xt = ctx.op("Transpose", self, perm=perm) if perm != list(range(rank)) else self
    lead = [dim_of(ctx, self, i) for i in others]
    flat = ctx.op("Reshape", xt, concat_shape(ctx, [*lead, n * m]))
    index = ctx.const(_diagonal_index(n, m, offset))
    index = expand_to(ctx, index, ctx.op("Shape", src))
    out = ctx.op("ScatterElements", flat, index, ctx.cast(src, self.dtype), axis=rank - 2)
    out = ctx.op("Reshape", out, concat_shape(ctx, [*lead, n, m]))
    if perm == list(range(rank)):
        return out
    return ctx.op("Transpose", out, perm=[perm.index(i) for i in range(rank)])
