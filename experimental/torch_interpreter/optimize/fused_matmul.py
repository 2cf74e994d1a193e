"""``com.microsoft::FusedMatMul`` nodes onnxruntime refuses to run, given their ``Transpose`` back.

onnxscript's fusion folds ``Transpose(a, [1, ..., N-2, 0, N-1])`` into ``FusedMatMul(transBatchA=1)`` (and
the same for ``b``) without checking the other operand: onnxruntime's kernel runs a batch transpose only
when both operands have the same rank, at least 3, and fails otherwise (XLNet's ``[seq, batch, hidden]``
states times the 2-D output projection: "Two inputs should have same rank and rank >= 3 if transBatchA or
transBatchB is true"). Such a node gets the ``Transpose`` before it again and loses the attribute.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph_match import dims, typed


def _batch_perm(rank: int) -> list[int]:
    """The permutation ``transBatch=1`` applies: the first axis moves before the last one."""
    return [*range(1, rank - 1), 0, rank - 1]


def split_batch_transposes(model: ir.Model) -> dict[str, int]:
    """Gives back the ``Transpose`` of the ``FusedMatMul`` nodes whose ``transBatchA``/``transBatchB``
    onnxruntime cannot run (operands of different ranks, or below 3), in place; returns
    ``{"fused_matmul_batch_transposes": n}`` when ``n > 0``.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.fused_matmul import split_batch_transposes
        >>> a, b = ir.val("a", ir.DataType.FLOAT, [5, 2, 4]), ir.val("b", ir.DataType.FLOAT, [4, 3])
        >>> mm = ir.node("FusedMatMul", [a, b], attributes={"transBatchA": 1}, domain="com.microsoft")
        >>> mm.outputs[0].name = "y"
        >>> g = ir.Graph([a, b], mm.outputs, nodes=[mm], opset_imports={"": 23, "com.microsoft": 1})
        >>> split_batch_transposes(ir.Model(g, ir_version=10))
        {'fused_matmul_batch_transposes': 1}
        >>> [(n.op_type, {k: list(v.value) if k == "perm" else v.value for k, v in n.attributes.items()}) for n in g]
        [('Transpose', {'perm': [1, 0, 2]}), ('FusedMatMul', {'transBatchA': 0})]
    """
    count = 0
    for node in list(model.graph.all_nodes()):
        if node.op_type != "FusedMatMul" or node.domain != "com.microsoft":
            continue
        shapes = [dims(v) for v in node.inputs[:2]]
        if None in shapes:
            continue
        ranks = [len(s) for s in shapes]
        if ranks[0] == ranks[1] and ranks[0] >= 3:
            continue
        for i, name in enumerate(("transBatchA", "transBatchB")):
            attr = node.attributes.get(name)
            if attr is None or attr.as_int() == 0:
                continue
            value, perm = node.inputs[i], _batch_perm(ranks[i])
            transpose = ir.node("Transpose", [value], attributes={"perm": perm}, name=f"{node.name}_{name}")
            typed(transpose, dtype=value.dtype, shape=[shapes[i][p] for p in perm])
            transpose.metadata_props.update(node.metadata_props)
            node.graph.insert_before(node, transpose)
            node.replace_input_with(i, transpose.outputs[0])
            node.attributes[name] = ir.AttrInt64(name, 0)
            count += 1
    return {"fused_matmul_batch_transposes": count} if count else {}
