"""Scans along one axis and discrete calculus: cumsum, cumprod, logcumsumexp, cummax/cummin, diff,
gradient, trapezoid and cumulative_trapezoid.
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
    INT64,
    dim_of,
    filled,
    kernel_dtype,
    kernel_op,
    normalize_dim,
    opmath_dtype,
    slice_axis,
    static_dim,
)


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


def _cumulative_axis(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    return ctx.const(normalize_dim(dim, ctx.rank(self)), INT64)


@register("aten::logcumsumexp.default")
def aten_logcumsumexp(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    Each output is the log-sum-exp of a prefix, shifted by the running maximum of that prefix (a global
    shift underflows: ``[-200, -300, 100]`` would give ``-inf`` for the first two). The prefixes are the
    rows of ``x[..., None, :]`` with ``-inf`` above the diagonal: n*n values for an axis of size n.
    """
    out_dtype = ctx.out_dtype
    rank = ctx.rank(self)
    if rank == 0:
        return ctx.cast(self, out_dtype)
    c = opmath_dtype(out_dtype)
    axis = normalize_dim(dim, rank)
    perm = [*range(axis), *range(axis + 1, rank), axis]
    x = ctx.op("Transpose", ctx.cast(self, c), perm=perm) if axis != rank - 1 else ctx.cast(self, c)
    n = dim_of(ctx, self, axis)
    positions = ctx.op("Range", ctx.const(0, INT64), ctx.operand(n, INT64), ctx.const(1, INT64))
    later = ctx.op("Greater", positions, ctx.op("Unsqueeze", positions, ctx.const([1], INT64)))  # [n, n]: j > i
    # [..., i, j]: x_j for j <= i, else -inf (a Where, so that a NaN does not reach earlier prefixes)
    prefixes = ctx.op("Where", later, ctx.const(float("-inf"), c), ctx.op("Unsqueeze", x, ctx.const([-2], INT64)))
    last = ctx.const([-1], INT64)
    high = ctx.op("ReduceMax", prefixes, last, keepdims=1)
    high = ctx.op("Where", ctx.op("IsInf", high), ctx.const(0.0, c), high)
    total = ctx.op("ReduceSum", ctx.op("Exp", ctx.op("Sub", prefixes, high)), last, keepdims=1)
    out = ctx.op("Squeeze", ctx.op("Add", ctx.op("Log", total), high), last)
    if axis != rank - 1:
        out = ctx.op("Transpose", out, perm=[perm.index(i) for i in range(rank)])
    return ctx.cast(out, out_dtype)


