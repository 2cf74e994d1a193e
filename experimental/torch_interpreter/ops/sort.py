"""Sorting and searching: sort, argsort, topk, kthvalue, median, quantile, unique, cummax/cummin, searchsorted,
bucketize, isin, histc.

Sorts are ONNX ``TopK`` over the whole axis: it is stable (ties keep their order), as PyTorch's CPU sort.
NaN sorts above every number, as in PyTorch: floats are sorted once with NaN read as +inf, then stably by
``isnan``, so that NaN comes after +inf.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BOOL,
    FLOAT,
    INT64,
    dim_of,
    filled,
    kernel_dtype,
    kernel_op,
    linspace_values,
    normalize_dim,
    numel,
    opmath_dtype,
    promoted_dtype,
    static_dim,
    widen,
)

#: element types onnxruntime's TopK takes
_TOPK = frozenset(
    {ir.DataType.FLOAT16, FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, INT64, ir.DataType.INT8, ir.DataType.UINT8}
)


def _topk_input(ctx: NodeContext, x: ir.Value) -> ir.Value:
    if x.dtype in _TOPK:
        return x
    return ctx.cast(x, FLOAT if x.dtype in FLOAT_TYPES else ir.DataType.UINT8 if x.dtype == BOOL else INT64)


def _size(ctx: NodeContext, x: ir.Value, axis: int) -> ir.Value:
    """The size of ``axis`` as a 1-D INT64 tensor (the ``k`` of a full TopK)."""
    return ctx.int64s([dim_of(ctx, x, axis)])


def _argsort(ctx: NodeContext, x: ir.Value, axis: int, descending: bool, k: ir.Value | None = None) -> ir.Value:
    """Indices sorting ``x`` (an FX value) along ``axis``, stable, NaN above +inf."""
    full = _size(ctx, x, axis)
    data = _topk_input(ctx, x)
    if x.dtype not in FLOAT_TYPES:
        _, idx = ctx.op("TopK", data, k if k is not None else full, axis=axis, largest=int(descending), num_outputs=2)
        return idx
    nan = ctx.op("IsNaN", data)
    key = ctx.op("Where", nan, ctx.const(float("inf"), data.dtype), data)
    _, first = ctx.op("TopK", key, full, axis=axis, largest=int(descending), num_outputs=2)
    nan_sorted = ctx.cast(ctx.op("GatherElements", nan, first, axis=axis), ir.DataType.UINT8)
    _, second = ctx.op("TopK", nan_sorted, full, axis=axis, largest=int(descending), num_outputs=2)
    idx = ctx.op("GatherElements", first, second, axis=axis)
    if k is not None:
        idx = ctx.op("Slice", idx, ctx.const([0], INT64), k, ctx.const([axis], INT64))
    return idx


def _sorted(ctx: NodeContext, x: ir.Value, axis: int, descending: bool, k: ir.Value | None = None):
    idx = _argsort(ctx, x, axis, descending, k)
    return ctx.op("GatherElements", x, idx, axis=axis), idx


@register("aten::sort.default", "aten::sort.stable")
def aten_sort(
    ctx: NodeContext, self: ir.Value, dim: int = -1, descending: bool = False, *, stable: bool | None = None
) -> tuple[ir.Value, ir.Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    if ctx.rank(self) == 0:
        return self, ctx.const(0, INT64)
    return _sorted(ctx, self, normalize_dim(dim, ctx.rank(self)), descending)


@register("aten::argsort.default", "aten::argsort.stable")
def aten_argsort(
    ctx: NodeContext, self: ir.Value, dim: int = -1, descending: bool = False, *, stable: bool = False
) -> ir.Value:
    """argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor"""
    if ctx.rank(self) == 0:
        return ctx.const(0, INT64)
    return _argsort(ctx, self, normalize_dim(dim, ctx.rank(self)), descending)


@register("aten::msort.default")
def aten_msort(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """msort(Tensor self) -> Tensor: sorted along the first axis."""
    if ctx.rank(self) == 0:
        return self
    return _sorted(ctx, self, 0, False)[0]


@register("aten::topk.default")
def aten_topk(
    ctx: NodeContext, self: ir.Value, k: int | ir.Value, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[ir.Value, ir.Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)"""
    if ctx.rank(self) == 0:
        return self, ctx.const(0, INT64)
    return _sorted(ctx, self, normalize_dim(dim, ctx.rank(self)), largest, ctx.int64s([k]))


