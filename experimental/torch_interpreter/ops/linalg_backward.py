"""Gradients of the linear algebra ops, as AOTAutograd's backward graphs call them (``_cdist_backward`` after
``_cdist_forward``).

The formulas of PyTorch's CPU kernel (ATen's ``native/cpu/DistanceOpsKernel.cpp``), computed in float32 for
float16/bfloat16 and cast back.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, opmath_dtype


def _zero_where(ctx: NodeContext, condition: ir.Value, value: ir.Value, dtype: ir.DataType) -> ir.Value:
    return ctx.op("Where", condition, ctx.const(0.0, dtype), value)


@register("aten::_cdist_backward.default")
def aten__cdist_backward(
    ctx: NodeContext, grad: ir.Value, x1: ir.Value, x2: ir.Value, p: float, cdist: ir.Value
) -> ir.Value:
    """_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor: the gradient of
    ``cdist(x1, x2, p)`` with respect to ``x1``, ``sum_j grad[i, j] * d dist[i, j] / d x1[i]``: for ``diff = x1[i] -
    x2[j]`` and ``dist = dist[i, j]``, 0 for p = 0, ``sign(diff)`` for p = 1, ``diff / dist`` for p = 2,
    ``sign(diff) * (|diff| == dist)`` for p = inf, ``sign(diff) |diff|^(p-1) / dist^(p-1)`` below 2 (0 where
    ``diff`` is 0 and p < 1), ``diff |diff|^(p-2) / dist^(p-1)`` above; 0 where ``dist`` is 0 but for p = 1 and
    inf, as PyTorch's kernel gives it."""
    if not isinstance(p, (int, float)) or p < 0 or math.isnan(p):
        raise ValueError(f"_cdist_backward: p={p!r} must be a non-negative number known at export time")
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    a = ctx.op("Unsqueeze", ctx.cast(x1, c), ctx.const([-2], INT64))  # [..., P, 1, M]
    b = ctx.op("Unsqueeze", ctx.cast(x2, c), ctx.const([-3], INT64))  # [..., 1, R, M]
    diff = ctx.op("Sub", a, b)  # [..., P, R, M]
    g = ctx.op("Unsqueeze", ctx.cast(grad, c), ctx.const([-1], INT64))  # [..., P, R, 1]
    dist = ctx.op("Unsqueeze", ctx.cast(cdist, c), ctx.const([-1], INT64))
    zero = ctx.const(0.0, c)
    dist_zero = ctx.op("Equal", dist, zero)
    if p == 0:
        term = ctx.op("Mul", diff, zero)
    elif p == 1:
        term = ctx.op("Mul", ctx.op("Sign", diff), g)
    elif p == 2:
        term = _zero_where(ctx, dist_zero, ctx.op("Div", ctx.op("Mul", g, diff), dist), c)
    elif math.isinf(p):
        at_max = ctx.cast(ctx.op("Equal", ctx.op("Abs", diff), dist), c)
        term = ctx.op("Mul", ctx.op("Mul", ctx.op("Sign", diff), at_max), g)
    else:
        powered = ctx.op("Pow", ctx.op("Abs", diff), ctx.const(p - 1 if p < 2 else p - 2, c))
        scale = ctx.op("Div", g, ctx.op("Pow", dist, ctx.const(p - 1, c)))
        if p < 2:
            term = ctx.op("Mul", ctx.op("Mul", ctx.op("Sign", diff), powered), scale)
            if p < 1:
                dist_zero = ctx.op("Or", dist_zero, ctx.op("Equal", diff, zero))
        else:
            term = ctx.op("Mul", ctx.op("Mul", diff, powered), scale)
        term = _zero_where(ctx, dist_zero, term, c)
    rank = max(ctx.rank(x1), ctx.rank(x2)) + 1
    summed = ctx.op("ReduceSum", term, ctx.const([rank - 2], INT64), keepdims=0)  # over j: [..., P, M]
    return ctx.cast(summed, dtype)
