"""Reading and writing by index tensors and masks: gather/take/index_select, advanced indexing
(``x[idx]``, ``x[mask]``, ``x[idx] = v``), the scatter and index_put families, where, masked_fill/select/scatter,
nonzero, embedding and embedding_bag.

Advanced indices follow PyTorch: bool masks become the ``NonZero`` coordinates of the dimensions they cover,
the index tensors broadcast together, and the dimensions they produce go first unless the indexed dimensions
are adjacent, in which case they replace them in place.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BOOL,
    INT64,
    Vec,
    concat_shape,
    dims_of,
    kernel_op,
    normalize_dim,
    opmath_dtype,
    same_shape,
    scatter_elements,
    static_dim,
    static_shape,
    uses_output,
    where_typed,
    widen,
)


def _sized_like(ctx: NodeContext, value: Any, dtype: ir.DataType, like: ir.Value) -> ir.Value:
    """``value`` (a scalar or 0-D tensor) expanded to the shape of ``like``."""
    v = widen(ctx, ctx.operand(value, dtype), "Expand")
    return ctx.cast(ctx.op("Expand", v, ctx.op("Shape", like)), dtype)


def _lift_0d(fn: Any) -> Any:
    """Runs converter ``fn`` on its 0-D tensors reshaped to 1-D when ``self`` is 0-D (ONNX gathers and
    scatters need rank 1), and reshapes the result back to 0-D."""

    def lift(ctx: NodeContext, v: Any) -> Any:
        if not isinstance(v, ir.Value) or v.shape is None or len(v.shape) != 0:
            return v
        out = ctx.op("Reshape", v, ctx.const([1], INT64))
        out.shape = ir.Shape([1])
        return out

    @functools.wraps(fn)
    def wrapper(ctx: NodeContext, self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
        if ctx.rank(self) != 0:
            return fn(ctx, self, *args, **kwargs)
        out = fn(ctx, lift(ctx, self), *[lift(ctx, a) for a in args], **{k: lift(ctx, v) for k, v in kwargs.items()})
        return ctx.op("Reshape", out, ctx.const([], INT64))

    return wrapper


# -- where, masked_fill -----------------------------------------------------------------------------------
@register("aten::where.self", "aten::where.ScalarSelf", "aten::where.ScalarOther", "aten::where.Scalar")
def aten_where(ctx: NodeContext, condition: ir.Value, self: Any, other: Any) -> ir.Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor (either may be a Scalar)"""
    dtype = ctx.out_dtype
    return where_typed(ctx, condition, ctx.operand(self, dtype), ctx.operand(other, dtype))


@register("aten::masked_fill.Scalar", "aten::masked_fill.Tensor")
def aten_masked_fill(ctx: NodeContext, self: ir.Value, mask: ir.Value, value: Any) -> ir.Value:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    return where_typed(ctx, mask, ctx.operand(value, self.dtype), self)