def _keep(ctx: NodeContext, x: ir.Value, axis: int, keepdim: bool) -> ir.Value:
    return x if keepdim else ctx.op("Squeeze", x, ctx.const([axis], INT64))


def _pick(ctx: NodeContext, values: ir.Value, idx: ir.Value, position: Any, axis: int, keepdim: bool):
    """``values`` and ``idx`` at ``position`` (an int, or an index tensor with a size-1 ``axis``) of ``axis``."""
    pos = ctx.const([position], INT64) if isinstance(position, int) else position
    if isinstance(position, int):
        v, i = (ctx.op("Gather", t, pos, axis=axis) for t in (values, idx))
    else:
        v, i = (ctx.op("GatherElements", t, pos, axis=axis) for t in (values, idx))
    return _keep(ctx, v, axis, keepdim), _keep(ctx, i, axis, keepdim)


@register("aten::kthvalue.default")
def aten_kthvalue(
    ctx: NodeContext, self: ir.Value, k: int, dim: int = -1, keepdim: bool = False
) -> tuple[ir.Value, ir.Value]:
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if ctx.rank(self) == 0:
        return self, ctx.const(0, INT64)
    axis = normalize_dim(dim, ctx.rank(self))
    values, idx = _sorted(ctx, self, axis, False, ctx.int64s([k]))
    return _pick(ctx, values, idx, k - 1, axis, keepdim)


