"""Element types and PyTorch's type promotion, shared by every converter family."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ...dtypes import onnx_dtype
from ...translation.context import NodeContext

INT64 = ir.DataType.INT64


BOOL = ir.DataType.BOOL


FLOAT = ir.DataType.FLOAT


def promoted_dtype(ctx: NodeContext, *indices: int) -> ir.DataType:
    """The dtype PyTorch promotes the node's arguments ``indices`` to (default: all positional args)."""
    if not indices:
        indices = tuple(range(len(ctx.node.args)))
    vals = [ctx.arg_val(i) for i in indices]
    vals = [v for v in vals if isinstance(v, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat))]
    _, result = elementwise_dtypes(*vals, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return onnx_dtype(result)


def binary(ctx: NodeContext, op_type: str, a: Any, b: Any, dtype: ir.DataType | None = None) -> ir.Value:
    """``op_type(a, b)`` with both operands cast to ``dtype`` (default: the node's output dtype)."""
    dtype = dtype or ctx.out_dtype
    return ctx.op(op_type, ctx.operand(a, dtype), ctx.operand(b, dtype))


def scalar_of(ctx: NodeContext, value: Any, like: ir.Value) -> ir.Value:
    """``value`` as a 0-D tensor of the element type of ``like``."""
    return ctx.operand(value, like.dtype)


def opmath_dtype(dtype: ir.DataType) -> ir.DataType:
    """The type PyTorch computes ``dtype`` in on CPU: FLOAT for float16 and bfloat16, else ``dtype``."""
    return FLOAT if dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16) else dtype


DOUBLE = ir.DataType.DOUBLE


Scalar = Any  # an ir.Value or a Python number


BF16 = ir.DataType.BFLOAT16


F16 = ir.DataType.FLOAT16


INT64_MAX = 9223372036854775807
