"""Element types of ONNX node outputs, so that every value the builder creates knows its type.

This is not shape inference: it only tells the element type, which is enough to check a converter's
result against ``node.meta['val']`` and to cast inputs where PyTorch promotes types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

_BOOL_OPS = frozenset(
    {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf"}
)
_INT64_OPS = frozenset({"Shape", "Size", "ArgMax", "ArgMin", "NonZero", "NonMaxSuppression"})
# op type -> index of the input whose type the outputs take (default 0)
_FROM_INPUT = {"Where": 1, "Expand": 0, "ScatterND": 0, "ScatterElements": 0}


# ops whose (listed) inputs must share one element type: a converter bug otherwise
_SAME_TYPE = {
    **{op: None for op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Mean", "Sum", "Concat", "MatMul", "Gemm",
                           "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
                           "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Mod")},
    "Where": (1, 2),
}


def mixed_input_types(op_type: str, domain: str, inputs) -> list | None:
    """The element types of the inputs of ``op_type`` when ONNX needs one type and they differ, else None.

    >>> a, b = ir.Value(type=ir.TensorType(ir.DataType.FLOAT)), ir.Value(type=ir.TensorType(ir.DataType.DOUBLE))
    >>> [t.name for t in mixed_input_types("Mul", "", [a, b])]
    ['FLOAT', 'DOUBLE']
    """
    if domain not in ("", "ai.onnx") or op_type not in _SAME_TYPE:
        return None
    indices = _SAME_TYPE[op_type]
    chosen = [inputs[i] for i in indices] if indices else inputs
    types = [v.dtype for v in chosen if v is not None and v.dtype is not None]
    return types if len(set(types)) > 1 else None


def output_dtypes(
    op_type: str, domain: str, inputs: Sequence[ir.Value | None], attrs: Mapping[str, Any], num_outputs: int
) -> list[ir.DataType | None]:
    """Element types of the outputs of one node (None where unknown).

    >>> output_dtypes("Cast", "", [], {"to": ir.DataType.INT64}, 1)
    [INT64]
    """
    if domain not in ("", "ai.onnx"):
        return [None] * num_outputs
    if op_type == "Cast":
        return [ir.DataType(attrs["to"])]
    if op_type == "CastLike":
        return [inputs[1].dtype]
    if op_type in _BOOL_OPS:
        return [ir.DataType.BOOL] * num_outputs
    if op_type in _INT64_OPS:
        return [ir.DataType.INT64]
    if op_type == "Constant":
        return [attrs["value"].dtype]
    if op_type == "ConstantOfShape":
        value = attrs.get("value")
        return [value.dtype if value is not None else ir.DataType.FLOAT]
    if op_type == "TopK":
        return [inputs[0].dtype, ir.DataType.INT64]
    if op_type in ("LayerNormalization", "RMSNormalization"):
        stash = ir.DataType(attrs.get("stash_type", 1))
        return [inputs[0].dtype] + [stash] * (num_outputs - 1)
    if op_type == "BatchNormalization":
        return [inputs[0].dtype] + [inputs[3].dtype] * (num_outputs - 1)
    if op_type == "EyeLike" and "dtype" in attrs:
        return [ir.DataType(attrs["dtype"])]
    first = inputs[_FROM_INPUT.get(op_type, 0)] if inputs else None
    dtype = first.dtype if first is not None else None
    return [dtype] * num_outputs