def _median(ctx: NodeContext, x: ir.Value, axis: int, n: int | None, keepdim: bool, ignore_nan: bool):
    """The lower median along ``axis`` (of size ``n``): NaN if the axis holds one (``ignore_nan``: the median
    of the other values)."""
    if n is None:
        raise NotImplementedError("median over a dynamic dimension")
    values, idx = _sorted(ctx, x, axis, False)
    if x.dtype not in FLOAT_TYPES:
        return _pick(ctx, values, idx, (n - 1) // 2, axis, keepdim)
    nan = kernel_op(ctx, "IsNaN", x, dtype=x.dtype)
    count = ctx.op("ReduceSum", ctx.cast(ctx.op("Not", nan), INT64), ctx.const([axis], INT64), keepdims=1)
    if ignore_nan:  # the median of the values before the NaN, which sort last
        pos = ctx.op(
            "Max", ctx.op("Div", ctx.op("Sub", count, ctx.const(1, INT64)), ctx.const(2, INT64)), ctx.const(0, INT64)
        )
        return _pick(ctx, values, idx, pos, axis, keepdim)
    # a NaN anywhere: the first NaN (sorted at position count), else the median
    any_nan = ctx.op("Less", count, ctx.int64s([dim_of(ctx, x, axis)]))
    pos = ctx.op("Where", any_nan, count, ctx.const((n - 1) // 2, INT64))
    return _pick(ctx, values, idx, pos, axis, keepdim)


@register("aten::median.dim", "aten::nanmedian.dim")
def aten_median_dim(ctx: NodeContext, self: ir.Value, dim: int, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices): the lower median."""
    if ctx.rank(self) == 0:
        return self, ctx.const(0, INT64)
    axis = normalize_dim(dim, ctx.rank(self))
    n = static_dim(ctx.arg_val(0).shape[axis])
    return _median(ctx, self, axis, n, keepdim, ctx.op_name == "nanmedian")


@register("aten::median.default", "aten::nanmedian.default")
def aten_median(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """median(Tensor self) -> Tensor: the lower median of all values."""
    if static_dim(ctx.arg_val(0).numel()) == 0:
        return ctx.const(float("nan"), ctx.out_dtype)
    n = static_dim(ctx.arg_val(0).numel())
    flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
    flat.shape = ir.Shape([n])
    values, _ = _median(ctx, flat, 0, n, False, ctx.op_name == "nanmedian")
    return values


# -- quantiles --------------------------------------------------------------------------------------------
def _quantile(
    ctx: NodeContext, self: ir.Value, q: Any, dim: int | None, keepdim: bool, interpolation: str, ignore_nan: bool
) -> ir.Value:
    """Sorted values (NaN last) at ranks ``q * (n - 1)`` (``n`` the count of non-NaN values for nanquantile)."""
    dtype = ctx.out_dtype
    rank = ctx.rank(self)
    if dim is None or rank == 0:
        x, axis = ctx.op("Reshape", self, ctx.const([-1], INT64)), 0
        n = static_dim(ctx.arg_val(0).numel())
        x.shape = ir.Shape([n])
    else:
        x, axis = self, normalize_dim(dim, rank)
        n = static_dim(ctx.arg_val(0).shape[axis])
    if n is None:
        raise NotImplementedError("quantile over a dynamic dimension")
    xr = (
        ctx.op("Transpose", x, perm=[i for i in range(ctx.rank(x)) if i != axis] + [axis])
        if axis != ctx.rank(x) - 1
        else x
    )
    xr.shape = ir.Shape([s for i, s in enumerate(x.shape) if i != axis] + [n])
    last = ctx.rank(xr) - 1
    values, _ = _sorted(ctx, xr, last, False)
    c = opmath_dtype(dtype)
    values = ctx.cast(values, c)
    qv = ctx.op("Reshape", ctx.operand(q, c), ctx.const([-1], INT64))  # [Q]
    nan = ctx.op("IsNaN", ctx.cast(xr, c))
    valid = ctx.op("ReduceSum", ctx.cast(ctx.op("Not", nan), c), ctx.const([last], INT64), keepdims=1)  # [..., 1]
    count = valid if ignore_nan else ctx.const(float(n), c)
    ranks = ctx.op("Mul", qv, ctx.op("Max", ctx.op("Sub", count, ctx.const(1, c)), ctx.const(0, c)))  # [..., Q]
    if interpolation == "lower":
        ranks = ctx.op("Floor", ranks)
    elif interpolation == "higher":
        ranks = ctx.op("Ceil", ranks)
    elif interpolation == "nearest":
        ranks = ctx.op("Round", ranks)
    lo_r, hi_r = ctx.op("Floor", ranks), ctx.op("Ceil", ranks)
    shape = ctx.op("Shape", ctx.op("Add", ranks, ctx.op("ReduceSum", values, ctx.const([last], INT64), keepdims=1)))
    lo_i = ctx.op("Expand", ctx.cast(lo_r, INT64), shape)
    hi_i = ctx.op("Expand", ctx.cast(hi_r, INT64), shape)
    lo = ctx.op("GatherElements", values, lo_i, axis=last)
    hi = ctx.op("GatherElements", values, hi_i, axis=last)
    if interpolation == "midpoint":
        out = ctx.op("Mul", ctx.op("Add", lo, hi), ctx.const(0.5, c))
    else:
        out = ctx.op("Add", lo, ctx.op("Mul", ctx.op("Sub", ranks, lo_r), ctx.op("Sub", hi, lo)))
    if not ignore_nan:  # NaN where the row holds one
        any_nan = ctx.op("Less", valid, ctx.const(float(n), c))
        out = ctx.op("Where", any_nan, ctx.const(float("nan"), c), out)
    # out: [rest..., Q] -> [Q, rest...], keepdim inserts the reduced axis
    out_rank = ctx.rank(xr)
    out = ctx.op("Transpose", out, perm=[out_rank - 1, *range(out_rank - 1)]) if out_rank > 1 else out
    if keepdim:
        keep_axes = [1 + a for a in range(rank)] if dim is None else [1 + normalize_dim(dim, rank)]
        out = ctx.op("Unsqueeze", out, ctx.const(keep_axes, INT64)) if rank else out
    if ctx.rank(ctx.operand(q, c)) == 0 if isinstance(q, ir.Value) else not isinstance(q, (list, tuple)):
        out = ctx.op("Squeeze", out, ctx.const([0], INT64))
    return ctx.cast(out, dtype)


@register("aten::quantile.default", "aten::quantile.scalar", "aten::nanquantile.default", "aten::nanquantile.scalar")
def aten_quantile(
    ctx: NodeContext,
    self: ir.Value,
    q: Any,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> ir.Value:
    """quantile(Tensor self, Tensor q, int? dim=None, bool keepdim=False, *, str interpolation='linear') -> Tensor"""
    return _quantile(ctx, self, q, dim, keepdim, interpolation, ctx.op_name == "nanquantile")


# -- unique -------------------------------------------------------------------------------------------------
_UNIQUE = frozenset({ir.DataType.FLOAT16, FLOAT, ir.DataType.DOUBLE, INT64, ir.DataType.INT8})


def _empty_int64(ctx: NodeContext) -> ir.Value:
    return ctx.const(np.zeros(0, dtype=np.int64))


def _unique(ctx: NodeContext, x: ir.Value, **attrs: Any) -> tuple[ir.Value, ...]:
    outputs = ctx.op("Unique", x, sorted=1, num_outputs=4, **attrs)
    for v in outputs[1:]:
        v.dtype = INT64
    return outputs


@register("aten::unique_dim.default")
def aten_unique_dim(
    ctx: NodeContext,
    self: ir.Value,
    dim: int,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False)
    -> (Tensor, Tensor, Tensor): ONNX Unique along an axis."""
    dtype = self.dtype
    data = self if dtype in _UNIQUE else ctx.cast(self, FLOAT if dtype in FLOAT_TYPES else INT64)
    values, _, inverse, counts = _unique(ctx, data, axis=normalize_dim(dim, ctx.rank(self)))
    return (
        ctx.cast(values, dtype),
        inverse if return_inverse else _empty_int64(ctx),
        counts if return_counts else _empty_int64(ctx),
    )


@register("aten::_unique2.default")
def aten__unique2(
    ctx: NodeContext, self: ir.Value, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False)
    -> (Tensor, Tensor, Tensor): ONNX Unique, always sorted (PyTorch sorts on CPU too)."""
    dtype = self.dtype
    data = self if dtype in _UNIQUE else ctx.cast(self, FLOAT if dtype in FLOAT_TYPES else INT64)
    flat = ctx.op("Reshape", data, ctx.const([-1], INT64))
    values, _, inverse, counts = _unique(ctx, flat)
    inverse = ctx.op("Reshape", inverse, ctx.op("Shape", self)) if return_inverse else _empty_int64(ctx)
    return ctx.cast(values, dtype), inverse, counts if return_counts else _empty_int64(ctx)


@register("aten::unique_consecutive.default")
def aten_unique_consecutive(
    ctx: NodeContext, self: ir.Value, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None)
    -> (Tensor, Tensor, Tensor): the elements (slices along ``dim``) that differ from their predecessor."""
    rank = ctx.rank(self)
    if dim is None or rank == 0:
        x, axis, rank = ctx.op("Reshape", self, ctx.const([-1], INT64)), 0, 1
        n = numel(ctx, self)
    else:
        x, axis = self, normalize_dim(dim, rank)
        n = ctx.op("Shape", self, start=axis, end=axis + 1)
    n = ctx.op("Reshape", n, ctx.const([1], INT64))
    axes = ctx.const([axis], INT64)
    head = ctx.op("Slice", x, ctx.const([0], INT64), ctx.const([-1], INT64), axes)
    tail = ctx.op("Slice", x, ctx.const([1], INT64), ctx.const([2**62], INT64), axes)
    kd = kernel_dtype("Equal", self.dtype)
    differs = ctx.op("Not", ctx.op("Equal", ctx.cast(tail, kd), ctx.cast(head, kd)))
    others = [i for i in range(rank) if i != axis]
    if others:
        differs = ctx.op("ReduceMax", ctx.cast(differs, ir.DataType.UINT8), ctx.const(others, INT64), keepdims=0)
        differs = ctx.op("Cast", differs, to=BOOL)
    first = ctx.op("Greater", n, ctx.const([0], INT64))
    starts = ctx.op("Concat", first, differs, axis=0)
    values = ctx.cast(ctx.op("Compress", widen(ctx, x, "Compress"), starts, axis=axis), x.dtype)
    inverse = _empty_int64(ctx)
    if return_inverse:
        inverse = ctx.op("Sub", ctx.op("CumSum", ctx.cast(starts, INT64), ctx.const(0, INT64)), ctx.const(1, INT64))
        if dim is None:
            inverse = ctx.op("Reshape", inverse, ctx.op("Shape", self))
    counts = _empty_int64(ctx)
    if return_counts:
        positions = ctx.op("Reshape", ctx.op("NonZero", starts), ctx.const([-1], INT64))
        ends = ctx.op("Concat", ctx.op("Slice", positions, ctx.const([1], INT64), ctx.const([2**62], INT64)), n, axis=0)
        counts = ctx.op("Sub", ends, positions)
    return values, inverse, counts


# -- searching ----------------------------------------------------------------------------------------------
def _empty(ctx: NodeContext) -> ir.Value | None:
    """An empty tensor of the node's output shape when it has no element (onnxruntime reduces empty axes
    badly), else None."""
    shape = [static_dim(d) for d in ctx.val.shape]
    if 0 not in shape or None in shape:
        return None
    return filled(ctx, ctx.const(shape, INT64), ctx.out_dtype)


def _count_below(
    ctx: NodeContext, boundaries: ir.Value, values: ir.Value, right: bool, rows: bool, length: Any = None
) -> ir.Value:
    """For each value, PyTorch's binary search over the boundaries: the first position whose boundary is not
    ``<`` it (``<=`` with ``right``), comparisons written ``not (b >= v)`` as PyTorch, so that a NaN value
    goes last and a NaN boundary counts as below. ``rows``: one row of boundaries per row of values (their
    last axes). ``length`` (the number of boundaries) static: the search itself, unrolled; dynamic: the count
    of boundaries below each value (the same on sorted boundaries without NaN)."""
    b = boundaries
    v = ctx.cast(values, b.dtype)
    if isinstance(length, int) and b.dtype in FLOAT_TYPES:
        return _binary_search(ctx, b, v, right, rows, length)
    v = ctx.op("Unsqueeze", v, ctx.const([-1], INT64))  # [..., K, 1]
    if rows:
        b = ctx.op("Unsqueeze", b, ctx.const([-2], INT64))  # [..., 1, M]
    below = ctx.op("Not", ctx.op("Greater" if right else "GreaterOrEqual", b, v))
    return ctx.op("ReduceSum", ctx.cast(below, INT64), ctx.const([-1], INT64), keepdims=0)


def _binary_search(ctx: NodeContext, b: ir.Value, v: ir.Value, right: bool, rows: bool, length: int) -> ir.Value:
    """PyTorch's ``cus_lower_bound``/``cus_upper_bound`` step by step (``length.bit_length()`` steps): the
    same answer as PyTorch also where NaN boundaries make the predicate non monotonic."""
    start = ctx.op("ConstantOfShape", ctx.op("Shape", v), value=ir.tensor([0], dtype=INT64))
    end = ctx.op("Add", start, ctx.const(length, INT64))
    one, two, last = ctx.const(1, INT64), ctx.const(2, INT64), ctx.const(max(length - 1, 0), INT64)
    for _ in range(length.bit_length()):
        mid = ctx.op("Add", start, ctx.op("Div", ctx.op("Sub", end, start), two))
        at = ctx.op("Min", mid, last)
        found = ctx.op("GatherElements", b, at, axis=-1) if rows else ctx.op("Gather", b, at, axis=0)
        after = ctx.op("Not", ctx.op("Greater" if right else "GreaterOrEqual", found, v))
        active = ctx.op("Less", start, end)
        start = ctx.op("Where", ctx.op("And", active, after), ctx.op("Add", mid, one), start)
        end = ctx.op("Where", ctx.op("And", active, ctx.op("Not", after)), mid, end)
    return start


@register("aten::searchsorted.Tensor", "aten::searchsorted.Scalar")
def aten_searchsorted(
    ctx: NodeContext,
    sorted_sequence: ir.Value,
    self: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: ir.Value | None = None,
) -> ir.Value:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False,
    str? side=None, Tensor? sorter=None) -> Tensor: counts of the sequence below each value."""
    empty = _empty(ctx)
    if empty is not None:
        return empty
    seq = sorted_sequence
    if sorter is not None:
        seq = ctx.op("GatherElements", seq, ctx.cast(sorter, INT64), axis=-1)
    dtype = _compare_dtype(ctx, 0, 1)
    values = ctx.operand(self, dtype)
    length = static_dim(ctx.arg_val(0).shape[-1])
    rows = ctx.rank(sorted_sequence) > 1
    out = _count_below(ctx, ctx.cast(seq, dtype), values, right or side == "right", rows, length)
    return ctx.cast(out, ctx.out_dtype)


@register("aten::bucketize.Tensor", "aten::bucketize.Scalar")
def aten_bucketize(
    ctx: NodeContext, self: Any, boundaries: ir.Value, *, out_int32: bool = False, right: bool = False
) -> ir.Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    empty = _empty(ctx)
    if empty is not None:
        return empty
    dtype = _compare_dtype(ctx, 0, 1)
    length = static_dim(ctx.arg_val(1).shape[-1])
    out = _count_below(ctx, ctx.cast(boundaries, dtype), ctx.operand(self, dtype), right, False, length)
    return ctx.cast(out, ctx.out_dtype)


def _compare_dtype(ctx: NodeContext, *indices: int) -> ir.DataType:
    return kernel_dtype("Less", promoted_dtype(ctx, *indices))


@register("aten::isin.Tensor_Tensor", "aten::isin.Tensor_Scalar", "aten::isin.Scalar_Tensor")
def aten_isin(
    ctx: NodeContext, elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
) -> ir.Value:
    """isin.Tensor_Tensor(Tensor elements, Tensor test_elements, *, bool assume_unique=False, bool invert=False)
    -> Tensor: every element compared with every test element."""
    dtype = kernel_dtype("Equal", _compare_dtype(ctx, 0, 1))
    tests = ctx.op("Reshape", ctx.operand(test_elements, dtype), ctx.const([-1], INT64))
    x = ctx.operand(elements, dtype)
    equal = ctx.op("Equal", ctx.op("Unsqueeze", x, ctx.const([-1], INT64)), tests)
    found = ctx.op("ReduceMax", ctx.cast(equal, ir.DataType.UINT8), ctx.const([-1], INT64), keepdims=0)
    found = ctx.op("Cast", found, to=BOOL)
    return ctx.op("Not", found) if invert else found


@register("aten::histc.default")
def aten_histc(ctx: NodeContext, self: ir.Value, bins: int = 100, min: float = 0, max: float = 0) -> ir.Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor: ``min == max`` takes the range
    of the data (widened by 1 on both sides when it is a single value)."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x = ctx.op("Reshape", ctx.cast(self, c), ctx.const([-1], INT64))
    if min == max:
        lo, hi = ctx.op("ReduceMin", x, keepdims=0), ctx.op("ReduceMax", x, keepdims=0)
        if static_dim(ctx.arg_val(0).numel()) == 0:
            lo, hi = ctx.const(float(min), c), ctx.const(float(max), c)
        same = ctx.op("Equal", lo, hi)
        lo = ctx.op("Where", same, ctx.op("Sub", lo, ctx.const(1, c)), lo)
        hi = ctx.op("Where", same, ctx.op("Add", hi, ctx.const(1, c)), hi)
    else:
        lo, hi = ctx.const(float(min), c), ctx.const(float(max), c)
    inside = ctx.op("And", ctx.op("GreaterOrEqual", x, lo), ctx.op("LessOrEqual", x, hi))
    position = ctx.op("Div", ctx.op("Mul", ctx.op("Sub", x, lo), ctx.const(float(bins), c)), ctx.op("Sub", hi, lo))
    index = ctx.op("Min", ctx.cast(ctx.op("Floor", position), INT64), ctx.const(bins - 1, INT64))
    index = ctx.op("Where", inside, index, ctx.const(-1, INT64))
    hits = ctx.op(
        "Equal", ctx.op("Unsqueeze", index, ctx.const([-1], INT64)), ctx.const(np.arange(bins, dtype=np.int64))
    )
    return ctx.cast(ctx.op("ReduceSum", ctx.cast(hits, c), ctx.const([0], INT64), keepdims=0), dtype)


def _histogram(
    ctx: NodeContext, x: ir.Value, edges: ir.Value, bins: int, weight: ir.Value | None, density: bool, c: ir.DataType
) -> ir.Value:
    """Counts (or sums of ``weight``) of the flat ``x`` in the bins ``[edges[i], edges[i + 1])``, the last
    bin closed, as ``torch.histogram``."""
    lo = ctx.op("Gather", edges, ctx.const(0, INT64))
    hi = ctx.op("Gather", edges, ctx.const(bins, INT64))
    # the bin of each value: the number of inner edges <= x, values == the last edge in the last bin
    inner = ctx.op("Slice", edges, ctx.const([1], INT64), ctx.const([bins], INT64))
    inner = ctx.op("Concat", inner, ctx.const([float("inf")], c), axis=0)  # never empty: onnxruntime reduces badly
    index = ctx.op(
        "ReduceSum",
        ctx.cast(ctx.op("LessOrEqual", inner, ctx.op("Unsqueeze", x, ctx.const([-1], INT64))), INT64),
        ctx.const([-1], INT64),
        keepdims=0,
    )
    inside = ctx.op("And", ctx.op("GreaterOrEqual", x, lo), ctx.op("LessOrEqual", x, hi))
    index = ctx.op("Where", inside, index, ctx.const(-1, INT64))
    hits = ctx.cast(
        ctx.op("Equal", ctx.op("Unsqueeze", index, ctx.const([-1], INT64)), ctx.const(np.arange(bins, dtype=np.int64))),
        c,
    )
    if weight is not None:
        hits = ctx.op(
            "Mul",
            hits,
            ctx.op("Unsqueeze", ctx.op("Reshape", ctx.cast(weight, c), ctx.const([-1], INT64)), ctx.const([-1], INT64)),
        )
    hist = ctx.op("ReduceSum", hits, ctx.const([0], INT64), keepdims=0)
    if density:
        widths = ctx.op(
            "Sub",
            ctx.op("Slice", edges, ctx.const([1], INT64), ctx.const([bins + 1], INT64)),
            ctx.op("Slice", edges, ctx.const([0], INT64), ctx.const([bins], INT64)),
        )
        hist = ctx.op("Div", hist, ctx.op("Mul", ctx.op("ReduceSum", hist, keepdims=0), widths))
    return hist


@register("aten::histogram.bin_ct")
def aten_histogram_bin_ct(
    ctx: NodeContext,
    self: ir.Value,
    bins: int = 100,
    *,
    range: Any = None,
    weight: ir.Value | None = None,
    density: bool = False,
) -> tuple[ir.Value, ir.Value]:
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False)
    -> (Tensor hist, Tensor bin_edges): ``bins`` equal bins over ``range`` or the range of the data."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x = ctx.op("Reshape", ctx.cast(self, c), ctx.const([-1], INT64))
    empty = static_dim(ctx.arg_val(0).numel()) == 0
    if range is not None:
        lo, hi = ctx.const(float(range[0]), c), ctx.const(float(range[1]), c)
    elif empty:
        lo, hi = ctx.const(0.0, c), ctx.const(1.0, c)
    else:
        lo, hi = ctx.op("ReduceMin", x, keepdims=0), ctx.op("ReduceMax", x, keepdims=0)
    same = ctx.op("Equal", lo, hi)  # a single value: PyTorch's range is that value +- 0.5
    lo = ctx.op("Where", same, ctx.op("Sub", lo, ctx.const(0.5, c)), lo)
    hi = ctx.op("Where", same, ctx.op("Add", hi, ctx.const(0.5, c)), hi)
    edges = ctx.cast(linspace_values(ctx, lo, hi, bins + 1), c)  # as torch.linspace computes them
    if empty:
        hist = filled(ctx, ctx.const([bins], INT64), dtype, np.nan if density else 0)  # 0 / 0
        return hist, ctx.cast(edges, dtype)
    hist = _histogram(ctx, x, edges, bins, weight, density, c)
    return ctx.cast(hist, dtype), ctx.cast(edges, dtype)


@register("aten::histogram.bins_tensor")
def aten_histogram_bins_tensor(
    ctx: NodeContext, self: ir.Value, bins: ir.Value, *, weight: ir.Value | None = None, density: bool = False
) -> tuple[ir.Value, ir.Value]:
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False)
    -> (Tensor hist, Tensor bin_edges): the bin edges given."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    n = static_dim(ctx.arg_val(1).shape[0])
    if static_dim(ctx.arg_val(0).numel()) == 0:
        hist = filled(ctx, ctx.const([n - 1], INT64), dtype, np.nan if density else 0)
        return hist, ctx.cast(bins, dtype)
    x = ctx.op("Reshape", ctx.cast(self, c), ctx.const([-1], INT64))
    edges = ctx.cast(bins, c)
    return ctx.cast(_histogram(ctx, x, edges, n - 1, weight, density, c), dtype), ctx.cast(bins, dtype)
