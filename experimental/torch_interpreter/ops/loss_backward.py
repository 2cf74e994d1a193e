"""Gradients of the loss functions, as AOTAutograd's backward graphs call them (``nll_loss_backward`` after
``nll_loss_forward``, ``mse_loss_backward``...).

The formulas of PyTorch's CPU kernels (ATen's ``LossNLL.cpp``, ``LossNLL2d.cpp``, ``Loss.cpp``), computed in
float32 for float16/bfloat16 and cast back; where a kernel computes in float16/bfloat16 itself (mse,
huber, binary_cross_entropy, the scale of nll_loss), each of its steps is rounded to that type.

``reduction`` is PyTorch's enum: 0 none, 1 mean, 2 sum. ``grad_output`` has the loss's shape with no reduction
(the target's for nll_loss, the input's for the pointwise losses), and is 0-D otherwise.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, dim_of, numel, opmath_dtype

NONE, MEAN, SUM = 0, 1, 2


def _norm(ctx: NodeContext, self: ir.Value, reduction: int, value: float, dtype: ir.DataType) -> ir.Value:
    """``value / self.numel()`` for the mean reduction, else ``value``, in ``dtype``."""
    norm = ctx.const(value, dtype)
    if reduction == MEAN:
        norm = ctx.op("Div", norm, ctx.cast(numel(ctx, self), dtype))
    return norm


def _rounding(ctx: NodeContext) -> tuple[ir.DataType, Any]:
    """The float type to compute in, and a function rounding a value of it to the output dtype (identity for
    float32 and float64): the kernels that compute float16/bfloat16 in their own type round each step."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    if c == dtype:
        return c, lambda v: v
    return c, lambda v: ctx.cast(ctx.cast(v, dtype), c)


@register("aten::nll_loss_backward.default", "aten::nll_loss2d_backward.default")
def aten_nll_loss_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None,
    reduction: int,
    ignore_index: Any,
    total_weight: ir.Value,
) -> ir.Value:
    """nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction,
    SymInt ignore_index, Tensor total_weight) -> Tensor (nll_loss2d_backward: the same on ``[N, C, H, W]``)

    0 everywhere but at the target class of each element whose target is not ``ignore_index``:
    ``-weight[t] * grad`` with ``grad`` divided by ``total_weight`` for the mean reduction.
    """
    c, r = _rounding(ctx)
    rank = ctx.rank(self)
    class_axis = 0 if rank == 1 else 1
    t = ctx.cast(target, INT64)
    kept = ctx.op("Not", ctx.op("Equal", t, ctx.operand(ignore_index, INT64)))
    g = ctx.cast(grad_output, c)
    if reduction == MEAN:
        g = ctx.op("Div", g, ctx.cast(total_weight, c))
    scale = ctx.op("Neg", g)
    if reduction != NONE:  # the kernel rounds -(grad / total_weight) before it multiplies by the weight
        scale = r(scale)
    value = scale
    if weight is not None:
        safe = ctx.op("Where", kept, t, ctx.const(0, INT64))
        value = ctx.op("Mul", ctx.op("Gather", ctx.cast(weight, c), safe, axis=0), scale)
    axis = ctx.const([class_axis], INT64)
    if reduction == NONE or weight is not None:  # one value per target element
        value = ctx.op("Unsqueeze", value, axis)
    # one-hot of the kept targets along the class axis (-1 for the ignored ones matches no class)
    classes = dim_of(ctx, self, class_axis)
    if isinstance(classes, int):
        arange = ctx.const(list(range(classes)), INT64)
    else:
        arange = ctx.op("Range", ctx.const(0, INT64), classes, ctx.const(1, INT64))
    if rank > 2:
        arange = ctx.op("Reshape", arange, ctx.const([-1] + [1] * (rank - 2), INT64))
    picked = ctx.op("Unsqueeze", ctx.op("Where", kept, t, ctx.const(-1, INT64)), axis)
    hot = ctx.op("Equal", picked, arange)
    return ctx.cast(ctx.op("Where", hot, value, ctx.const(0.0, c)), ctx.out_dtype)


