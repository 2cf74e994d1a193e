"""Gradients of the activations, as AOTAutograd's backward graphs call them (``relu`` gives
``threshold_backward``, ``gelu`` gives ``gelu_backward``...), and of log_softmax.

Each converter computes the formula of PyTorch's CPU kernel (ATen's ``cpu/Activation.cpp``), in float32 for
float16 and bfloat16 inputs (``sigmoid_backward`` rounds each step in float16, as its kernel), with the kernel's
comparisons (which side of a boundary keeps the gradient, where NaN goes), then casts back to the output dtype.
``_softmax_backward_data`` lives in ``activation.py``.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    F16,
    INT64,
    Scalar,
    binary_formula,
    kernel_op,
    opmath_dtype,
    scalar_of,
    static_shape,
    where_typed,
)


@register("aten::threshold_backward.default")
def aten_threshold_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value, threshold: Scalar) -> ir.Value:
    """threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor:
    ``0 if x <= threshold else grad`` (NaN keeps the gradient); the backward of relu."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        return where_typed(ctx, ctx.op("LessOrEqual", x, scalar_of(ctx, threshold, x)), scalar_of(ctx, 0.0, g), g)

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::gelu_backward.default")
def aten_gelu_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, *, approximate: str = "none"
) -> ir.Value:
    """gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor

    ``grad * (cdf(x) + x * pdf(x))``, or the derivative of the tanh approximation.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_backward: unexpected approximate={approximate!r}")

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        def c(v: float) -> ir.Value:
            return scalar_of(ctx, v, x)

        x_sq = ctx.op("Mul", x, x)
        if approximate == "tanh":
            beta = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5
            inner = ctx.op("Mul", c(beta), ctx.op("Add", x, ctx.op("Mul", c(0.044715), ctx.op("Mul", x_sq, x))))
            t = kernel_op(ctx, "Tanh", inner, dtype=x.dtype)
            left_derivative = ctx.op("Mul", c(0.5), ctx.op("Add", c(1.0), t))
            tanh_derivative = ctx.op("Sub", c(1.0), ctx.op("Mul", t, t))
            inner_derivative = ctx.op("Mul", c(beta), ctx.op("Add", c(1.0), ctx.op("Mul", c(3 * 0.044715), x_sq)))
            right_derivative = ctx.op(
                "Mul", ctx.op("Mul", ctx.op("Mul", c(0.5), x), tanh_derivative), inner_derivative
            )
            return ctx.op("Mul", g, ctx.op("Add", left_derivative, right_derivative))
        erf = kernel_op(ctx, "Erf", ctx.op("Mul", x, c(math.sqrt(0.5))), dtype=x.dtype)
        cdf = ctx.op("Mul", c(0.5), ctx.op("Add", c(1.0), erf))
        gauss = kernel_op(ctx, "Exp", ctx.op("Mul", x_sq, c(-0.5)), dtype=x.dtype)
        pdf = ctx.op("Mul", c(0.5 * math.sqrt(0.5) * 2 / math.sqrt(math.pi)), gauss)
        return ctx.op("Mul", g, ctx.op("Add", cdf, ctx.op("Mul", x, pdf)))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::silu_backward.default")
def aten_silu_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value) -> ir.Value:
    """silu_backward(Tensor grad_output, Tensor self) -> Tensor:
    ``grad * s * (1 + x * (1 - s))``, ``s = sigmoid(x)``."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        one = scalar_of(ctx, 1.0, x)
        s = kernel_op(ctx, "Sigmoid", x, dtype=x.dtype)
        return ctx.op("Mul", ctx.op("Mul", g, s), ctx.op("Add", one, ctx.op("Mul", x, ctx.op("Sub", one, s))))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::mish_backward.default")
