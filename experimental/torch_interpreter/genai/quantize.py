"""int4 weight-only packages: every ``MatMul`` of a weight becomes onnxruntime's ``com.microsoft::MatMulNBits``,
quantized by onnxruntime's own quantizer (``onnxruntime.quantization.matmul_nbits_quantizer``), with the settings
of onnxruntime-genai's model builder (symmetric blocks of 32, int8 activations on the CPU).

The quantizer reads ``MatMul(x, W)`` with ``W`` a ``[K, N]`` initializer only: the products spelled otherwise
(``Gemm`` of GPT-2's ``Conv1D``, ``FusedMatMul`` with a transposed weight for an output projection tied to the
embedding) are first given that form, a tied weight getting its own transposed copy, which the quantizer packs.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import helper, numpy_helper

logger = logging.getLogger(__name__)

#: the weights' block size and the CPU's accuracy level (4: int8 activations), as the model builder sets them
BLOCK_SIZE = 32
CPU_ACCURACY_LEVEL = 4


def quantize_int4(model: onnx.ModelProto, provider: str) -> onnx.ModelProto:
    """``model`` with the weights of its ``MatMul`` nodes in int4 (``MatMulNBits``); ``provider`` ``"cpu"`` computes
    the products with int8 activations (accuracy level 4), ``"cuda"`` in the activations' type.

    Example::

        >>> import numpy as np, onnx
        >>> from onnx import helper, numpy_helper, TensorProto
        >>> w = numpy_helper.from_array(np.random.rand(64, 32).astype(np.float32), "w")
        >>> graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], [w])
        >>> q = quantize_int4(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), "cpu")
        >>> [n.op_type for n in q.graph.node]
        ['MatMulNBits']
    """
    products_as_matmul(model)
    MatMulNBitsQuantizer = _quantizer_class()
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=BLOCK_SIZE, is_symmetric=True,
                                     accuracy_level=CPU_ACCURACY_LEVEL if provider == "cpu" else None)
    quantizer.process()
    quantized = quantizer.model.model
    count = sum(n.op_type == "MatMulNBits" for n in quantized.graph.node)
    logger.info("int4: %d MatMul nodes quantized (MatMulNBits, blocks of %d)", count, BLOCK_SIZE)
    return quantized


def products_as_matmul(model: onnx.ModelProto) -> int:
    """Rewrites in place the products of a constant weight that are not ``MatMul(x, W[K, N])`` into that form:
    ``Gemm(x, W, b)`` (no transposed ``x``, ``alpha = beta = 1``) becomes ``MatMul`` + ``Add``, a
    ``com.microsoft::FusedMatMul`` reading ``W`` transposed (``alpha = 1``, no other transposition) a ``MatMul``
    of a transposed copy; returns how many it rewrote."""
    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    nodes, count = [], 0
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        weight = weights.get(node.input[1]) if len(node.input) > 1 else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        if node.op_type == "Gemm" and node.domain == "" and not attrs.get("transA", 0) and \
                attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0:
            transposed = bool(attrs.get("transB", 0))
        elif node.op_type == "FusedMatMul" and node.domain == "com.microsoft" and attrs.get("transB", 0) and \
                attrs.get("alpha", 1.0) == 1.0 and not any(attrs.get(k, 0) for k in
                                                            ("transA", "transBatchA", "transBatchB")):
            transposed = True
        else:
            nodes.append(node)
            continue
        name = weight.name
        if transposed:
            name = f"{weight.name}.T"
            if name not in weights:
                weights[name] = numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(weight).T), name)
                graph.initializer.append(weights[name])
        label = node.name or node.output[0]
        product = node.output[0] if len(node.input) < 3 or not node.input[2] else f"{node.output[0]}.product"
        nodes.append(helper.make_node("MatMul", [node.input[0], name], [product], name=f"{label}.matmul"))
        if product != node.output[0]:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=f"{label}.bias"))
        count += 1
    del graph.node[:]
    graph.node.extend(nodes)
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return count


def _quantizer_class():
    """onnxruntime's ``MatMulNBitsQuantizer``, imported without the ``logging.basicConfig`` its module calls (which
    would print every INFO line of the process, ours and onnxscript's)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return MatMulNBitsQuantizer
