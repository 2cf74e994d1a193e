"""The float32 twin of a float16 or bfloat16 decoder, for the check that runs on the CPU.

A package made for CUDA in float16 or bfloat16 keeps ``GroupQueryAttention`` only when onnxruntime, fed as
onnxruntime-genai feeds it, gives PyTorch's logits (:mod:`.shared_buffer_check`). The check is about the rewrite's
form (the mask read as lengths, the positions, the rotary tables, the cache written in place), and a mistake there
moves the logits by a few float16 ulps only on a small random model, as much as two kernels' rounding does. The
check therefore runs the same graph with every half-precision type read as float32 (onnxruntime's CPU has a
float32 kernel for every op of it, and no bfloat16 one for most), against the model in float32 with the same
weights: the weights converted exactly, the casts and constants retyped, the nodes and their order unchanged.
Only the roundings to half precision written in the graph are gone.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def float32_twin(model: ir.Model) -> ir.Model:
    """A copy of ``model`` where every float16 or bfloat16 value, weight, cast and constant is float32 instead.

    Example::

        >>> import ml_dtypes, numpy as np, onnx_ir as ir
        >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([2]))
        >>> w = ir.Value(name="w", const_value=ir.tensor(np.array([0.5, 3.0], dtype=ml_dtypes.bfloat16), name="w"))
        >>> node = ir.node("Mul", [x, w])
        >>> graph = ir.Graph([x], node.outputs, nodes=[node], initializers=[w], opset_imports={"": 21})
        >>> model = ir.Model(graph, ir_version=10)
        >>> twin = float32_twin(model)
        >>> twin.graph.inputs[0].dtype, twin.graph.initializers["w"].const_value.numpy(), model.graph.inputs[0].dtype
        (FLOAT, array([0.5, 3. ], dtype=float32), BFLOAT16)
    """
    twin = model.clone()
    for graph in (twin.graph, *twin.graph.subgraphs()):
        for value in graph.initializers.values():
            if value.const_value is not None and value.const_value.dtype in _HALF:
                value.const_value = _as_float32(value.const_value)
        for value in graph.inputs:
            _retype(value)
        for node in graph:
            _retype_attributes(node)
            for value in node.outputs:
                _retype(value)
    return twin


def _as_float32(tensor: ir.TensorProtocol) -> ir.Tensor:
    return ir.tensor(tensor.numpy().astype(np.float32), name=tensor.name)


def _retype(value: ir.Value) -> None:
    # a new type: the clone shares its type objects with the model (setting ``dtype`` would retype both)
    if isinstance(value.type, ir.TensorType) and value.dtype in _HALF:
        value.type = ir.TensorType(ir.DataType.FLOAT)


def _retype_attributes(node: ir.Node) -> None:
    """``Cast(to=float16)`` and the tensors of ``Constant`` or ``ConstantOfShape`` in half precision."""
    for name, attribute in list(node.attributes.items()):
        if attribute.type == ir.AttributeType.INT and name in ("to", "dtype") and attribute.value in _HALF:
            node.attributes[name] = ir.AttrInt64(name, int(ir.DataType.FLOAT))
        elif attribute.type == ir.AttributeType.TENSOR and attribute.value.dtype in _HALF:
            node.attributes[name] = ir.AttrTensor(name, _as_float32(attribute.value))
