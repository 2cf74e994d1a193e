"""Shape functions made of several ONNX ops: broadcasting, stacks, meshgrid, diagonals, sliding windows,
strided views, padding, scatters into views, repeat_interleave.

The positions these ops read or write are computed at export time from the static sizes PyTorch
recorded; an op that needs a dynamic size there raises NotImplementedError.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..context import NodeContext
from ..registry import register
from ._helpers import BOOL, INT64, normalize_dim, widen
from .shape import INT64_MAX, aten_flip, concat_shape, dim_of, dims_of, same_shape, static_dim, static_shape

BF16 = ir.DataType.BFLOAT16
#: element types onnxruntime's CPU kernels of Where, Expand and Pad lack
_MISSING = (BOOL, ir.DataType.INT16, ir.DataType.UINT16, BF16)


def _static(ctx: NodeContext, sizes: Sequence[Any], what: str) -> list[int]:
    out = [static_dim(s) for s in sizes]
    if any(s is None for s in out):
        raise NotImplementedError(f"{what} needs static sizes, got {list(sizes)}")
    return out


def _list_vals(ctx: NodeContext, index: int) -> list[Any]:
    """``meta['val']`` of each tensor of the list argument ``index``."""
    return [n.meta["val"] for n in ctx.node.args[index]]


def _where(ctx: NodeContext, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    dtype = a.dtype
    return ctx.cast(ctx.op("Where", cond, widen(ctx, a, _MISSING), widen(ctx, ctx.cast(b, dtype), _MISSING)), dtype)


def _expand(ctx: NodeContext, x: ir.Value, shape: ir.Value) -> ir.Value:
    return ctx.cast(ctx.op("Expand", widen(ctx, x, (BF16,)), shape), x.dtype)


def _out_shape(ctx: NodeContext, val: Any) -> ir.Value | None:
    """The shape of ``val`` (a FakeTensor) as a constant when static, else None."""
    shape = static_shape(val)
    return None if shape is None else ctx.const(shape, INT64)


def _unsqueeze(ctx: NodeContext, x: ir.Value, axes: Sequence[int]) -> ir.Value:
    return ctx.op("Unsqueeze", x, ctx.const(list(axes), INT64)) if axes else x


def _move_last_two(ctx: NodeContext, x: ir.Value, rank: int, dim1: int, dim2: int) -> ir.Value:
    """Moves the last two axes of ``x`` (of rank ``rank``) to positions ``dim1`` and ``dim2`` (normalized)."""
    perm: list[int | None] = [None] * rank
    perm[dim1], perm[dim2] = rank - 2, rank - 1
    rest = iter(range(rank - 2))
    perm = [p if p is not None else next(rest) for p in perm]
    return x if perm == list(range(rank)) else ctx.op("Transpose", x, perm=perm)


# -- broadcasting -------------------------------------------------------------------------------------------
@register("aten::broadcast_tensors.default")
def aten_broadcast_tensors(ctx: NodeContext, tensors: Sequence[ir.Value]) -> list[ir.Value]:
    """broadcast_tensors(Tensor[] tensors) -> Tensor[]"""
    vals = ctx.val
    shape = _out_shape(ctx, vals[0])
    if shape is None:  # the largest size of each axis, the shapes aligned on the right
        rank = len(vals[0].shape)
        padded = [
            ctx.op("Concat", ctx.const([1] * (rank - ctx.rank(t)), INT64), ctx.op("Shape", t), axis=0)
            if ctx.rank(t) < rank
            else ctx.op("Shape", t)
            for t in tensors
        ]
        shape = padded[0] if len(padded) == 1 else ctx.op("Max", *padded)
    return [
        t if same_shape(ctx, v, vals[i]) else _expand(ctx, t, shape)
        for i, (t, v) in enumerate(zip(tensors, _list_vals(ctx, 0)))
    ]


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
        out.append(_expand(ctx, _unsqueeze(ctx, flat, axes), shape))
    return out


@register("aten::cartesian_prod.default")
def aten_cartesian_prod(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """cartesian_prod(Tensor[] tensors) -> Tensor: the meshgrid flattened and stacked as columns."""
    if len(tensors) == 1:
        return tensors[0]
    grids = aten_meshgrid(ctx, tensors)
    last = ctx.const([-1, 1], INT64)
    return ctx.op("Concat", *[ctx.op("Reshape", g, last) for g in grids], axis=1)


# -- stacks -------------------------------------------------------------------------------------------------
_ATLEAST_AXES = {
    1: {0: [0]},
    2: {0: [0, 1], 1: [0]},
    3: {0: [0, 1, 2], 1: [0, 2], 2: [2]},
}


def _atleast(ctx: NodeContext, x: ir.Value, n: int) -> ir.Value:
    return _unsqueeze(ctx, x, _ATLEAST_AXES[n].get(ctx.rank(x), []))


def _atleast_converter(n: int):
    def converter(ctx: NodeContext, self: Any) -> Any:
        if isinstance(self, ir.Value):
            return _atleast(ctx, self, n)
        return [_atleast(ctx, t, n) for t in self]

    converter.__name__ = converter.__qualname__ = f"aten_atleast_{n}d"
    converter.__doc__ = f"atleast_{n}d(Tensor self) -> Tensor (Sequence: the same on each tensor)"
    return converter


for _n in (1, 2, 3):
    register(f"aten::atleast_{_n}d.default", f"aten::atleast_{_n}d.Sequence")(_atleast_converter(_n))


def _concat(ctx: NodeContext, parts: Sequence[ir.Value], axis: int) -> ir.Value:
    parts = [ctx.cast(p, ctx.out_dtype) for p in parts]
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=axis)


@register("aten::hstack.default")
def aten_hstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """hstack(Tensor[] tensors) -> Tensor"""
    parts = [_atleast(ctx, t, 1) for t in tensors]
    return _concat(ctx, parts, 0 if ctx.rank(parts[0]) == 1 else 1)


@register("aten::vstack.default", "aten::row_stack.default")
def aten_vstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """vstack(Tensor[] tensors) -> Tensor"""
    return _concat(ctx, [_atleast(ctx, t, 2) for t in tensors], 0)


@register("aten::dstack.default")
def aten_dstack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """dstack(Tensor[] tensors) -> Tensor"""
    return _concat(ctx, [_atleast(ctx, t, 3) for t in tensors], 2)


@register("aten::column_stack.default")
def aten_column_stack(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """column_stack(Tensor[] tensors) -> Tensor: 0-D and 1-D tensors become columns."""
    column = ctx.const([-1, 1], INT64)
    parts = [ctx.op("Reshape", t, column) if ctx.rank(t) < 2 else t for t in tensors]
    return _concat(ctx, parts, 1)


@register("aten::block_diag.default")
def aten_block_diag(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """block_diag(Tensor[] tensors) -> Tensor: each block padded with zeros to the full width, stacked."""
    dtype = ctx.out_dtype
    blocks = []
    for t, val in zip(tensors, _list_vals(ctx, 0)):
        shape = _static(ctx, val.shape, "block_diag")
        matrix = [1, 1] if len(shape) == 0 else [1, shape[0]] if len(shape) == 1 else shape
        blocks.append((ctx.op("Reshape", ctx.cast(t, dtype), ctx.const(matrix, INT64)), matrix))
    width = sum(m[1] for _, m in blocks)
    rows, before = [], 0
    for block, (_, cols) in blocks:
        pads = ctx.const([0, before, 0, width - before - cols], INT64)
        rows.append(ctx.cast(ctx.op("Pad", widen(ctx, block, (BF16,)), pads), dtype))
        before += cols
    return rows[0] if len(rows) == 1 else ctx.op("Concat", *rows, axis=0)


# -- diagonals --------------------------------------------------------------------------------------------
def _diagonal(ctx: NodeContext, x: ir.Value, shape: Sequence[Any], offset: int, dim1: int, dim2: int) -> ir.Value:
    """The diagonal ``offset`` of the planes ``(dim1, dim2)`` of ``x`` (of shape ``shape``), as the last axis."""
    rank = len(shape)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    n, m = _static(ctx, [shape[d1], shape[d2]], "diagonal")
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
        x = ctx.cast(ctx.op("Pad", widen(ctx, x, (BF16,)), pads), x.dtype)
    mask = np.eye(size, size, k=offset, dtype=np.bool_)
    values = _unsqueeze(ctx, x, [rank] if offset >= 0 else [rank - 1])
    return _where(ctx, ctx.const(mask), values, ctx.const(0, x.dtype))


@register("aten::diag_embed.default")
def aten_diag_embed(ctx: NodeContext, self: ir.Value, offset: int = 0, dim1: int = -2, dim2: int = -1) -> ir.Value:
    """diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor"""
    n = _static(ctx, ctx.arg_val(0).shape[-1:], "diag_embed")[0]
    out = _embed(ctx, self, ctx.rank(self), n, offset)
    rank = ctx.rank(self) + 1
    return _move_last_two(ctx, out, rank, normalize_dim(dim1, rank), normalize_dim(dim2, rank))


@register("aten::diag.default")
def aten_diag(ctx: NodeContext, self: ir.Value, diagonal: int = 0) -> ir.Value:
    """diag(Tensor self, int diagonal=0) -> Tensor: a matrix from a vector, the diagonal of a matrix."""
    shape = ctx.arg_val(0).shape
    if len(shape) == 1:
        return _embed(ctx, self, 1, _static(ctx, shape, "diag")[0], diagonal)
    return _diagonal(ctx, self, shape, diagonal, 0, 1)


@register("aten::diagflat.default")
def aten_diagflat(ctx: NodeContext, self: ir.Value, offset: int = 0) -> ir.Value:
    """diagflat(Tensor self, int offset=0) -> Tensor"""
    n = _static(ctx, [ctx.arg_val(0).numel()], "diagflat")[0]
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
    n, m = _static(ctx, [shape[d1], shape[d2]], "diagonal_scatter")
    others = [i for i in range(rank) if i not in (d1, d2)]
    perm = [*others, d1, d2]
    xt = ctx.op("Transpose", self, perm=perm) if perm != list(range(rank)) else self
    lead = [dim_of(ctx, self, i) for i in others]
    flat = ctx.op("Reshape", xt, concat_shape(ctx, [*lead, n * m]))
    index = ctx.const(_diagonal_index(n, m, offset))
    index = _expand(ctx, index, ctx.op("Shape", src))
    out = ctx.op("ScatterElements", flat, index, ctx.cast(src, self.dtype), axis=rank - 2)
    out = ctx.op("Reshape", out, concat_shape(ctx, [*lead, n, m]))
    if perm == list(range(rank)):
        return out
    return ctx.op("Transpose", out, perm=[perm.index(i) for i in range(rank)])


# -- flips and rotations ----------------------------------------------------------------------------------
@register("aten::fliplr.default")
def aten_fliplr(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """fliplr(Tensor self) -> Tensor"""
    return aten_flip(ctx, self, [1])


@register("aten::flipud.default")
def aten_flipud(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """flipud(Tensor self) -> Tensor"""
    return aten_flip(ctx, self, [0])


@register("aten::rot90.default")
def aten_rot90(ctx: NodeContext, self: ir.Value, k: int = 1, dims: Sequence[int] = (0, 1)) -> ir.Value:
    """rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor: flips and a transposition."""
    rank = ctx.rank(self)
    a, b = normalize_dim(dims[0], rank), normalize_dim(dims[1], rank)
    k %= 4
    if k == 0:
        return self
    if k == 2:
        return aten_flip(ctx, self, [a, b])
    perm = list(range(rank))
    perm[a], perm[b] = b, a
    return ctx.op("Transpose", aten_flip(ctx, self, [b] if k == 1 else [a]), perm=perm)


# -- windows and strided views ------------------------------------------------------------------------------
@register("aten::unfold.default", "aten::unfold_copy.default")
def aten_unfold(ctx: NodeContext, self: ir.Value, dimension: int, size: int, step: int) -> ir.Value:
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a): one ``Gather`` of the windows."""
    shape = ctx.arg_val(0).shape
    rank = len(shape)
    if rank == 0:
        return ctx.op("Reshape", self, ctx.const([1], INT64))
    axis = normalize_dim(dimension, rank)
    length = _static(ctx, [shape[axis]], "unfold")[0]
    windows = (length - size) // step + 1
    index = np.arange(windows)[:, None] * step + np.arange(size)[None, :]
    out = ctx.op("Gather", self, ctx.const(index.astype(np.int64)), axis=axis)
    perm = [*range(axis + 1), *range(axis + 2, rank + 1), axis + 1]
    return out if perm == list(range(rank + 1)) else ctx.op("Transpose", out, perm=perm)


