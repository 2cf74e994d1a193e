"""Backward of the normalizations: layer, batch and group norms, the formulas of PyTorch's CPU kernels
(ATen's ``layer_norm_kernel.cpp``, ``Normalization.cpp``, ``group_norm_kernel.cpp``).

With ``x_hat = (x - mean) * rstd`` over the ``n`` elements normalized together and ``g = grad_out * weight``,
``grad_input = rstd * (g - mean(g) - x_hat * mean(g * x_hat))``; ``grad_weight = sum(grad_out * x_hat)`` and
``grad_bias = sum(grad_out)`` over the axes the parameter does not have. Computed in float32 for float16 and
bfloat16, as PyTorch does; each result is cast to PyTorch's type. An output whose ``output_mask`` entry is False
(or that the graph does not read) is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from ..dtypes import onnx_dtype
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, concat_shape, dim_of, int_op, opmath_dtype, uses_output


def _result(ctx: NodeContext, index: int, value: ir.Value | None) -> ir.Value | None:
    """Output ``index`` cast to the type PyTorch gives it; None when not computed."""
    return None if value is None else ctx.cast(value, onnx_dtype(ctx.val[index].dtype))


def _sum(ctx: NodeContext, x: ir.Value, axes: Sequence[int], keepdims: int = 0) -> ir.Value:
    """``ReduceSum`` over ``axes``; no axis: ``x`` itself (an empty axes input would reduce them all)."""
    return ctx.op("ReduceSum", x, ctx.const(list(axes), INT64), keepdims=keepdims) if axes else x


def _centered_grad(ctx: NodeContext, g: ir.Value, x_hat: ir.Value, axes: ir.Value) -> ir.Value:
    """``g - mean(g) - x_hat * mean(g * x_hat)`` over ``axes`` (a 1-D INT64 value)."""
    mean_g = ctx.op("ReduceMean", g, axes, keepdims=1)
    mean_gx = ctx.op("ReduceMean", ctx.op("Mul", g, x_hat), axes, keepdims=1)
    return ctx.op("Sub", ctx.op("Sub", g, mean_g), ctx.op("Mul", x_hat, mean_gx))


@register("aten::native_layer_norm_backward.default")
def aten_native_layer_norm_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    input: ir.Value,
    normalized_shape: Sequence[Any],
    mean: ir.Value,
    rstd: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    output_mask: Sequence[bool],
) -> tuple[ir.Value | None, ir.Value | None, ir.Value | None]:
    """native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean,
    Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)

    ``mean`` and ``rstd`` keep the normalized axes (size 1); the parameters' gradients sum the leading axes.
    """
    c = opmath_dtype(input.dtype)
    rank, k = ctx.rank(input), len(normalized_shape)
    dy = ctx.cast(grad_out, c)
    rstd = ctx.cast(rstd, c)
    x_hat = ctx.op("Mul", ctx.op("Sub", ctx.cast(input, c), ctx.cast(mean, c)), rstd)
    grads: list[ir.Value | None] = [None, None, None]
    if output_mask[0] and uses_output(ctx, 0):
        g = dy if weight is None else ctx.op("Mul", dy, ctx.cast(weight, c))
        inner = ctx.const(list(range(rank - k, rank)), INT64)
        grads[0] = ctx.op("Mul", rstd, _centered_grad(ctx, g, x_hat, inner))
    outer = list(range(rank - k))
    if output_mask[1] and uses_output(ctx, 1):
        grads[1] = _sum(ctx, ctx.op("Mul", dy, x_hat), outer)
    if output_mask[2] and uses_output(ctx, 2):
        grads[2] = _sum(ctx, dy, outer)
    return tuple(_result(ctx, i, v) for i, v in enumerate(grads))


@register("aten::native_batch_norm_backward.default")
def aten_native_batch_norm_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    input: ir.Value,
    weight: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    save_mean: ir.Value | None,
    save_invstd: ir.Value | None,
    train: bool,
    eps: float,
    output_mask: Sequence[bool],
) -> tuple[ir.Value | None, ir.Value | None, ir.Value | None]:
    """native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean,
    Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask)
    -> (Tensor, Tensor, Tensor)

    Statistics per channel (axis 1): the saved batch ones in training mode, else ``running_mean`` and
    ``1 / sqrt(running_var + eps)``. In eval mode ``grad_input = grad_out * invstd * weight``; in training mode
    the two sums per channel (``grad_out`` and ``grad_out * x_hat``) serve the three gradients.
    """
    c = opmath_dtype(input.dtype)
    rank = ctx.rank(input)
    axes = [0, *range(2, rank)]
    per_channel = ctx.const([-1] + [1] * (rank - 2), INT64)
    if train:
        mean, invstd = ctx.cast(save_mean, c), ctx.cast(save_invstd, c)
    else:
        mean = ctx.cast(running_mean, c)
        invstd = ctx.op("Reciprocal", ctx.op("Sqrt", ctx.op("Add", ctx.cast(running_var, c), ctx.const(float(eps), c))))
    mean, invstd = ctx.op("Reshape", mean, per_channel), ctx.op("Reshape", invstd, per_channel)
    dy = ctx.cast(grad_out, c)
    need = [bool(m) and uses_output(ctx, i) for i, m in enumerate(output_mask)]
    x_hat = None
    if need[1] or (need[0] and train):
        x_hat = ctx.op("Mul", ctx.op("Sub", ctx.cast(input, c), mean), invstd)
    sum_dy = _sum(ctx, dy, axes, 1) if need[2] or (need[0] and train) else None
    dot = _sum(ctx, ctx.op("Mul", dy, x_hat), axes, 1) if need[1] or (need[0] and train) else None
    grads: list[ir.Value | None] = [None, None, None]
    if need[0]:
        scale = invstd if weight is None else ctx.op("Mul", invstd, ctx.op("Reshape", ctx.cast(weight, c), per_channel))
        centered = dy
        if train:
            n: int | ir.Value = 1  # values per channel
            for a in axes:
                n = int_op(ctx, "Mul", n, dim_of(ctx, input, a))
            n_ = ctx.operand(n, c)
            mean_dy, mean_dot = ctx.op("Div", sum_dy, n_), ctx.op("Div", dot, n_)
            centered = ctx.op("Sub", ctx.op("Sub", dy, mean_dy), ctx.op("Mul", x_hat, mean_dot))
        grads[0] = ctx.op("Mul", centered, scale)
    flat = ctx.const([-1], INT64)
    if need[1]:
        grads[1] = ctx.op("Reshape", dot, flat)
    if need[2]:
        grads[2] = ctx.op("Reshape", sum_dy, flat)
    return tuple(_result(ctx, i, v) for i, v in enumerate(grads))


@register("aten::native_group_norm_backward.default")
def aten_native_group_norm_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    input: ir.Value,
    mean: ir.Value,
    rstd: ir.Value,
    weight: ir.Value | None,
    N: Any,
    C: Any,
    HxW: Any,
    group: int,
    output_mask: Sequence[bool],
) -> tuple[ir.Value | None, ir.Value | None, ir.Value | None]:
    """native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight,
    SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)

    ``grad_input`` computed on the tensors reshaped to ``(N, group, C / group * HxW)`` (``mean`` and ``rstd``
    are ``(N, group)``); the parameters' gradients sum every axis but the channels.
    """
    c = opmath_dtype(input.dtype)
    rank = ctx.rank(input)
    grouped = concat_shape(ctx, [N, group, int_op(ctx, "Mul", int_op(ctx, "Div", C, group), HxW)])
    full = ctx.op("Shape", input)
    two = ctx.const([2], INT64)
    mean = ctx.op("Unsqueeze", ctx.cast(mean, c), two)
    rstd = ctx.op("Unsqueeze", ctx.cast(rstd, c), two)
    dy = ctx.cast(grad_out, c)
    x = ctx.op("Reshape", ctx.cast(input, c), grouped, allowzero=1)
    x_hat = ctx.op("Mul", ctx.op("Sub", x, mean), rstd)
    grads: list[ir.Value | None] = [None, None, None]
    if output_mask[0] and uses_output(ctx, 0):
        per_channel = ctx.const([-1] + [1] * (rank - 2), INT64)
        g = dy if weight is None else ctx.op("Mul", dy, ctx.op("Reshape", ctx.cast(weight, c), per_channel))
        g = ctx.op("Reshape", g, grouped, allowzero=1)
        grads[0] = ctx.op("Reshape", ctx.op("Mul", rstd, _centered_grad(ctx, g, x_hat, two)), full, allowzero=1)
    axes = [0, *range(2, rank)]
    if output_mask[1] and uses_output(ctx, 1):
        grads[1] = _sum(ctx, ctx.op("Mul", dy, ctx.op("Reshape", x_hat, full, allowzero=1)), axes)
    if output_mask[2] and uses_output(ctx, 2):
        grads[2] = _sum(ctx, dy, axes)
    return tuple(_result(ctx, i, v) for i, v in enumerate(grads))
