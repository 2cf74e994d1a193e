"""Reductions: sum, mean, prod, max/min, argmax/argmin, var/std, all/any, logsumexp, cumsum, norms.

ONNX ``Reduce*`` take their axes as an input (opset 18); ``dim=None`` or ``[]`` reduces every axis.
Sums, means, products and norms of float16/bfloat16 accumulate in float32, as PyTorch does on CPU;
integer and bool sums give int64 (the output dtype says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..context import NodeContext
from ..dtypes import FLOAT_TYPES
from ..registry import register
from ._helpers import BOOL, INT64, axes, filled, kernel_op, normalize_dim, opmath_dtype
from .shape import static_dim

Dims = int | Sequence[int] | None


def _axes(ctx: NodeContext, rank: int, dim: Dims) -> list[ir.Value]:
    """The axes input of a Reduce op: empty for every axis (and for a 0-D input)."""
    ax = axes(ctx, dim, rank) if rank else None
    return [] if ax is None else [ax]


def _reduce(
    ctx: NodeContext, op_type: str, x: ir.Value, dim: Dims, keepdim: bool, dtype: ir.DataType | None = None
) -> ir.Value:
    """``op_type`` over ``dim`` of ``x`` (of the rank of the node's input) cast to ``dtype`` (default: the
    output dtype)."""
    dtype = dtype or ctx.out_dtype
    ax = _axes(ctx, len(ctx.arg_val(0).shape), dim)
    return kernel_op(ctx, op_type, ctx.cast(x, dtype), *ax, dtype=dtype, keepdims=int(keepdim))


def _reduced_sizes(ctx: NodeContext, dim: Dims) -> list[Any]:
    """The sizes (ints or SymInts) of the reduced axes of the node's input."""
    shape = ctx.arg_val(0).shape
    if dim is None or (not isinstance(dim, int) and len(dim) == 0) or len(shape) == 0:
        return list(shape)
    return [shape[normalize_dim(d, len(shape))] for d in ([dim] if isinstance(dim, int) else dim)]


def _accumulate(ctx: NodeContext, op_type: str, x: ir.Value, dim: Dims, keepdim: bool) -> ir.Value:
    """``op_type`` computed in float32 for float16/bfloat16 outputs, then cast to the output dtype."""
    dtype = ctx.out_dtype
    return ctx.cast(_reduce(ctx, op_type, x, dim, keepdim, opmath_dtype(dtype)), dtype)


@register("aten::sum.default")
def aten_sum(ctx: NodeContext, self: ir.Value, *, dtype: Any = None) -> ir.Value:
    """sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _accumulate(ctx, "ReduceSum", self, None, False)


@register("aten::sum.dim_IntList")
def aten_sum_dim(ctx: NodeContext, self: ir.Value, dim: Dims, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _accumulate(ctx, "ReduceSum", self, dim, keepdim)


@register("aten::nansum.default")
def aten_nansum(
    ctx: NodeContext, self: ir.Value, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None
) -> ir.Value:
    """nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    if self.dtype in FLOAT_TYPES:
        x = ctx.cast(self, opmath_dtype(self.dtype))
        self = ctx.op("Where", ctx.op("IsNaN", x), ctx.const(0, x.dtype), x)
    return _accumulate(ctx, "ReduceSum", self, dim, keepdim)


def _mean(ctx: NodeContext, x: ir.Value, dim: Dims, keepdim: bool) -> ir.Value:
    if any(isinstance(s, int) and s == 0 for s in _reduced_sizes(ctx, dim)):  # 0 / 0, not onnxruntime's 0
        total = _accumulate(ctx, "ReduceSum", x, dim, keepdim)
        return ctx.op("Div", total, ctx.const(0, total.dtype))
    return _accumulate(ctx, "ReduceMean", x, dim, keepdim)