@register("aten::mse_loss_backward.default")
def aten_mse_loss_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, target: ir.Value, reduction: int
) -> ir.Value:
    """mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor:
    ``norm * (x - t) * grad``, ``norm = 2 / self.numel()`` for the mean reduction, else 2 (each step rounded
    to float16/bfloat16 as the kernel does)."""
    c, r = _rounding(ctx)
    x, y, g = (ctx.cast(v, c) for v in (self, target, grad_output))
    diff = r(ctx.op("Mul", r(_norm(ctx, self, reduction, 2.0, c)), r(ctx.op("Sub", x, y))))
    return ctx.cast(ctx.op("Mul", diff, g), ctx.out_dtype)


@register("aten::smooth_l1_loss_backward.default")
def aten_smooth_l1_loss_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, target: ir.Value, reduction: int, beta: float
) -> ir.Value:
    """smooth_l1_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction, float beta) -> Tensor

    With ``d = x - t`` and ``n = norm * grad`` (``norm = 1 / self.numel()`` for the mean reduction, else 1):
    ``-n`` where ``d <= -beta``, ``n`` where ``d >= beta``, ``norm * d * grad / beta`` between (``beta = 0``:
    ``d = 0`` gives ``-n``, as PyTorch's kernel).
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x, y, g = (ctx.cast(v, c) for v in (self, target, grad_output))
    norm = _norm(ctx, self, reduction, 1.0, c)
    d = ctx.op("Sub", x, y)
    n = ctx.op("Mul", norm, g)
    b = ctx.const(float(beta), c)
    middle = ctx.op("Div", ctx.op("Mul", ctx.op("Mul", norm, d), g), b)
    upper = ctx.op("Where", ctx.op("GreaterOrEqual", d, b), n, middle)
    out = ctx.op("Where", ctx.op("LessOrEqual", d, ctx.const(-float(beta), c)), ctx.op("Neg", n), upper)
    return ctx.cast(out, dtype)


@register("aten::huber_loss_backward.default")
def aten_huber_loss_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, target: ir.Value, reduction: int, delta: float
) -> ir.Value:
    """huber_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction, float delta) -> Tensor

    With ``d = x - t`` and ``norm = 1 / self.numel()`` for the mean reduction, else 1: ``-norm * grad * delta``
    where ``d <= -delta``, ``norm * grad * delta`` where ``d >= delta``, ``norm * d * grad`` between (each step
    rounded to float16/bfloat16 as the kernel does).
    """
    c, r = _rounding(ctx)
    x, y, g = (ctx.cast(v, c) for v in (self, target, grad_output))
    norm = r(_norm(ctx, self, reduction, 1.0, c))
    d = r(ctx.op("Sub", x, y))
    bound = r(ctx.const(float(delta), c))
    outer = r(ctx.op("Mul", r(ctx.op("Mul", norm, g)), bound))
    middle = r(ctx.op("Mul", r(ctx.op("Mul", norm, d)), g))
    upper = ctx.op("Where", ctx.op("GreaterOrEqual", d, bound), outer, middle)
    out = ctx.op("Where", ctx.op("LessOrEqual", d, ctx.op("Neg", bound)), ctx.op("Neg", outer), upper)
    return ctx.cast(out, ctx.out_dtype)


@register("aten::binary_cross_entropy_backward.default")
def aten_binary_cross_entropy_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = MEAN,
) -> ir.Value:
    """binary_cross_entropy_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight=None,
    int reduction=Mean) -> Tensor

    ``grad * (x - t) / max((1 - x) * x, 1e-12)``, times the weight, divided by ``self.numel()`` for the mean
    reduction. The kernel rounds each step to float16/bfloat16, and ``1e-12`` too: 0 in float16 (``x`` 0 or 1
    gives NaN there).
    """
    c, r = _rounding(ctx)
    x, y, g = (ctx.cast(v, c) for v in (self, target, grad_output))
    eps = float(torch.tensor(1e-12, dtype=ctx.val.dtype))
    denominator = ctx.op("Max", r(ctx.op("Mul", r(ctx.op("Sub", ctx.const(1.0, c), x)), x)), ctx.const(eps, c))
    out = ctx.op("Div", r(ctx.op("Mul", g, r(ctx.op("Sub", x, y)))), denominator)
    if weight is not None:
        out = ctx.op("Mul", r(out), ctx.cast(weight, c))
    if reduction == MEAN:
        out = ctx.op("Div", r(out), ctx.cast(numel(ctx, self), c))
    return ctx.cast(out, ctx.out_dtype)