# -- gather -----------------------------------------------------------------------------------------------
@register("aten::index_select.default")
@_lift_0d
def aten_index_select(ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    if ctx.rank(index) == 0:
        index = ctx.op("Reshape", index, ctx.const([1], INT64))
    return ctx.op("Gather", self, index, axis=normalize_dim(dim, ctx.rank(self)))


@register("aten::embedding.default")
def aten_embedding(
    ctx: NodeContext,
    weight: ir.Value,
    indices: ir.Value,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> ir.Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
    bool sparse=False) -> Tensor: the other arguments only matter to the gradient."""
    return ctx.op("Gather", weight, indices, axis=0)


@register("aten::gather.default")
def aten_gather(ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, *, sparse_grad: bool = False) -> ir.Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    if ctx.rank(self) == 0:
        return ctx.op("Expand", self, ctx.op("Shape", index))
    shape = static_shape(ctx.val)
    if shape is not None and 0 in shape:  # an empty index may have another rank than self
        empty = ctx.op("Slice", _flat(ctx, self), ctx.const([0], INT64), ctx.const([0], INT64))
        return ctx.op("Reshape", empty, ctx.const(shape, INT64), allowzero=1)
    return ctx.op("GatherElements", self, ctx.cast(index, INT64), axis=normalize_dim(dim, ctx.rank(self)))


def _with_dim(ctx: NodeContext, x: ir.Value, axis: int, size: int | Vec) -> ir.Value:
    """The shape of ``x`` with dimension ``axis`` replaced by ``size``."""
    return concat_shape(ctx, [*dims_of(ctx, x, 0, axis), size, *dims_of(ctx, x, axis + 1)])


@register("aten::take_along_dim.default")
def aten_take_along_dim(ctx: NodeContext, self: ir.Value, indices: ir.Value, dim: int | None = None) -> ir.Value:
    """take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor

    ``GatherElements`` once both tensors are broadcast to each other outside ``dim``.
    """
    if dim is None:
        flat = ctx.const([-1], INT64)
        return ctx.op("GatherElements", ctx.op("Reshape", self, flat), ctx.op("Reshape", indices, flat), axis=0)
    axis = normalize_dim(dim, ctx.rank(self))
    x_shape, i_shape = list(ctx.onnx_shape(ctx.arg_val(0))), list(ctx.onnx_shape(ctx.arg_val(1)))
    x_shape[axis] = i_shape[axis] = None
    if x_shape != i_shape:
        self_shape, index_shape = _with_dim(ctx, self, axis, 1), _with_dim(ctx, indices, axis, 1)
        self = ctx.cast(ctx.op("Expand", widen(ctx, self, "Expand"), index_shape), self.dtype)
        indices = ctx.op("Expand", indices, self_shape)
    return ctx.op("GatherElements", self, indices, axis=axis)


# -- scatter ----------------------------------------------------------------------------------------------
def _src_like_index(ctx: NodeContext, src: ir.Value, index: ir.Value, src_arg: int, index_arg: int) -> ir.Value:
    """``src`` cut to the shape of ``index`` (PyTorch only reads that part of it)."""
    if same_shape(ctx, ctx.arg_val(src_arg), ctx.arg_val(index_arg)):
        return src
    rank = ctx.rank(index)
    shape = static_shape(ctx.arg_val(index_arg))
    ends = ctx.const(shape, INT64) if shape is not None else ctx.op("Shape", index)
    return ctx.op("Slice", src, ctx.const([0] * rank, INT64), ends, ctx.const(list(range(rank)), INT64))


_REDUCE = {None: None, "add": "add", "sum": "add", "multiply": "mul", "prod": "mul", "amax": "max", "amin": "min"}


@register("aten::scatter.src", "aten::scatter.reduce", "aten::scatter_add.default")
@_lift_0d
def aten_scatter_src(
    ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, src: ir.Value, *, reduce: str | None = None
) -> ir.Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor
    (scatter.src: no reduction, scatter_add: reduce='add')"""
    if ctx.op_name == "scatter_add":
        reduce = "add"
    src = _src_like_index(ctx, src, index, 3, 2)
    axis = normalize_dim(dim, ctx.rank(self))
    return scatter_elements(ctx, "ScatterElements", self, index, src, _REDUCE[reduce], axis=axis)


@register("aten::scatter.value", "aten::scatter.value_reduce")
@_lift_0d
def aten_scatter_value(
    ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, value: Any, *, reduce: str | None = None
) -> ir.Value:
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor"""
    updates = _sized_like(ctx, value, self.dtype, index)
    axis = normalize_dim(dim, ctx.rank(self))
    return scatter_elements(ctx, "ScatterElements", self, index, updates, _REDUCE[reduce], axis=axis)


@register("aten::scatter_reduce.two")
@_lift_0d
def aten_scatter_reduce(
    ctx: NodeContext,
    self: ir.Value,
    dim: int,
    index: ir.Value,
    src: ir.Value,
    reduce: str,
    *,
    include_self: bool = True,
) -> ir.Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True)
    -> Tensor

    Without ``include_self``, the scattered positions are first reset to the reduction's identity;
    ``mean`` divides a sum by a count scattered the same way.
    """
    axis = normalize_dim(dim, ctx.rank(self))
    return _scatter_reduce(ctx, self, axis, index, _src_like_index(ctx, src, index, 3, 2), reduce, include_self)


def _scatter_reduce(
    ctx: NodeContext, self: ir.Value, axis: int, index: ir.Value, src: ir.Value, reduce: str, include_self: bool
) -> ir.Value:
    dtype = self.dtype
    if reduce == "mean":
        base = self if include_self else _reset(ctx, self, index, 0, axis)
        total = scatter_elements(ctx, "ScatterElements", base, index, src, "add", axis=axis)
        ones = _sized_like(ctx, 1, dtype, self)
        ones_base = ones if include_self else _reset(ctx, ones, index, 0, axis)
        count = scatter_elements(ctx, "ScatterElements", ones_base, index, _sized_like(ctx, 1, dtype, index), "add", axis=axis)
        if dtype.is_floating_point():
            return kernel_op(ctx, "Div", total, count, dtype=dtype)
        # floor division, as PyTorch rounds integer means
        floor = kernel_op(ctx, "Sub", total, kernel_op(ctx, "Mod", total, count, dtype=dtype), dtype=dtype)
        return kernel_op(ctx, "Div", floor, count, dtype=dtype)
    if reduce not in ("sum", "prod", "amax", "amin"):
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")
    base = self
    if not include_self:
        identity = {"sum": 0, "prod": 1, "amax": _lowest(dtype), "amin": _highest(dtype)}[reduce]
        base = _reset(ctx, self, index, identity, axis)
    return scatter_elements(ctx, "ScatterElements", base, index, src, _REDUCE[reduce], axis=axis)


def _reset(ctx: NodeContext, x: ir.Value, index: ir.Value, value: Any, axis: int) -> ir.Value:
    """``x`` with the positions ``index`` points to set to ``value``."""
    return scatter_elements(ctx, "ScatterElements", x, index, _sized_like(ctx, value, x.dtype, index), None, axis=axis)


def _lowest(dtype: ir.DataType) -> Any:
    if dtype == BOOL:
        return False
    return float("-inf") if dtype.is_floating_point() else int(np.iinfo(dtype.numpy()).min)


def _highest(dtype: ir.DataType) -> Any:
    if dtype == BOOL:
        return True
    return float("inf") if dtype.is_floating_point() else int(np.iinfo(dtype.numpy()).max)


def _along(ctx: NodeContext, self: ir.Value, axis: int, index: ir.Value, like: ir.Value | None) -> ir.Value:
    """1-D ``index`` reshaped along ``axis`` and expanded to the shape of ``like`` (default: ``self`` with
    ``len(index)`` on ``axis``)."""
    rank = ctx.rank(self)
    shape = [1] * rank
    shape[axis] = -1
    idx = ctx.op("Reshape", ctx.cast(index, INT64), ctx.const(shape, INT64))
    if like is None:
        like_shape = _with_dim(ctx, self, axis, Vec(ctx.op("Shape", idx, start=axis, end=axis + 1)))
    else:
        like_shape = ctx.op("Shape", like)
    return ctx.op("Expand", idx, like_shape)


@register("aten::index_fill.int_Scalar", "aten::index_fill.int_Tensor")
@_lift_0d
def aten_index_fill(ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, value: Any) -> ir.Value:
    """index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    axis = normalize_dim(dim, ctx.rank(self))
    idx = _along(ctx, self, axis, index, None)
    return scatter_elements(ctx, "ScatterElements", self, idx, _sized_like(ctx, value, self.dtype, idx), None, axis=axis)


@register("aten::index_copy.default")
@_lift_0d
def aten_index_copy(ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, source: ir.Value) -> ir.Value:
    """index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor"""
    axis = normalize_dim(dim, ctx.rank(self))
    idx = _along(ctx, self, axis, index, source)
    return scatter_elements(ctx, "ScatterElements", self, idx, source, None, axis=axis)


@register("aten::index_add.default")
@_lift_0d
def aten_index_add(
    ctx: NodeContext, self: ir.Value, dim: int, index: ir.Value, source: ir.Value, *, alpha: Any = 1
) -> ir.Value:
    """index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor"""
    axis = normalize_dim(dim, ctx.rank(self))
    idx = _along(ctx, self, axis, index, source)
    source = ctx.cast(source, self.dtype)
    if alpha != 1:
        source = kernel_op(ctx, "Mul", source, alpha, dtype=self.dtype)
    return scatter_elements(ctx, "ScatterElements", self, idx, source, "add", axis=axis)


@register("aten::index_reduce.default")
@_lift_0d
def aten_index_reduce(
    ctx: NodeContext,
    self: ir.Value,
    dim: int,
    index: ir.Value,
    source: ir.Value,
    reduce: str,
    *,
    include_self: bool = True,
) -> ir.Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True)
    -> Tensor: ``scatter_reduce`` with the index spread along ``dim``."""
    axis = normalize_dim(dim, ctx.rank(self))
    idx = _along(ctx, self, axis, index, source)
    return _scatter_reduce(ctx, self, axis, idx, ctx.cast(source, self.dtype), reduce, include_self)


# -- masks --------------------------------------------------------------------------------------------------
def _flat(ctx: NodeContext, x: ir.Value) -> ir.Value:
    return ctx.op("Reshape", x, ctx.const([-1], INT64))


@register("aten::masked_scatter.default")
def aten_masked_scatter(ctx: NodeContext, self: ir.Value, mask: ir.Value, source: ir.Value) -> ir.Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor

    The k-th True of the mask takes ``source.flatten()[k]``: positions from a ``CumSum`` of the mask.
    """
    shape = ctx.op("Shape", self) if static_shape(ctx.val) is None else ctx.const(static_shape(ctx.val), INT64)
    flat_mask = _flat(ctx, ctx.op("Expand", ctx.cast(mask, BOOL), shape))
    flat_self = _flat(ctx, ctx.op("Expand", widen(ctx, self, "Expand"), shape))
    position = ctx.op("CumSum", ctx.cast(flat_mask, INT64), ctx.const(0, INT64))
    position = ctx.op("Max", ctx.op("Sub", position, ctx.const(1, INT64)), ctx.const(0, INT64))
    taken = ctx.op("Gather", ctx.cast(_flat(ctx, source), flat_self.dtype), position, axis=0)
    out = where_typed(ctx, flat_mask, taken, flat_self)
    return ctx.cast(ctx.op("Reshape", out, shape), self.dtype)


@register("aten::masked_select.default")
def aten_masked_select(ctx: NodeContext, self: ir.Value, mask: ir.Value) -> ir.Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    dtype = self.dtype
    x = widen(ctx, self, "Compress")
    mask = ctx.cast(mask, BOOL)
    if not same_shape(ctx, ctx.arg_val(0), ctx.arg_val(1)):
        x = ctx.op("Expand", x, ctx.op("Shape", mask))  # Expand broadcasts both ways
        mask = ctx.op("Expand", mask, ctx.op("Shape", x))
    return ctx.cast(ctx.op("Compress", _flat(ctx, x), _flat(ctx, mask), axis=0), dtype)


# -- advanced indexing --------------------------------------------------------------------------------------
class _Indices:
    """The indices of ``x[indices]`` / ``x[indices] = v`` after bool masks became coordinates."""

    def __init__(self, ctx: NodeContext, x: ir.Value, indices: Sequence[ir.Value | None]):
        rank = ctx.rank(x)
        entries: list[ir.Value | None] = []
        #: (first dimension, mask) of each bool index
        self.masks: list[tuple[int, ir.Value]] = []
        #: shape of each index tensor (None for the coordinates of a mask, 1-D of unknown length)
        self.shapes: list[tuple[int | Any, ...] | None] = []
        for idx in indices:
            if idx is None:
                entries.append(None)
            elif idx.dtype in (BOOL, ir.DataType.UINT8):
                k = ctx.rank(idx)
                if k == 0:
                    raise NotImplementedError("indexing with a 0-D bool tensor")
                mask = ctx.cast(idx, BOOL)
                self.masks.append((len(entries), mask))
                coords = ctx.op("NonZero", mask)
                for j in range(k):
                    entries.append(ctx.op("Gather", coords, ctx.const(j, INT64), axis=0))
                    self.shapes.append(None)
            else:
                entries.append(ctx.cast(idx, INT64))
                self.shapes.append(tuple(idx.shape))
        entries += [None] * (rank - len(entries))
        self.rank = rank
        self.positions = [i for i, e in enumerate(entries) if e is not None]
        self.tensors = [entries[i] for i in self.positions]
        self.first = self.positions[0]
        self.adjacent = self.positions == list(range(self.first, self.first + len(self.positions)))
        #: the indexed dimensions first, the others after, in order
        self.perm = self.positions + [i for i in range(rank) if i not in self.positions]
        #: rank of the index tensors broadcast together
        self.index_rank = max(1 if s is None else len(s) for s in self.shapes)

    def only_mask(self) -> tuple[int, ir.Value] | None:
        """(first dimension, mask) when the only index is one bool mask."""
        if len(self.masks) == 1 and all(s is None for s in self.shapes):
            return self.masks[0]
        return None

    def stacked(self, ctx: NodeContext) -> ir.Value:
        """The index tensors broadcast together and stacked on a last axis: ``B + [k]`` for ``GatherND``."""
        tensors = self.tensors
        if None in self.shapes or len(set(self.shapes)) > 1 or not all(isinstance(d, int) for d in self.shapes[0]):
            probe = tensors[0]
            for t in tensors[1:]:
                probe = ctx.op("Add", probe, t)
            shape = ctx.op("Shape", probe)
            tensors = [ctx.op("Expand", t, shape) for t in tensors]
        last = ctx.const([-1], INT64)
        parts = [ctx.op("Unsqueeze", t, last) for t in tensors]
        return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=-1)


def _mask_reshape(ctx: NodeContext, x: ir.Value, first: int, k: int) -> ir.Value:
    """``x`` with its dimensions ``first:first+k`` merged into one."""
    if k == 1:
        return x
    shape = concat_shape(ctx, [*dims_of(ctx, x, 0, first), -1, *dims_of(ctx, x, first + k)])
    return ctx.op("Reshape", x, shape)


@register("aten::index.Tensor", "aten::_unsafe_index.Tensor")
def aten_index(ctx: NodeContext, self: ir.Value, indices: Sequence[ir.Value | None]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor

    One index tensor: ``Gather``; one bool mask: ``Compress``; several: ``GatherND`` on the tensor
    transposed so that the indexed dimensions come first, transposed back when PyTorch keeps them in place.
    """
    if all(i is None for i in indices):
        return self
    ind = _Indices(ctx, self, indices)
    mask = ind.only_mask()
    if mask is not None:
        first, m = mask
        k = ctx.rank(m)
        data = _mask_reshape(ctx, self, first, k)
        flat_mask = m if k == 1 else _flat(ctx, m)
        return ctx.cast(ctx.op("Compress", widen(ctx, data, "Compress"), flat_mask, axis=first), self.dtype)
    if len(ind.tensors) == 1:
        return ctx.op("Gather", self, ind.tensors[0], axis=ind.first)
    data = ctx.op("Transpose", self, perm=ind.perm) if ind.perm != list(range(ind.rank)) else self
    out = ctx.op("GatherND", data, ind.stacked(ctx))
    if ind.adjacent and ind.first > 0:
        nb = ind.index_rank
        rest = ind.rank - len(ind.tensors)
        perm = [nb + j for j in range(ind.first)] + list(range(nb)) + [nb + j for j in range(ind.first, rest)]
        out = ctx.op("Transpose", out, perm=perm)
    return out


@register("aten::index_put.default", "aten::_unsafe_index_put.default")
def aten_index_put(
    ctx: NodeContext, self: ir.Value, indices: Sequence[ir.Value | None], values: ir.Value, accumulate: bool = False
) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    ``ScatterND`` (reduction ``add`` to accumulate) on the tensor transposed as for :func:`aten_index`;
    ``x[mask] = scalar`` is a ``Where``.
    """
    return _index_put(ctx, self, indices, values, accumulate, ctx.arg_val(2))


def _index_put(
    ctx: NodeContext,
    self: ir.Value,
    indices: Sequence[ir.Value | None],
    values: ir.Value,
    accumulate: bool,
    values_val: Any,
) -> ir.Value:
    """index_put with ``values_val`` the FakeTensor of ``values`` (for its shape)."""
    if all(i is None for i in indices):
        raise NotImplementedError("index_put without any index tensor")
    values = ctx.cast(values, self.dtype)
    ind = _Indices(ctx, self, indices)
    mask = ind.only_mask()
    value_shape = static_shape(values_val)
    if mask is not None and not accumulate and value_shape is not None and all(d == 1 for d in value_shape):
        first, m = mask
        trailing = ind.rank - first - ctx.rank(m)
        if trailing:
            m = ctx.op("Unsqueeze", m, ctx.const(list(range(-trailing, 0)), INT64))
        if len(value_shape) > 0:
            values = ctx.op("Reshape", values, ctx.const([], INT64))
        return where_typed(ctx, m, values, self)
    identity = ind.perm == list(range(ind.rank))
    data = self if identity else ctx.op("Transpose", self, perm=ind.perm)
    stacked = ind.stacked(ctx)
    k = len(ind.tensors)
    # values broadcast to the shape of x[indices], then laid out as B + the dimensions not indexed
    nb_shape = ctx.op("Shape", stacked, end=-1)
    target = ctx.op("Concat", nb_shape, ctx.op("Shape", data, start=k), axis=0) if k < ind.rank else nb_shape
    rv = values_val.dim()
    if ind.adjacent and ind.first > 0:
        # PyTorch keeps the broadcast index dimensions at ind.first: move them first
        nb = ind.index_rank
        out_rank = nb + ind.rank - k
        if rv < out_rank:
            values = ctx.op("Unsqueeze", values, ctx.const(list(range(out_rank - rv)), INT64))
        perm = list(range(ind.first, ind.first + nb)) + list(range(ind.first)) + list(range(ind.first + nb, out_rank))
        values = ctx.op("Transpose", values, perm=perm)
    updates = ctx.cast(ctx.op("Expand", widen(ctx, values, "Expand"), target), self.dtype)
    out = scatter_elements(ctx, "ScatterND", data, stacked, updates, "add" if accumulate else None)
    if not identity:
        inverse = [ind.perm.index(i) for i in range(ind.rank)]
        out = ctx.op("Transpose", out, perm=inverse)
    return out


# -- flat positions and coordinates --------------------------------------------------------------------------
@register("aten::take.default")
def aten_take(ctx: NodeContext, self: ir.Value, index: ir.Value) -> ir.Value:
    """take(Tensor self, Tensor index) -> Tensor: ``Gather`` on the flattened tensor."""
    return ctx.op("Gather", _flat(ctx, self), ctx.cast(index, INT64), axis=0)


@register("aten::put.default")
def aten_put(ctx: NodeContext, self: ir.Value, index: ir.Value, source: ir.Value, accumulate: bool = False) -> ir.Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor: ``ScatterElements`` on
    the flattened tensor."""
    flat = _flat(ctx, self)
    out = scatter_elements(ctx, "ScatterElements", flat, _flat(ctx, ctx.cast(index, INT64)), _flat(ctx, source),
                   "add" if accumulate else None, axis=0)
    return ctx.op("Reshape", out, ctx.op("Shape", self))


def _nonzero(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """``[n, rank]`` coordinates of the nonzero elements (``[n, 0]`` for a 0-D tensor)."""
    mask = ctx.cast(self, BOOL)
    if ctx.rank(self) == 0:
        coords = ctx.op("NonZero", ctx.op("Reshape", mask, ctx.const([1], INT64)))
        return ctx.op("Slice", ctx.op("Transpose", coords, perm=[1, 0]), ctx.const([0], INT64), ctx.const([0], INT64),
                      ctx.const([1], INT64))
    return ctx.op("Transpose", ctx.op("NonZero", mask), perm=[1, 0])


@register("aten::nonzero.default", "aten::argwhere.default")
def aten_nonzero(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """nonzero(Tensor self) -> Tensor: ONNX NonZero transposed (argwhere: the same)."""
    return _nonzero(ctx, self)


@register("aten::nonzero_static.default")
def aten_nonzero_static(ctx: NodeContext, self: ir.Value, *, size: int, fill_value: int = -1) -> ir.Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor: the first ``size`` coordinates,
    padded with ``fill_value``."""
    rank = ctx.rank(self)
    coords = _nonzero(ctx, self)
    padding = ctx.const(np.full((size, rank), fill_value, dtype=np.int64))
    both = ctx.op("Concat", coords, padding, axis=0)
    return ctx.op("Slice", both, ctx.const([0], INT64), ctx.const([size], INT64), ctx.const([0], INT64))


def _in_range(ctx: NodeContext, self: ir.Value, indices: Sequence[ir.Value | None]) -> list[ir.Value | None]:
    """Index tensors clamped to the valid range of their axis (unsafe masked indices may be anything where
    the mask is False)."""
    out: list[ir.Value | None] = []
    for axis, idx in enumerate(indices):
        if idx is None or idx.dtype == BOOL:
            out.append(idx)
            continue
        size = ctx.op("Shape", self, start=axis, end=axis + 1)
        low = ctx.op("Neg", size)
        high = ctx.op("Sub", size, ctx.const([1], INT64))
        clamped = ctx.op("Min", ctx.op("Max", ctx.cast(idx, INT64), low), high)
        clamped.shape = idx.shape
        out.append(clamped)
    return out


@register("aten::_unsafe_masked_index.default")
def aten__unsafe_masked_index(
    ctx: NodeContext, self: ir.Value, mask: ir.Value, indices: Sequence[ir.Value | None], fill: Any
) -> ir.Value:
    """_unsafe_masked_index(Tensor self, Tensor mask, Tensor?[] indices, Scalar fill) -> Tensor:
    ``where(mask, self[indices], fill)``."""
    gathered = aten_index(ctx, self, _in_range(ctx, self, indices))
    return where_typed(ctx, mask, gathered, ctx.operand(fill, self.dtype))


@register("aten::_unsafe_masked_index_put_accumulate.default")
def aten__unsafe_masked_index_put_accumulate(
    ctx: NodeContext, self: ir.Value, mask: ir.Value, indices: Sequence[ir.Value | None], values: ir.Value
) -> ir.Value:
    """_unsafe_masked_index_put_accumulate(Tensor self, Tensor mask, Tensor?[] indices, Tensor values) -> Tensor:
    ``index_put(self, indices, where(mask, values, 0), accumulate=True)``."""
    masked = where_typed(ctx, mask, ctx.cast(values, self.dtype), ctx.const(0, self.dtype))
    return _index_put(ctx, self, _in_range(ctx, self, indices), masked, True, ctx.arg_val(3))


@register("aten::nonzero_numpy.default", "aten::where.default")
def aten_nonzero_numpy(ctx: NodeContext, self: ir.Value) -> list[ir.Value]:
    """nonzero_numpy(Tensor self) -> Tensor[]: one 1-D tensor of coordinates per axis (a 0-D tensor counts
    as 1-D); ``where(Tensor condition) -> Tensor[]``, ``torch.where`` with one argument, is the same."""
    mask = ctx.cast(self, BOOL)
    if ctx.rank(self) == 0:
        mask = ctx.op("Reshape", mask, ctx.const([1], INT64))
    coords = ctx.op("NonZero", mask)
    n = len(ctx.val)
    return [ctx.op("Squeeze", ctx.op("Slice", coords, ctx.const([i], INT64), ctx.const([i + 1], INT64),
                                     ctx.const([0], INT64)), ctx.const([0], INT64)) for i in range(n)]


# -- embedding bags -----------------------------------------------------------------------------------------
@register("aten::embedding_bag.default", "aten::embedding_bag.padding_idx", "aten::_embedding_bag.default")
def aten_embedding_bag(
    ctx: NodeContext,
    weight: ir.Value,
    indices: ir.Value,
    offsets: ir.Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: ir.Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> tuple[ir.Value | None, ...]:
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode,
    bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx)
    -> (Tensor, Tensor, Tensor, Tensor)

    A ``[bags, n]`` membership mask built from the offsets, then a MatMul (sum, mean) or a masked ReduceMax;
    only the first output (the bags) is computed.
    """
    if any(uses_output(ctx, i) for i in (1, 2, 3)):
        raise NotImplementedError("embedding_bag: only the first output (the bags) is supported")
    bags = static_dim(ctx.val[0].shape[0])
    if bags is None:
        raise NotImplementedError("embedding_bag with a dynamic number of bags")
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    idx = ctx.op("Reshape", ctx.cast(indices, INT64), ctx.const([-1], INT64))
    rows = ctx.cast(ctx.op("Gather", weight, idx, axis=0), c)  # [n, D]
    n_offsets = static_dim(ctx.arg_val(2).shape[0])
    starts = ctx.cast(offsets, INT64)
    position = ctx.op(
        "Range",
        ctx.const(0, INT64),
        ctx.op("Squeeze", ctx.op("Shape", idx), ctx.const([0], INT64)),
        ctx.const(1, INT64),
    )  # [n]
    # bag of each position: the number of offsets <= position, minus 1
    passed = ctx.op(
        "LessOrEqual",
        ctx.op("Unsqueeze", starts, ctx.const([0], INT64)),
        ctx.op("Unsqueeze", position, ctx.const([1], INT64)),
    )  # [n, offsets]
    bag = ctx.op(
        "Sub", ctx.op("ReduceSum", ctx.cast(passed, INT64), ctx.const([1], INT64), keepdims=0), ctx.const(1, INT64)
    )
    member = ctx.op(
        "Equal",
        ctx.op("Unsqueeze", bag, ctx.const([0], INT64)),
        ctx.const(np.arange(bags, dtype=np.int64).reshape(-1, 1)),
    )  # [bags, n]
    if include_last_offset and n_offsets is not None:  # positions past the last offset belong to no bag
        end = ctx.op("Slice", starts, ctx.const([-1], INT64), ctx.const([2**62], INT64))
        member = ctx.op("And", member, ctx.op("Less", ctx.op("Unsqueeze", position, ctx.const([0], INT64)), end))
    if padding_idx is not None and padding_idx < 0 and ctx.node.target._overloadname == "padding_idx":
        padding_idx += static_dim(ctx.arg_val(0).shape[0])  # counts from the end; _embedding_bag's -1 is none
    if padding_idx is not None and padding_idx >= 0:
        keep = ctx.op("Not", ctx.op("Equal", idx, ctx.const(padding_idx, INT64)))
        member = ctx.op("And", member, ctx.op("Unsqueeze", keep, ctx.const([0], INT64)))
    if per_sample_weights is not None:
        rows = ctx.op("Mul", rows, ctx.op("Unsqueeze", ctx.cast(per_sample_weights, c), ctx.const([1], INT64)))
    weights = ctx.cast(member, c)
    if mode == 2:  # max, 0 for an empty bag
        out = _bag_max(ctx, rows, member, weights, c)
    else:
        out = ctx.op("MatMul", weights, rows)
        if mode == 1:
            count = ctx.op("ReduceSum", weights, ctx.const([1], INT64), keepdims=1)
            out = ctx.op("Div", out, ctx.op("Max", count, ctx.const(1.0, c)))
    return ctx.cast(out, dtype), None, None, None


def _bag_max(ctx: NodeContext, rows: ir.Value, member: ir.Value, weights: ir.Value, c: ir.DataType) -> ir.Value:
    """The maximum of the ``rows`` ``[n, D]`` of each bag (``member`` ``[bags, n]``, ``weights`` its 0/1 in
    ``c``), as PyTorch's kernel: it starts from the bag's first member and takes a greater value, so a NaN counts
    only as the first member (the next values are never greater), an empty bag gives 0, a bag of -inf -inf.

    A masked ReduceMax of the rows, NaN read as -inf; NaN where the first member is; with CUDA, -inf where no
    member is above -inf (onnxruntime's CUDA ReduceMax gives the lowest finite float32), counted by a MatMul."""
    inf = ctx.const(-math.inf, c)
    nan = ctx.op("IsNaN", rows)
    clean = ctx.op("Where", nan, inf, rows)
    masked = ctx.op("Where", ctx.op("Unsqueeze", member, ctx.const([2], INT64)),
                    ctx.op("Unsqueeze", clean, ctx.const([0], INT64)), inf)  # [bags, n, D]
    out = ctx.op("ReduceMax", masked, ctx.const([1], INT64), keepdims=0)
    members = ctx.op("ReduceSum", weights, ctx.const([1], INT64), keepdims=1)  # [bags, 1]
    some = ctx.op("Greater", members, ctx.const(0.0, c))
    if ctx.needs_guard("extremum_of_infinities_is_finite"):
        above = ctx.cast(ctx.op("Not", ctx.op("Equal", clean, inf)), c)
        none_above = ctx.op("Equal", ctx.op("MatMul", weights, above), ctx.const(0.0, c))  # [bags, D]
        out = ctx.op("Where", none_above, inf, out)
    first = ctx.op("ArgMax", ctx.cast(member, ir.DataType.UINT8), axis=1, keepdims=0)  # [bags]
    out = ctx.op("Where", ctx.op("Gather", nan, first, axis=0), ctx.const(math.nan, c), out)
    return ctx.op("Where", some, out, ctx.const(0.0, c))


# -- one_hot ------------------------------------------------------------------------------------------------
@register("aten::one_hot.default")
def aten_one_hot(ctx: NodeContext, self: ir.Value, num_classes: int | ir.Value = -1) -> ir.Value:
    """one_hot(Tensor self, int num_classes=-1) -> Tensor: ``self[..., None] == arange(num_classes)`` as int64.

    ``num_classes=-1`` (the largest class plus one) is a size that depends on the data: torch.export refuses
    it before conversion; give the number of classes.
    """
    if isinstance(num_classes, int) and num_classes < 0:
        raise NotImplementedError(
            "one_hot with num_classes=-1 has a size that depends on the values; pass num_classes in the model"
        )
    n = ctx.operand(num_classes, INT64)
    classes = ctx.op("Range", ctx.const(0, INT64), n, ctx.const(1, INT64))
    hot = ctx.op("Equal", ctx.op("Unsqueeze", ctx.cast(self, INT64), ctx.const([-1], INT64)), classes)
    return ctx.cast(hot, ctx.out_dtype)
