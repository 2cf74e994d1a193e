"""Helpers shared by the converters: type promotion as PyTorch does it, axes, scalars."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..context import NodeContext
from ..dtypes import FLOAT_TYPES, onnx_dtype

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


# Element types onnxruntime's CPU kernels take, for the op types that miss some (onnxruntime computes
# float16 in float32 by itself where a kernel lacks it); op types not listed take every type.
_F = frozenset({ir.DataType.FLOAT16, FLOAT, ir.DataType.DOUBLE})
_I = frozenset({ir.DataType.INT32, INT64})
_I8 = frozenset({ir.DataType.INT8, ir.DataType.UINT8})
_KERNEL_DTYPES: dict[str, frozenset] = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Mod", "Abs"), _F | _I | _I8 | {ir.DataType.INT16}),
    **dict.fromkeys(("Less", "LessOrEqual", "Greater", "GreaterOrEqual"), _F | _I | _I8 | {ir.DataType.INT16}),
    "Equal": _F | _I | _I8 | {ir.DataType.INT16, BOOL},
    "Neg": _F | _I | {ir.DataType.INT8, ir.DataType.INT16},
    **dict.fromkeys(("Max", "Min", "Clip", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin"), _F | _I | _I8),
    **dict.fromkeys(("Pow", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "CumSum"), _F | _I),
    **dict.fromkeys(("Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tanh", "Floor", "Ceil", "Round"), _F),
    **dict.fromkeys(("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Erf"), frozenset({ir.DataType.FLOAT16, FLOAT})),
    "IsNaN": _F,
    "IsInf": frozenset({FLOAT, ir.DataType.DOUBLE}),
}


def kernel_dtype(op_type: str, dtype: ir.DataType) -> ir.DataType:
    """The element type onnxruntime CPU computes ``op_type`` in for inputs of type ``dtype``: ``dtype``
    itself, else FLOAT for a floating type (bfloat16, double for Tan/Erf...), INT32 or INT64 for others.

    >>> kernel_dtype("Sin", ir.DataType.BFLOAT16).name, kernel_dtype("Max", ir.DataType.BOOL).name
    ('FLOAT', 'INT32')
    """
    supported = _KERNEL_DTYPES.get(op_type)
    if supported is None or dtype in supported:
        return dtype
    if dtype in FLOAT_TYPES:
        return FLOAT
    return ir.DataType.INT32 if ir.DataType.INT32 in supported else INT64


def kernel_op(ctx: NodeContext, op_type: str, *inputs: Any, dtype: ir.DataType, **attrs: Any) -> ir.Value:
    """``op_type`` on inputs of element type ``dtype`` (values or Python scalars; the axes of ``Reduce*``
    and ``CumSum`` are left as they are), computed in :func:`kernel_dtype` and cast back to ``dtype``."""
    compute = kernel_dtype(op_type, dtype)
    n = 1 if op_type.startswith("Reduce") or op_type == "CumSum" else len(inputs)
    typed = [x if i >= n or x is None else ctx.operand(x, compute) for i, x in enumerate(inputs)]
    out = ctx.op(op_type, *typed, **attrs)
    if compute != dtype and out.dtype == compute and op_type not in ("ArgMax", "ArgMin"):
        out = ctx.cast(out, dtype)
    return out


def opmath_dtype(dtype: ir.DataType) -> ir.DataType:
    """The type PyTorch computes ``dtype`` in on CPU: FLOAT for float16 and bfloat16, else ``dtype``."""
    return FLOAT if dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16) else dtype


#: a lossless wider element type, for the onnxruntime CPU kernels that lack some types
_WIDER = {
    ir.DataType.BFLOAT16: FLOAT,
    ir.DataType.FLOAT16: FLOAT,
    BOOL: ir.DataType.UINT8,
    ir.DataType.INT8: ir.DataType.INT32,
    ir.DataType.UINT8: ir.DataType.INT32,
    ir.DataType.INT16: ir.DataType.INT32,
    ir.DataType.UINT16: ir.DataType.INT32,
}


def widen(ctx: NodeContext, x: ir.Value, unsupported: Sequence[ir.DataType]) -> ir.Value:
    """``x`` cast to a lossless wider type when its type is in ``unsupported`` (cast the result back)."""
    return ctx.cast(x, _WIDER[x.dtype]) if x.dtype in unsupported and x.dtype in _WIDER else x


# activation, convolution, pooling and normalization kernels (onnxruntime has no DOUBLE Conv, no FLOAT16 Celu...)
_KERNEL_DTYPES.update(
    {
        "Relu": _F | _I | {ir.DataType.INT8},
        "PRelu": _F | _I,
        **dict.fromkeys(
            ("Sigmoid", "Softplus", "Elu", "Selu", "HardSigmoid", "HardSwish", "LeakyRelu", "Softmax", "LogSoftmax"),
            _F,
        ),
        **dict.fromkeys(("Mish", "Shrink", "LayerNormalization", "BatchNormalization", "RMSNormalization"), _F),
        "Celu": frozenset({FLOAT}),
        **dict.fromkeys(
            ("Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization"),
            frozenset({ir.DataType.FLOAT16, FLOAT}),
        ),
        "Gelu": frozenset({ir.DataType.FLOAT16, FLOAT}),
        **dict.fromkeys(("MaxPool", "DepthToSpace"), _F | _I8),
    }
)


def uses_output(ctx: NodeContext, index: int) -> bool:
    """Whether the graph reads output ``index`` of a multi-output node (``getitem(node, index)`` with users)."""
    for user in ctx.node.users:
        if user.target is not operator.getitem or (user.args[1] == index and user.users):
            return True
    return False


# inverse hyperbolic functions: float16 and float32 kernels only
_KERNEL_DTYPES.update(dict.fromkeys(("Asinh", "Acosh", "Atanh"), frozenset({ir.DataType.FLOAT16, FLOAT})))

# matrix products and determinants
_KERNEL_DTYPES.update(
    {
        **dict.fromkeys(("MatMul", "Einsum"), _F | _I),
        "Gemm": _F,
        "Det": frozenset({ir.DataType.FLOAT16, FLOAT}),
    }
)

# grid sampling
_KERNEL_DTYPES["GridSample"] = _F


def filled(ctx: NodeContext, shape: ir.Value, dtype: ir.DataType, value: float = 0) -> ir.Value:
    """A tensor of shape ``shape`` (1-D INT64) filled with ``value``; ConstantOfShape has no bfloat16
    before opset 20: made in float32 and cast then."""
    import numpy as np

    make = FLOAT if dtype == ir.DataType.BFLOAT16 and ctx.opset < 20 else dtype
    out = ctx.op("ConstantOfShape", shape, value=ir.tensor(np.full(1, value, dtype=make.numpy()), dtype=make))
    return ctx.cast(out, dtype)
