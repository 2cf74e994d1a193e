"""Elementwise arithmetic, math functions, rounding, clamping, bitwise and logical ops.

Operands are cast to the node's output dtype, which is PyTorch's type promotion. An op onnxruntime
lacks for a type runs in a wider one (``kernel_op``); formulas of several nodes run in float32 for
float16 and bfloat16, as PyTorch does on CPU.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from ..context import NodeContext
from ..dtypes import FLOAT_TYPES
from ..registry import register
from ._helpers import BOOL, kernel_op, opmath_dtype

Scalar = Any  # an ir.Value or a Python number


def _scaled(ctx: NodeContext, x: Scalar, alpha: Scalar, dtype: ir.DataType) -> Scalar:
    """``alpha * x``."""
    if isinstance(alpha, (int, float)) and alpha == 1:
        return x
    if not isinstance(x, ir.Value) and not isinstance(alpha, ir.Value):
        return x * alpha
    return kernel_op(ctx, "Mul", x, alpha, dtype=dtype)


# -- arithmetic -------------------------------------------------------------------------------------


@register("aten::add.Tensor", "aten::add.Scalar")
def aten_add(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

    Booleans add as a logical or.
    """
    dtype = ctx.out_dtype
    if dtype == BOOL:
        return ctx.op("Or", ctx.cast(self, BOOL), ctx.operand(other, BOOL))
    return kernel_op(ctx, "Add", self, _scaled(ctx, other, alpha, dtype), dtype=dtype)


