"""Shape manipulation: view/reshape, permutations, (un)squeeze, expand, repeat, cat/stack, splits, slicing.

Output shapes that PyTorch computed statically become constants; dynamic sizes (0-D INT64 values) are
assembled with ``Shape``/``Concat`` only where needed.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch

from ..context import NodeContext
from ..registry import register
from ._helpers import INT64, normalize_dim, widen

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808
BF16 = ir.DataType.BFLOAT16


# -- shape helpers, also used by indexing.py and creation.py ---------------------------------------------
def static_dim(d: Any) -> int | None:
    """``d`` as an int when it is known at export time, else None."""
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt) and d.node.expr.is_number:
        return int(d.node.expr)
    return None


def static_shape(val: torch.Tensor) -> list[int] | None:
    """The shape of a FakeTensor as ints, or None when one dimension is dynamic."""
    dims = [static_dim(d) for d in val.shape]
    return None if any(d is None for d in dims) else dims


class Vec:
    """A 1-D INT64 value standing for several dimensions in a list given to :func:`concat_shape`."""

    def __init__(self, value: ir.Value):
        self.value = value


def dims_of(ctx: NodeContext, x: ir.Value, start: int = 0, end: int | None = None) -> list[int | Vec]:
    """The dimensions ``start:end`` of ``x`` (a value from an FX node): ints where static, runs of
    dynamic dimensions as a :class:`Vec` sliced from ``Shape(x)``."""
    shape = list(x.shape)
    end = len(shape) if end is None else end
    out: list[int | Vec] = []
    i = start
    while i < end:
        if isinstance(shape[i], int):
            out.append(shape[i])
            i += 1
            continue
        j = i
        while j < end and not isinstance(shape[j], int):
            j += 1
        out.append(Vec(ctx.op("Shape", x, start=i, end=j)))
        i = j
    return out


def dim_of(ctx: NodeContext, x: ir.Value, axis: int) -> int | ir.Value:
    """Size of axis ``axis`` of ``x``: an int, or a 0-D INT64 value when dynamic."""
    d = x.shape[axis]
    if isinstance(d, int):
        return d
    return ctx.op("Squeeze", ctx.op("Shape", x, start=axis, end=axis + 1), ctx.const([0], INT64))


def concat_shape(ctx: NodeContext, pieces: Sequence[int | ir.Value | Vec]) -> ir.Value:
    """A 1-D INT64 tensor from ints, 0-D INT64 values (one dimension each) and :class:`Vec`."""
    parts: list[ir.Value] = []
    ints: list[int] = []
    for p in pieces:
        if isinstance(p, int):
            ints.append(int(p))
            continue
        if ints:
            parts.append(ctx.const(ints, INT64))
            ints = []
        if isinstance(p, Vec):
            parts.append(p.value)
        else:
            parts.append(ctx.op("Reshape", ctx.cast(p, INT64), ctx.const([1], INT64)))
    if ints or not parts:
        parts.append(ctx.const(ints, INT64))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)


_PY_INT_OPS = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "Div": operator.floordiv,
    "Mod": operator.mod,
}


def int_op(ctx: NodeContext, op_type: str, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    """Integer arithmetic (Add, Sub, Mul, Div of non-negative values, Mod) on ints or 0-D INT64 values."""
    if isinstance(a, int) and isinstance(b, int):
        return _PY_INT_OPS[op_type](a, b)
    return ctx.op(op_type, ctx.operand(a, INT64), ctx.operand(b, INT64))


def same_shape(ctx: NodeContext, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two FakeTensors have the same shape, symbolic dimensions included."""
    return ctx.onnx_shape(a) == ctx.onnx_shape(b)