def aten_mish_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value) -> ir.Value:
    """mish_backward(Tensor grad_output, Tensor self) -> Tensor:
    ``grad * (t + x * sigmoid(x) * (1 - t * t))``, ``t = tanh(softplus(x))``."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        one = scalar_of(ctx, 1.0, x)
        s = kernel_op(ctx, "Sigmoid", x, dtype=x.dtype)
        t = kernel_op(ctx, "Tanh", kernel_op(ctx, "Softplus", x, dtype=x.dtype), dtype=x.dtype)
        right = ctx.op("Mul", ctx.op("Mul", x, s), ctx.op("Sub", one, ctx.op("Mul", t, t)))
        return ctx.op("Mul", g, ctx.op("Add", t, right))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::tanh_backward.default")
def aten_tanh_backward(ctx: NodeContext, grad_output: ir.Value, output: ir.Value) -> ir.Value:
    """tanh_backward(Tensor grad_output, Tensor output) -> Tensor: ``grad * (1 - y * y)``."""
    return binary_formula(
        ctx, grad_output, output,
        lambda g, y: ctx.op("Mul", g, ctx.op("Sub", scalar_of(ctx, 1.0, y), ctx.op("Mul", y, y))),
    )


@register("aten::sigmoid_backward.default")
def aten_sigmoid_backward(ctx: NodeContext, grad_output: ir.Value, output: ir.Value) -> ir.Value:
    """sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor: ``grad * (1 - y) * y``.

    PyTorch's kernel computes float16 in float16 (each step rounded), bfloat16 in float32.
    """
    dtype = ctx.out_dtype

    def formula(g: ir.Value, y: ir.Value) -> ir.Value:
        def r(v: ir.Value) -> ir.Value:
            return ctx.cast(ctx.cast(v, dtype), v.dtype) if dtype == F16 else v

        return ctx.op("Mul", r(ctx.op("Mul", g, r(ctx.op("Sub", scalar_of(ctx, 1.0, y), y)))), y)

    return binary_formula(ctx, grad_output, output, formula)


@register("aten::hardtanh_backward.default")
def aten_hardtanh_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, min_val: Scalar, max_val: Scalar
) -> ir.Value:
    """hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val) -> Tensor:
    ``grad if min_val < x < max_val else 0`` (the boundaries and NaN give 0); the backward of relu6 too."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        inside = ctx.op(
            "And",
            ctx.op("Greater", x, scalar_of(ctx, min_val, x)),
            ctx.op("Less", x, scalar_of(ctx, max_val, x)),
        )
        return where_typed(ctx, inside, g, scalar_of(ctx, 0.0, g))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::leaky_relu_backward.default")
def aten_leaky_relu_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, negative_slope: Scalar, self_is_result: bool
) -> ir.Value:
    """leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope, bool self_is_result) -> Tensor:
    ``grad if x > 0 else grad * negative_slope`` (``self`` may be the result: same sign)."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        positive = ctx.op("Greater", x, scalar_of(ctx, 0.0, x))
        return where_typed(ctx, positive, g, ctx.op("Mul", g, scalar_of(ctx, negative_slope, g)))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::elu_backward.default")
def aten_elu_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    alpha: Scalar,
    scale: Scalar,
    input_scale: Scalar,
    is_result: bool,
    self_or_result: ir.Value,
) -> ir.Value:
    """elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, bool is_result,
    Tensor self_or_result) -> Tensor

    ``grad * scale`` where ``b > 0``, else ``grad * input_scale * (b + alpha * scale)`` when ``b`` is the
    result, ``grad * input_scale * alpha * scale * exp(b * input_scale)`` when it is the input.
    """
    negcoef = float(alpha) * float(scale)

    def formula(g: ir.Value, b: ir.Value) -> ir.Value:
        def c(v: float) -> ir.Value:
            return scalar_of(ctx, float(v), b)

        scaled = ctx.op("Mul", g, c(input_scale))
        if is_result:
            negative = ctx.op("Mul", scaled, ctx.op("Add", b, c(negcoef)))
        else:
            e = kernel_op(ctx, "Exp", ctx.op("Mul", b, c(input_scale)), dtype=b.dtype)
            negative = ctx.op("Mul", ctx.op("Mul", scaled, c(negcoef)), e)
        return where_typed(ctx, ctx.op("Greater", b, c(0.0)), ctx.op("Mul", g, c(scale)), negative)

    return binary_formula(ctx, grad_output, self_or_result, formula)


@register("aten::softplus_backward.default")
def aten_softplus_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, beta: Scalar, threshold: Scalar
) -> ir.Value:
    """softplus_backward(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold) -> Tensor:
    ``grad if beta * x > threshold else grad * z / (z + 1)``, ``z = exp(beta * x)``."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        bx = ctx.op("Mul", x, scalar_of(ctx, float(beta), x))
        z = kernel_op(ctx, "Exp", bx, dtype=x.dtype)
        smooth = ctx.op("Div", ctx.op("Mul", g, z), ctx.op("Add", z, scalar_of(ctx, 1.0, z)))
        return where_typed(ctx, ctx.op("Greater", bx, scalar_of(ctx, float(threshold), x)), g, smooth)

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::hardsigmoid_backward.default")
def aten_hardsigmoid_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value) -> ir.Value:
    """hardsigmoid_backward(Tensor grad_output, Tensor self) -> Tensor: ``grad / 6`` where ``-3 < x < 3``, else 0."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        inside = ctx.op(
            "And", ctx.op("Greater", x, scalar_of(ctx, -3.0, x)), ctx.op("Less", x, scalar_of(ctx, 3.0, x))
        )
        return where_typed(ctx, inside, ctx.op("Mul", g, scalar_of(ctx, 1.0 / 6.0, g)), scalar_of(ctx, 0.0, g))

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::hardswish_backward.default")
def aten_hardswish_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value) -> ir.Value:
    """hardswish_backward(Tensor grad_output, Tensor self) -> Tensor:
    0 where ``x <= -3``, ``grad`` where ``x >= 3``, ``grad * (x / 3 + 1/2)`` between (and for NaN)."""

    def formula(g: ir.Value, x: ir.Value) -> ir.Value:
        def c(v: float) -> ir.Value:
            return scalar_of(ctx, v, x)

        middle = ctx.op("Mul", g, ctx.op("Add", ctx.op("Div", x, c(3.0)), c(0.5)))
        y = where_typed(ctx, ctx.op("GreaterOrEqual", x, c(3.0)), g, middle)
        return where_typed(ctx, ctx.op("LessOrEqual", x, c(-3.0)), c(0.0), y)

    return binary_formula(ctx, grad_output, self, formula)


@register("aten::log_sigmoid_backward.default")
def aten_log_sigmoid_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value, buffer: ir.Value) -> ir.Value:
    """log_sigmoid_backward(Tensor grad_output, Tensor self, Tensor buffer) -> Tensor

    ``grad * (1 - b / (1 + b))`` where ``x < 0``, else ``grad * b / (1 + b)``, ``b = exp(-|x|)`` the buffer
    ``log_sigmoid_forward`` saved (recomputed when it is empty, as CUDA leaves it).
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x, g = ctx.cast(self, c), ctx.cast(grad_output, c)
    if static_shape(ctx.arg_val(2)) == [0]:
        b = kernel_op(ctx, "Exp", ctx.op("Neg", ctx.op("Abs", x)), dtype=c)
    else:
        b = ctx.cast(buffer, c)
    one = ctx.const(1.0, c)
    fraction = ctx.op("Div", b, ctx.op("Add", one, b))
    negative = ctx.op("Less", x, ctx.const(0.0, c))
    return ctx.cast(ctx.op("Mul", ctx.op("Where", negative, ctx.op("Sub", one, fraction), fraction), g), dtype)


