"""Reductions: sum, mean, prod, max/min, argmax/argmin, var/std, all/any, count_nonzero, logsumexp,
vector norms.

ONNX ``Reduce*`` take their axes as an input (opset 18); ``dim=None`` or ``[]`` reduces every axis.
Sums, means, products and norms of float16/bfloat16 accumulate in float32, as PyTorch does on CPU;
integer and bool sums give int64 (the output dtype says so). Scans (cumsum...) are in ``cumulative.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BOOL,
    INT64,
    extremum_as_pytorch,
    kernel_op,
    normalize_dim,
    numel,
    opmath_dtype,
    shifted_by_first,
    vector_norm,
)


def axes(ctx: NodeContext, dims: int | Sequence[int] | None, rank: int) -> ir.Value | None:
    """Normalized (non-negative) axes as a 1-D INT64 constant, or None for "all axes"."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return None
    return ctx.const([d % rank if rank else 0 for d in dims], INT64)


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


def _reduced_axes(dim: Dims, rank: int) -> list[int]:
    """The reduced axes of an input of rank ``rank`` as non-negative ints (every axis for None or ``[]``)."""
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return list(range(rank))
    return sorted({normalize_dim(d, rank) for d in ([dim] if isinstance(dim, int) else dim)})


def _reduced_sizes(ctx: NodeContext, dim: Dims) -> list[Any]:
    """The sizes (ints or SymInts) of the reduced axes of the node's input."""
    shape = ctx.arg_val(0).shape
    return [shape[a] for a in _reduced_axes(dim, len(shape))] if len(shape) else []


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


def _extremum(ctx: NodeContext, op_type: str, x: ir.Value, dim: Dims, keepdim: bool) -> ir.Value:
    """ReduceMax or ReduceMin as PyTorch on every provider (:func:`extremum_as_pytorch`): NaN where the reduced
    values hold one, the infinity where they are all that infinity."""
    dtype = ctx.out_dtype
    if dtype not in FLOAT_TYPES:
        return _reduce(ctx, op_type, x, dim, keepdim)
    c = opmath_dtype(dtype)  # exact here; Where has no bfloat16 kernel
    x = ctx.cast(x, c)
    out = _reduce(ctx, op_type, x, dim, keepdim, c)
    ax = _axes(ctx, len(ctx.arg_val(0).shape), dim)
    # float16 and bfloat16 are computed in float32: the lowest float32 cast back is -inf
    return ctx.cast(extremum_as_pytorch(ctx, op_type, x, out, ax, keepdim, infinity=c == dtype), dtype)


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
    """ArgMax/ArgMin along ``axis``; PyTorch returns the first NaN where there is one, onnxruntime skips them. The
    NaN flags are float32 (not uint8): onnxruntime's CUDA provider has ArgMax for floating types only, and a node it
    lacks runs on the CPU (a copy each way, no CUDA graph)."""
    index = kernel_op(ctx, op_type, x, dtype=x.dtype, axis=axis, keepdims=keepdims)
    if x.dtype not in FLOAT_TYPES:
        return index
    nan = ctx.cast(kernel_op(ctx, "IsNaN", x, dtype=x.dtype), ir.DataType.FLOAT)
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


def _var_mean(
    ctx: NodeContext, x: ir.Value, dim: Dims, correction: float | None, keepdim: bool
) -> tuple[ir.Value, ir.Value]:
    """Variance and mean (in float32 for float16/bfloat16) as ``sum((x - mean)^2) / max(N - correction, 0)``, on
    ``x`` shifted by its first value over the reduced axes (:func:`shifted_by_first`: exact on a constant row, as
    PyTorch's Welford mean)."""
    c = opmath_dtype(ctx.out_dtype)
    correction = 1 if correction is None else correction
    rank = ctx.rank(x)
    ax = _axes(ctx, rank, dim)
    xc = ctx.cast(x, c)
    reduced = _reduced_sizes(ctx, dim)
    pivot = None
    if any(isinstance(s, int) and s == 0 for s in reduced):  # 0 / 0, not onnxruntime's 0
        mean = ctx.op("Div", ctx.op("ReduceSum", xc, *ax, keepdims=1), ctx.const(0, c))
    else:
        if rank:
            xc, pivot = shifted_by_first(ctx, xc, _reduced_axes(dim, rank))
        mean = ctx.op("ReduceMean", xc, *ax, keepdims=1)
    diff = ctx.op("Sub", xc, mean)
    if pivot is not None:
        mean = ctx.op("Add", mean, pivot)
    var = ctx.op("ReduceSum", ctx.op("Mul", diff, diff), *ax, keepdims=int(keepdim))
    if all(isinstance(s, int) for s in reduced):
        denom = ctx.const(max(math.prod(reduced) - correction, 0), c)
    else:  # dynamic: number of elements of x over number of elements of the mean
        count = ctx.op("Div", numel(ctx, x), numel(ctx, mean))
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
    if ctx.op_name == "std_mean":
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


@register("aten::logsumexp.default")
def aten_logsumexp(ctx: NodeContext, self: ir.Value, dim: Dims, keepdim: bool = False) -> ir.Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor: onnxruntime's kernel subtracts the max."""
    return _accumulate(ctx, "ReduceLogSumExp", self, dim, keepdim)


@register("aten::linalg_vector_norm.default")
def aten_linalg_vector_norm(
    ctx: NodeContext, self: ir.Value, ord: float = 2, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None
) -> ir.Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
    -> Tensor: ReduceL2, ReduceL1, ReduceMax/ReduceMin of ``|x|`` for +-inf, else ``sum(|x|^p)^(1/p)``."""
    out_dtype = ctx.out_dtype
    x = ctx.cast(self, opmath_dtype(out_dtype))
    rank = ctx.rank(self)
    dims = [dim] if isinstance(dim, int) else list(dim or [])
    # a 0-D input: dim 0 or -1 names the value itself, the norm reduces nothing (ONNX rejects axis 0 there)
    axes = [d % rank for d in dims] if rank else None
    return ctx.cast(vector_norm(ctx, x, float(ord), axes or None, keepdim), out_dtype)


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
