"""Pointwise arithmetic and math: add/sub/mul/div/pow/remainder, lerp, addcmul, clamp, maximum/minimum,
abs/sign, rounding, exp/log/trig and the other one-input functions.

Operands are cast to the node's output dtype, which is PyTorch's type promotion. An op onnxruntime
lacks for a type runs in a wider one (``kernel_op``); formulas of several nodes run in float32 for
float16 and bfloat16, as PyTorch does on CPU. Bitwise and logical ops are in ``logical.py``, special
functions (erfc, xlogy, ndtr, ...) in ``special.py``.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BOOL,
    Scalar,
    binary_formula,
    float_formula,
    kernel_dtype,
    kernel_op,
    opmath_dtype,
    where_typed,
)


def _scaled(ctx: NodeContext, x: Scalar, alpha: Scalar, dtype: ir.DataType) -> Scalar:
    """``alpha * x``."""
    if isinstance(alpha, (int, float)) and alpha == 1:
        return x
    if not isinstance(x, ir.Value) and not isinstance(alpha, ir.Value):
        return x * alpha
    return kernel_op(ctx, "Mul", x, alpha, dtype=dtype)


@register("aten::add.Tensor", "aten::add.Scalar")
def aten_add(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

    Booleans add as a logical or.
    """
    dtype = ctx.out_dtype
    if dtype == BOOL:
        if isinstance(alpha, (bool, int, float)) and not alpha:
            return ctx.cast(self, BOOL)
        return ctx.op("Or", ctx.cast(self, BOOL), ctx.operand(other, BOOL))
    return kernel_op(ctx, "Add", self, _scaled(ctx, other, alpha, dtype), dtype=dtype)


