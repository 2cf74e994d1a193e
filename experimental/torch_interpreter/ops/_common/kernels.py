"""The element types onnxruntime's kernels take, in ONE place (the CPU's table; CUDA's bfloat16 kernels for a model
made for CUDA only), and how to compute an op in a type it has.

onnxruntime lacks some kernels for some types (no bfloat16 ``Sin``, no bool ``Max``...): :func:`kernel_op`
computes such an op in :func:`kernel_dtype` and casts the result back; :func:`widen` casts a value to a
lossless wider type for converters that build several nodes in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import onnx_ir as ir

from ...dtypes import FLOAT_TYPES
from ...providers import CUDA_BFLOAT16, KNOWN
from ...translation.context import NodeContext
from .types import BF16, BOOL, F16, FLOAT, INT64

D = ir.DataType
_F = frozenset({D.FLOAT16, FLOAT, D.DOUBLE})
_I = frozenset({D.INT32, INT64})
_I8 = frozenset({D.INT8, D.UINT8})
_ALL = _F | _I | _I8 | {BF16, BOOL, D.INT16, D.UINT16, D.UINT32, D.UINT64}


def _all_but(*missing: ir.DataType) -> frozenset:
    return _ALL - set(missing)


# Element types onnxruntime's CPU kernels take, for the op types that miss some (onnxruntime computes
# float16 in float32 by itself where a kernel lacks it); op types not listed take every type. A key
# ``Op.mode`` is the op with that attribute (``ScatterElements.add`` for reduction="add").
_KERNEL_DTYPES: dict[str, frozenset] = {
    # arithmetic and comparisons
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Mod", "Abs"), _F | _I | _I8 | {D.INT16}),
    **dict.fromkeys(("Less", "LessOrEqual", "Greater", "GreaterOrEqual"), _F | _I | _I8 | {D.INT16}),
    "Equal": _F | _I | _I8 | {D.INT16, BOOL},
    "Neg": _F | _I | {D.INT8, D.INT16},
    **dict.fromkeys(("Max", "Min", "Clip", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin"), _F | _I | _I8),
    **dict.fromkeys(("Pow", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "CumSum"), _F | _I),
    # math functions
    **dict.fromkeys(("Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tanh", "Floor", "Ceil", "Round"), _F),
    **dict.fromkeys(("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Erf"), frozenset({D.FLOAT16, FLOAT})),
    **dict.fromkeys(("Asinh", "Acosh", "Atanh"), frozenset({D.FLOAT16, FLOAT})),
    "IsNaN": _F,
    "IsInf": frozenset({FLOAT, D.DOUBLE}),
    # activations, convolution, pooling, normalization (no DOUBLE Conv, no FLOAT16 Celu...)
    "Relu": _F | _I | {D.INT8},
    "PRelu": _F | _I,
    **dict.fromkeys(
        ("Sigmoid", "Softplus", "Elu", "Selu", "HardSigmoid", "HardSwish", "LeakyRelu", "Softmax", "LogSoftmax"), _F
    ),
    **dict.fromkeys(("Mish", "Shrink", "LayerNormalization", "BatchNormalization", "RMSNormalization"), _F),
    "Celu": frozenset({FLOAT}),
    **dict.fromkeys(
        ("Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization"),
        frozenset({D.FLOAT16, FLOAT}),
    ),
    "Gelu": frozenset({D.FLOAT16, FLOAT}),
    **dict.fromkeys(("MaxPool", "DepthToSpace"), _F | _I8),
    "GridSample": _F,
    # matrix products and determinants
    **dict.fromkeys(("MatMul", "Einsum"), _F | _I),
    "Gemm": _F,
    "Det": frozenset({D.FLOAT16, FLOAT}),
    # data movement: every type but a few
    **dict.fromkeys(("Expand", "Tile", "Pad", "Compress"), _all_but(BF16)),
    "Where": _all_but(BOOL, D.INT16, D.UINT16, BF16),
    "Trilu": _all_but(D.UINT8, D.INT8, D.INT16, D.UINT16, BF16),
    "EyeLike": _all_but(BOOL, D.UINT8, D.INT8, D.INT16, D.UINT16, BF16),
    # ScatterElements / ScatterND with a reduction
    **dict.fromkeys(("ScatterElements.add", "ScatterElements.mul"), _all_but(F16, BF16)),
    **dict.fromkeys(("ScatterElements.max", "ScatterElements.min"), _all_but(BOOL, BF16)),
}


def has_kernel(op_type: str, dtype: ir.DataType, providers: Iterable[str] = KNOWN) -> bool:
    """Whether ``op_type`` has a kernel for ``dtype`` itself on ``providers``: onnxruntime's CPU kernels for a
    model that may run there (the default), and for a model made for CUDA only (``("cuda",)``) CUDA's kernels
    too (a node CUDA has no kernel for runs on the CPU's).

    >>> has_kernel("DepthToSpace", ir.DataType.UINT8), has_kernel("DepthToSpace", ir.DataType.INT64)
    (True, False)
    >>> has_kernel("Mul", ir.DataType.BFLOAT16), has_kernel("Mul", ir.DataType.BFLOAT16, ("cuda",))
    (False, True)
    """
    supported = _KERNEL_DTYPES.get(op_type)
    if supported is None or dtype in supported:
        return True
    return "cpu" not in providers and dtype == BF16 and op_type in CUDA_BFLOAT16


def kernel_dtype(op_type: str, dtype: ir.DataType, providers: Iterable[str] = KNOWN) -> ir.DataType:
    """The element type onnxruntime CPU computes ``op_type`` in for inputs of type ``dtype``: ``dtype``
    itself, else FLOAT for a floating type (bfloat16, double for Tan/Erf...) or an op with float kernels only
    (Softmax of an empty bool tensor), INT32 or INT64 for others.

    >>> kernel_dtype("Sin", ir.DataType.BFLOAT16).name, kernel_dtype("Max", ir.DataType.BOOL).name
    ('FLOAT', 'INT32')
    """
    if has_kernel(op_type, dtype, providers):
        return dtype
    supported = _KERNEL_DTYPES[op_type]
    if dtype in FLOAT_TYPES or not supported & (_I | _I8):  # a kernel of floats only: FLOAT for every input
        return FLOAT
    return ir.DataType.INT32 if ir.DataType.INT32 in supported else INT64


def kernel_op(ctx: NodeContext, op_type: str, *inputs: Any, dtype: ir.DataType, **attrs: Any) -> ir.Value:
    """``op_type`` on inputs of element type ``dtype`` (values or Python scalars; the axes of ``Reduce*``
    and ``CumSum`` are left as they are), computed in :func:`kernel_dtype` and cast back to ``dtype``."""
    compute = kernel_dtype(op_type, dtype, ctx.providers)
    n = 1 if op_type.startswith("Reduce") or op_type == "CumSum" else len(inputs)
    typed = [x if i >= n or x is None else ctx.operand(x, compute) for i, x in enumerate(inputs)]
    out = ctx.op(op_type, *typed, **attrs)
    if compute != dtype and out.dtype == compute and op_type not in ("ArgMax", "ArgMin"):
        out = ctx.cast(out, dtype)
    return out


def widen(ctx: NodeContext, x: ir.Value, op_type: str) -> ir.Value:
    """``x`` cast to the type onnxruntime computes ``op_type`` in (:func:`kernel_dtype`), for converters that
    build several nodes in it; they cast the result back."""
    return ctx.cast(x, kernel_dtype(op_type, x.dtype, ctx.providers))