@register("aten::cumprod.default")
def aten_cumprod(ctx: NodeContext, self: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    ONNX has no cumulative product: ``exp(cumsum(log|x|))`` in double precision over the nonzero factors, with the
    sign from the count of factors whose sign bit is set (``-0`` included), times 0 from the first 0 on (so that a
    NaN or an infinity met before or after it gives NaN, as ``0 * inf`` does in PyTorch's product, and a zero
    carries the product's sign), rounded for integers.
    """
    out_dtype = ctx.out_dtype
    if ctx.rank(self) == 0:
        return ctx.cast(self, out_dtype)
    d = ir.DataType.DOUBLE
    x = ctx.cast(ctx.cast(self, out_dtype), d)
    axis = _cumulative_axis(ctx, self, dim)
    zero = ctx.const(0.0, d)
    is_zero = ctx.op("Equal", x, zero)
    nonzero = ctx.op("Where", is_zero, ctx.const(1.0, d), ctx.op("Abs", x))
    magnitude = ctx.op("Exp", ctx.op("CumSum", ctx.op("Log", nonzero), axis))
    sign_bit = ctx.op("Or", ctx.op("Less", x, zero), ctx.op("Less", ctx.op("Reciprocal", x), zero))  # -0 included
    negatives = ctx.op("CumSum", ctx.cast(sign_bit, d), axis)
    odd = ctx.op("Equal", ctx.op("Mod", negatives, ctx.const(2.0, d), fmod=1), ctx.const(1.0, d))
    signed = ctx.op("Where", odd, ctx.op("Neg", magnitude), magnitude)
    no_zero_yet = ctx.cast(ctx.op("LessOrEqual", ctx.op("CumSum", ctx.cast(is_zero, d), axis), zero), d)
    out = ctx.op("Mul", signed, no_zero_yet)
    if out_dtype not in FLOAT_TYPES:
        out = ctx.op("Round", out)
    return ctx.cast(out, out_dtype)


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
        tail, head = slice_axis(ctx, x, axis, 1, _END), slice_axis(ctx, x, axis, 0, -1)
        x = ctx.op("Xor", tail, head) if dtype == BOOL else kernel_op(ctx, "Sub", tail, head, dtype=dtype)
    return x


def _trapezoid_parts(ctx: NodeContext, y: ir.Value, x: Any, dim: int) -> tuple[ir.Value, int]:
    """``(y[1:] + y[:-1]) / 2 * dx`` along ``dim`` (``x`` a tensor of positions or the spacing ``dx``)."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    axis = normalize_dim(dim, ctx.rank(y))
    yc = ctx.cast(y, c)
    mid = ctx.op("Mul", ctx.op("Add", slice_axis(ctx, yc, axis, 1, _END), slice_axis(ctx, yc, axis, 0, -1)), ctx.const(0.5, c))
    if isinstance(x, ir.Value):
        xc = ctx.cast(x, c)
        xaxis = normalize_dim(dim, ctx.rank(x)) if ctx.rank(x) > 1 else 0
        dx = ctx.op("Sub", slice_axis(ctx, xc, xaxis, 1, _END), slice_axis(ctx, xc, xaxis, 0, -1))
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
            return slice_axis(ctx, x, axis, start, end)

        if isinstance(h, ir.Value):  # coordinates along the axis
            shape = [1] * rank
            shape[axis] = -1
            hx = ctx.cast(h, c)
            dx = ctx.op("Sub", slice_axis(ctx, hx, 0, 1, _END), slice_axis(ctx, hx, 0, 0, -1))
            dx1, dx2 = slice_axis(ctx, dx, 0, 0, -1), slice_axis(ctx, dx, 0, 1, _END)
            total = ctx.op("Add", dx1, dx2)

            def along(v: ir.Value, shape: list[int] = shape) -> ir.Value:
                return ctx.op("Reshape", v, ctx.const(shape, INT64))

            a = along(ctx.op("Div", ctx.op("Neg", dx2), ctx.op("Mul", dx1, total)))
            b = along(ctx.op("Div", ctx.op("Sub", dx2, dx1), ctx.op("Mul", dx1, dx2)))
            cc = along(ctx.op("Div", dx1, ctx.op("Mul", dx2, total)))
            center = ctx.op("Add", ctx.op("Add", ctx.op("Mul", a, part(0, -2)), ctx.op("Mul", b, part(1, -1))),
                            ctx.op("Mul", cc, part(2, _END)))
            d0, dl = along(slice_axis(ctx, dx, 0, 0, 1)), along(slice_axis(ctx, dx, 0, -1, _END))
            if edge_order == 1:
                head = ctx.op("Div", ctx.op("Sub", part(1, 2), part(0, 1)), d0)
                tail = ctx.op("Div", ctx.op("Sub", part(-1, _END), part(-2, -1)), dl)
            else:
                d1, dm = along(slice_axis(ctx, dx, 0, 1, 2)), along(slice_axis(ctx, dx, 0, -2, -1))

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


# -- cumulative extrema -----------------------------------------------------------------------------------
def _cumulative_extremum(ctx: NodeContext, self: ir.Value, dim: int, largest: bool) -> tuple[ir.Value, ir.Value]:
    """Values and (last) indices of the running max or min, from a ``[..., n, n]`` lower-triangular mask:
    O(n^2) memory along ``dim``. NaN, once met, stays, with the index of the last NaN."""
    rank = ctx.rank(self)
    if rank == 0:
        return self, ctx.const(0, INT64)
    axis = normalize_dim(dim, rank)
    n = dim_of(ctx, self, axis, ctx.arg_val(0).shape[axis])
    dtype = self.dtype
    c = kernel_dtype("Max", opmath_dtype(dtype) if dtype in FLOAT_TYPES else dtype)
    x = ctx.cast(self, c)
    perm = [i for i in range(rank) if i != axis] + [axis]
    xt = ctx.op("Transpose", x, perm=perm) if axis != rank - 1 else x
    if isinstance(n, int):
        j = ctx.const(np.arange(n, dtype=np.int64))
        seen = ctx.const(np.tril(np.ones((n, n), dtype=np.bool_)))  # seen[i, j]: j <= i
    else:  # a dynamic axis: the same mask from Range
        j = ctx.op("Range", ctx.const(0, INT64), n, ctx.const(1, INT64))
        seen = ctx.op("LessOrEqual", j, ctx.op("Unsqueeze", j, ctx.const([1], INT64)))
    grid = ctx.op("Unsqueeze", xt, ctx.const([-2], INT64))  # [..., 1, n]
    floats = c in FLOAT_TYPES
    if floats:
        low = float("-inf") if largest else float("inf")
    else:
        info = np.iinfo(c.numpy())
        low = int(info.min) if largest else int(info.max)
    lowest = ctx.const(low, c)
    clean = ctx.op("Where", ctx.op("IsNaN", grid), lowest, grid) if floats else grid
    masked = ctx.op("Where", seen, clean, lowest)  # [..., n, n]
    values = ctx.op("ReduceMax" if largest else "ReduceMin", masked, ctx.const([-1], INT64), keepdims=0)
    hit = ctx.op("Equal", clean, ctx.op("Unsqueeze", values, ctx.const([-1], INT64)))
    if floats:  # NaN: the last NaN so far
        nan = ctx.op("IsNaN", grid)
        nan_seen = ctx.op("And", nan, seen)
        any_nan = ctx.op(
            "Cast",
            ctx.op("ReduceMax", ctx.cast(nan_seen, ir.DataType.UINT8), ctx.const([-1], INT64), keepdims=0),
            to=BOOL,
        )
        nan_row = ctx.op("Unsqueeze", any_nan, ctx.const([-1], INT64))
        hit = ctx.op("Or", ctx.op("And", nan_row, nan), ctx.op("And", ctx.op("Not", nan_row), hit))
        values = ctx.op("Where", any_nan, ctx.const(float("nan"), c), values)
    index = ctx.op(
        "ReduceMax",
        ctx.op("Where", ctx.op("And", hit, seen), j, ctx.const(-1, INT64)),
        ctx.const([-1], INT64),
        keepdims=0,
    )
    if floats and ctx.needs_guard("extremum_of_infinities_is_finite"):
        # no hit: the values so far are all the infinity and the reduction did not return it (onnxruntime's CUDA
        # kernels start from the lowest (largest) finite float32): that infinity, at the last position, as PyTorch
        # (the CPU's reduction returns the infinity: a hit)
        none = ctx.op("Less", index, ctx.const(0, INT64))
        values = ctx.op("Where", none, lowest, values)
        index = ctx.op("Where", none, j, index)
    if axis != rank - 1:
        inverse = [perm.index(i) for i in range(rank)]
        values, index = (ctx.op("Transpose", v, perm=inverse) for v in (values, index))
    return ctx.cast(values, dtype), index


@register("aten::cummax.default")
def aten_cummax(ctx: NodeContext, self: ir.Value, dim: int) -> tuple[ir.Value, ir.Value]:
    """cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative_extremum(ctx, self, dim, True)


@register("aten::cummin.default")
def aten_cummin(ctx: NodeContext, self: ir.Value, dim: int) -> tuple[ir.Value, ir.Value]:
    """cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative_extremum(ctx, self, dim, False)
