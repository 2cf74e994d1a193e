"""Small tensor-building blocks shared by several families: filled tensors, typed where, scatter, linspace, norms, padding, formulas run in float32."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ...dtypes import FLOAT_TYPES
from ...translation.context import NodeContext
from .kernels import widen
from .shapes import static_dim, static_ints
from .types import BOOL, DOUBLE, FLOAT, INT64, INT64_MAX, Scalar, opmath_dtype


def shifted_by_first(ctx: NodeContext, x: ir.Value, axes: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """``(x - p, p)``, ``p`` the first element of each row of ``x`` over ``axes`` (those axes kept with size 1).

    A mean and a variance computed on ``x - p`` are those of ``x`` shifted by ``p``, and exact on a constant row: the
    float32 mean of a constant row is off by an ulp or more (onnxruntime's ``ReduceMean``, its
    ``InstanceNormalization`` and ``GroupNormalization`` sum then divide), and ``(x - mean) / sqrt(var + eps)`` turns
    that ulp into up to 3e-2 where PyTorch's mean (Welford's) gives the constant and the normalization 0.
    """
    k = len(axes)
    pivot = ctx.op("Slice", x, ctx.const([0] * k, INT64), ctx.const([1] * k, INT64), ctx.const(list(axes), INT64))
    return ctx.op("Sub", x, pivot), pivot


def filled(ctx: NodeContext, shape: ir.Value, dtype: ir.DataType, value: float = 0) -> ir.Value:
    """A tensor of shape ``shape`` (1-D INT64) filled with ``value``; ConstantOfShape has no bfloat16
    before opset 20: made in float32 and cast then."""
    import numpy as np

    make = FLOAT if dtype == ir.DataType.BFLOAT16 and ctx.opset < 20 else dtype
    out = ctx.op("ConstantOfShape", shape, value=ir.tensor(np.full(1, value, dtype=make.numpy()), dtype=make))
    return ctx.cast(out, dtype)


def linspace_values(
    ctx: NodeContext, start: Any, end: Any, steps: int | ir.Value, like: ir.DataType | None = None
) -> ir.Value:
    """linspace in DOUBLE, as PyTorch computes it for the output type ``like``: integer types truncate the
    bounds first, float16 and bfloat16 round the step and every partial result."""
    start, end = (ctx.operand(b, DOUBLE) for b in (start, end))
    if like is not None and like not in FLOAT_TYPES:
        start, end = (ctx.cast(ctx.cast(b, INT64), DOUBLE) for b in (start, end))

    def r(x: ir.Value) -> ir.Value:
        if like in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
            return ctx.cast(ctx.cast(x, like), DOUBLE)
        return x

    start, end = r(start), r(end)
    n = ctx.operand(steps, DOUBLE)
    one = ctx.const(1.0, DOUBLE)
    step = r(ctx.op("Div", ctx.op("Sub", end, start), ctx.op("Max", ctx.op("Sub", n, one), one)))
    i = ctx.op("Range", ctx.const(0.0, DOUBLE), n, one)
    low = r(ctx.op("Add", start, r(ctx.op("Mul", i, step))))
    high = r(ctx.op("Sub", end, r(ctx.op("Mul", ctx.op("Sub", ctx.op("Sub", n, one), i), step))))
    first_half = ctx.op("Less", i, ctx.op("Div", n, ctx.const(2.0, DOUBLE)))
    return ctx.op("Where", first_half, low, high)


def float_formula(ctx: NodeContext, self: ir.Value, formula: Any) -> ir.Value:
    """``formula(ctx, x)`` on the input cast to float32 (for float16/bfloat16) or the output dtype."""
    dtype = ctx.out_dtype
    return ctx.cast(formula(ctx.cast(self, opmath_dtype(dtype))), dtype)


def binary_formula(ctx: NodeContext, a: Scalar, b: Scalar, formula: Any) -> ir.Value:
    """``formula(a, b)`` on both operands cast to float32 (float16/bfloat16) or the output dtype."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    return ctx.cast(formula(ctx.operand(a, c), ctx.operand(b, c)), dtype)


