"""int4 weight-only packages: every ``MatMul`` of a weight becomes onnxruntime's ``com.microsoft::MatMulNBits``,
quantized by onnxruntime's own quantizer (``onnxruntime.quantization.matmul_nbits_quantizer``), with the settings
of onnxruntime-genai's model builder (symmetric blocks of 32, int8 activations on the CPU)."""

from __future__ import annotations

import logging

import onnx

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
    MatMulNBitsQuantizer = _quantizer_class()
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=BLOCK_SIZE, is_symmetric=True,
                                     accuracy_level=CPU_ACCURACY_LEVEL if provider == "cpu" else None)
    quantizer.process()
    quantized = quantizer.model.model
    count = sum(n.op_type == "MatMulNBits" for n in quantized.graph.node)
    logger.info("int4: %d MatMul nodes quantized (MatMulNBits, blocks of %d)", count, BLOCK_SIZE)
    return quantized


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
