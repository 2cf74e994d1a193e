"""Uses held by nodes no graph holds any more: released, so that what only they read is removed as unused.

onnxscript's constant folding replaces an ``If`` whose condition is a constant by the branch it takes; the nodes of
the other branch leave every graph but stay registered as uses of the outer values they read. onnx-ir's
``RemoveUnusedNodesPass`` then keeps everything feeding them: a bicubic ``interpolate`` of a constant (ViT's
position embeddings at a dynamic image size) left the ~120 nodes of its exact branch's taps in the graph.
"""

from __future__ import annotations

import onnx_ir as ir


def release_orphan_uses(model: ir.Model) -> int:
    """Disconnects the inputs of nodes outside every graph of ``model`` (the main graph, the subgraphs of its nodes,
    its functions) from the values they read; returns how many uses were released.

    Example::

        >>> import onnx_ir as ir
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> kept, lost = ir.node("Neg", [x]), ir.node("Abs", [x])  # ``lost`` in no graph, a use of x all the same
        >>> kept.outputs[0].name = "y"
        >>> model = ir.Model(ir.Graph([x], kept.outputs, nodes=[kept], opset_imports={"": 18}), ir_version=10)
        >>> len(list(x.uses())), release_orphan_uses(model), len(list(x.uses()))
        (2, 1, 1)
    """
    graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    live = {node for graph in graphs for node in ir.traversal.RecursiveGraphIterator(graph)}
    values: list[ir.Value] = []
    for graph in graphs:
        values.extend(graph.inputs)
        if isinstance(graph, ir.Graph):
            values.extend(graph.initializers.values())
    for node in live:
        values.extend(node.outputs)
        for attr in node.attributes.values():
            for sub in (attr.value if isinstance(attr.value, list) else [attr.value]):
                if isinstance(sub, ir.Graph):
                    values.extend(sub.inputs)
                    values.extend(sub.initializers.values())
    released = 0
    for value in values:
        for use in list(value.uses()):
            if use.node not in live:
                use.node.replace_input_with(use.idx, None)
                released += 1
    return released


class ReleaseOrphanUsesPass(ir.passes.InPlacePass):
    """:func:`release_orphan_uses` as an onnx-ir pass (before ``RemoveUnusedNodesPass``)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, modified=bool(release_orphan_uses(model)))
