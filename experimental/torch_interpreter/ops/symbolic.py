"""Dynamic sizes: ``sym_size`` and the Python arithmetic on SymInts that torch.export records.

A dynamic size is a 0-D INT64 value; a static one stays a Python int.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, INT64, normalize_dim, numel


@register("aten::sym_size.int")
def aten_sym_size_int(ctx: NodeContext, self: ir.Value, dim: int) -> Any:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    if isinstance(ctx.val, int):
        return ctx.val
    dim = normalize_dim(dim, ctx.rank(self))
    shape = ctx.op("Shape", self, start=dim, end=dim + 1)
    return ctx.op("Squeeze", shape, ctx.const([0], INT64))


@register("aten::sym_numel.default")
def aten_sym_numel(ctx: NodeContext, self: ir.Value) -> Any:
    return ctx.val if isinstance(ctx.val, int) else numel(ctx, self)


@register("aten::sym_stride.int")
def aten_sym_stride_int(ctx: NodeContext, self: ir.Value, dim: int) -> Any:
    """sym_stride.int(Tensor self, int dim) -> SymInt: the product of the sizes after ``dim``, the stride of a
    contiguous tensor (every tensor of an ONNX graph is); a tensor PyTorch traced with other strides is refused."""
    if isinstance(ctx.val, int):
        return ctx.val
    val = ctx.arg_val(0)
    try:
        contiguous = bool(val.is_contiguous())
    except Exception:  # noqa: BLE001  (a condition on dynamic sizes torch cannot decide)
        contiguous = False
    if not contiguous:
        raise NotImplementedError("sym_stride of a tensor that is not contiguous in the traced graph")
    dim = normalize_dim(dim, ctx.rank(self))
    if dim == ctx.rank(self) - 1:
        return 1
    return ctx.op("ReduceProd", ctx.op("Shape", self, start=dim + 1), keepdims=0)


@register("aten::sym_storage_offset.default")
def aten_sym_storage_offset(ctx: NodeContext, self: ir.Value) -> int:
    return 0


@register("operator::getitem")
def operator_getitem(ctx: NodeContext, seq: Any, index: int) -> Any:
    """Picks one output of a multi-output node."""
    return seq[index]


def _int_binary(ctx: NodeContext, op_type: str, a: Any, b: Any, py: Any) -> Any:
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return py(a, b)
    dtype = ctx.out_dtype if op_type not in _COMPARE else _operand_dtype(a, b)
    return ctx.op(op_type, ctx.operand(a, dtype), ctx.operand(b, dtype))


def _operand_dtype(a: Any, b: Any) -> ir.DataType:
    for x in (a, b):
        if isinstance(x, ir.Value):
            return x.dtype
    return INT64


_COMPARE = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}


_BINARY = {
    "add": ("Add", operator.add),
    "sub": ("Sub", operator.sub),
    "mul": ("Mul", operator.mul),
    "eq": ("Equal", operator.eq),
    "lt": ("Less", operator.lt),
    "le": ("LessOrEqual", operator.le),
    "gt": ("Greater", operator.gt),
    "ge": ("GreaterOrEqual", operator.ge),
    "truediv": ("Div", operator.truediv),
    "and_": ("And", operator.and_),
    "or_": ("Or", operator.or_),
}


def _make(op_type: str, py: Any):
    def converter(ctx: NodeContext, a: Any, b: Any) -> Any:
        return _int_binary(ctx, op_type, a, b, py)

    converter.__name__ = converter.__qualname__ = f"operator_{py.__name__}"
    return converter


for _name, (_op, _py) in _BINARY.items():
    register(f"operator::{_name}")(_make(_op, _py))


@register("operator::floordiv")
def operator_floordiv(ctx: NodeContext, a: Any, b: Any) -> Any:
    """Python's floor division: ``(a - a mod b) / b`` is exact in integers."""
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return a // b
    a, b = ctx.operand(a, INT64), ctx.operand(b, INT64)
    return ctx.op("Div", ctx.op("Sub", a, ctx.op("Mod", a, b)), b)


@register("operator::mod")
def operator_mod(ctx: NodeContext, a: Any, b: Any) -> Any:
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return a % b
    return ctx.op("Mod", ctx.operand(a, INT64), ctx.operand(b, INT64))


@register("operator::ne")
def operator_ne(ctx: NodeContext, a: Any, b: Any) -> Any:
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return a != b
    return ctx.op("Not", _int_binary(ctx, "Equal", a, b, operator.eq))


@register("torch::sym_sum")
def torch_sym_sum(ctx: NodeContext, args: Any) -> Any:
    """sym_sum(list of SymInts): their sum (an int when all are static)."""
    total: Any = 0
    for a in args:
        total = _int_binary(ctx, "Add", total, a, operator.add)
    return total


@register("operator::neg")
def operator_neg(ctx: NodeContext, a: Any) -> Any:
    return -a if not isinstance(a, ir.Value) else ctx.op("Neg", a)


@register("operator::not_", "torch::sym_not")
def torch_sym_not(ctx: NodeContext, a: Any) -> Any:
    return (not a) if not isinstance(a, ir.Value) else ctx.op("Not", ctx.cast(a, BOOL))


@register("torch::sym_max", "builtins::max")
def torch_sym_max(ctx: NodeContext, a: Any, b: Any) -> Any:
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return max(a, b)
    dtype = ctx.out_dtype
    return ctx.op("Max", ctx.operand(a, dtype), ctx.operand(b, dtype))


@register("torch::sym_min", "builtins::min")
def torch_sym_min(ctx: NodeContext, a: Any, b: Any) -> Any:
    if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
        return min(a, b)
    dtype = ctx.out_dtype
    return ctx.op("Min", ctx.operand(a, dtype), ctx.operand(b, dtype))


@register("torch::sym_float")
def torch_sym_float(ctx: NodeContext, a: Any) -> Any:
    return float(a) if not isinstance(a, ir.Value) else ctx.cast(a, ctx.out_dtype)


@register("torch::sym_int", "math::floor", "math::ceil", "math::trunc")
def torch_sym_int(ctx: NodeContext, a: Any) -> Any:
    """Float SymNode to int: floor, ceil or trunc by the target's name."""
    name = getattr(ctx.node.target, "__name__", "sym_int")
    if not isinstance(a, ir.Value):
        return {"floor": math.floor, "ceil": math.ceil}.get(name, int)(a)
    if a.dtype == INT64:
        return a
    rounded = {"floor": "Floor", "ceil": "Ceil"}.get(name)
    if rounded:
        a = ctx.op(rounded, a)
    return ctx.cast(a, INT64)


@register("torch::sym_ite")
def torch_sym_ite(ctx: NodeContext, b: Any, t: Any, f: Any) -> Any:
    """``t if b else f`` on symbolic values: a Python choice when ``b`` is known, else ``Where``."""
    if not isinstance(b, ir.Value):
        return t if b else f
    dtype = ctx.out_dtype
    return ctx.op("Where", ctx.cast(b, ir.DataType.BOOL), ctx.operand(t, dtype), ctx.operand(f, dtype))
