"""The two halves of a last axis sliced apart (``x[..., :n]`` and ``x[..., n:]``, the rotary embedding's
``rotate_half``) become one ``Split``.

onnxscript's ``SlicesSplit`` rule makes the same rewrite, but its pattern has two output nodes, which onnxscript's
matcher pairs by trying every ``Slice`` of the graph against every other: the optimization grew with the square of
the model's depth (a 12-layer 13 B-class Llama: 7 s, a 57-layer one about a minute). Here the second half is
looked for among the readers of the first half's input only. The rewrite is the same: ``Slice(x, [0], [n], [a])``
and ``Slice(x, [n], [2n], [a])`` with ``a`` the last axis and ``2n`` its static size become
``Split(x, axis=-1, num_outputs=2)``.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph_match import ints


def _half(node: ir.Node, rank: int) -> tuple[int, int] | None:
    """``(begin, end)`` of a ``Slice`` of the last axis with constant bounds and no step other than 1, else None."""
    if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 4:
        return None
    if len(node.inputs) > 4 and node.inputs[4] is not None and ints(node.inputs[4]) != [1]:
        return None
    begin, end, axes = (ints(v) for v in node.inputs[1:4])
    if axes not in ([-1], [rank - 1]) or begin is None or end is None or len(begin) != 1 or len(end) != 1:
        return None
    return begin[0], end[0]


def halves_split(model: ir.Model) -> int:
    """Replaces each pair of ``Slice`` nodes taking the two halves of the last axis of the same value by one
    ``Split`` in the main graph; returns how many pairs.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.graph_match import int64s
        >>> x = ir.val("x", ir.DataType.FLOAT, [2, 8])
        >>> g = ir.Graph([x], [], nodes=[], opset_imports={"": 18})
        >>> c = lambda v: int64s(g, "c", v)
        >>> a = ir.node("Slice", [x, c([0]), c([4]), c([-1])])
        >>> b = ir.node("Slice", [x, c([4]), c([8]), c([1])])
        >>> g.extend([a, b]); g.outputs.extend([a.outputs[0], b.outputs[0]])
        >>> halves_split(ir.Model(g, ir_version=10)), [n.op_type for n in g]
        (1, ['Split'])
    """
    graph = model.graph
    count = 0
    for node in list(graph):
        x = node.inputs[0] if node.op_type == "Slice" and node.inputs and node.graph is graph else None
        if x is None or x.shape is None:
            continue
        rank, last = len(x.shape), x.shape[-1]
        if not isinstance(last, int) or last % 2 or _half(node, rank) != (0, last // 2):
            continue
        second = next((user for user, _ in x.uses() if user is not node and user.graph is graph
                       and _half(user, rank) == (last // 2, last)), None)
        if second is None:
            continue
        split = ir.node("Split", [x], attributes={"axis": -1, "num_outputs": 2}, num_outputs=2,
                        name=f"{node.name}_split")
        for out, old in zip(split.outputs, (node.outputs[0], second.outputs[0])):
            out.type, out.shape = old.type, old.shape
        first = node if _before(graph, node, second) else second
        ir.convenience.replace_nodes_and_values(
            graph, first, [node, second], [split], [node.outputs[0], second.outputs[0]], split.outputs)
        count += 1
    return count


def _before(graph: ir.Graph, a: ir.Node, b: ir.Node) -> bool:
    """Whether ``a`` comes before ``b`` in ``graph``."""
    for node in graph:
        if node is a:
            return True
        if node is b:
            return False
    return True
