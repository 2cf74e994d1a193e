"""The generic level: standard ONNX in, standard ONNX out, fewer nodes.

onnxscript's optimizer does the job (a well-kept library, used by ``torch.onnx.export``): constant folding
(with ONNX shape inference, so ``Shape``/``Slice``/``Concat`` chains on static dimensions fold), its default
rewrite rules (collapsed slices and reshapes, no-op casts and transposes), unused nodes, functions and opsets
removed, constants lifted to initializers, duplicated initializers and common subexpressions merged.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
import onnxscript.optimizer

logger = logging.getLogger(__name__)

#: the largest constant (elements) onnxscript folds an op into; larger ones (the weights) are left to the
#: runtime, which folds ``Transpose(weight)`` when it loads the model: folding here would copy the weights
FOLD_INPUT_SIZE_LIMIT = 8192


def optimize_generic(model: ir.Model) -> ir.Model:
    """Folds constants, simplifies shape ops, removes unused nodes and merges common subexpressions,
    in place; the model keeps its inputs, outputs and node metadata.

    :param model: an ``onnx_ir.Model``
    :return: the same model

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import optimize_generic
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> two = ir.node("Constant", [], attributes={"value": ir.tensor([2.0])})
        >>> a = ir.node("Mul", [x, two.outputs[0]])
        >>> b = ir.node("Mul", [x, two.outputs[0]])
        >>> s = ir.node("Add", [a.outputs[0], b.outputs[0]])
        >>> s.outputs[0].name = "y"
        >>> g = ir.Graph([x], s.outputs, nodes=[two, a, b, s], opset_imports={"": 18})
        >>> [n.op_type for n in optimize_generic(ir.Model(g, ir_version=10)).graph]
        ['Mul', 'Add']
    """
    onnxscript.optimizer.optimize(model, input_size_limit=FOLD_INPUT_SIZE_LIMIT)
    return model