@register("aten::sub.Tensor", "aten::sub.Scalar", "aten::subtract.Tensor", "aten::subtract.Scalar")
def aten_sub(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = ctx.out_dtype
    return kernel_op(ctx, "Sub", self, _scaled(ctx, other, alpha, dtype), dtype=dtype)


@register("aten::rsub.Scalar", "aten::rsub.Tensor")
def aten_rsub(ctx: NodeContext, self: ir.Value, other: Scalar, alpha: Scalar = 1) -> ir.Value:
    """rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor: ``other - alpha * self``."""
    dtype = ctx.out_dtype
    return kernel_op(ctx, "Sub", other, _scaled(ctx, self, alpha, dtype), dtype=dtype)


@register("aten::mul.Tensor", "aten::mul.Scalar", "aten::multiply.Tensor", "aten::multiply.Scalar")
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
    """Python's floor division, computed the way PyTorch does (``div = (a - fmod(a, b)) / b``, minus 1 where the
    signs differ, then floored and rounded up where ``div - floor(div) > 0.5``), which is exact where
    ``floor(a / b)`` is not (``1.0 // 0.1 == 9``); ``Round`` instead of the last step would round a ``div`` of
    ``k + 0.5`` to even, as happens from quotients of 2**22 on in float32."""
    if dtype not in FLOAT_TYPES:
        mod = kernel_op(ctx, "Mod", a, b, dtype=dtype)  # fmod=0: the sign of the divisor, exact
        return kernel_op(ctx, "Div", kernel_op(ctx, "Sub", a, mod, dtype=dtype), b, dtype=dtype)
    c = opmath_dtype(dtype)

    def step(x: ir.Value) -> ir.Value:
        """PyTorch's CPU kernel rounds each step of a float16 or bfloat16 division to that type."""
        return x if c == dtype else ctx.cast(ctx.cast(x, dtype), c)

    nonzero_b = not isinstance(b, ir.Value) and b != 0
    a, b = ctx.operand(a, c), ctx.operand(b, c)
    mod = ctx.op("Mod", a, b, fmod=1)
    div = step(ctx.op("Div", step(ctx.op("Sub", a, mod)), b))
    div = step(ctx.op("Sub", div, ctx.op("Cast", _sign_fix(ctx, mod, b), to=c)))
    floor = ctx.op("Floor", div)
    up = ctx.op("Greater", step(ctx.op("Sub", div, floor)), ctx.const(0.5, c))
    q = step(ctx.op("Add", floor, ctx.op("Cast", up, to=c)))
    # a zero quotient takes the sign of a / b in PyTorch (copysign(0, a / b)): 0 * (a / b) has that sign.
    # It goes in Where's second branch: onnxruntime's Where turns a -0 of its first branch into +0 (and its
    # optimizer swaps the branches of a Where on a Not, hence |div| > 0 rather than Not(div == 0)).
    quotient = step(ctx.op("Div", a, b))
    zero = ctx.const(0, c)
    q = ctx.op("Where", ctx.op("Greater", ctx.op("Abs", div), zero), q, ctx.op("Mul", quotient, zero))
    if not nonzero_b:
        q = ctx.op("Where", ctx.op("Equal", b, zero), quotient, q)
    return ctx.cast(q, dtype)


@register(
    "aten::div.Tensor",
    "aten::div.Scalar",
    "aten::div.Tensor_mode",
    "aten::div.Scalar_mode",
    "aten::divide.Tensor",
    "aten::divide.Scalar",
    "aten::divide.Tensor_mode",
    "aten::divide.Scalar_mode",
    "aten::true_divide.Tensor",
    "aten::true_divide.Scalar",
)
def aten_div(ctx: NodeContext, self: ir.Value, other: Scalar, *, rounding_mode: str | None = None) -> ir.Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor

    Integers give floats without a rounding mode; ONNX Div of integers truncates.
    """
    dtype = ctx.out_dtype
    if rounding_mode is None or (rounding_mode == "trunc" and dtype not in FLOAT_TYPES):
        return kernel_op(ctx, "Div", self, other, dtype=dtype)
    if rounding_mode == "trunc":
        c = opmath_dtype(dtype)
        quotient = ctx.op("Div", ctx.operand(self, c), ctx.operand(other, c))
        if dtype == ir.DataType.BFLOAT16:  # PyTorch rounds the quotient to bfloat16 before truncating it
            quotient = ctx.cast(ctx.cast(quotient, dtype), c)
        return ctx.cast(_trunc(ctx, quotient), dtype)
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
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor (float_power: the same in double)

    Integer powers with a negative exponent are 0, except for the bases 1 and -1, as in PyTorch. A float tensor
    to the power 1, 0.5 or -1 (and 3 in bfloat16) is computed as PyTorch's CPU kernel computes it (a copy,
    ``sqrt``, ``1 / x``, ``x * x * x``), faster than onnxruntime's ``Pow`` and with PyTorch's bits where ``Pow``
    differed (55 of 100,000 reciprocals; ``sqrt`` differs from PyTorch's in the last bit as ``Pow`` did, slightly
    less often).
    """
    dtype = ctx.out_dtype
    special = _power_by_products(ctx, self, exponent, dtype)
    if special is not None:
        return special
    out = kernel_op(ctx, "Pow", self, exponent, dtype=dtype)
    if dtype in FLOAT_TYPES or dtype == BOOL or (not isinstance(exponent, ir.Value) and exponent >= 0):
        return out
    k = kernel_dtype("Less", dtype)
    base, exp = ctx.operand(self, k), ctx.operand(exponent, k)
    one, zero = ctx.const(1, k), ctx.const(0, k)
    odd = ctx.op("Not", ctx.op("Equal", ctx.op("Mod", exp, ctx.const(2, k)), zero))
    minus_one = ctx.op("Where", odd, ctx.op("Neg", one), one)
    small = ctx.op("Where", ctx.op("Equal", base, one), one,
                   ctx.op("Where", ctx.op("Equal", base, ctx.op("Neg", one)), minus_one, zero))
    return ctx.cast(ctx.op("Where", ctx.op("Less", exp, zero), small, ctx.cast(out, k)), dtype)


def _power_by_products(ctx: NodeContext, self: Scalar, exponent: Scalar, dtype: ir.DataType) -> ir.Value | None:
    """``self ** exponent`` for a float tensor where onnxruntime's ``Pow`` is not PyTorch's: 1 (a copy), 0.5
    (``sqrt``), -1 (``1 / x``), and 3 in bfloat16 (PyTorch rounds the square to bfloat16 first); else None. The
    exponents 2 and 3 stay ``Pow``, which gives PyTorch's ``x * x`` and ``x * x * x`` bits and is the form the
    onnxruntime fusions match (RMSNorm, GELU)."""
    if (
        not isinstance(self, ir.Value)
        or isinstance(exponent, (ir.Value, bool))
        or not isinstance(exponent, (int, float))
        or dtype not in FLOAT_TYPES
        or self.dtype != dtype
    ):
        return None
    e = float(exponent)
    if e == 1.0:
        return ctx.op("Identity", self)
    x = ctx.cast(self, opmath_dtype(dtype))
    if e == 0.5:
        y = kernel_op(ctx, "Sqrt", x, dtype=x.dtype)
    elif e == -1.0:
        y = kernel_op(ctx, "Reciprocal", x, dtype=x.dtype)
    elif e == 3.0 and dtype == ir.DataType.BFLOAT16:
        square = ctx.cast(ctx.cast(kernel_op(ctx, "Mul", x, x, dtype=x.dtype), dtype), x.dtype)
        y = kernel_op(ctx, "Mul", square, x, dtype=x.dtype)
    else:
        return None
    return ctx.cast(y, dtype)


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
    "acosh": "Acosh",
    "asinh": "Asinh",
    "atanh": "Atanh",
}