def scatter_elements(
    ctx: NodeContext,
    op_type: str,
    data: ir.Value,
    index: ir.Value,
    updates: ir.Value,
    reduction: str | None,
    **attrs: Any,
) -> ir.Value:
    """``ScatterElements``/``ScatterND``, through a wider type where onnxruntime lacks the reduction's type."""
    dtype = data.dtype
    kernel = f"ScatterElements.{reduction}"
    out = ctx.op(
        op_type,
        widen(ctx, data, kernel),
        ctx.cast(index, INT64),
        widen(ctx, ctx.cast(updates, dtype), kernel),
        reduction=reduction,
        **attrs,
    )
    return ctx.cast(out, dtype)


def extremum_as_pytorch(
    ctx: NodeContext,
    op_type: str,
    x: ir.Value,
    out: ir.Value,
    ax: Sequence[ir.Value],
    keepdim: bool,
    members: ir.Value | None = None,
    infinity: bool = True,
) -> ir.Value:
    """``out``, the ``op_type`` (ReduceMax or ReduceMin) of ``x`` (of a float type) over the axes input ``ax``
    (empty: every axis), as PyTorch computes it, on every onnxruntime provider: NaN where the reduced values hold
    one (onnxruntime keeps a NaN only when it comes first), ``-inf`` (``+inf`` for ReduceMin) where they are all
    ``-inf`` (onnxruntime's CUDA kernels start from the lowest finite float32 and return it then).
    ``members``: the reduced values are ``Where(members, x, -inf)`` (``+inf``), ``x`` broadcast (a window mask).
    ``infinity=False``: NaN only (the caller casts a float32 result to float16 or bfloat16, where the lowest
    float32 becomes ``-inf``); the infinity flag is left out too for a model made for the CPU only
    (``providers="cpu"``), whose kernels return the infinity.

    Two reductions of uint8 flags (values 0 and 1 only, exact on every provider): any NaN, all the infinity; half
    the time of one reduction of a float code on onnxruntime's CPU, where casting a boolean to float is slow.
    """
    keep = int(keepdim)
    nan = ctx.op("IsNaN", x)
    nan = nan if members is None else ctx.op("And", members, nan)
    nan = ctx.cast(ctx.op("ReduceMax", ctx.cast(nan, ir.DataType.UINT8), *ax, keepdims=keep), BOOL)
    if infinity and ctx.needs_guard("extremum_of_infinities_is_finite"):
        bound = ctx.const(-math.inf if op_type == "ReduceMax" else math.inf, x.dtype)
        edge = ctx.op("Equal", x, bound)
        edge = edge if members is None else ctx.op("Or", ctx.op("Not", members), edge)
        edge = ctx.cast(ctx.op("ReduceMin", ctx.cast(edge, ir.DataType.UINT8), *ax, keepdims=keep), BOOL)
        out = ctx.op("Where", edge, bound, out)
    return ctx.op("Where", nan, ctx.const(math.nan, x.dtype), out)