@register("aten::as_strided.default", "aten::as_strided_copy.default")
def aten_as_strided(
    ctx: NodeContext,
    self: ir.Value,
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int | None = None,
) -> ir.Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    A ``Gather`` of the contiguous input flattened, at the positions the strides give.
    """
    index = _strided_index(_static(ctx, size, "as_strided"), _static(ctx, stride, "as_strided"), storage_offset or 0)
    flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
    return ctx.op("Gather", flat, ctx.const(index))


# -- padding ------------------------------------------------------------------------------------------------
def _pad(
    ctx: NodeContext, x: ir.Value, pad: Sequence[int], mode: str, value: Any = None, rank: int | None = None
) -> ir.Value:
    """PyTorch's ``pad`` (pairs for the last axis first): negative pads crop with ``Slice``, positive ones
    are an ONNX ``Pad`` (``wrap`` made of slices before opset 19)."""
    pad = _static(ctx, pad, "pad")
    rank = ctx.rank(x) if rank is None else rank
    dtype = x.dtype
    pairs = [(rank - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    sizes = [static_dim(x.shape[axis]) if x.shape is not None else None for axis, _, _ in pairs]
    if mode != "constant" and all(s is not None for s in sizes):
        for (axis, before, after), n in zip(pairs, sizes):
            x = ctx.op("Gather", x, ctx.const(_pad_index(mode, n, before, after)), axis=axis)
        return x
    crops = [(axis, max(0, -b), min(0, a)) for axis, b, a in pairs if b < 0 or a < 0]
    if crops:
        starts = ctx.const([c[1] for c in crops], INT64)
        ends = ctx.const([c[2] if c[2] < 0 else INT64_MAX for c in crops], INT64)
        x = ctx.op("Slice", x, starts, ends, ctx.const([c[0] for c in crops], INT64))
    grows = [(axis, max(0, b), max(0, a)) for axis, b, a in pairs if b > 0 or a > 0]
    if not grows:
        return x
    if mode == "circular" and ctx.opset < 19:
        for axis, before, after in grows:
            parts = [x]
            if before:
                parts.insert(
                    0,
                    ctx.op(
                        "Slice", x, ctx.const([-before], INT64), ctx.const([INT64_MAX], INT64), ctx.const([axis], INT64)
                    ),
                )
            if after:
                parts.append(
                    ctx.op("Slice", x, ctx.const([0], INT64), ctx.const([after], INT64), ctx.const([axis], INT64))
                )
            x = ctx.op("Concat", *parts, axis=axis)
        return x
    onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    pads = ctx.const([g[1] for g in grows] + [g[2] for g in grows], INT64)
    wide = widen(ctx, x, (BF16,))
    inputs = [wide, pads]
    if mode == "constant":
        fill = 0 if value is None else value
        if dtype == BOOL:
            fill = bool(fill)
        elif not dtype.is_floating_point():
            fill = int(fill)
        inputs.append(ctx.const(fill, wide.dtype))
    else:
        inputs.append(None)
    inputs.append(ctx.const([g[0] for g in grows], INT64))
    return ctx.cast(ctx.op("Pad", *inputs, mode=onnx_mode), dtype)


def _pad_index(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """Positions of the input read by each position of a padded axis, as PyTorch computes them."""
    i = np.arange(n + before + after, dtype=np.int64) - before
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":  # negative pads crop first, the wrapped values come from what remains
        start, length = max(-before, 0), n - max(-before, 0) - max(-after, 0)
        return start + (np.arange(n + before + after, dtype=np.int64) - max(before, 0)) % length
    while ((i < 0) | (i >= n)).any():  # reflect
        i = np.where(i < 0, -i, i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    return i


@register("aten::constant_pad_nd.default")
def aten_constant_pad_nd(ctx: NodeContext, self: ir.Value, pad: Sequence[int], value: Any = 0) -> ir.Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    return _pad(ctx, self, pad, "constant", value)


@register("aten::pad.default")
def aten_pad(
    ctx: NodeContext, self: ir.Value, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> ir.Value:
    """pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor"""
    return _pad(ctx, self, pad, mode, value)


def _pad_converter(mode: str):
    def converter(ctx: NodeContext, self: ir.Value, padding: Sequence[int]) -> ir.Value:
        return _pad(ctx, self, padding, mode)

    converter.__name__ = converter.__qualname__ = f"aten_{mode}_pad"
    converter.__doc__ = f"{mode}_pad2d(Tensor self, SymInt[4] padding) -> Tensor (1d, 3d alike)"
    return converter


for _mode, _onnx in (("reflection", "reflect"), ("replication", "replicate")):
    register(*(f"aten::{_mode}_pad{n}d.default" for n in (1, 2, 3)))(_pad_converter(_onnx))
register("aten::_pad_circular.default")(_pad_converter("circular"))


# -- scatter into views -------------------------------------------------------------------------------------
def _positions(ctx: NodeContext, src: ir.Value, axis: int, start: int | ir.Value, step: int) -> ir.Value:
    """``start + step * i`` along ``axis`` of ``src`` (an FX value), expanded to its shape (indices of
    ScatterElements)."""
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
    return _expand(ctx, ctx.op("Reshape", index, ctx.const(shape, INT64)), ctx.op("Shape", src))


@register("aten::slice_scatter.default")
def aten_slice_scatter(
    ctx: NodeContext,
    self: ir.Value,
    src: ir.Value,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> ir.Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor"""
    rank = ctx.rank(self)
    if rank == 0:
        return ctx.cast(src, self.dtype)
    axis = normalize_dim(dim, rank)
    size = static_dim(ctx.arg_val(0).shape[axis])
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        if size is None:
            raise NotImplementedError("slice_scatter with a negative start on a dynamic dimension")
        start += size
    if isinstance(start, int) and size is not None:
        start = min(max(start, 0), size)
    index = _positions(ctx, src, axis, start, step)
    return ctx.op("ScatterElements", self, index, ctx.cast(src, self.dtype), axis=axis)