def _make_unary(name: str, op_type: str):
    def converter(ctx: NodeContext, self: ir.Value) -> ir.Value:
        return kernel_op(ctx, op_type, self, dtype=ctx.out_dtype)

    converter.__name__ = converter.__qualname__ = f"aten_{name}_default"
    converter.__doc__ = f"{name}(Tensor self) -> Tensor: ONNX {op_type}."
    return converter


for _name, _op in _UNARY.items():
    register(f"aten::{_name}.default")(_make_unary(_name, _op))


@register("aten::abs.default", "aten::absolute.default")
def aten_abs(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor"""
    return kernel_op(ctx, "Abs", self, dtype=ctx.out_dtype)


@register("aten::sign.default", "aten::sgn.default")
def aten_sign(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """sign(Tensor self) -> Tensor: 0 for NaN as PyTorch (ONNX Sign gives NaN); sgn is sign for real inputs."""
    if self.dtype == BOOL:
        return self
    if self.dtype not in FLOAT_TYPES:
        return ctx.op("Sign", self)
    if not ctx.needs_guard("sign_of_nan_is_nan"):  # a model for CUDA: its Sign gives PyTorch's 0 for NaN
        return float_formula(ctx, self, lambda x: ctx.op("Sign", x))
    return float_formula(
        ctx, self, lambda x: ctx.op("Where", ctx.op("IsNaN", x), ctx.const(0, x.dtype), ctx.op("Sign", x))
    )


@register("aten::rsqrt.default")
def aten_rsqrt(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """rsqrt(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Reciprocal", ctx.op("Sqrt", x)))


@register("aten::log1p.default")
def aten_log1p(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log1p(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Log", ctx.op("Add", x, ctx.const(1, x.dtype))))


@register("aten::expm1.default")
def aten_expm1(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """expm1(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Sub", ctx.op("Exp", x), ctx.const(1, x.dtype)))


@register("aten::log2.default")
def aten_log2(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log2(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Div", ctx.op("Log", x), ctx.const(math.log(2), x.dtype)))


@register("aten::log10.default")
def aten_log10(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """log10(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Div", ctx.op("Log", x), ctx.const(math.log(10), x.dtype)))


@register("aten::exp2.default")
def aten_exp2(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """exp2(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Pow", ctx.const(2, x.dtype), x))


@register("aten::atan2.default")
def aten_atan2(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """atan2(Tensor self, Tensor other) -> Tensor

    ``atan(self / other)``, plus or minus pi where ``other``'s sign bit is set; signed zeros and infinities
    as C's atan2: ``atan2(1, -0.0) = pi/2``, ``atan2(-0.0, -1) = -pi``, ``atan2(inf, inf) = pi/4``.
    """
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    y, x = ctx.cast(self, c), ctx.cast(other, c)
    zero, pi = ctx.const(0, c), ctx.const(math.pi, c)
    y_neg, x_neg = _signbit(ctx, y), _signbit(ctx, x)
    turn = ctx.op("Where", y_neg, ctx.op("Neg", pi), pi)
    angle = kernel_op(ctx, "Atan", ctx.op("Div", y, x), dtype=c)
    angle = ctx.op("Add", angle, ctx.op("Where", x_neg, turn, zero))
    # both zero: +-0 or +-pi; both infinite: +-pi/4 or +-3pi/4
    origin = ctx.op("And", ctx.op("Equal", x, zero), ctx.op("Equal", y, zero))
    angle = ctx.op("Where", origin, ctx.op("Where", x_neg, turn, y), angle)
    corners = ctx.op("And", ctx.op("IsInf", x), ctx.op("IsInf", y))
    quarter = ctx.op("Mul", turn, ctx.op("Where", x_neg, ctx.const(0.75, c), ctx.const(0.25, c)))
    return ctx.cast(ctx.op("Where", corners, quarter, angle), dtype)


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

    return float_formula(ctx, self, formula)


@register("aten::trunc.default", "aten::fix.default")
def aten_trunc(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """trunc(Tensor self) -> Tensor"""
    if self.dtype not in FLOAT_TYPES:
        return self
    return float_formula(ctx, self, lambda x: _trunc(ctx, x))


def _is_scalar(x: Any) -> bool:
    return not isinstance(x, ir.Value) or (x.shape is not None and len(x.shape) == 0)


@register("aten::clamp.default", "aten::clamp.Tensor", "aten::clip.default", "aten::clip.Tensor")
def aten_clamp(ctx: NodeContext, self: ir.Value, min: Scalar = None, max: Scalar = None) -> ir.Value:
    """clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor

    ONNX Clip for scalar bounds of a float tensor, else Max then Min (tensor bounds broadcast). A missing
    bound is an infinite one: Clip's default is the largest finite value, which would clip ``inf``.
    """
    dtype = ctx.out_dtype
    if _is_scalar(min) and _is_scalar(max) and dtype in FLOAT_TYPES:
        # not for integers: onnxruntime's optimizer fuses Relu+Clip wrongly on integer tensors
        low = -math.inf if min is None else min
        high = math.inf if max is None else max
        return kernel_op(ctx, "Clip", self, low, high, dtype=dtype)
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


@register("aten::deg2rad.default")
def aten_deg2rad(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """deg2rad(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Mul", x, ctx.const(math.pi / 180, x.dtype)))


@register("aten::rad2deg.default")
def aten_rad2deg(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """rad2deg(Tensor self) -> Tensor"""
    return float_formula(ctx, self, lambda x: ctx.op("Mul", x, ctx.const(180 / math.pi, x.dtype)))


@register("aten::frac.default")
def aten_frac(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """frac(Tensor self) -> Tensor: ``x - trunc(x)``."""
    return float_formula(ctx, self, lambda x: ctx.op("Sub", x, _trunc(ctx, x)))


@register("aten::ldexp.Tensor")
def aten_ldexp(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """ldexp.Tensor(Tensor self, Tensor other) -> Tensor: ``self * 2^other``."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    scale = ctx.op("Pow", ctx.const(2, c), ctx.cast(other, c))
    return ctx.cast(ctx.op("Mul", ctx.cast(self, c), scale), dtype)


@register("aten::logaddexp.default")
def aten_logaddexp(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """logaddexp(Tensor self, Tensor other) -> Tensor: ``max + log1p(exp(-|a - b|))``, ``a`` where a == b = +-inf."""

    def formula(a: ir.Value, b: ir.Value) -> ir.Value:
        big = ctx.op("Max", a, b)
        tail = ctx.op("Exp", ctx.op("Neg", ctx.op("Abs", ctx.op("Sub", a, b))))
        out = ctx.op("Add", big, ctx.op("Log", ctx.op("Add", tail, ctx.const(1, a.dtype))))
        same_inf = ctx.op("And", kernel_op(ctx, "IsInf", a, dtype=a.dtype), ctx.op("Equal", a, b))
        return ctx.op("Where", same_inf, a, out)

    return binary_formula(ctx, self, other, formula)


@register("aten::logaddexp2.default")
def aten_logaddexp2(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """logaddexp2(Tensor self, Tensor other) -> Tensor: ``max + log2(1 + 2^-|a - b|)``."""

    def formula(a: ir.Value, b: ir.Value) -> ir.Value:
        big = ctx.op("Max", a, b)
        tail = ctx.op("Pow", ctx.const(2, a.dtype), ctx.op("Neg", ctx.op("Abs", ctx.op("Sub", a, b))))
        log2 = ctx.op("Div", ctx.op("Log", ctx.op("Add", tail, ctx.const(1, a.dtype))), ctx.const(math.log(2), a.dtype))
        same_inf = ctx.op("And", kernel_op(ctx, "IsInf", a, dtype=a.dtype), ctx.op("Equal", a, b))
        return ctx.op("Where", same_inf, a, ctx.op("Add", big, log2))

    return binary_formula(ctx, self, other, formula)


@register("aten::hypot.default")
def aten_hypot(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """hypot(Tensor self, Tensor other) -> Tensor: ``sqrt(a^2 + b^2)``."""
    return binary_formula(
        ctx, self, other, lambda a, b: ctx.op("Sqrt", ctx.op("Add", ctx.op("Mul", a, a), ctx.op("Mul", b, b)))
    )


@register("aten::heaviside.default")
def aten_heaviside(ctx: NodeContext, self: ir.Value, values: ir.Value) -> ir.Value:
    """heaviside(Tensor self, Tensor values) -> Tensor: ``values`` where 0, else ``self > 0`` (0 for NaN)."""
    dtype = ctx.out_dtype
    x = ctx.cast(self, dtype)
    zero = ctx.const(0, kernel_dtype_of(x.dtype))
    xk = ctx.cast(x, zero.dtype)
    positive = ctx.cast(ctx.op("Greater", xk, zero), dtype)
    return where_typed(ctx, ctx.op("Equal", xk, zero), ctx.cast(values, dtype), positive)


def kernel_dtype_of(dtype: ir.DataType) -> ir.DataType:
    """A type the comparisons of onnxruntime take, holding every value of ``dtype`` exactly."""
    return kernel_dtype("Less", dtype)


def _signbit(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """True where the sign bit of ``x`` is set: negative numbers and -0.0 (``1 / -0.0 == -inf``)."""
    if x.dtype not in FLOAT_TYPES:
        return ctx.op("Less", ctx.cast(x, kernel_dtype_of(x.dtype)), ctx.const(0, kernel_dtype_of(x.dtype)))
    x = ctx.cast(x, opmath_dtype(x.dtype))
    zero = ctx.const(0, x.dtype)
    negative_zero = ctx.op("And", ctx.op("Equal", x, zero), ctx.op("Less", ctx.op("Reciprocal", x), zero))
    return ctx.op("Or", ctx.op("Less", x, zero), negative_zero)


@register("aten::signbit.default")
def aten_signbit(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """signbit(Tensor self) -> Tensor"""
    if self.dtype == BOOL:
        return ctx.op("Not", ctx.op("Or", self, ctx.op("Not", self)))
    return _signbit(ctx, self)


@register("aten::copysign.Tensor", "aten::copysign.Scalar")
def aten_copysign(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor: ``|self|`` with the sign bit of ``other``."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    magnitude = ctx.op("Abs", ctx.operand(self, c))
    negative = _signbit(ctx, ctx.operand(other, c))
    return ctx.cast(ctx.op("Where", negative, ctx.op("Neg", magnitude), magnitude), dtype)


def _fminmax(ctx: NodeContext, op_type: str, a: ir.Value, b: ir.Value) -> ir.Value:
    dtype = ctx.out_dtype
    out = kernel_op(ctx, op_type, a, b, dtype=dtype)
    if dtype not in FLOAT_TYPES:
        return out
    c = opmath_dtype(dtype)
    a, b, out = ctx.operand(a, c), ctx.operand(b, c), ctx.cast(out, c)
    out = ctx.op("Where", ctx.op("IsNaN", a), b, ctx.op("Where", ctx.op("IsNaN", b), a, out))
    return ctx.cast(out, dtype)


@register("aten::fmax.default")
def aten_fmax(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """fmax(Tensor self, Tensor other) -> Tensor: the maximum ignoring NaN."""
    return _fminmax(ctx, "Max", self, other)


@register("aten::fmin.default")
def aten_fmin(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """fmin(Tensor self, Tensor other) -> Tensor: the minimum ignoring NaN."""
    return _fminmax(ctx, "Min", self, other)


@register("aten::nan_to_num.default")
def aten_nan_to_num(
    ctx: NodeContext, self: ir.Value, nan: float | None = None, posinf: float | None = None, neginf: float | None = None
) -> ir.Value:
    """nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor

    The defaults of ``posinf`` and ``neginf`` are the largest and lowest finite values of the dtype.
    """
    dtype = ctx.out_dtype
    if dtype not in FLOAT_TYPES:
        return self
    info = {
        ir.DataType.FLOAT: np.finfo(np.float32),
        ir.DataType.DOUBLE: np.finfo(np.float64),
        ir.DataType.FLOAT16: np.finfo(np.float16),
        ir.DataType.BFLOAT16: ml_dtypes.finfo(ml_dtypes.bfloat16),
    }[dtype]
    c = opmath_dtype(dtype)
    x = ctx.cast(self, c)
    high = float(info.max) if posinf is None else posinf
    low = float(info.min) if neginf is None else neginf
    x = ctx.op("Where", ctx.op("IsNaN", x), ctx.const(0.0 if nan is None else nan, c), x)
    x = ctx.op("Where", kernel_op(ctx, "IsInf", x, dtype=c, detect_negative=0), ctx.const(high, c), x)
    x = ctx.op("Where", kernel_op(ctx, "IsInf", x, dtype=c, detect_positive=0), ctx.const(low, c), x)
    return ctx.cast(x, dtype)


@register("aten::angle.default")
def aten_angle(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """angle(Tensor self) -> Tensor: pi for negative real numbers, 0 otherwise, NaN for NaN."""

    def formula(x: ir.Value) -> ir.Value:
        zero = ctx.const(0, x.dtype)
        out = ctx.op("Where", ctx.op("Less", x, zero), ctx.const(math.pi, x.dtype), zero)
        return ctx.op("Where", ctx.op("IsNaN", x), x, out)

    return float_formula(ctx, self, formula)
