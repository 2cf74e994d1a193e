"""Views: ops whose output is the input's elements re-indexed by shape and stride arithmetic alone.

view/reshape/flatten/unflatten, permute/transpose/movedim, (un)squeeze, expand/broadcast, atleast_Nd,
slice/select/narrow, as_strided, and the ``*_scatter`` forms of these views (``slice_scatter`` writes
into a slice). Output shapes that PyTorch computed statically become constants; dynamic sizes (0-D INT64
values) are assembled with ``Shape``/``Concat`` only where needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    INT64_MAX,
    Vec,
    atleast,
    concat_shape,
    dim_of,
    dims_of,
    expand_to,
    int_op,
    list_vals,
    normalize_dim,
    same_shape,
    scatter_slice,
    slice_axis,
    static_dim,
    static_ints,
    static_shape,
    unsqueeze_axes,
)


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


@register(
    "aten::transpose.int",
    "aten::swapaxes.default",
    "aten::swapdims.default",
    "aten::transpose_copy.int",
    "aten::transpose_.default",
    "aten::swapaxes_.default",
    "aten::swapdims_.default",
)
def aten_transpose(ctx: NodeContext, self: ir.Value, dim0: int, dim1: int) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = ctx.rank(self)
    perm = list(range(rank))
    if rank:
        a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
        perm[a], perm[b] = perm[b], perm[a]
    return _transpose(ctx, self, perm)


@register("aten::t.default", "aten::t_copy.default", "aten::t_.default")
def aten_t(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """t(Tensor(a) self) -> Tensor(a): tensors of rank < 2 are returned as they are."""
    return self if ctx.rank(self) < 2 else _transpose(ctx, self, [1, 0])


@register("aten::numpy_T.default")
def aten_numpy_T(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """numpy_T(Tensor(a) self) -> Tensor(a): all dimensions reversed."""
    return _transpose(ctx, self, list(reversed(range(ctx.rank(self)))))


@register("aten::mT.default", "aten::mH.default", "aten::adjoint.default", "aten::matrix_H.default")
def aten_mT(ctx: NodeContext, self: ir.Value) -> ir.Value:
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
@register("aten::unsqueeze.default", "aten::unsqueeze_copy.default", "aten::unsqueeze_.default")
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
    "aten::squeeze_.default",
    "aten::squeeze_.dim",
    "aten::squeeze_.dims",
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
@register("aten::expand.default", "aten::expand_copy.default", "aten::broadcast_to.default")
def aten_expand(ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    ``Expand`` broadcasts both ways, so -1 (keep the dimension) becomes 1.
    """
    if same_shape(ctx, ctx.arg_val(0), ctx.val):
        return self
    out = [static_dim(d) for d in ctx.val.shape]
    pieces = [o if o is not None else (1 if isinstance(s, int) and s == -1 else s) for o, s in zip(out, size)]
    return expand_to(ctx, self, concat_shape(ctx, pieces), out)  # slices 1 -> 0 first (issue 17)


@register("aten::expand_as.default")
def aten_expand_as(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    if same_shape(ctx, ctx.arg_val(0), ctx.val):
        return self
    out = static_shape(ctx.val)
    return expand_to(ctx, self, ctx.const(out, INT64) if out is not None else ctx.op("Shape", other))


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
    return slice_axis(ctx, self, normalize_dim(dim, ctx.rank(self)), start, end, step)


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
    return slice_axis(ctx, self, axis, start, int_op(ctx, "Add", start, length))


def _out_shape(ctx: NodeContext, val: Any) -> ir.Value | None:
    """The shape of ``val`` (a FakeTensor) as a constant when static, else None."""
    shape = static_shape(val)
    return None if shape is None else ctx.const(shape, INT64)


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
        t if same_shape(ctx, v, vals[i]) else expand_to(ctx, t, shape)
        for i, (t, v) in enumerate(zip(tensors, list_vals(ctx, 0)))
    ]


def _atleast_converter(n: int):
    def converter(ctx: NodeContext, self: Any) -> Any:
        if isinstance(self, ir.Value):
            return atleast(ctx, self, n)
        return [atleast(ctx, t, n) for t in self]

    converter.__name__ = converter.__qualname__ = f"aten_atleast_{n}d"
    converter.__doc__ = f"atleast_{n}d(Tensor self) -> Tensor (Sequence: the same on each tensor)"
    return converter


for _n in (1, 2, 3):
    register(f"aten::atleast_{_n}d.default", f"aten::atleast_{_n}d.Sequence")(_atleast_converter(_n))


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
    index = _strided_index(static_ints(ctx, size, "as_strided"), static_ints(ctx, stride, "as_strided"), storage_offset or 0)
    flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
    return ctx.op("Gather", flat, ctx.const(index))


# -- scatter into views -------------------------------------------------------------------------------------
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
    return scatter_slice(ctx, self, src, axis, start, step, static_dim(ctx.arg_val(0).shape[axis]))


@register("aten::select_scatter.default")
def aten_select_scatter(ctx: NodeContext, self: ir.Value, src: ir.Value, dim: int, index: int | ir.Value) -> ir.Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    rank = ctx.rank(self)
    axis = normalize_dim(dim, rank)
    if isinstance(index, int) and index < 0:
        size = dim_of(ctx, self, axis)
        index = index + size if isinstance(size, int) else ctx.op("Add", ctx.const(index, INT64), size)
    src = unsqueeze_axes(ctx, ctx.cast(src, self.dtype), [axis])
    position = ctx.op("Reshape", ctx.operand(index, INT64), ctx.const([1] * rank, INT64))
    return ctx.op("ScatterElements", self, expand_to(ctx, position, ctx.op("Shape", src)), src, axis=axis)


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
        static_ints(ctx, size, "as_strided_scatter"), static_ints(ctx, stride, "as_strided_scatter"), storage_offset or 0
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