def _reshape(ctx: NodeContext, x: ir.Value, pieces: Any) -> ir.Value:
    """Reshape ``x`` to the node's output shape: a constant when at most one dimension is dynamic
    (written -1), else ``pieces()`` (ints, dynamic sizes, :class:`Vec`) concatenated."""
    if same_shape(ctx, ctx.arg_val(0), ctx.val):
        return x
    out = [static_dim(d) for d in ctx.val.shape]
    dynamic = [i for i, d in enumerate(out) if d is None]
    if not dynamic or (len(dynamic) == 1 and 0 not in out):
        shape = [-1 if d is None else d for d in out]
        return ctx.op("Reshape", x, ctx.const(shape, INT64), allowzero=1 if 0 in shape else None)
    items = list(pieces())
    zero = any(isinstance(p, int) and p == 0 for p in items)
    return ctx.op("Reshape", x, concat_shape(ctx, items), allowzero=1 if zero else None)


def _transpose(ctx: NodeContext, x: ir.Value, perm: Sequence[int]) -> ir.Value:
    perm = list(perm)
    return x if perm == sorted(perm) else ctx.op("Transpose", x, perm=perm)


# -- views ------------------------------------------------------------------------------------------------
@register("aten::view.default", "aten::reshape.default", "aten::_unsafe_view.default", "aten::view_copy.default")
def aten_view(ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value]) -> ir.Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    return _reshape(ctx, self, lambda: size)


@register("aten::reshape_as.default", "aten::view_as.default")
def aten_reshape_as(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    return _reshape(ctx, self, lambda: [Vec(ctx.op("Shape", other))])


@register("aten::flatten.using_ints")
def aten_flatten(ctx: NodeContext, self: ir.Value, start_dim: int = 0, end_dim: int = -1) -> ir.Value:
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)"""
    rank = ctx.rank(self)
    if rank == 0:
        return ctx.op("Reshape", self, ctx.const([1], INT64))
    start, end = normalize_dim(start_dim, rank), normalize_dim(end_dim, rank)
    return _reshape(ctx, self, lambda: [*dims_of(ctx, self, 0, start), -1, *dims_of(ctx, self, end + 1)])


@register("aten::ravel.default")
def aten_ravel(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """ravel(Tensor(a) self) -> Tensor(a)"""
    return _reshape(ctx, self, lambda: [-1])


@register("aten::unflatten.int")
def aten_unflatten(ctx: NodeContext, self: ir.Value, dim: int, sizes: Sequence[int | ir.Value]) -> ir.Value:
    """unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)"""
    dim = normalize_dim(dim, ctx.rank(self))
    return _reshape(ctx, self, lambda: [*dims_of(ctx, self, 0, dim), *sizes, *dims_of(ctx, self, dim + 1)])


# -- permutations -----------------------------------------------------------------------------------------
@register("aten::permute.default", "aten::permute_copy.default")
def aten_permute(ctx: NodeContext, self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    rank = ctx.rank(self)
    return _transpose(ctx, self, [normalize_dim(d, rank) for d in dims])


@register("aten::transpose.int", "aten::swapaxes.default", "aten::swapdims.default", "aten::transpose_copy.int")
def aten_transpose(ctx: NodeContext, self: ir.Value, dim0: int, dim1: int) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = ctx.rank(self)
    perm = list(range(rank))
    if rank:
        a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
        perm[a], perm[b] = perm[b], perm[a]
    return _transpose(ctx, self, perm)


@register("aten::t.default", "aten::t_copy.default")
def aten_t(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """t(Tensor(a) self) -> Tensor(a): tensors of rank < 2 are returned as they are."""
    return self if ctx.rank(self) < 2 else _transpose(ctx, self, [1, 0])


@register("aten::numpy_T.default")
def aten_numpy_t(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """numpy_T(Tensor(a) self) -> Tensor(a): all dimensions reversed."""
    return _transpose(ctx, self, list(reversed(range(ctx.rank(self)))))


@register("aten::mT.default", "aten::mH.default", "aten::adjoint.default", "aten::matrix_H.default")
def aten_mt(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """mT(Tensor(a) self) -> Tensor(a): the last two dimensions swapped (mH, adjoint: same for real types)."""
    rank = ctx.rank(self)
    return _transpose(ctx, self, [*range(rank - 2), rank - 1, rank - 2])


@register("aten::movedim.int", "aten::movedim.intlist", "aten::moveaxis.int", "aten::moveaxis.intlist")
def aten_movedim(
    ctx: NodeContext, self: ir.Value, source: int | Sequence[int], destination: int | Sequence[int]
) -> ir.Value:
    """movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)"""
    rank = ctx.rank(self)
    src = [normalize_dim(s, rank) for s in ([source] if isinstance(source, int) else source)]
    dst = [normalize_dim(d, rank) for d in ([destination] if isinstance(destination, int) else destination)]
    perm = [-1] * rank
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(rank) if i not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return _transpose(ctx, self, perm)


# -- (un)squeeze ------------------------------------------------------------------------------------------
@register("aten::unsqueeze.default", "aten::unsqueeze_copy.default")
def aten_unsqueeze(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return ctx.op("Unsqueeze", self, ctx.const([normalize_dim(dim, ctx.rank(self) + 1)], INT64))


@register(
    "aten::squeeze.default",
    "aten::squeeze.dim",
    "aten::squeeze.dims",
    "aten::squeeze_copy.default",
    "aten::squeeze_copy.dim",
    "aten::squeeze_copy.dims",
)
def aten_squeeze(ctx: NodeContext, self: ir.Value, dim: int | Sequence[int] | None = None) -> ir.Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a): only the axes of size 1 go, as in PyTorch."""
    shape = ctx.arg_val(0).shape
    rank = len(shape)
    if rank == 0:
        return self
    dims = range(rank) if dim is None else [dim] if isinstance(dim, int) else dim
    axes = sorted({normalize_dim(d, rank) for d in dims if static_dim(shape[normalize_dim(d, rank)]) == 1})
    return ctx.op("Squeeze", self, ctx.const(axes, INT64)) if axes else self