@register("aten::mean.default")
def aten_mean(ctx: NodeContext, self: ir.Value, *, dtype: Any = None) -> ir.Value:
    """mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _mean(ctx, self, None, False)


@register("aten::mean.dim")
def aten_mean_dim(
    ctx: NodeContext, self: ir.Value, dim: Dims, keepdim: bool = False, *, dtype: Any = None
) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _mean(ctx, self, dim, keepdim)


@register("aten::prod.default")
def aten_prod(ctx: NodeContext, self: ir.Value, *, dtype: Any = None) -> ir.Value:
    """prod(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _accumulate(ctx, "ReduceProd", self, None, False)


@register("aten::prod.dim_int")
def aten_prod_dim(ctx: NodeContext, self: ir.Value, dim: int, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _accumulate(ctx, "ReduceProd", self, dim, keepdim)


# -- max, min and their indices -----------------------------------------------------------------------


def _extremum(ctx: NodeContext, op_type: str, x: ir.Value, dim: Dims, keepdim: bool) -> ir.Value:
    """ReduceMax or ReduceMin; NaN where the reduced values hold one, as PyTorch (onnxruntime keeps a NaN
    only when it comes first)."""
    dtype = ctx.out_dtype
    if dtype not in FLOAT_TYPES:
        return _reduce(ctx, op_type, x, dim, keepdim)
    c = opmath_dtype(dtype)  # exact here; Where has no bfloat16 kernel
    x = ctx.cast(x, c)
    out = _reduce(ctx, op_type, x, dim, keepdim, c)
    flags = ctx.cast(ctx.op("IsNaN", x), ir.DataType.UINT8)
    nan = ctx.cast(_reduce(ctx, "ReduceMax", flags, dim, keepdim, ir.DataType.UINT8), BOOL)
    return ctx.cast(ctx.op("Where", nan, ctx.const(float("nan"), c), out), dtype)


@register("aten::amax.default")
def aten_amax(ctx: NodeContext, self: ir.Value, dim: Dims = (), keepdim: bool = False) -> ir.Value:
    """amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _extremum(ctx, "ReduceMax", self, dim, keepdim)


@register("aten::amin.default")
def aten_amin(ctx: NodeContext, self: ir.Value, dim: Dims = (), keepdim: bool = False) -> ir.Value:
    """amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _extremum(ctx, "ReduceMin", self, dim, keepdim)


@register("aten::max.default")
def aten_max(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """max(Tensor self) -> Tensor"""
    return _extremum(ctx, "ReduceMax", self, None, False)


@register("aten::min.default")
def aten_min(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """min(Tensor self) -> Tensor"""
    return _extremum(ctx, "ReduceMin", self, None, False)


@register("aten::aminmax.default")
def aten_aminmax(
    ctx: NodeContext, self: ir.Value, *, dim: int | None = None, keepdim: bool = False
) -> tuple[ir.Value, ir.Value]:
    """aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)"""
    return _extremum(ctx, "ReduceMin", self, dim, keepdim), _extremum(ctx, "ReduceMax", self, dim, keepdim)


def _zero_index(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """Index 0 in the shape of a 0-D tensor (its only element)."""
    return ctx.op("ConstantOfShape", ctx.op("Shape", x), value=ir.tensor(np.zeros(1, np.int64)))


def _arg(ctx: NodeContext, op_type: str, x: ir.Value, dim: int | None, keepdim: bool) -> ir.Value:
    """ArgMax/ArgMin; the first index among equal values, as PyTorch. ``dim=None``: over the flattened input."""
    rank = ctx.rank(x)
    if dim is None:
        flat = ctx.op("Reshape", x, ctx.const([-1], INT64))
        index = _arg_nan(ctx, op_type, flat, 0, 0)
        return ctx.op("Reshape", index, ctx.const([1] * rank, INT64)) if keepdim and rank else index
    if rank == 0:
        return _zero_index(ctx, x)
    return _arg_nan(ctx, op_type, x, normalize_dim(dim, rank), int(keepdim))


def _arg_nan(ctx: NodeContext, op_type: str, x: ir.Value, axis: int, keepdims: int) -> ir.Value:
    """ArgMax/ArgMin along ``axis``; PyTorch returns the first NaN where there is one, onnxruntime skips them."""
    index = kernel_op(ctx, op_type, x, dtype=x.dtype, axis=axis, keepdims=keepdims)
    if x.dtype not in FLOAT_TYPES:
        return index
    nan = ctx.cast(kernel_op(ctx, "IsNaN", x, dtype=x.dtype), ir.DataType.UINT8)
    first_nan = ctx.op("ArgMax", nan, axis=axis, keepdims=keepdims)
    any_nan = ctx.cast(ctx.op("ReduceMax", nan, ctx.const([axis], INT64), keepdims=keepdims), BOOL)
    return ctx.op("Where", any_nan, first_nan, index)


@register("aten::argmax.default")
def aten_argmax(ctx: NodeContext, self: ir.Value, dim: int | None = None, keepdim: bool = False) -> ir.Value:
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(ctx, "ArgMax", self, dim, keepdim)


@register("aten::argmin.default")
def aten_argmin(ctx: NodeContext, self: ir.Value, dim: int | None = None, keepdim: bool = False) -> ir.Value:
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(ctx, "ArgMin", self, dim, keepdim)


@register("aten::max.dim")
def aten_max_dim(ctx: NodeContext, self: ir.Value, dim: int, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _extremum(ctx, "ReduceMax", self, dim, keepdim), _arg(ctx, "ArgMax", self, dim, keepdim)


@register("aten::min.dim")
def aten_min_dim(ctx: NodeContext, self: ir.Value, dim: int, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _extremum(ctx, "ReduceMin", self, dim, keepdim), _arg(ctx, "ArgMin", self, dim, keepdim)


# -- variance and standard deviation ------------------------------------------------------------------


def _var_mean(
    ctx: NodeContext, x: ir.Value, dim: Dims, correction: float | None, keepdim: bool
) -> tuple[ir.Value, ir.Value]:
    """Variance and mean (in float32 for float16/bfloat16) as ``sum((x - mean)^2) / max(N - correction, 0)``."""
    c = opmath_dtype(ctx.out_dtype)
    correction = 1 if correction is None else correction
    ax = _axes(ctx, ctx.rank(x), dim)
    xc = ctx.cast(x, c)
    reduced = _reduced_sizes(ctx, dim)
    if any(isinstance(s, int) and s == 0 for s in reduced):  # 0 / 0, not onnxruntime's 0
        mean = ctx.op("Div", ctx.op("ReduceSum", xc, *ax, keepdims=1), ctx.const(0, c))
    else:
        mean = ctx.op("ReduceMean", xc, *ax, keepdims=1)
    diff = ctx.op("Sub", xc, mean)
    var = ctx.op("ReduceSum", ctx.op("Mul", diff, diff), *ax, keepdims=int(keepdim))
    if all(isinstance(s, int) for s in reduced):
        denom = ctx.const(max(math.prod(reduced) - correction, 0), c)
    else:  # dynamic: number of elements of x over number of elements of the mean
        count = ctx.op("Div", ctx.op("Size", x), ctx.op("Size", mean))
        denom = ctx.op("Max", ctx.op("Sub", ctx.cast(count, c), ctx.const(correction, c)), ctx.const(0, c))
    var = ctx.op("Div", var, denom)
    if not keepdim:
        mean = ctx.op("Squeeze", mean, *ax)
    return var, mean


def _correction(unbiased: bool) -> int:
    return 1 if unbiased else 0


@register("aten::var.correction")
def aten_var(
    ctx: NodeContext, self: ir.Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> ir.Value:
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return ctx.cast(_var_mean(ctx, self, dim, correction, keepdim)[0], ctx.out_dtype)


@register("aten::var.dim")
def aten_var_dim(ctx: NodeContext, self: ir.Value, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> ir.Value:
    """var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return aten_var(ctx, self, dim, correction=_correction(unbiased), keepdim=keepdim)


@register("aten::var.default")
def aten_var_default(ctx: NodeContext, self: ir.Value, unbiased: bool = True) -> ir.Value:
    """var(Tensor self, bool unbiased=True) -> Tensor"""
    return aten_var(ctx, self, None, correction=_correction(unbiased))


@register("aten::std.correction")
def aten_std(
    ctx: NodeContext, self: ir.Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> ir.Value:
    """std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return ctx.cast(ctx.op("Sqrt", _var_mean(ctx, self, dim, correction, keepdim)[0]), ctx.out_dtype)


@register("aten::std.dim")
def aten_std_dim(ctx: NodeContext, self: ir.Value, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> ir.Value:
    """std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return aten_std(ctx, self, dim, correction=_correction(unbiased), keepdim=keepdim)


@register("aten::std.default")
def aten_std_default(ctx: NodeContext, self: ir.Value, unbiased: bool = True) -> ir.Value:
    """std(Tensor self, bool unbiased=True) -> Tensor"""
    return aten_std(ctx, self, None, correction=_correction(unbiased))


@register("aten::var_mean.correction", "aten::std_mean.correction")
def aten_var_mean(
    ctx: NodeContext, self: ir.Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> tuple[ir.Value, ir.Value]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False)
    -> (Tensor, Tensor); std_mean takes the square root of the first output."""
    var, mean = _var_mean(ctx, self, dim, correction, keepdim)
    if ctx.node.target._opname == "std_mean":
        var = ctx.op("Sqrt", var)
    return ctx.cast(var, ctx.out_dtype), ctx.cast(mean, ctx.out_dtype)


@register("aten::var_mean.default", "aten::std_mean.default")
def aten_var_mean_default(ctx: NodeContext, self: ir.Value, unbiased: bool = True) -> tuple[ir.Value, ir.Value]:
    """var_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)"""
    return aten_var_mean(ctx, self, None, correction=_correction(unbiased))


@register("aten::var_mean.dim", "aten::std_mean.dim")
def aten_var_mean_dim(
    ctx: NodeContext, self: ir.Value, dim: Dims, unbiased: bool = True, keepdim: bool = False
) -> tuple[ir.Value, ir.Value]:
    """var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)"""
    return aten_var_mean(ctx, self, dim, correction=_correction(unbiased), keepdim=keepdim)


# -- logical reductions -------------------------------------------------------------------------------


def _all_any(ctx: NodeContext, op_type: str, x: ir.Value, dim: Dims, keepdim: bool) -> ir.Value:
    """ReduceMin (all) or ReduceMax (any) of the truth values as uint8 (an empty input gives True, False)."""
    flags = ctx.cast(ctx.cast(x, BOOL), ir.DataType.UINT8)
    out = ctx.op(op_type, flags, *_axes(ctx, ctx.rank(x), dim), keepdims=int(keepdim))
    return ctx.cast(out, ctx.out_dtype)


@register("aten::all.default", "aten::all.dim", "aten::all.dims")
def aten_all(ctx: NodeContext, self: ir.Value, dim: Dims = None, keepdim: bool = False) -> ir.Value:
    """all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"""
    return _all_any(ctx, "ReduceMin", self, dim, keepdim)


@register("aten::any.default", "aten::any.dim", "aten::any.dims")
def aten_any(ctx: NodeContext, self: ir.Value, dim: Dims = None, keepdim: bool = False) -> ir.Value:
    """any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"""
    return _all_any(ctx, "ReduceMax", self, dim, keepdim)


@register("aten::count_nonzero.default", "aten::count_nonzero.dim_IntList")
def aten_count_nonzero(ctx: NodeContext, self: ir.Value, dim: Dims = None) -> ir.Value:
    """count_nonzero.dim_IntList(Tensor self, int[] dim) -> Tensor"""
    nonzero = ctx.op("Not", kernel_op(ctx, "Equal", self, 0, dtype=self.dtype))
    return _reduce(ctx, "ReduceSum", nonzero, dim, False)


# -- logsumexp, cumsum, norms -------------------------------------------------------------------------


@register("aten::logsumexp.default")
def aten_logsumexp(ctx: NodeContext, self: ir.Value, dim: Dims, keepdim: bool = False) -> ir.Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor: onnxruntime's kernel subtracts the max."""
    return _accumulate(ctx, "ReduceLogSumExp", self, dim, keepdim)


@register("aten::cumsum.default")
def aten_cumsum(ctx: NodeContext, self: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    out_dtype = ctx.out_dtype
    rank = ctx.rank(self)
    if rank == 0:
        return ctx.cast(self, out_dtype)
    c = opmath_dtype(out_dtype)
    axis = ctx.const(normalize_dim(dim, rank), INT64)
    return ctx.cast(kernel_op(ctx, "CumSum", ctx.cast(self, c), axis, dtype=c), out_dtype)


@register("aten::linalg_vector_norm.default")
def aten_linalg_vector_norm(
    ctx: NodeContext, self: ir.Value, ord: float = 2, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None
) -> ir.Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
    -> Tensor: ReduceL2, ReduceL1, ReduceMax/ReduceMin of ``|x|`` for +-inf, else ``sum(|x|^p)^(1/p)``."""
    out_dtype = ctx.out_dtype
    c = opmath_dtype(out_dtype)
    x = ctx.cast(self, c)
    ax = _axes(ctx, ctx.rank(self), dim)
    if ord == 2:
        out = ctx.op("ReduceL2", x, *ax, keepdims=int(keepdim))
    elif ord == 1:
        out = ctx.op("ReduceL1", x, *ax, keepdims=int(keepdim))
    elif math.isinf(ord):
        out = ctx.op("ReduceMax" if ord > 0 else "ReduceMin", ctx.op("Abs", x), *ax, keepdims=int(keepdim))
        nan = ctx.op("ReduceMax", ctx.cast(ctx.op("IsNaN", x), ir.DataType.UINT8), *ax, keepdims=int(keepdim))
        out = ctx.op("Where", ctx.cast(nan, BOOL), ctx.const(float("nan"), c), out)  # onnxruntime skips NaN
    elif ord == 0:
        nonzero = ctx.cast(ctx.op("Not", ctx.op("Equal", x, ctx.const(0, c))), c)
        out = ctx.op("ReduceSum", nonzero, *ax, keepdims=int(keepdim))
    else:
        powered = ctx.op("Pow", ctx.op("Abs", x), ctx.const(ord, c))
        out = ctx.op("Pow", ctx.op("ReduceSum", powered, *ax, keepdims=int(keepdim)), ctx.const(1 / ord, c))
    return ctx.cast(out, out_dtype)


@register("aten::nanmean.default")
def aten_nanmean(
    ctx: NodeContext, self: ir.Value, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None
) -> ir.Value:
    """nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor:
    the sum of the non-NaN values over their count."""
    out_dtype = ctx.out_dtype
    c = opmath_dtype(out_dtype)
    x = ctx.cast(self, c)
    kept = ctx.op("Not", ctx.op("IsNaN", x))
    ax = _axes(ctx, ctx.rank(self), dim)
    total = ctx.op("ReduceSum", ctx.op("Where", kept, x, ctx.const(0, c)), *ax, keepdims=int(keepdim))
    count = ctx.op("ReduceSum", ctx.cast(kept, c), *ax, keepdims=int(keepdim))
    return ctx.cast(ctx.op("Div", total, count), out_dtype)


def _cumulative_axis(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    return ctx.const(normalize_dim(dim, ctx.rank(self)), INT64)


@register("aten::logcumsumexp.default")
def aten_logcumsumexp(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor: ``m + log(cumsum(exp(x - m)))`` with ``m`` the maximum of
    the axis (0 where it is infinite)."""
    out_dtype = ctx.out_dtype
    if ctx.rank(self) == 0:
        return ctx.cast(self, out_dtype)
    c = opmath_dtype(out_dtype)
    x = ctx.cast(self, c)
    axis = normalize_dim(dim, ctx.rank(self))
    high = ctx.op("ReduceMax", ctx.op("Where", ctx.op("IsNaN", x), ctx.const(float("-inf"), c), x),
                  ctx.const([axis], INT64), keepdims=1)
    high = ctx.op("Where", ctx.op("IsInf", high), ctx.const(0, c), high)
    total = ctx.op("CumSum", ctx.op("Exp", ctx.op("Sub", x, high)), ctx.const(axis, INT64))
    return ctx.cast(ctx.op("Add", ctx.op("Log", total), high), out_dtype)


@register("aten::cumprod.default")
def aten_cumprod(ctx: NodeContext, self: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    ONNX has no cumulative product: ``exp(cumsum(log|x|))`` in double precision, with the sign from the
    count of negative factors, 0 from the first 0 on, and rounded for integers.
    """
    out_dtype = ctx.out_dtype
    if ctx.rank(self) == 0:
        return ctx.cast(self, out_dtype)
    d = ir.DataType.DOUBLE
    x = ctx.cast(ctx.cast(self, out_dtype), d)
    axis = _cumulative_axis(ctx, self, dim)
    zero = ctx.const(0.0, d)
    magnitude = ctx.op("Exp", ctx.op("CumSum", ctx.op("Log", ctx.op("Abs", x)), axis))
    negatives = ctx.op("CumSum", ctx.cast(ctx.op("Less", x, zero), d), axis)
    odd = ctx.op("Equal", ctx.op("Mod", negatives, ctx.const(2.0, d), fmod=1), ctx.const(1.0, d))
    out = ctx.op("Where", odd, ctx.op("Neg", magnitude), magnitude)
    zeros_seen = ctx.op("CumSum", ctx.cast(ctx.op("Equal", x, zero), d), axis)
    out = ctx.op("Where", ctx.op("Greater", zeros_seen, zero), zero, out)
    # a NaN propagates through Log/Exp already
    if out_dtype not in FLOAT_TYPES:
        out = ctx.op("Round", out)
    return ctx.cast(out, out_dtype)


@register("aten::sum_to_size.default")
def aten_sum_to_size(ctx: NodeContext, self: ir.Value, size: Sequence[int]) -> ir.Value:
    """sum_to_size(Tensor self, SymInt[] size) -> Tensor: sums the leading axes and those ``size`` makes 1."""
    shape = ctx.arg_val(0).shape
    lead = len(shape) - len(size)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(size) if n == 1 and shape[lead + i] != 1]
    if not axes:
        return ctx.cast(self, ctx.out_dtype)
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    out = kernel_op(ctx, "ReduceSum", ctx.cast(self, c), ctx.const(axes, INT64), dtype=c, keepdims=1)
    if lead:
        out = ctx.op("Squeeze", out, ctx.const(list(range(lead)), INT64))
    return ctx.cast(out, dtype)


# -- differences and integrals ----------------------------------------------------------------------------


def _slice(ctx: NodeContext, x: ir.Value, axis: int, start: int, end: int) -> ir.Value:
    return ctx.op("Slice", x, ctx.const([start], INT64), ctx.const([end], INT64), ctx.const([axis], INT64))


_END = 2**62


@register("aten::diff.default")
def aten_diff(
    ctx: NodeContext,
    self: ir.Value,
    n: int = 1,
    dim: int = -1,
    prepend: ir.Value | None = None,
    append: ir.Value | None = None,
) -> ir.Value:
    """diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor

    ``n`` times ``x[1:] - x[:-1]`` along ``dim`` (a logical xor for booleans).
    """
    dtype = ctx.out_dtype
    if n == 0:  # PyTorch ignores prepend and append then
        return self
    axis = normalize_dim(dim, ctx.rank(self))
    parts = [t for t in (prepend, self, append) if t is not None]
    x = ctx.op("Concat", *[ctx.cast(t, dtype) for t in parts], axis=axis) if len(parts) > 1 else self
    for _ in range(n):
        tail, head = _slice(ctx, x, axis, 1, _END), _slice(ctx, x, axis, 0, -1)
        x = ctx.op("Xor", tail, head) if dtype == BOOL else kernel_op(ctx, "Sub", tail, head, dtype=dtype)
    return x


def _trapezoid_parts(ctx: NodeContext, y: ir.Value, x: Any, dim: int) -> tuple[ir.Value, int]:
    """``(y[1:] + y[:-1]) / 2 * dx`` along ``dim`` (``x`` a tensor of positions or the spacing ``dx``)."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    axis = normalize_dim(dim, ctx.rank(y))
    yc = ctx.cast(y, c)
    mid = ctx.op("Mul", ctx.op("Add", _slice(ctx, yc, axis, 1, _END), _slice(ctx, yc, axis, 0, -1)), ctx.const(0.5, c))
    if isinstance(x, ir.Value):
        xc = ctx.cast(x, c)
        xaxis = normalize_dim(dim, ctx.rank(x)) if ctx.rank(x) > 1 else 0
        dx = ctx.op("Sub", _slice(ctx, xc, xaxis, 1, _END), _slice(ctx, xc, xaxis, 0, -1))
        if ctx.rank(x) == 1 and ctx.rank(y) > 1:  # positions along dim only
            shape = [1] * ctx.rank(y)
            shape[axis] = -1
            dx = ctx.op("Reshape", dx, ctx.const(shape, INT64))
    else:
        dx = ctx.const(float(x), c)
    return ctx.op("Mul", mid, dx), axis


@register("aten::trapezoid.x", "aten::trapz.x", "aten::trapezoid.dx", "aten::trapz.dx")
def aten_trapezoid(ctx: NodeContext, y: ir.Value, x: Any = None, *, dx: float = 1, dim: int = -1) -> ir.Value:
    """trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor (trapezoid.dx: a constant spacing)"""
    if static_dim(ctx.arg_val(0).shape[normalize_dim(dim, ctx.rank(y))]) == 0:
        shape = [static_dim(d) for d in ctx.val.shape]
        return filled(ctx, ctx.const(shape, INT64), ctx.out_dtype)
    areas, axis = _trapezoid_parts(ctx, y, dx if x is None else x, dim)
    return ctx.cast(ctx.op("ReduceSum", areas, ctx.const([axis], INT64), keepdims=0), ctx.out_dtype)


@register("aten::cumulative_trapezoid.x", "aten::cumulative_trapezoid.dx")
def aten_cumulative_trapezoid(ctx: NodeContext, y: ir.Value, x: Any = None, *, dx: float = 1, dim: int = -1) -> ir.Value:
    """cumulative_trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor"""
    areas, axis = _trapezoid_parts(ctx, y, dx if x is None else x, dim)
    return ctx.cast(ctx.op("CumSum", areas, ctx.const(axis, INT64)), ctx.out_dtype)


def _gradient(
    ctx: NodeContext, self: ir.Value, spacing: Any, dim: Any, edge_order: int
) -> list[ir.Value]:
    """PyTorch's ``gradient``: second-order central differences inside, first or second order at the edges;
    ``spacing`` a scalar, one scalar per axis, or one tensor of coordinates per axis."""
    rank = ctx.rank(self)
    dims = list(range(rank)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if spacing is None:
        spacing = [1.0] * len(dims)
    elif not isinstance(spacing, (list, tuple)):
        spacing = [spacing] * len(dims)
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x = ctx.cast(self, c)
    out = []
    for d, h in zip(dims, spacing):
        axis = normalize_dim(d, rank)

        def part(start: int, end: int, axis: int = axis) -> ir.Value:
            return _slice(ctx, x, axis, start, end)

        if isinstance(h, ir.Value):  # coordinates along the axis
            shape = [1] * rank
            shape[axis] = -1
            hx = ctx.cast(h, c)
            dx = ctx.op("Sub", _slice(ctx, hx, 0, 1, _END), _slice(ctx, hx, 0, 0, -1))
            dx1, dx2 = _slice(ctx, dx, 0, 0, -1), _slice(ctx, dx, 0, 1, _END)
            total = ctx.op("Add", dx1, dx2)

            def along(v: ir.Value, shape: list[int] = shape) -> ir.Value:
                return ctx.op("Reshape", v, ctx.const(shape, INT64))

            a = along(ctx.op("Div", ctx.op("Neg", dx2), ctx.op("Mul", dx1, total)))
            b = along(ctx.op("Div", ctx.op("Sub", dx2, dx1), ctx.op("Mul", dx1, dx2)))
            cc = along(ctx.op("Div", dx1, ctx.op("Mul", dx2, total)))
            center = ctx.op("Add", ctx.op("Add", ctx.op("Mul", a, part(0, -2)), ctx.op("Mul", b, part(1, -1))),
                            ctx.op("Mul", cc, part(2, _END)))
            d0, dl = along(_slice(ctx, dx, 0, 0, 1)), along(_slice(ctx, dx, 0, -1, _END))
            if edge_order == 1:
                head = ctx.op("Div", ctx.op("Sub", part(1, 2), part(0, 1)), d0)
                tail = ctx.op("Div", ctx.op("Sub", part(-1, _END), part(-2, -1)), dl)
            else:
                d1, dm = along(_slice(ctx, dx, 0, 1, 2)), along(_slice(ctx, dx, 0, -2, -1))

                def mul(*vs: ir.Value) -> ir.Value:
                    out_ = vs[0]
                    for v in vs[1:]:
                        out_ = ctx.op("Mul", out_, v)
                    return out_

                two = ctx.const(2.0, c)
                s01, sml = ctx.op("Add", d0, d1), ctx.op("Add", dl, dm)
                a0 = ctx.op("Neg", ctx.op("Div", ctx.op("Add", mul(two, d0), d1), mul(d0, s01)))
                b0 = ctx.op("Div", s01, mul(d0, d1))
                c0 = ctx.op("Div", ctx.op("Neg", d0), mul(d1, s01))
                head = ctx.op("Add", ctx.op("Add", mul(a0, part(0, 1)), mul(b0, part(1, 2))), mul(c0, part(2, 3)))
                a1 = ctx.op("Div", dl, mul(dm, sml))
                b1 = ctx.op("Neg", ctx.op("Div", sml, mul(dl, dm)))
                c1 = ctx.op("Div", ctx.op("Add", mul(two, dl), dm), mul(dl, sml))
                tail = ctx.op("Add", ctx.op("Add", mul(a1, part(-3, -2)), mul(b1, part(-2, -1))), mul(c1, part(-1, _END)))
        else:
            step = ctx.const(float(h), c)
            center = ctx.op("Div", ctx.op("Div", ctx.op("Sub", part(2, _END), part(0, -2)), step), ctx.const(2.0, c))
            if edge_order == 1:
                head = ctx.op("Div", ctx.op("Sub", part(1, 2), part(0, 1)), step)
                tail = ctx.op("Div", ctx.op("Sub", part(-1, _END), part(-2, -1)), step)
            else:
                def combine(*terms: tuple[int, int, float], step: ir.Value = step) -> ir.Value:
                    total = None
                    for start, end, w in terms:
                        t = ctx.op("Mul", part(start, end), ctx.const(w, c))
                        total = t if total is None else ctx.op("Add", total, t)
                    return ctx.op("Div", total, step)

                head = combine((0, 1, -1.5), (1, 2, 2.0), (2, 3, -0.5))
                tail = combine((-3, -2, 0.5), (-2, -1, -2.0), (-1, _END, 1.5))
        out.append(ctx.cast(ctx.op("Concat", head, center, tail, axis=axis), dtype))
    return out


@register(
    "aten::gradient.scalarint",
    "aten::gradient.scalararray",
    "aten::gradient.array",
    "aten::gradient.scalarrayint",
    "aten::gradient.scalarrayarray",
    "aten::gradient.tensorarrayint",
    "aten::gradient.tensorarray",
)
def aten_gradient(
    ctx: NodeContext, self: ir.Value, *, spacing: Any = None, dim: Any = None, edge_order: int = 1
) -> list[ir.Value]:
    """gradient.scalarint(Tensor self, *, Scalar? spacing=None, int? dim=None, int edge_order=1) -> Tensor[]
    (the other overloads: lists of spacings or dimensions, tensors of coordinates)"""
    return _gradient(ctx, self, spacing, dim, edge_order)
