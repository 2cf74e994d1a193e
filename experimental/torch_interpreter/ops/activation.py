"""Activations: relu family, gelu, silu, sigmoid, softmax, elu family, softplus, mish, glu, prelu, threshold.

One ONNX op where ONNX has it (run in float32 where onnxruntime lacks the type, see ``kernel_op``);
formulas of several nodes run in float32 for float16 and bfloat16, as PyTorch does on CPU.
The in-place overloads (``relu_``) are registered by ``inplace.py``, with their aliasing semantics.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, filled, kernel_op, opmath_dtype, static_shape, uses_output, where_typed

Scalar = Any  # a Python number


def _op(ctx: NodeContext, op_type: str, x: ir.Value, **attrs: Any) -> ir.Value:
    """One activation op on ``x``, with the node's output type."""
    return kernel_op(ctx, op_type, x, dtype=ctx.out_dtype, **attrs)


def _c(ctx: NodeContext, value: float, like: ir.Value) -> ir.Value:
    return ctx.const(value, like.dtype)


@register("aten::relu.default")
def aten_relu(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """relu(Tensor self) -> Tensor"""
    return _op(ctx, "Relu", self)


@register("aten::relu6.default")
def aten_relu6(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """relu6(Tensor self) -> Tensor"""
    return aten_hardtanh(ctx, self, 0, 6)


@register("aten::hardtanh.default")
def aten_hardtanh(ctx: NodeContext, self: ir.Value, min_val: Scalar = -1, max_val: Scalar = 1) -> ir.Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return kernel_op(ctx, "Clip", self, min_val, max_val, dtype=ctx.out_dtype)


@register("aten::gelu.default")
def aten_gelu(ctx: NodeContext, self: ir.Value, *, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor

    ONNX Gelu from opset 20; before, ``x/2 * (1 + erf(x/sqrt(2)))`` or its tanh approximation.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: unexpected approximate={approximate!r}")
    if ctx.opset >= 20:
        return _op(ctx, "Gelu", self, approximate=approximate)
    x = ctx.cast(self, opmath_dtype(self.dtype))
    if approximate == "tanh":
        cube = ctx.op("Mul", x, ctx.op("Mul", x, x))
        inner = ctx.op("Add", x, ctx.op("Mul", cube, _c(ctx, 0.044715, x)))
        t = kernel_op(ctx, "Tanh", ctx.op("Mul", inner, _c(ctx, math.sqrt(2 / math.pi), x)), dtype=x.dtype)
    else:
        # x / sqrt(2), the form onnxruntime's GeluFusion recognizes (one com.microsoft Gelu kernel when the session
        # is created, 3x faster than the five passes); PyTorch multiplies by 1 / sqrt(2): the argument of erf may
        # differ by one rounding, erf's value by as little
        t = kernel_op(ctx, "Erf", ctx.op("Div", x, _c(ctx, math.sqrt(2.0), x)), dtype=x.dtype)
    y = ctx.op("Mul", ctx.op("Mul", x, _c(ctx, 0.5, x)), ctx.op("Add", t, _c(ctx, 1.0, x)))
    return ctx.cast(y, ctx.out_dtype)


@register("aten::silu.default")
def aten_silu(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """silu(Tensor self) -> Tensor: ``x * sigmoid(x)``."""
    x = ctx.cast(self, opmath_dtype(self.dtype))
    return ctx.cast(ctx.op("Mul", x, kernel_op(ctx, "Sigmoid", x, dtype=x.dtype)), ctx.out_dtype)


@register("aten::sigmoid.default")
def aten_sigmoid(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """sigmoid(Tensor self) -> Tensor (integers give floats)"""
    return _op(ctx, "Sigmoid", ctx.cast(self, ctx.out_dtype))


def _softmax(ctx: NodeContext, op_type: str, self: ir.Value, dim: int) -> ir.Value:
    rank = ctx.rank(self)
    x = ctx.cast(self, ctx.out_dtype)
    if rank == 0:  # ONNX needs an axis
        zero = ctx.const([0], INT64)
        y = _op(ctx, op_type, ctx.op("Unsqueeze", x, zero), axis=0)
        return ctx.op("Squeeze", y, zero)
    return _op(ctx, op_type, x, axis=dim)


@register("aten::softmax.int")
def aten_softmax_int(ctx: NodeContext, self: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(ctx, "Softmax", self, dim)


@register("aten::_softmax.default")
def aten__softmax(ctx: NodeContext, self: ir.Value, dim: int, half_to_float: bool) -> ir.Value:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax(ctx, "Softmax", self, dim)


@register("aten::log_softmax.int")
def aten_log_softmax_int(ctx: NodeContext, self: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    return _softmax(ctx, "LogSoftmax", self, dim)


@register("aten::_log_softmax.default")
def aten__log_softmax(ctx: NodeContext, self: ir.Value, dim: int, half_to_float: bool) -> ir.Value:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _softmax(ctx, "LogSoftmax", self, dim)


@register("aten::leaky_relu.default")
def aten_leaky_relu(ctx: NodeContext, self: ir.Value, negative_slope: Scalar = 0.01) -> ir.Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return _op(ctx, "LeakyRelu", self, alpha=float(negative_slope))


@register("aten::rrelu.default")
def aten_rrelu(
    ctx: NodeContext,
    self: ir.Value,
    lower: Scalar = 0.125,
    upper: Scalar = 1.0 / 3.0,
    training: bool = False,
    generator: Any = None,
) -> ir.Value:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False,
    Generator? generator=None) -> Tensor: a leaky relu of slope ``(lower + upper) / 2`` in eval mode."""
    if training:  # a random slope in [lower, upper) for each negative element
        x = ctx.cast(self, opmath_dtype(ctx.out_dtype))
        slopes = ctx.op("RandomUniformLike", x, dtype=x.dtype, low=float(lower), high=float(upper))
        slopes.dtype = x.dtype
        negative = ctx.op("Less", x, _c(ctx, 0.0, x))
        return ctx.cast(ctx.op("Where", negative, ctx.op("Mul", x, slopes), x), ctx.out_dtype)
    return _op(ctx, "LeakyRelu", self, alpha=(float(lower) + float(upper)) / 2)


@register("aten::elu.default")
def aten_elu(
    ctx: NodeContext, self: ir.Value, alpha: Scalar = 1, scale: Scalar = 1, input_scale: Scalar = 1
) -> ir.Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor

    ``scale * (x > 0 ? x : alpha * (exp(input_scale * x) - 1))``.
    """
    if input_scale == 1:
        y = _op(ctx, "Elu", self, alpha=float(alpha))
        return y if scale == 1 else ctx.op("Mul", y, _c(ctx, float(scale), y))
    x = ctx.cast(self, opmath_dtype(self.dtype))
    neg = kernel_op(ctx, "Exp", ctx.op("Mul", x, _c(ctx, float(input_scale), x)), dtype=x.dtype)
    neg = ctx.op("Mul", ctx.op("Sub", neg, _c(ctx, 1.0, x)), _c(ctx, float(alpha), x))
    y = ctx.op("Where", ctx.op("Greater", x, _c(ctx, 0.0, x)), x, neg)
    return ctx.cast(ctx.op("Mul", y, _c(ctx, float(scale), x)), ctx.out_dtype)


@register("aten::selu.default")
def aten_selu(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """selu(Tensor self) -> Tensor (ONNX Selu's default alpha and gamma are PyTorch's constants)"""
    return _op(ctx, "Selu", self)


@register("aten::celu.default")
def aten_celu(ctx: NodeContext, self: ir.Value, alpha: Scalar = 1.0) -> ir.Value:
    """celu(Tensor self, Scalar alpha=1.) -> Tensor"""
    return _op(ctx, "Celu", self, alpha=float(alpha))


@register("aten::hardsigmoid.default")
def aten_hardsigmoid(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """hardsigmoid(Tensor self) -> Tensor: ``clip(x / 6 + 1 / 2, 0, 1)``."""
    return _op(ctx, "HardSigmoid", self, alpha=1.0 / 6, beta=0.5)


@register("aten::hardswish.default")
def aten_hardswish(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """hardswish(Tensor self) -> Tensor

    float16 and bfloat16: PyTorch's formula ``x * clamp(x + 3, 0, 6) / 6`` in float32, rounded once (its kernel's
    answer for every float16 value). onnxruntime's HardSwish (``x * max(0, min(1, x / 6 + 0.5))``) differs by an
    ulp on 7,711 of the 63,488 finite float16 values in float16 and on 39% of float32 values; an ulp a layer_norm of
    a near-constant row then made 3% (fuzz seed 209313). float32 keeps the one node (an ulp of float32 noise).
    """
    if self.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        x = ctx.cast(self, ir.DataType.FLOAT)
        clipped = ctx.op("Clip", ctx.op("Add", x, _c(ctx, 3.0, x)), _c(ctx, 0.0, x), _c(ctx, 6.0, x))
        return ctx.cast(ctx.op("Div", ctx.op("Mul", x, clipped), _c(ctx, 6.0, x)), ctx.out_dtype)
    return _op(ctx, "HardSwish", self)


@register("aten::softplus.default")
def aten_softplus(ctx: NodeContext, self: ir.Value, beta: Scalar = 1, threshold: Scalar = 20) -> ir.Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor

    ``x if beta * x > threshold else log(1 + exp(beta * x)) / beta``.
    """
    x = ctx.cast(self, opmath_dtype(self.dtype))
    bx = x if beta == 1 else ctx.op("Mul", x, _c(ctx, float(beta), x))
    y = kernel_op(ctx, "Softplus", bx, dtype=x.dtype)
    if beta != 1:
        y = ctx.op("Div", y, _c(ctx, float(beta), x))
    y = ctx.op("Where", ctx.op("Greater", bx, _c(ctx, float(threshold), x)), x, y)
    return ctx.cast(y, ctx.out_dtype)


@register("aten::mish.default")
def aten_mish(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """mish(Tensor self) -> Tensor"""
    return _op(ctx, "Mish", self)


@register("aten::log_sigmoid.default")
def aten_log_sigmoid(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log_sigmoid(Tensor self) -> Tensor: ``-softplus(-x)``."""
    x = ctx.cast(self, opmath_dtype(self.dtype))
    y = ctx.op("Neg", kernel_op(ctx, "Softplus", ctx.op("Neg", x), dtype=x.dtype))
    return ctx.cast(y, ctx.out_dtype)


@register("aten::log_sigmoid_forward.default")
def aten_log_sigmoid_forward(ctx: NodeContext, self: ir.Value) -> tuple[ir.Value, ir.Value | None]:
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)

    ``output`` as ``log_sigmoid``; ``buffer`` the ``exp(-|x|)`` that PyTorch's CPU kernel saves for
    ``log_sigmoid_backward`` (computed in float32 for float16 and bfloat16, stored in the input's dtype), or an
    empty tensor where the graph was traced for CUDA, whose kernel leaves it empty.
    """
    buffer = None
    if uses_output(ctx, 1):
        if static_shape(ctx.val[1]) == [0]:
            buffer = filled(ctx, ctx.const([0], INT64), ctx.out_dtype)
        else:
            x = ctx.cast(self, opmath_dtype(self.dtype))
            b = kernel_op(ctx, "Exp", ctx.op("Neg", ctx.op("Abs", x)), dtype=x.dtype)
            buffer = ctx.cast(b, ctx.out_dtype)
    return aten_log_sigmoid(ctx, self), buffer


@register("aten::glu.default")
def aten_glu(ctx: NodeContext, self: ir.Value, dim: int = -1) -> ir.Value:
    """glu(Tensor self, int dim=-1) -> Tensor: ``a * sigmoid(b)`` with ``a, b`` the halves along ``dim``."""
    rank = ctx.rank(self)
    size = self.shape[dim]
    if isinstance(size, int):
        half: int | ir.Value = size // 2
    else:
        axis = dim % rank
        half = ctx.op("Div", ctx.op("Shape", self, start=axis, end=axis + 1), ctx.const([2], INT64))
    a, b = ctx.op("Split", self, ctx.int64s([half, half]), axis=dim, num_outputs=2)
    dtype = opmath_dtype(self.dtype)
    a, b = ctx.cast(a, dtype), ctx.cast(b, dtype)
    return ctx.cast(ctx.op("Mul", a, kernel_op(ctx, "Sigmoid", b, dtype=dtype)), ctx.out_dtype)


@register("aten::prelu.default", "aten::_prelu_kernel.default")
def aten_prelu(ctx: NodeContext, self: ir.Value, weight: ir.Value) -> ir.Value:
    """prelu(Tensor self, Tensor weight) -> Tensor

    ``weight`` holds one slope per channel (dimension 1), or a single one.
    """
    rank, wrank = ctx.rank(self), ctx.rank(weight)
    if rank >= 2 and wrank == 1 and weight.shape[0] != 1:
        weight = ctx.op("Reshape", weight, ctx.const([-1] + [1] * (rank - 2), INT64))
    elif wrank > rank:  # a 0-D input keeps its rank
        weight = ctx.op("Reshape", weight, ctx.const([1] * rank, INT64))
    return kernel_op(ctx, "PRelu", self, weight, dtype=ctx.out_dtype)


@register("aten::threshold.default")
def aten_threshold(ctx: NodeContext, self: ir.Value, threshold: Scalar, value: Scalar) -> ir.Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor: ``x if x > threshold else value``."""
    dtype = ctx.out_dtype
    keep = kernel_op(ctx, "Greater", self, threshold, dtype=dtype)
    return where_typed(ctx, keep, ctx.cast(self, dtype), ctx.operand(value, dtype))


@register("aten::hardshrink.default")
def aten_hardshrink(ctx: NodeContext, self: ir.Value, lambd: Scalar = 0.5) -> ir.Value:
    """hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor: ``x if |x| > lambd else 0``."""
    magnitude = kernel_op(ctx, "Abs", self, dtype=self.dtype)
    keep = kernel_op(ctx, "Greater", magnitude, _c(ctx, float(lambd), self), dtype=self.dtype)
    return where_typed(ctx, keep, self, _c(ctx, 0.0, self))


@register("aten::softshrink.default")
def aten_softshrink(ctx: NodeContext, self: ir.Value, lambd: Scalar = 0.5) -> ir.Value:
    """softshrink(Tensor self, Scalar lambd=0.5) -> Tensor"""
    return _op(ctx, "Shrink", self, bias=float(lambd), lambd=float(lambd))


@register("aten::_softmax_backward_data.default")
def aten__softmax_backward_data(
    ctx: NodeContext, grad_output: ir.Value, output: ir.Value, dim: int, input_dtype: Any
) -> ir.Value:
    """_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor:
    ``output * (grad - sum(grad * output, dim))``."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    g, y = ctx.cast(grad_output, c), ctx.cast(output, c)
    axis = ctx.const([dim % ctx.rank(output) if ctx.rank(output) else 0], INT64)
    if ctx.rank(output) == 0:
        return ctx.cast(ctx.op("Mul", y, ctx.op("Sub", g, ctx.op("Mul", g, y))), dtype)
    total = ctx.op("ReduceSum", ctx.op("Mul", g, y), axis, keepdims=1)
    return ctx.cast(ctx.op("Mul", y, ctx.op("Sub", g, total)), dtype)


@register("aten::_safe_softmax.default")
def aten__safe_softmax(ctx: NodeContext, self: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """_safe_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor: 0 on the rows that are all -inf."""
    out = _softmax(ctx, "Softmax", self, dim)
    if ctx.rank(self) == 0:
        return out
    x = ctx.cast(self, ctx.out_dtype)
    masked = ctx.op("Cast", kernel_op(ctx, "IsInf", x, dtype=x.dtype, detect_positive=0), to=ir.DataType.UINT8)
    all_masked = ctx.op("ReduceMin", masked, ctx.const([dim % ctx.rank(self)], INT64), keepdims=1)
    zero = _c(ctx, 0.0, out)
    return ctx.op("Where", ctx.op("Cast", all_masked, to=ir.DataType.BOOL), zero, out)


@register("aten::native_dropout_backward.default")
def aten_native_dropout_backward(ctx: NodeContext, grad_output: ir.Value, mask: ir.Value, scale: float) -> ir.Value:
    """native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor: ``grad * mask * scale``."""
    dtype = ctx.out_dtype
    kept = kernel_op(ctx, "Mul", ctx.cast(grad_output, dtype), ctx.cast(mask, dtype), dtype=dtype)
    return kernel_op(ctx, "Mul", kept, float(scale), dtype=dtype)