# -- broadcasting and repetition --------------------------------------------------------------------------
def _expand(ctx: NodeContext, x: ir.Value, shape: ir.Value) -> ir.Value:
    return ctx.cast(ctx.op("Expand", widen(ctx, x, (BF16,)), shape), x.dtype)


@register("aten::expand.default", "aten::expand_copy.default", "aten::broadcast_to.default")
def aten_expand(ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    ``Expand`` broadcasts both ways, so -1 (keep the dimension) becomes 1.
    """
    if same_shape(ctx, ctx.arg_val(0), ctx.val):
        return self
    out = [static_dim(d) for d in ctx.val.shape]
    pieces = [o if o is not None else (1 if isinstance(s, int) and s == -1 else s) for o, s in zip(out, size)]
    return _expand(ctx, self, concat_shape(ctx, pieces))


@register("aten::expand_as.default")
def aten_expand_as(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    if same_shape(ctx, ctx.arg_val(0), ctx.val):
        return self
    out = static_shape(ctx.val)
    return _expand(ctx, self, ctx.const(out, INT64) if out is not None else ctx.op("Shape", other))


@register("aten::repeat.default", "aten::tile.default")
def aten_repeat(ctx: NodeContext, self: ir.Value, repeats: Sequence[int | ir.Value]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor (tile: fewer repeats than dimensions allowed)"""
    rank = ctx.rank(self)
    repeats = [1] * (rank - len(repeats)) + list(repeats)
    extra = len(repeats) - rank
    x = self
    if extra:
        x = ctx.op("Unsqueeze", x, ctx.const(list(range(extra)), INT64))
    if all(isinstance(r, int) and r == 1 for r in repeats):
        return x
    return ctx.cast(ctx.op("Tile", widen(ctx, x, (BF16,)), ctx.int64s(repeats)), self.dtype)


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
    name = ctx.node.target._opname
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


# -- slicing ----------------------------------------------------------------------------------------------
def _slice(
    ctx: NodeContext, x: ir.Value, axis: int, start: Any, end: Any, step: Any = 1
) -> ir.Value:
    inputs = [x, ctx.int64s([start]), ctx.int64s([end]), ctx.const([axis], INT64)]
    if not (isinstance(step, int) and step == 1):
        inputs.append(ctx.int64s([step]))
    return ctx.op("Slice", *inputs)


@register("aten::slice.Tensor", "aten::slice_copy.Tensor")
def aten_slice(
    ctx: NodeContext,
    self: ir.Value,
    dim: int = 0,
    start: int | ir.Value | None = None,
    end: int | ir.Value | None = None,
    step: int | ir.Value = 1,
) -> ir.Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(start, int) and start == 0 and isinstance(step, int) and step == 1:
        if same_shape(ctx, ctx.arg_val(0), ctx.val):
            return self
    return _slice(ctx, self, normalize_dim(dim, ctx.rank(self)), start, end, step)


@register("aten::select.int", "aten::select_copy.int")
def aten_select(ctx: NodeContext, self: ir.Value, dim: int, index: int | ir.Value) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    return ctx.op("Gather", self, ctx.operand(index, INT64), axis=normalize_dim(dim, ctx.rank(self)))


@register("aten::narrow.default", "aten::narrow.Tensor", "aten::narrow_copy.default")
def aten_narrow(
    ctx: NodeContext, self: ir.Value, dim: int, start: int | ir.Value, length: int | ir.Value
) -> ir.Value:
    """narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)

    A negative ``start`` counts from the end, a dynamic one must be non-negative.
    """
    axis = normalize_dim(dim, ctx.rank(self))
    if isinstance(start, int) and start < 0:
        start = int_op(ctx, "Add", dim_of(ctx, self, axis), start)
    return _slice(ctx, self, axis, start, int_op(ctx, "Add", start, length))


@register("aten::flip.default")
def aten_flip(ctx: NodeContext, self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    rank = ctx.rank(self)
    if rank == 0 or not dims:
        return self
    axes = sorted({normalize_dim(d, rank) for d in dims})
    k = len(axes)
    return ctx.op(
        "Slice",
        self,
        ctx.const([-1] * k, INT64),
        ctx.const([INT64_MIN] * k, INT64),
        ctx.const(axes, INT64),
        ctx.const([-1] * k, INT64),
    )


@register("aten::roll.default")
def aten_roll(ctx: NodeContext, self: ir.Value, shifts: Sequence[int | ir.Value], dims: Sequence[int] = ()) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor: two slices concatenated per axis."""
    if isinstance(shifts, (int, ir.Value)):
        shifts = [shifts]
    if isinstance(dims, int):
        dims = [dims]
    rank = ctx.rank(self)
    if static_dim(ctx.arg_val(0).numel()) == 0:
        return self
    if not dims:
        flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
        size = static_dim(ctx.arg_val(0).numel())
        shape = static_shape(ctx.arg_val(0))
        rolled = _roll(ctx, flat, shifts[0], 0, size if size is not None else ctx.op("Size", self))
        return ctx.op("Reshape", rolled, ctx.const(shape, INT64) if shape is not None else ctx.op("Shape", self))
    x = self
    for shift, dim in zip(shifts, dims):
        axis = normalize_dim(dim, rank)
        x = _roll(ctx, x, shift, axis, dim_of(ctx, self, axis))
    return x


def _roll(ctx: NodeContext, x: ir.Value, shift: int | ir.Value, axis: int, size: int | ir.Value) -> ir.Value:
    if isinstance(size, int) and isinstance(shift, int):
        if size == 0 or shift % size == 0:
            return x
        cut = size - shift % size
    else:
        cut = int_op(ctx, "Sub", size, int_op(ctx, "Mod", shift, size))
    return ctx.op("Concat", _slice(ctx, x, axis, cut, INT64_MAX), _slice(ctx, x, axis, 0, cut), axis=axis)