@register("aten::select_scatter.default")
def aten_select_scatter(ctx: NodeContext, self: ir.Value, src: ir.Value, dim: int, index: int | ir.Value) -> ir.Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    rank = ctx.rank(self)
    axis = normalize_dim(dim, rank)
    if isinstance(index, int) and index < 0:
        size = dim_of(ctx, self, axis)
        index = index + size if isinstance(size, int) else ctx.op("Add", ctx.const(index, INT64), size)
    src = _unsqueeze(ctx, ctx.cast(src, self.dtype), [axis])
    position = ctx.op("Reshape", ctx.operand(index, INT64), ctx.const([1] * rank, INT64))
    return ctx.op("ScatterElements", self, _expand(ctx, position, ctx.op("Shape", src)), src, axis=axis)


# -- repetitions and chunks ---------------------------------------------------------------------------------
@register("aten::repeat_interleave.self_int")
def aten_repeat_interleave_self_int(
    ctx: NodeContext, self: ir.Value, repeats: int | ir.Value, dim: int | None = None, *, output_size: int | None = None
) -> ir.Value:
    """repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor

    Each element repeated in a new axis after ``dim`` (``Expand``), merged with ``dim`` (``Reshape``).
    """
    if dim is None:
        x, axis, dims = ctx.op("Reshape", self, ctx.const([-1], INT64)), 0, [-1]
    else:
        x, axis = self, normalize_dim(dim, ctx.rank(self))
        dims = [dim_of(ctx, self, i) for i in range(ctx.rank(self))]
    x = _unsqueeze(ctx, x, [axis + 1])
    expanded = [*dims[: axis + 1], repeats, *dims[axis + 1 :]]
    if dim is None:
        expanded[0] = static_dim(ctx.arg_val(0).numel())
        if expanded[0] is None:
            expanded[0] = ctx.op("Size", self)
    x = _expand(ctx, x, concat_shape(ctx, expanded))
    return ctx.op("Reshape", x, concat_shape(ctx, [*dims[:axis], -1, *dims[axis + 1 :]]))


