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

from ..errors import ConversionError

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
    register_dangling_constants(model)
    return model


def register_dangling_constants(model: ir.Model) -> int:
    """Makes initializers of the constants that nodes read but no graph holds; returns how many.

    onnxscript 0.7's rewrite rules may give a node a constant input (the bounds of a ``Clip`` made from
    ``Max``/``Min``) without adding it to any graph: onnxruntime then refuses the model ("not a graph input,
    initializer, or output of a previous node"). Such a value becomes an initializer of the main graph, which
    every subgraph sees. An input with neither producer nor value is a broken model: :class:`ConversionError`.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import register_dangling_constants
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> low = ir.Value(name="low", const_value=ir.tensor(0.0))
        >>> clip = ir.node("Clip", [x, low])
        >>> g = ir.Graph([x], clip.outputs, nodes=[clip], opset_imports={"": 18})
        >>> register_dangling_constants(ir.Model(g, ir_version=10)), list(g.initializers)
        (1, ['low'])
    """
    main = model.graph
    added = 0
    for node in ir.traversal.RecursiveGraphIterator(main):
        for value in node.inputs:
            if value is None or value.producer() is not None or value.graph is not None:
                continue  # a node's output, or a graph input or initializer
            if value.const_value is None:
                raise ConversionError(
                    f"the optimizer left node {node.name!r} ({node.op_type}) reading {value.name!r}, which nothing "
                    "produces; export with optimize=False and report this model"
                )
            base = value.name or "dangling_constant"
            name, i = base, 0
            while name in main.initializers:
                i += 1
                name = f"{base}_{i}"
            value.name = name
            main.register_initializer(value)
            added += 1
    if added:
        logger.debug("%d dangling constant(s) registered as initializers", added)
    return added