@register("aten::sub.Tensor", "aten::sub.Scalar")
def aten_sub(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = ctx.out_dtype
    return kernel_op(ctx, "Sub", self, _scaled(ctx, other, alpha, dtype), dtype=dtype)


@register("aten::rsub.Scalar", "aten::rsub.Tensor")
def aten_rsub(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor: ``other - alpha * self``."""
    dtype = ctx.out_dtype
    return kernel_op(ctx, "Sub", other, _scaled(ctx, self, alpha, dtype), dtype=dtype)


@register("aten::mul.Tensor", "aten::mul.Scalar")
def aten_mul(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor

    Booleans multiply as a logical and.
    """
    dtype = ctx.out_dtype
    if dtype == BOOL:
        return ctx.op("And", ctx.cast(self, BOOL), ctx.operand(other, BOOL))
    return kernel_op(ctx, "Mul", self, other, dtype=dtype)


def _trunc(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """Rounds a float toward zero: ``sign(x) * floor(|x|)`` (ONNX has no Trunc)."""
    return ctx.op("Mul", ctx.op("Sign", x), kernel_op(ctx, "Floor", ctx.op("Abs", x), dtype=x.dtype))


def _sign_fix(ctx: NodeContext, mod: ir.Value, b: ir.Value) -> ir.Value:
    """True where the C remainder ``mod`` of a division by ``b`` is nonzero and of another sign than ``b``."""
    zero = ctx.const(0, mod.dtype)
    nonzero = ctx.op("Not", ctx.op("Equal", mod, zero))
    return ctx.op("And", nonzero, ctx.op("Xor", ctx.op("Less", b, zero), ctx.op("Less", mod, zero)))


def _floor_divide(ctx: NodeContext, a: Scalar, b: Scalar, dtype: ir.DataType) -> ir.Value:
    """Python's floor division, computed the way PyTorch does (``(a - fmod(a, b)) / b`` rounded, minus 1
    where the signs differ), which is exact where ``floor(a / b)`` is not (``1.0 // 0.1 == 9``)."""
    if dtype not in FLOAT_TYPES:
        mod = kernel_op(ctx, "Mod", a, b, dtype=dtype)  # fmod=0: the sign of the divisor, exact
        return kernel_op(ctx, "Div", kernel_op(ctx, "Sub", a, mod, dtype=dtype), b, dtype=dtype)
    c = opmath_dtype(dtype)
    nonzero_b = not isinstance(b, ir.Value) and b != 0
    a, b = ctx.operand(a, c), ctx.operand(b, c)
    mod = ctx.op("Mod", a, b, fmod=1)
    q = ctx.op("Round", ctx.op("Div", ctx.op("Sub", a, mod), b))
    q = ctx.op("Sub", q, ctx.op("Cast", _sign_fix(ctx, mod, b), to=c))
    if not nonzero_b:
        q = ctx.op("Where", ctx.op("Equal", b, ctx.const(0, c)), ctx.op("Div", a, b), q)
    return ctx.cast(q, dtype)


@register("aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode")
def aten_div(ctx: NodeContext, self: ir.Value, other: Scalar, *, rounding_mode: str | None = None) -> ir.Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor

    Integers give floats without a rounding mode; ONNX Div of integers truncates.
    """
    dtype = ctx.out_dtype
    if rounding_mode is None or (rounding_mode == "trunc" and dtype not in FLOAT_TYPES):
        return kernel_op(ctx, "Div", self, other, dtype=dtype)
    if rounding_mode == "trunc":
        c = opmath_dtype(dtype)
        return ctx.cast(_trunc(ctx, ctx.op("Div", ctx.operand(self, c), ctx.operand(other, c))), dtype)
    if rounding_mode == "floor":
        return _floor_divide(ctx, self, other, dtype)
    raise ValueError(f"unexpected rounding_mode {rounding_mode!r}")


@register("aten::floor_divide.default", "aten::floor_divide.Scalar")
def aten_floor_divide(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """floor_divide(Tensor self, Tensor other) -> Tensor"""
    return _floor_divide(ctx, self, other, ctx.out_dtype)


@register("aten::remainder.Tensor", "aten::remainder.Scalar", "aten::remainder.Scalar_Tensor")
def aten_remainder(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor

    The sign of the divisor, as Python's ``%``: ONNX Mod for integers, ``fmod`` corrected for floats.
    """
    dtype = ctx.out_dtype
    if dtype not in FLOAT_TYPES:
        return kernel_op(ctx, "Mod", self, other, dtype=dtype)
    c = opmath_dtype(dtype)
    a, b = ctx.operand(self, c), ctx.operand(other, c)
    mod = ctx.op("Mod", a, b, fmod=1)
    return ctx.cast(ctx.op("Where", _sign_fix(ctx, mod, b), ctx.op("Add", mod, b), mod), dtype)


@register("aten::fmod.Tensor", "aten::fmod.Scalar")
def aten_fmod(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor: the sign of the dividend, as C's ``fmod``."""
    return kernel_op(ctx, "Mod", self, other, dtype=ctx.out_dtype, fmod=1)


@register(
    "aten::pow.Tensor_Scalar",
    "aten::pow.Tensor_Tensor",
    "aten::pow.Scalar",
    "aten::float_power.Tensor_Scalar",
    "aten::float_power.Tensor_Tensor",
    "aten::float_power.Scalar",
)
def aten_pow(ctx: NodeContext, self: Scalar, exponent: Scalar) -> ir.Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor (float_power: the same in double)"""
    return kernel_op(ctx, "Pow", self, exponent, dtype=ctx.out_dtype)


@register("aten::square.default")
def aten_square(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """square(Tensor self) -> Tensor"""
    x = ctx.cast(self, ctx.out_dtype)
    return kernel_op(ctx, "Mul", x, x, dtype=ctx.out_dtype)


@register("aten::addcmul.default")
def aten_addcmul(
    ctx: NodeContext, self: ir.Value, tensor1: ir.Value, tensor2: ir.Value, *, value: Scalar = 1
) -> ir.Value:
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    dtype = ctx.out_dtype
    prod = kernel_op(ctx, "Mul", _scaled(ctx, tensor1, value, dtype), tensor2, dtype=dtype)
    return kernel_op(ctx, "Add", self, prod, dtype=dtype)


@register("aten::addcdiv.default")
def aten_addcdiv(
    ctx: NodeContext, self: ir.Value, tensor1: ir.Value, tensor2: ir.Value, *, value: Scalar = 1
) -> ir.Value:
    """addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    dtype = ctx.out_dtype
    quot = kernel_op(ctx, "Div", _scaled(ctx, tensor1, value, dtype), tensor2, dtype=dtype)
    return kernel_op(ctx, "Add", self, quot, dtype=dtype)


@register("aten::lerp.Scalar", "aten::lerp.Tensor")
def aten_lerp(ctx: NodeContext, self: ir.Value, end: ir.Value, weight: Scalar) -> ir.Value:
    """lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor

    As PyTorch: ``self + w * (end - self)`` where ``|w| < 0.5``, else ``end - (end - self) * (1 - w)``.
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    a, b = ctx.cast(self, c), ctx.cast(end, c)
    diff = ctx.op("Sub", b, a)
    if not isinstance(weight, ir.Value):
        if abs(weight) < 0.5:
            out = ctx.op("Add", a, ctx.op("Mul", diff, ctx.const(weight, c)))
        else:
            out = ctx.op("Sub", b, ctx.op("Mul", diff, ctx.const(1 - weight, c)))
        return ctx.cast(out, dtype)
    w = ctx.cast(weight, c)
    low = ctx.op("Add", a, ctx.op("Mul", w, diff))
    high = ctx.op("Sub", b, ctx.op("Mul", diff, ctx.op("Sub", ctx.const(1, c), w)))
    small = ctx.op("Less", ctx.op("Abs", w), ctx.const(0.5, c))
    return ctx.cast(ctx.op("Where", small, low, high), dtype)


# -- unary math ---------------------------------------------------------------------------------------

#: aten op -> ONNX op, for the functions that are one ONNX op on the input cast to the output dtype
#: (integers give floats).
_UNARY = {
    "exp": "Exp",
    "log": "Log",
    "sqrt": "Sqrt",
    "reciprocal": "Reciprocal",
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tanh": "Tanh",
    "erf": "Erf",
    "neg": "Neg",
}


def _make_unary(name: str, op_type: str):
    def converter(ctx: NodeContext, self: ir.Value) -> ir.Value:
        return kernel_op(ctx, op_type, self, dtype=ctx.out_dtype)

    converter.__name__ = converter.__qualname__ = f"aten_{name}_default"
    converter.__doc__ = f"{name}(Tensor self) -> Tensor: ONNX {op_type}."
    return converter


for _name, _op in _UNARY.items():
    register(f"aten::{_name}.default")(_make_unary(_name, _op))


@register("aten::abs.default")
def aten_abs(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor"""
    return kernel_op(ctx, "Abs", self, dtype=ctx.out_dtype)


@register("aten::sign.default")
def aten_sign(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """sign(Tensor self) -> Tensor: 0 for NaN as PyTorch (ONNX Sign gives NaN)."""
    if self.dtype == BOOL:
        return self
    if self.dtype not in FLOAT_TYPES:
        return ctx.op("Sign", self)
    return _float_formula(
        ctx, self, lambda x: ctx.op("Where", ctx.op("IsNaN", x), ctx.const(0, x.dtype), ctx.op("Sign", x))
    )


def _float_formula(ctx: NodeContext, self: ir.Value, formula: Any) -> ir.Value:
    """``formula(ctx, x)`` on the input cast to float32 (for float16/bfloat16) or the output dtype."""
    dtype = ctx.out_dtype
    return ctx.cast(formula(ctx.cast(self, opmath_dtype(dtype))), dtype)


@register("aten::rsqrt.default")
def aten_rsqrt(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """rsqrt(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Reciprocal", ctx.op("Sqrt", x)))


@register("aten::log1p.default")
def aten_log1p(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log1p(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Log", ctx.op("Add", x, ctx.const(1, x.dtype))))


@register("aten::expm1.default")
def aten_expm1(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """expm1(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Sub", ctx.op("Exp", x), ctx.const(1, x.dtype)))


@register("aten::log2.default")
def aten_log2(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log2(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Div", ctx.op("Log", x), ctx.const(math.log(2), x.dtype)))


@register("aten::log10.default")
def aten_log10(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log10(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Div", ctx.op("Log", x), ctx.const(math.log(10), x.dtype)))


@register("aten::exp2.default")
def aten_exp2(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """exp2(Tensor self) -> Tensor"""
    return _float_formula(ctx, self, lambda x: ctx.op("Pow", ctx.const(2, x.dtype), x))


@register("aten::atan2.default")
def aten_atan2(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """atan2(Tensor self, Tensor other) -> Tensor

    ``atan(self / other)``, plus or minus pi where ``other < 0``, and 0 where both are 0.
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    y, x = ctx.cast(self, c), ctx.cast(other, c)
    zero, pi = ctx.const(0, c), ctx.const(math.pi, c)
    angle = kernel_op(ctx, "Atan", ctx.op("Div", y, x), dtype=c)
    turn = ctx.op("Where", ctx.op("Less", y, zero), ctx.op("Neg", pi), pi)
    angle = ctx.op("Add", angle, ctx.op("Where", ctx.op("Less", x, zero), turn, zero))
    origin = ctx.op("And", ctx.op("Equal", x, zero), ctx.op("Equal", y, zero))
    return ctx.cast(ctx.op("Where", origin, zero, angle), dtype)


# -- rounding -----------------------------------------------------------------------------------------


def _rounding(ctx: NodeContext, self: ir.Value, op_type: str) -> ir.Value:
    if self.dtype not in FLOAT_TYPES:
        return self  # integers are already round
    return kernel_op(ctx, op_type, self, dtype=self.dtype)


@register("aten::floor.default")
def aten_floor(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """floor(Tensor self) -> Tensor"""
    return _rounding(ctx, self, "Floor")


@register("aten::ceil.default")
def aten_ceil(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """ceil(Tensor self) -> Tensor"""
    return _rounding(ctx, self, "Ceil")


@register("aten::round.default")
def aten_round(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """round(Tensor self) -> Tensor: ONNX Round rounds half to even, as PyTorch."""
    return _rounding(ctx, self, "Round")


@register("aten::round.decimals")
def aten_round_decimals(ctx: NodeContext, self: ir.Value, *, decimals: int = 0) -> ir.Value:
    """round.decimals(Tensor self, *, int decimals) -> Tensor: as PyTorch, ``round(x * 10^d) / 10^d``."""
    if self.dtype not in FLOAT_TYPES or decimals == 0:
        return _rounding(ctx, self, "Round")
    scale, (up, down) = 10.0 ** abs(decimals), (("Mul", "Div") if decimals > 0 else ("Div", "Mul"))

    def formula(x: ir.Value) -> ir.Value:
        ten = ctx.const(scale, x.dtype)
        return ctx.op(down, ctx.op("Round", ctx.op(up, x, ten)), ten)

    return _float_formula(ctx, self, formula)


@register("aten::trunc.default", "aten::fix.default")
def aten_trunc(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """trunc(Tensor self) -> Tensor"""
    if self.dtype not in FLOAT_TYPES:
        return self
    return _float_formula(ctx, self, lambda x: _trunc(ctx, x))


# -- clamping -----------------------------------------------------------------------------------------


def _is_scalar(x: Any) -> bool:
    return not isinstance(x, ir.Value) or (x.shape is not None and len(x.shape) == 0)


@register("aten::clamp.default", "aten::clamp.Tensor", "aten::clip.default", "aten::clip.Tensor")
def aten_clamp(ctx: NodeContext, self: ir.Value, min: Scalar = None, max: Scalar = None) -> ir.Value:
    """clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor

    ONNX Clip for scalar bounds, Max then Min for tensor bounds (which broadcast).
    """
    dtype = ctx.out_dtype
    if _is_scalar(min) and _is_scalar(max):
        return kernel_op(ctx, "Clip", self, min, max, dtype=dtype)
    out = self
    if min is not None:
        out = kernel_op(ctx, "Max", out, min, dtype=dtype)
    if max is not None:
        out = kernel_op(ctx, "Min", out, max, dtype=dtype)
    return ctx.cast(out, dtype)


@register("aten::clamp_min.default", "aten::clamp_min.Tensor")
def aten_clamp_min(ctx: NodeContext, self: ir.Value, min: Scalar) -> ir.Value:
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return kernel_op(ctx, "Max", self, min, dtype=ctx.out_dtype)


@register("aten::clamp_max.default", "aten::clamp_max.Tensor")
def aten_clamp_max(ctx: NodeContext, self: ir.Value, max: Scalar) -> ir.Value:
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return kernel_op(ctx, "Min", self, max, dtype=ctx.out_dtype)


@register("aten::maximum.default", "aten::max.other")
def aten_maximum(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """maximum(Tensor self, Tensor other) -> Tensor: ONNX Max propagates NaN, as PyTorch."""
    return kernel_op(ctx, "Max", self, other, dtype=ctx.out_dtype)


@register("aten::minimum.default", "aten::min.other")
def aten_minimum(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """minimum(Tensor self, Tensor other) -> Tensor"""
    return kernel_op(ctx, "Min", self, other, dtype=ctx.out_dtype)


# -- bitwise and logical ------------------------------------------------------------------------------


def _bitwise(ctx: NodeContext, bool_op: str, int_op: str, a: Scalar, b: Scalar) -> ir.Value:
    dtype = ctx.out_dtype
    op_type = bool_op if dtype == BOOL else int_op
    return ctx.op(op_type, ctx.operand(a, dtype), ctx.operand(b, dtype))


@register(
    "aten::bitwise_and.Tensor",
    "aten::bitwise_and.Scalar",
    "aten::bitwise_and.Scalar_Tensor",
    "aten::__and__.Tensor",
    "aten::__and__.Scalar",
)
def aten_bitwise_and(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor: And for bool, BitwiseAnd for integers."""
    return _bitwise(ctx, "And", "BitwiseAnd", self, other)


@register(
    "aten::bitwise_or.Tensor",
    "aten::bitwise_or.Scalar",
    "aten::bitwise_or.Scalar_Tensor",
    "aten::__or__.Tensor",
    "aten::__or__.Scalar",
)
def aten_bitwise_or(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor: Or for bool, BitwiseOr for integers."""
    return _bitwise(ctx, "Or", "BitwiseOr", self, other)


@register(
    "aten::bitwise_xor.Tensor",
    "aten::bitwise_xor.Scalar",
    "aten::bitwise_xor.Scalar_Tensor",
    "aten::__xor__.Tensor",
    "aten::__xor__.Scalar",
)
def aten_bitwise_xor(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor: Xor for bool, BitwiseXor for integers."""
    return _bitwise(ctx, "Xor", "BitwiseXor", self, other)


@register("aten::bitwise_not.default")
def aten_bitwise_not(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """bitwise_not(Tensor self) -> Tensor: Not for bool, BitwiseNot for integers."""
    return ctx.op("Not" if self.dtype == BOOL else "BitwiseNot", self)


def _logical(ctx: NodeContext, op_type: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return ctx.cast(ctx.op(op_type, ctx.cast(a, BOOL), ctx.cast(b, BOOL)), ctx.out_dtype)


@register("aten::logical_and.default")
def aten_logical_and(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """logical_and(Tensor self, Tensor other) -> Tensor"""
    return _logical(ctx, "And", self, other)


@register("aten::logical_or.default")
def aten_logical_or(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """logical_or(Tensor self, Tensor other) -> Tensor"""
    return _logical(ctx, "Or", self, other)


@register("aten::logical_xor.default")
def aten_logical_xor(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """logical_xor(Tensor self, Tensor other) -> Tensor"""
    return _logical(ctx, "Xor", self, other)


@register("aten::logical_not.default")
def aten_logical_not(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """logical_not(Tensor self) -> Tensor"""
    return ctx.cast(ctx.op("Not", ctx.cast(self, BOOL)), ctx.out_dtype)