@register("aten::glu_backward.default")
def aten_glu_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value, dim: int) -> ir.Value:
    """glu_backward(Tensor grad_output, Tensor self, int dim) -> Tensor

    With ``a, b`` the halves of ``self`` along ``dim`` and ``s = sigmoid(b)``: ``[grad * s, grad * a * s * (1 - s)]``
    concatenated along ``dim``; the kernel stores ``s`` in the input's dtype first.
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    axis = dim % ctx.rank(self)
    size = self.shape[axis]
    if isinstance(size, int):
        half: int | ir.Value = size // 2
    else:
        half = ctx.op("Div", ctx.op("Shape", self, start=axis, end=axis + 1), ctx.const([2], INT64))
    a, b = ctx.op("Split", self, ctx.int64s([half, half]), axis=axis, num_outputs=2)
    a, b, g = ctx.cast(a, c), ctx.cast(b, c), ctx.cast(grad_output, c)
    s = ctx.cast(ctx.cast(kernel_op(ctx, "Sigmoid", b, dtype=c), dtype), c)
    first = ctx.op("Mul", s, g)
    second = ctx.op("Mul", ctx.op("Mul", ctx.op("Mul", ctx.op("Sub", ctx.const(1.0, c), s), s), a), g)
    return ctx.op("Concat", ctx.cast(first, dtype), ctx.cast(second, dtype), axis=axis)


@register("aten::_log_softmax_backward_data.default")
def aten__log_softmax_backward_data(
    ctx: NodeContext, grad_output: ir.Value, output: ir.Value, dim: int, input_dtype: Any
) -> ir.Value:
    """_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor:
    ``grad - exp(output) * sum(grad, dim)``."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    g, y = ctx.cast(grad_output, c), ctx.cast(output, c)
    p = kernel_op(ctx, "Exp", y, dtype=c)
    if ctx.rank(output) == 0:
        return ctx.cast(ctx.op("Sub", g, ctx.op("Mul", p, g)), dtype)
    total = ctx.op("ReduceSum", g, ctx.const([dim % ctx.rank(output)], INT64), keepdims=1)
    return ctx.cast(ctx.op("Sub", g, ctx.op("Mul", p, total)), dtype)