# -- norms and distances ---------------------------------------------------------------------------------
def vector_norm(ctx: NodeContext, x: ir.Value, p: float, axes: Sequence[int] | None, keepdim: bool) -> ir.Value:
    """The ``p``-norm of ``x`` (already in a float type) over ``axes`` (None: all): ``sqrt(sum(x^2))``,
    ``sum(|x|)``, ``max|x|``/``min|x|`` (NaN propagated) for +-inf, the count of non-zeros for 0, else
    ``sum(|x|^p)^(1/p)``."""
    ax = [] if axes is None else [ctx.const(list(axes), INT64)]
    keep = int(keepdim)
    if p == 2:
        return ctx.op("Sqrt", ctx.op("ReduceSumSquare", x, *ax, keepdims=keep))
    absx = ctx.op("Abs", x)
    if p == 1:
        return ctx.op("ReduceSum", absx, *ax, keepdims=keep)
    if p == -math.inf:  # +inf when every |x| is: the CUDA kernel's answer is the largest float32
        out = ctx.op("ReduceMin", absx, *ax, keepdims=keep)
        return extremum_as_pytorch(ctx, "ReduceMin", absx, out, ax, keepdim)
    if p == math.inf:  # |x| is never -inf: NaN only, which onnxruntime's ReduceMax skips and PyTorch's norm keeps
        out = ctx.op("ReduceMax", absx, *ax, keepdims=keep)
        nan = ctx.op("ReduceMax", ctx.cast(ctx.op("IsNaN", x), ir.DataType.UINT8), *ax, keepdims=keep)
        return ctx.op("Where", ctx.cast(nan, BOOL), ctx.const(float("nan"), x.dtype), out)
    if p == 0:
        nonzero = ctx.cast(ctx.op("Not", ctx.op("Equal", x, ctx.const(0, x.dtype))), x.dtype)
        return ctx.op("ReduceSum", nonzero, *ax, keepdims=keep)
    powered = ctx.op("Pow", absx, ctx.const(float(p), x.dtype))
    return ctx.op("Pow", ctx.op("ReduceSum", powered, *ax, keepdims=keep), ctx.const(1.0 / p, x.dtype))


# -- padding ------------------------------------------------------------------------------------------------
def pad_axes(
    ctx: NodeContext, x: ir.Value, pad: Sequence[int], mode: str, value: Any = None, rank: int | None = None
) -> ir.Value:
    """PyTorch's ``pad`` (pairs for the last axis first): negative pads crop with ``Slice``, positive ones
    are an ONNX ``Pad`` (``wrap`` made of slices before opset 19)."""
    pad = static_ints(ctx, pad, "pad")
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
    # amounts for every axis, no ``axes`` input: onnxruntime's transpose optimizer permutes a Pad's amounts as if
    # they covered every axis (a Gather out of bounds at run time when a Transpose comes before the Pad)
    amounts = [0] * (2 * rank)
    for axis, before, after in grows:
        amounts[axis], amounts[rank + axis] = before, after
    pads = ctx.const(amounts, INT64)
    wide = widen(ctx, x, "Pad")
    inputs = [wide, pads]
    if mode == "constant":
        fill = 0 if value is None else value
        if dtype == BOOL:
            fill = bool(fill)
        elif not dtype.is_floating_point():
            fill = int(fill)
        inputs.append(ctx.const(fill, wide.dtype))
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


def where_typed(ctx: NodeContext, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """``Where(cond, a, b)`` in the element type of ``a`` (``b`` cast to it), through a wider type where
    onnxruntime lacks it."""
    dtype = a.dtype
    out = ctx.op("Where", ctx.cast(cond, BOOL), widen(ctx, a, "Where"), widen(ctx, ctx.cast(b, dtype), "Where"))
    return ctx.cast(out, dtype)


def pad_axis(
    ctx: NodeContext, x: ir.Value, rank: int, axis: int, before: int | ir.Value, after: int | ir.Value
) -> ir.Value:
    """``x`` (of rank ``rank``) with ``before`` zeros in front of axis ``axis`` and ``after`` behind it (ints or 0-D
    INT64 values; a negative amount crops).

    The amounts cover every axis, without the ``axes`` input: onnxruntime's transpose optimizer permutes a Pad's
    amounts as if they covered every axis (a Gather out of bounds at run time after a Transpose).
    """
    if isinstance(before, int) and isinstance(after, int) and before == after == 0:
        return x
    pads: list[int | ir.Value] = [0] * (2 * rank)
    pads[axis], pads[rank + axis] = before, after
    return ctx.cast(ctx.op("Pad", widen(ctx, x, "Pad"), ctx.int64s(pads)), x.dtype)
