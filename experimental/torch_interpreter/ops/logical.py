"""Bitwise and logical ops: bitwise_and/or/xor/not (``&``, ``|``, ``^``, ``~``) and logical_and/or/xor/not.

Bitwise ops on bool tensors are the logical ONNX ops; on integers the ONNX ``Bitwise*`` ops, in the
dtype PyTorch promotes the operands to. Logical ops return BOOL whatever their input types.
"""

from __future__ import annotations

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, Scalar


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
