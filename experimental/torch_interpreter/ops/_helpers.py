"""Helpers shared by the converters: type promotion as PyTorch does it, axes, scalars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..context import NodeContext
from ..dtypes import onnx_dtype

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


def axes(ctx: NodeContext, dims: int | Sequence[int] | None, rank: int) -> ir.Value | None:
    """Normalized (non-negative) axes as a 1-D INT64 constant, or None for "all axes"."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return None
    return ctx.const([d % rank if rank else 0 for d in dims], INT64)


def normalize_dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def scalar_of(ctx: NodeContext, value: Any, like: ir.Value) -> ir.Value:
    """``value`` as a 0-D tensor of the element type of ``like``."""
    return ctx.operand(value, like.dtype)
