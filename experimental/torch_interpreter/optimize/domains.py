"""The opset imports the nodes of the onnxruntime level need."""

from __future__ import annotations

import onnx_ir as ir

#: the domain of onnxruntime's contrib kernels (``FusedMatMul``, ``SkipLayerNormalization``, ``Attention``...)
MS_DOMAIN = "com.microsoft"


def import_ms_domain(model: ir.Model) -> int:
    """Imports the ``com.microsoft`` domain (version 1) when a node of the model, subgraphs included, is of
    that domain and the model does not import it yet; returns 1 when it did, else 0.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.domains import import_ms_domain
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> node = ir.node("FastGelu", [x], domain="com.microsoft")
        >>> model = ir.Model(ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 18}), ir_version=10)
        >>> import_ms_domain(model), model.opset_imports
        (1, {'': 18, 'com.microsoft': 1})
    """
    if MS_DOMAIN in model.opset_imports or not any(n.domain == MS_DOMAIN for n in model.graph.all_nodes()):
        return 0
    model.opset_imports[MS_DOMAIN] = 1
    return 1
