"""Normalizations: layer, batch, instance, group and RMS norms.

The ONNX op where one fits; statistics computed by hand (``ReduceMean``) run in float32 for float16 and
bfloat16, as PyTorch does on CPU. The ``native_*`` and ``_native_*`` overloads return their saved mean
and inverse standard deviation as PyTorch does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from ..dtypes import onnx_dtype, torch_dtype
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    concat_shape,
    dim_of,
    int_op,
    kernel_dtype,
    kernel_op,
    opmath_dtype,
    shifted_by_first,
    uses_output,
    vector_norm,
)


def _filled(ctx: NodeContext, x: ir.Value, start: int, end: int | None, value: float, dtype: ir.DataType) -> ir.Value:
    """A tensor of ``value`` with the shape of ``x.shape[start:end]``."""
    dims = list(x.shape)[start:end]
    if all(isinstance(d, int) for d in dims):
        return ctx.const(np.full(dims, value, dtype=dtype.numpy()), dtype)
    shape = ctx.op("Shape", x, start=start, end=end)
    return ctx.op("ConstantOfShape", shape, value=ir.tensor(np.array([value], dtype=dtype.numpy())))


def _param(ctx: NodeContext, p: ir.Value | None, x: ir.Value, value: float, dtype: ir.DataType) -> ir.Value:
    """A per-channel parameter (``x.shape[1]`` values): ``p`` cast to ``dtype``, else filled with ``value``."""
    return ctx.cast(p, dtype) if p is not None else _filled(ctx, x, 1, 2, value, dtype)


def _affine(ctx: NodeContext, y: ir.Value, rank: int, weight: ir.Value | None, bias: ir.Value | None) -> ir.Value:
    """``y * weight + bias`` with per-channel (dimension 1) parameters, ``y`` of rank ``rank``."""
    if weight is None and bias is None:
        return y
    shape = ctx.const([-1] + [1] * (rank - 2), INT64)
    if weight is not None:
        y = kernel_op(ctx, "Mul", y, ctx.op("Reshape", ctx.cast(weight, y.dtype), shape), dtype=y.dtype)
    if bias is not None:
        y = kernel_op(ctx, "Add", y, ctx.op("Reshape", ctx.cast(bias, y.dtype), shape), dtype=y.dtype)
    return y


def _normalize(ctx: NodeContext, x: ir.Value, axes: Sequence[int], eps: float) -> tuple[ir.Value, ...]:
    """``((x - mean) * rstd, mean, rstd, (x - mean)^2)`` over ``axes`` (kept), in the type PyTorch computes in; the
    statistics of ``x`` shifted by its first element (:func:`shifted_by_first`: exact on a constant row, as
    PyTorch's). The squares are returned for the unbiased variance of the running statistics."""
    x = ctx.cast(x, opmath_dtype(x.dtype))
    axes_ = ctx.const(list(axes), INT64)
    x, pivot = shifted_by_first(ctx, x, axes)
    mean = ctx.op("ReduceMean", x, axes_, keepdims=1)
    centered = ctx.op("Sub", x, mean)
    squares = ctx.op("Mul", centered, centered)
    var = ctx.op("ReduceMean", squares, axes_, keepdims=1)
    rstd = ctx.op("Reciprocal", ctx.op("Sqrt", ctx.op("Add", var, ctx.const(float(eps), x.dtype))))
    return ctx.op("Mul", centered, rstd), ctx.op("Add", mean, pivot), rstd, squares


def _saved(ctx: NodeContext, index: int, value: ir.Value | None) -> ir.Value | None:
    """Output ``index`` of a ``native_*`` op: ``value`` reshaped and cast as PyTorch's, or its empty
    tensor; None when the graph does not read it."""
    if not uses_output(ctx, index):
        return None
    val = ctx.val[index]
    dtype = onnx_dtype(val.dtype)
    if value is None or 0 in val.shape:
        return ctx.const(np.zeros(tuple(val.shape), dtype=dtype.numpy()), dtype)
    if all(isinstance(d, int) for d in val.shape) and len(val.shape) == 1:
        value = ctx.op("Reshape", value, ctx.const([-1], INT64))
    return ctx.cast(value, dtype)


def _layer_norm(
    ctx: NodeContext,
    input: ir.Value,
    normalized_shape: Sequence[Any],
    weight: ir.Value | None,
    bias: ir.Value | None,
    eps: float,
    num_outputs: int,
) -> Any:
    axis = -len(normalized_shape)
    compute = kernel_dtype("LayerNormalization", input.dtype)
    if any(isinstance(d, int) and d == 0 for d in normalized_shape):  # onnxruntime refuses an empty normalization
        return _empty_layer_norm(ctx, ctx.cast(input, compute), axis, num_outputs)
    scale = ctx.cast(weight, compute) if weight is not None else _filled(ctx, input, axis, None, 1.0, compute)
    b = [] if bias is None else [ctx.cast(bias, compute)]  # no trailing empty input: onnxruntime crashes
    if compute == ir.DataType.DOUBLE and num_outputs > 1:  # onnxruntime has no double kernel with mean and rstd
        return _layer_norm_double(ctx, input, axis, scale, b[0] if b else None, eps)
    stash = ir.DataType.DOUBLE if compute == ir.DataType.DOUBLE else ir.DataType.FLOAT
    return ctx.op(
        "LayerNormalization",
        ctx.cast(input, compute),
        scale,
        *b,
        axis=axis,
        epsilon=float(eps),
        stash_type=stash,
        num_outputs=num_outputs,
    )


def _empty_layer_norm(ctx: NodeContext, x: ir.Value, axis: int, num_outputs: int) -> Any:
    """Layer normalization over no element, as PyTorch gives it: ``x`` (empty), a mean of 0 and a reciprocal
    standard deviation of NaN (0 / 0) per row."""
    if num_outputs == 1:
        return x
    mean = ctx.op("ReduceSum", x, ctx.const(list(range(axis, 0)), INT64), keepdims=1)  # 0 over no element
    return x, mean, ctx.op("Div", mean, mean)


def _layer_norm_double(
    ctx: NodeContext, x: ir.Value, axis: int, scale: ir.Value, bias: ir.Value | None, eps: float
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Float64 layer normalization with its mean and reciprocal standard deviation, from reductions."""
    y, mean, rstd, _ = _normalize(ctx, x, list(range(axis, 0)), eps)
    y = ctx.op("Mul", y, scale)
    return (y if bias is None else ctx.op("Add", y, bias)), mean, rstd


@register("aten::layer_norm.default")
def aten_layer_norm(
    ctx: NodeContext,
    input: ir.Value,
    normalized_shape: Sequence[Any],
    weight: ir.Value | None = None,
    bias: ir.Value | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> ir.Value:
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None,
    float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    y = _layer_norm(ctx, input, normalized_shape, weight, bias, eps, 1)
    return ctx.cast(y, ctx.out_dtype)


@register("aten::native_layer_norm.default")
def aten_native_layer_norm(
    ctx: NodeContext,
    input: ir.Value,
    normalized_shape: Sequence[Any],
    weight: ir.Value | None,
    bias: ir.Value | None,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps)
    -> (Tensor, Tensor, Tensor)"""
    if not uses_output(ctx, 1) and not uses_output(ctx, 2):
        return aten_layer_norm(ctx, input, normalized_shape, weight, bias, eps), None, None
    y, mean, rstd = _layer_norm(ctx, input, normalized_shape, weight, bias, eps, 3)
    return ctx.cast(y, ctx.out_dtype), _saved(ctx, 1, mean), _saved(ctx, 2, rstd)


def _batch_norm_eval(
    ctx: NodeContext,
    x: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    eps: float,
) -> ir.Value:
    dtype = ctx.out_dtype
    scale = weight if weight is not None else _filled(ctx, running_mean, 0, 1, 1.0, running_mean.dtype)
    b = bias if bias is not None else _filled(ctx, running_mean, 0, 1, 0.0, running_mean.dtype)
    return kernel_op(ctx, "BatchNormalization", x, scale, b, running_mean, running_var, dtype=dtype, epsilon=float(eps))


def _batch_norm_train(
    ctx: NodeContext, x: ir.Value, weight: ir.Value | None, bias: ir.Value | None, eps: float
) -> tuple[ir.Value, ...]:
    """Normalized by the statistics of the batch (training mode): ``(y, mean, rstd, (x - mean)^2)``; the running
    statistics are not updated."""
    axes = [0, *range(2, ctx.rank(x))]
    y, mean, rstd, squares = _normalize(ctx, x, axes, eps)
    return ctx.cast(_affine(ctx, y, ctx.rank(x), weight, bias), ctx.out_dtype), mean, rstd, squares


@register("aten::batch_norm.default")
def aten_batch_norm(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> ir.Value:
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor

    BatchNormalization in eval mode; in training mode, the batch statistics (running ones are not updated).
    """
    if training or running_mean is None or running_var is None:
        return _batch_norm_train(ctx, input, weight, bias, eps)[0]
    return _batch_norm_eval(ctx, input, weight, bias, running_mean, running_var, eps)


@register("aten::_native_batch_norm_legit_no_training.default")
def aten__native_batch_norm_legit_no_training(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean,
    Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    y = _batch_norm_eval(ctx, input, weight, bias, running_mean, running_var, eps)
    return y, _saved(ctx, 1, None), _saved(ctx, 2, None)


@register("aten::_native_batch_norm_legit.default", "aten::native_batch_norm.default")
def aten__native_batch_norm_legit(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean,
    Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    if training or running_mean is None or running_var is None:
        y, mean, rstd, _ = _batch_norm_train(ctx, input, weight, bias, eps)
        return y, _saved(ctx, 1, mean), _saved(ctx, 2, rstd)
    y = _batch_norm_eval(ctx, input, weight, bias, running_mean, running_var, eps)
    return y, _saved(ctx, 1, None), _saved(ctx, 2, None)


@register("aten::_native_batch_norm_legit.no_stats")
def aten__native_batch_norm_legit_no_stats(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training,
    float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    y, mean, rstd, _ = _batch_norm_train(ctx, input, weight, bias, eps)
    return y, _saved(ctx, 1, mean), _saved(ctx, 2, rstd)


@register("aten::_native_batch_norm_legit_functional.default")
def aten__native_batch_norm_legit_functional(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value | None, ...]:
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean,
    Tensor running_var, bool training, float momentum, float eps)
    -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)

    The running statistics returned updated, as PyTorch's CPU kernel does in training mode:
    ``(1 - momentum) * running + momentum * batch``, the batch variance unbiased (``sum((x - mean)^2) / (n - 1)``);
    in eval mode, the running statistics used and returned unchanged. Those two outputs have the type of
    ``meta['val']`` (float32 for float16 statistics: so says PyTorch's meta function, where the eager kernel
    keeps float16).
    """
    if not training:
        y = _batch_norm_eval(ctx, input, weight, bias, running_mean, running_var, eps)
        running = [ctx.cast(r, onnx_dtype(ctx.val[i].dtype)) for i, r in ((3, running_mean), (4, running_var))]
        return y, _saved(ctx, 1, None), _saved(ctx, 2, None), *running
    y, mean, rstd, squares = _batch_norm_train(ctx, input, weight, bias, eps)
    updated: list[ir.Value | None] = [None, None]
    if uses_output(ctx, 3) or uses_output(ctx, 4):
        axes = [0, *range(2, ctx.rank(input))]
        n: int | ir.Value = 1  # values per channel
        for a in axes:
            n = int_op(ctx, "Mul", n, dim_of(ctx, input, a))
        var_sum = ctx.op("ReduceSum", squares, ctx.const(axes, INT64), keepdims=0)
        unbiased = ctx.op("Div", var_sum, ctx.operand(int_op(ctx, "Sub", n, 1), mean.dtype))
        batch = (ctx.op("Reshape", mean, ctx.const([-1], INT64)), unbiased)
        for i, (running, stat) in enumerate(zip((running_mean, running_var), batch)):
            old = ctx.op("Mul", ctx.cast(running, mean.dtype), ctx.const(1.0 - momentum, mean.dtype))
            new = ctx.op("Add", ctx.op("Mul", stat, ctx.const(float(momentum), mean.dtype)), old)
            updated[i] = ctx.cast(new, onnx_dtype(ctx.val[3 + i].dtype))
    return y, _saved(ctx, 1, mean), _saved(ctx, 2, rstd), *updated


@register("aten::instance_norm.default")
def aten_instance_norm(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> ir.Value:
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor

    InstanceNormalization, or BatchNormalization with the running statistics when they are used.
    """
    if not use_input_stats and running_mean is not None and running_var is not None:
        return _batch_norm_eval(ctx, input, weight, bias, running_mean, running_var, eps)
    dtype = ctx.out_dtype
    compute = kernel_dtype("InstanceNormalization", dtype)
    scale, b = _param(ctx, weight, input, 1.0, compute), _param(ctx, bias, input, 0.0, compute)
    x, _ = shifted_by_first(ctx, ctx.cast(input, compute), range(2, ctx.rank(input)))  # exact on constant planes
    return ctx.cast(ctx.op("InstanceNormalization", x, scale, b, epsilon=float(eps)), dtype)


def _grouped(ctx: NodeContext, x: ir.Value, groups: int) -> ir.Value:
    """``x`` reshaped to ``(N, groups, C * HxW / groups)``, no ``-1``, so that empty inputs reshape too."""
    shape = [d if isinstance(d, int) else None for d in x.shape]
    if None not in shape[1:]:
        per_group: int | ir.Value = int(np.prod(shape[1:])) // groups
        if per_group and shape[0] is None:  # 0 copies the batch size
            return ctx.op("Reshape", x, ctx.const([0, groups, per_group], INT64))
    else:
        size = ctx.op("ReduceProd", ctx.op("Shape", x, start=1), keepdims=0)
        per_group = int_op(ctx, "Div", size, groups)
    target = concat_shape(ctx, [dim_of(ctx, x, 0), groups, per_group])
    return ctx.op("Reshape", x, target, allowzero=1)


@register("aten::group_norm.default")
def aten_group_norm(
    ctx: NodeContext,
    input: ir.Value,
    num_groups: int,
    weight: ir.Value | None = None,
    bias: ir.Value | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> ir.Value:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05,
    bool cudnn_enabled=True) -> Tensor

    InstanceNormalization of the input reshaped to ``(N, groups, -1)`` and shifted by each group's first value
    (exact on a constant group, as PyTorch; onnxruntime's GroupNormalization-21 is not), then the per-channel
    affine transform. No channel or an empty plane: the (empty) input itself (onnxruntime's InstanceNormalization
    crashes on groups of no element).
    """
    dtype = ctx.out_dtype
    if any(isinstance(d, int) and d == 0 for d in ctx.arg_val(0).shape[1:]):  # no SymInt comparison (a guard)
        return ctx.cast(input, dtype)
    compute = kernel_dtype("InstanceNormalization", dtype)
    grouped, _ = shifted_by_first(ctx, _grouped(ctx, ctx.cast(input, compute), num_groups), [2])
    ones = ctx.const(np.ones(num_groups, dtype=compute.numpy()), compute)
    zeros = ctx.const(np.zeros(num_groups, dtype=compute.numpy()), compute)
    y = ctx.cast(ctx.op("InstanceNormalization", grouped, ones, zeros, epsilon=float(eps)), dtype)
    y = ctx.op("Reshape", y, ctx.op("Shape", input))
    return _affine(ctx, y, ctx.rank(input), weight, bias)


@register("aten::native_group_norm.default")
def aten_native_group_norm(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    N: Any,
    C: Any,
    HxW: Any,
    group: int,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW,
    int group, float eps) -> (Tensor, Tensor, Tensor)"""
    grouped = _grouped(ctx, input, group)
    y, mean, rstd, _ = _normalize(ctx, grouped, [2], eps)
    y = _affine(ctx, ctx.op("Reshape", y, ctx.op("Shape", input)), ctx.rank(input), weight, bias)
    two = ctx.const([2], INT64)
    saved = [
        _saved(ctx, i, ctx.op("Squeeze", v, two)) if uses_output(ctx, i) else None for i, v in ((1, mean), (2, rstd))
    ]
    return ctx.cast(y, ctx.out_dtype), *saved


@register("aten::rms_norm.default")
def aten_rms_norm(
    ctx: NodeContext,
    input: ir.Value,
    normalized_shape: Sequence[Any],
    weight: ir.Value | None = None,
    eps: float | None = None,
) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    RMSNormalization from opset 23, else ``x * rsqrt(mean(x^2) + eps) * weight`` in float32 for float16
    and bfloat16; ``eps=None`` is the machine epsilon of that type, as for PyTorch.
    """
    compute = opmath_dtype(input.dtype)
    if eps is None:
        eps = torch.finfo(torch_dtype(compute)).eps
    k = len(normalized_shape)
    rank = ctx.rank(input)
    dtype = ctx.out_dtype
    if ctx.opset >= 23:
        scale = weight if weight is not None else _filled(ctx, input, rank - k, None, 1.0, input.dtype)
        y = kernel_op(ctx, "RMSNormalization", input, scale, dtype=input.dtype, axis=-k, epsilon=float(eps))
        return ctx.cast(y, dtype)
    x = ctx.cast(input, compute)
    mean_square = ctx.op("ReduceMean", ctx.op("Mul", x, x), ctx.const(list(range(rank - k, rank)), INT64), keepdims=1)
    rstd = ctx.op("Reciprocal", ctx.op("Sqrt", ctx.op("Add", mean_square, ctx.const(float(eps), compute))))
    y = ctx.cast(ctx.cast(ctx.op("Mul", x, rstd), input.dtype), dtype)
    return y if weight is None else kernel_op(ctx, "Mul", y, weight, dtype=dtype)  # no bfloat16 Mul kernel


@register("aten::_batch_norm_with_update.default")
def aten__batch_norm_with_update(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    momentum: float,
    eps: float,
) -> tuple[ir.Value | None, ...]:
    """_batch_norm_with_update(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean,
    Tensor(b!) running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor)

    Training mode: the batch statistics; the running statistics are not updated.
    """
    y, mean, rstd, _ = _batch_norm_train(ctx, input, weight, bias, eps)
    return y, _saved(ctx, 1, mean), _saved(ctx, 2, rstd), _saved(ctx, 3, None)


def _norm_except(ctx: NodeContext, x: ir.Value, p: float, axis: int, rank: int) -> ir.Value:
    """The p-norm of ``x`` over every axis but ``axis``, the reduced axes kept (``|x|`` for a 1-D ``x``)."""
    others = [i for i in range(rank) if i != axis]
    return vector_norm(ctx, x, p, others, True) if others else ctx.op("Abs", x)


@register("aten::renorm.default")
def aten_renorm(ctx: NodeContext, self: ir.Value, p: float, dim: int, maxnorm: float) -> ir.Value:
    """renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor: each slice along ``dim`` whose p-norm
    exceeds ``maxnorm`` is scaled by ``maxnorm / (norm + 1e-7)``."""

    dtype = ctx.out_dtype
    rank = ctx.rank(self)
    c = opmath_dtype(dtype)
    x = ctx.cast(self, c)
    norm = _norm_except(ctx, x, p, dim % rank if rank else 0, rank)
    limit = ctx.const(float(maxnorm), c)
    factor = ctx.op("Where", ctx.op("Greater", norm, limit),
                    ctx.op("Div", limit, ctx.op("Add", norm, ctx.const(1e-7, c))), ctx.const(1.0, c))
    return ctx.cast(ctx.op("Mul", x, factor), dtype)


@register("aten::_weight_norm.default")
def aten__weight_norm(ctx: NodeContext, v: ir.Value, g: ir.Value, dim: int = 0) -> ir.Value:
    """_weight_norm(Tensor v, Tensor g, int dim=0) -> Tensor: ``v * (g / ||v||)``, the 2-norm over every axis but
    ``dim`` (over every axis for -1), in float32 for half types (PyTorch's order: ``g / norm`` first)."""
    out_dtype = ctx.out_dtype
    c = opmath_dtype(out_dtype)
    x = ctx.cast(v, c)
    rank = ctx.rank(v)
    if dim == -1:
        norm = vector_norm(ctx, x, 2.0, list(range(rank)), True)
    else:
        norm = _norm_except(ctx, x, 2.0, dim % rank, rank)
    return ctx.cast(ctx.op("Mul", x, ctx.op("Div", ctx.cast(g, c), norm)), out_dtype)
