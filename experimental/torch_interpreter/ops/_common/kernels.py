"""How to compute an op in a type onnxruntime has a kernel for, from the tables of
:mod:`~experimental.torch_interpreter.ort_kernels` (the CPU's types; CUDA's bfloat16 kernels for a model made for
CUDA only).

onnxruntime lacks some kernels for some types (no bfloat16 ``Sin``, no bool ``Max``...): :func:`kernel_op`
computes such an op in :func:`kernel_dtype` and casts the result back; :func:`widen` casts a value to a
lossless wider type for converters that build several nodes in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import onnx_ir as ir

from ...dtypes import FLOAT_TYPES
from ...ort_kernels import CPU_TYPES, CUDA_BFLOAT16, INTEGERS, LAST_OPSET
from ...providers import KNOWN
from ...translation.context import NodeContext
from .types import BF16, FLOAT, INT64

def has_kernel(op_type: str, dtype: ir.DataType, providers: Iterable[str] = KNOWN) -> bool:
    """Whether ``op_type`` has a kernel for ``dtype`` itself on ``providers``: onnxruntime's CPU kernels for a
    model that may run there (the default), and for a model made for CUDA only (``("cuda",)``) CUDA's kernels
    too (a node CUDA has no kernel for runs on the CPU's).

    >>> has_kernel("DepthToSpace", ir.DataType.UINT8), has_kernel("DepthToSpace", ir.DataType.INT64)
    (True, False)
    >>> has_kernel("Mul", ir.DataType.BFLOAT16), has_kernel("Mul", ir.DataType.BFLOAT16, ("cuda",))
    (False, True)
    """
    supported = CPU_TYPES.get(op_type)
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
    supported = CPU_TYPES[op_type]
    if dtype in FLOAT_TYPES or not supported & INTEGERS:  # a kernel of floats only: FLOAT for every input
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


def check_kernel_opset(ctx: NodeContext, op_type: str) -> None:
    """Raises ``NotImplementedError`` when onnxruntime has no kernel for ``op_type`` at the target opset
    (:data:`~experimental.torch_interpreter.ort_kernels.LAST_OPSET`): the model would not load."""
    last = LAST_OPSET.get(op_type)
    if last is not None and ctx.opset > last:
        raise NotImplementedError(
            f"onnxruntime has no {op_type} kernel at opset {ctx.opset} (its last is {last}): export with "
            f"target_opset={last} or less and optimize=True (optimize='onnxruntime' translates at a later opset)"
        )
