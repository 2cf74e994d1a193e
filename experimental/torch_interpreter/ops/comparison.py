"""Comparisons and floating-point classification; every result is BOOL.

Both operands are cast to the dtype PyTorch promotes them to before comparing (``int_tensor < 0.5``
compares in float).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import FLOAT, kernel_op, opmath_dtype, promoted_dtype

Scalar = Any  # an ir.Value or a Python number


def _compare(ctx: NodeContext, op_type: str, a: Scalar, b: Scalar) -> ir.Value:
    return kernel_op(ctx, op_type, a, b, dtype=promoted_dtype(ctx, 0, 1))


@register("aten::eq.Tensor", "aten::eq.Scalar")
def aten_eq(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(ctx, "Equal", self, other)


@register("aten::ne.Tensor", "aten::ne.Scalar")
def aten_ne(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor"""
    return ctx.op("Not", _compare(ctx, "Equal", self, other))


@register("aten::lt.Tensor", "aten::lt.Scalar")
def aten_lt(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """lt.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(ctx, "Less", self, other)


@register("aten::le.Tensor", "aten::le.Scalar")
def aten_le(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """le.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(ctx, "LessOrEqual", self, other)


@register("aten::gt.Tensor", "aten::gt.Scalar")
def aten_gt(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """gt.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(ctx, "Greater", self, other)


@register("aten::ge.Tensor", "aten::ge.Scalar")
def aten_ge(ctx: NodeContext, self: ir.Value, other: Scalar) -> ir.Value:
    """ge.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(ctx, "GreaterOrEqual", self, other)


def _all_false(ctx: NodeContext, x: ir.Value, value: bool = False) -> ir.Value:
    """``value`` everywhere, for integer and bool inputs, which hold neither NaN nor infinity."""
    return ctx.op("ConstantOfShape", ctx.op("Shape", x), value=ir.tensor([value]))


@register("aten::isnan.default")
def aten_isnan(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isnan(Tensor self) -> Tensor"""
    if self.dtype not in FLOAT_TYPES:
        return _all_false(ctx, self)
    return kernel_op(ctx, "IsNaN", self, dtype=self.dtype)


def _isinf(ctx: NodeContext, x: ir.Value, positive: int = 1, negative: int = 1) -> ir.Value:
    if x.dtype not in FLOAT_TYPES:
        return _all_false(ctx, x)
    return kernel_op(ctx, "IsInf", x, dtype=x.dtype, detect_positive=positive, detect_negative=negative)


@register("aten::isinf.default")
def aten_isinf(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isinf(Tensor self) -> Tensor"""
    return _isinf(ctx, self)


@register("aten::isposinf.default")
def aten_isposinf(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isposinf(Tensor self) -> Tensor"""
    return _isinf(ctx, self, negative=0)


@register("aten::isneginf.default")
def aten_isneginf(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isneginf(Tensor self) -> Tensor"""
    return _isinf(ctx, self, positive=0)


@register("aten::isfinite.default")
def aten_isfinite(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isfinite(Tensor self) -> Tensor: neither NaN nor infinite."""
    if self.dtype not in FLOAT_TYPES:
        return _all_false(ctx, self, True)
    return ctx.op("Not", ctx.op("Or", aten_isnan(ctx, self), _isinf(ctx, self)))


@register("aten::isreal.default")
def aten_isreal(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """isreal(Tensor self) -> Tensor: True everywhere for real tensors."""
    return _all_false(ctx, self, True)


@register("aten::isclose.default")
def aten_isclose(
    ctx: NodeContext, self: ir.Value, other: ir.Value, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> ir.Value:
    """isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor

    As PyTorch: equal, or both NaN with ``equal_nan``, or ``|a - b| <= atol + rtol * |b|`` with a finite error.
    """
    dtype = promoted_dtype(ctx, 0, 1)
    close = _compare(ctx, "Equal", self, other)
    if dtype not in FLOAT_TYPES and rtol == 0 and atol == 0:
        return close
    c = opmath_dtype(dtype) if dtype in FLOAT_TYPES else FLOAT
    a, b = ctx.cast(self, c), ctx.cast(other, c)
    if equal_nan and dtype in FLOAT_TYPES:
        close = ctx.op("Or", close, ctx.op("And", ctx.op("IsNaN", a), ctx.op("IsNaN", b)))
    if rtol == 0 and atol == 0:
        return close
    allowed = ctx.op("Add", ctx.const(float(atol), c), ctx.op("Abs", ctx.op("Mul", ctx.const(float(rtol), c), b)))
    error = ctx.op("Abs", ctx.op("Sub", a, b))
    finite = ctx.op("Not", ctx.op("Or", ctx.op("IsNaN", error), kernel_op(ctx, "IsInf", error, dtype=c)))
    return ctx.op("Or", close, ctx.op("And", finite, ctx.op("LessOrEqual", error, allowed)))