def _repeat_index(ctx: NodeContext, repeats: ir.Value) -> ir.Value:
    """``repeat_interleave(repeats)``: ``i`` repeated ``repeats[i]`` times, counted as the number of cumulated
    repeats each output position has passed."""
    repeats = ctx.op("Reshape", ctx.cast(repeats, INT64), ctx.const([-1], INT64))
    ends = ctx.op("CumSum", repeats, ctx.const(0, INT64))
    total = ctx.op("ReduceSum", repeats, keepdims=0)
    positions = ctx.op("Range", ctx.const(0, INT64), total, ctx.const(1, INT64))
    passed = ctx.op("GreaterOrEqual", ctx.op("Unsqueeze", positions, ctx.const([1], INT64)), ends)
    return ctx.op("ReduceSum", ctx.cast(passed, INT64), ctx.const([1], INT64), keepdims=0)


@register("aten::repeat_interleave.Tensor")
def aten_repeat_interleave_tensor(ctx: NodeContext, repeats: ir.Value, *, output_size: int | None = None) -> ir.Value:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor"""
    return ctx.cast(_repeat_index(ctx, repeats), ctx.out_dtype)


@register("aten::repeat_interleave.self_Tensor")
def aten_repeat_interleave_self_tensor(
    ctx: NodeContext, self: ir.Value, repeats: ir.Value, dim: int | None = None, *, output_size: int | None = None
) -> ir.Value:
    """repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor"""
    x, axis = (ctx.op("Reshape", self, ctx.const([-1], INT64)), 0) if dim is None else (self, dim)
    axis = normalize_dim(axis, ctx.rank(x))
    repeats = ctx.cast(repeats, INT64)
    if ctx.rank(repeats) == 0 or static_dim(ctx.arg_val(1).numel()) == 1:  # one count for every element
        size = ctx.op("Shape", x, start=axis, end=axis + 1)
        repeats = ctx.op("Expand", ctx.op("Reshape", repeats, ctx.const([-1], INT64)), size)
    return ctx.op("Gather", x, _repeat_index(ctx, repeats), axis=axis)


@register("aten::channel_shuffle.default", "aten::native_channel_shuffle.default")
def aten_channel_shuffle(ctx: NodeContext, self: ir.Value, groups: int) -> ir.Value:
    """channel_shuffle(Tensor self, SymInt groups) -> Tensor: ``[N, g, C/g, ...]`` transposed to ``[N, C/g, g, ...]``."""
    rank = ctx.rank(self)
    channels = _static(ctx, [ctx.arg_val(0).shape[1]], "channel_shuffle")[0]
    batch, rest = dims_of(ctx, self, 0, 1), dims_of(ctx, self, 2)
    x = ctx.op("Reshape", self, concat_shape(ctx, [*batch, groups, channels // groups, *rest]))
    x = ctx.op("Transpose", x, perm=[0, 2, 1, *range(3, rank + 1)])
    return ctx.op("Reshape", x, concat_shape(ctx, [*batch, channels, *rest]))


@register("aten::_chunk_cat.default")
def aten_chunk_cat(ctx: NodeContext, tensors: Sequence[ir.Value], dim: int, num_chunks: int) -> ir.Value:
    """_chunk_cat(Tensor[] tensors, int dim, int num_chunks) -> Tensor

    Each tensor padded along ``dim`` to a multiple of ``num_chunks``, reshaped to ``[..., num_chunks, -1]``,
    and the pieces concatenated on the last axis.
    """
    dtype = ctx.out_dtype
    parts = []
    for t, val in zip(tensors, _list_vals(ctx, 0)):
        shape = _static(ctx, val.shape, "_chunk_cat")
        axis = normalize_dim(dim, len(shape))
        size = shape[axis]
        chunk = -(-size // num_chunks)
        x = ctx.cast(t, dtype)
        if chunk * num_chunks != size:
            x = _pad(
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
        from .shape import aten_tensor_split_sections

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
    n = _static(ctx, ctx.arg_val(0).shape, "combinations")[0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    return ctx.op("Gather", self, ctx.const(index), axis=0)


@register("aten::as_strided_scatter.default")
def aten_as_strided_scatter(
    ctx: NodeContext,
    self: ir.Value,
    src: ir.Value,
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int | None = None,
) -> ir.Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None)
    -> Tensor: ``ScatterElements`` of ``src`` at the positions of the strided view of the flattened ``self``."""
    index = _strided_index(
        _static(ctx, size, "as_strided_scatter"), _static(ctx, stride, "as_strided_scatter"), storage_offset or 0
    )
    flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
    out = ctx.op(
        "ScatterElements",
        flat,
        ctx.const(index.reshape(-1)),
        ctx.op("Reshape", ctx.cast(src, self.dtype), ctx.const([-1], INT64)),
        axis=0,
    )
    return ctx.op("Reshape", out, ctx.op("Shape", self))


def _strided_index(size: Sequence[int], stride: Sequence[int], offset: int) -> np.ndarray:
    index = np.full(size, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = n
        index = index + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return index


def _im2col_index(
    height: int, width: int, kernel: Sequence[int], dilation: Sequence[int], stride: Sequence[int]
) -> tuple[np.ndarray, int]:
    """``[kh * kw, L]`` flat positions in a (padded) ``height x width`` plane of each kernel offset for each
    of the ``L`` sliding positions."""
    kh, kw = kernel
    oh = (height - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (width - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    rows = np.arange(kh)[:, None, None, None] * dilation[0] + np.arange(oh)[None, None, :, None] * stride[0]
    cols = np.arange(kw)[None, :, None, None] * dilation[1] + np.arange(ow)[None, None, None, :] * stride[1]
    return (rows * width + cols).reshape(kh * kw, oh * ow).astype(np.int64), oh * ow


@register("aten::im2col.default")
def aten_im2col(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> ir.Value:
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor:
    the padded planes flattened, one ``Gather`` of every window, ``[N, C * kh * kw, L]``."""
    shape = _static(ctx, ctx.arg_val(0).shape, "im2col")
    batched = len(shape) == 4
    x = self if batched else _unsqueeze(ctx, self, [0])
    n, c, h, w = shape if batched else [1, *shape]
    ph, pw = padding
    if ph or pw:
        x = ctx.cast(ctx.op("Pad", widen(ctx, x, (BF16,)), ctx.const([0, 0, ph, pw, 0, 0, ph, pw], INT64)), self.dtype)
    h, w = h + 2 * ph, w + 2 * pw
    index, positions = _im2col_index(h, w, kernel_size, dilation, stride)
    planes = ctx.op("Reshape", x, ctx.const([n, c, h * w], INT64))
    cols = ctx.op("Gather", planes, ctx.const(index), axis=2)  # [N, C, kh*kw, L]
    out_shape = [n, c * index.shape[0], positions] if batched else [c * index.shape[0], positions]
    return ctx.op("Reshape", cols, ctx.const(out_shape, INT64), allowzero=1)


@register("aten::col2im.default")
def aten_col2im(
    ctx: NodeContext,
    self: ir.Value,
    output_size: Sequence[int],
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> ir.Value:
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding,
    int[2] stride) -> Tensor: the columns summed back into the padded planes (``ScatterElements`` add),
    the padding cut."""
    shape = _static(ctx, ctx.arg_val(0).shape, "col2im")
    batched = len(shape) == 3
    n, ckk, positions = shape if batched else [1, *shape]
    kh, kw = kernel_size
    c = ckk // (kh * kw)
    ph, pw = padding
    h, w = output_size[0] + 2 * ph, output_size[1] + 2 * pw
    index, _ = _im2col_index(h, w, kernel_size, dilation, stride)
    dtype = ctx.out_dtype
    compute = ir.DataType.FLOAT if dtype in (BF16, ir.DataType.FLOAT16) else dtype
    cols = ctx.op("Reshape", ctx.cast(self, compute), ctx.const([n, c, kh * kw * positions], INT64))
    zeros = ctx.op(
        "ConstantOfShape",
        ctx.const([n, c, h * w], INT64),
        value=ir.tensor(np.zeros(1, dtype=compute.numpy()), dtype=compute),
    )
    flat_index = ctx.op("Expand", ctx.const(index.reshape(1, 1, -1)), ctx.const([n, c, index.size], INT64))
    planes = ctx.op("ScatterElements", zeros, flat_index, cols, axis=2, reduction="add")
    out = ctx.op("Reshape", planes, ctx.const([n, c, h, w], INT64))
    if ph or pw:
        out = ctx.op(
            "Slice", out, ctx.const([ph, pw], INT64), ctx.const([h - ph, w - pw], INT64), ctx.const([2, 3], INT64)
        )
    if not batched:
        out = ctx.op("Squeeze", out, ctx.const([0], INT64))
    return ctx.cast(out, dtype)
