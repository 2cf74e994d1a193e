"""The guard of the rows a mask hides entirely, moved where onnxscript's attention fusions expect the heads.

The translation of ``scaled_dot_product_attention`` sets to 0 the rows a mask hides entirely (PyTorch's result;
the softmax of a row of ``-inf`` is NaN) with a ``Where`` after ``softmax(QK^T)V``. onnxscript's fusions are
written against ``torch.onnx.export``'s graphs, which have no such guard (their padded rows differ from eager):

* before the fusions, :data:`GUARD_AFTER_MERGE_HEADS` moves the guard after the heads are merged, where the
  attention pattern ``SDPA → Transpose → Reshape`` of onnxscript's fusions then appears (pattern, check and
  replacement: onnxscript's rewriter);
* after the fusions, the ``Where`` sits between the ``Transpose`` out of the fused kernel's layout and the
  ``Transpose`` back to it, and keeps both: :class:`WhereBetweenTransposesPass` transposes the (small)
  condition instead.

Example (the guard moved)::

    >>> import onnx_ir as ir
    >>> from experimental.torch_interpreter.optimize.masked_rows import GUARD_AFTER_MERGE_HEADS
    >>> x, c = ir.val("x", ir.DataType.FLOAT, [1, 2, 3, 4]), ir.val("c", ir.DataType.BOOL, [1, 1, 3, 1])
    >>> zero = ir.Value(name="zero", const_value=ir.tensor(np.array(0.0, dtype=np.float32)))
    >>> shape = ir.Value(name="shape", const_value=ir.tensor(np.array([1, 3, 8])))
    >>> w = ir.node("Where", [c, zero, x], name="w")
    >>> t = ir.node("Transpose", [w.outputs[0]], attributes={"perm": [0, 2, 1, 3]}, name="t")
    >>> r = ir.node("Reshape", [t.outputs[0], shape], name="r")
    >>> t.outputs[0].shape, r.outputs[0].shape = ir.Shape([1, 3, 2, 4]), ir.Shape([1, 3, 8])
    >>> r.outputs[0].name = "y"
    >>> g = ir.Graph([x, c], r.outputs, nodes=[w, t, r], initializers=[zero, shape], opset_imports={"": 18})
    >>> GUARD_AFTER_MERGE_HEADS.apply_to_model(ir.Model(g, ir_version=10)), [n.op_type for n in g]
    (1, ['Squeeze', 'Transpose', 'Reshape', 'Where'])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..provenance import copy_provenance
from .graph_match import only_used_by, producer
from .rewrite import CountingPass

_SWAP_1_2 = (0, 2, 1, 3)


def _scalar(value: ir.Value | None) -> float | None:
    """The number a constant of one element holds, else None."""
    if value is None or value.const_value is None or value.const_value.size != 1:
        return None
    return float(np.asarray(value.const_value.numpy()).reshape(-1)[0])


def _guarded_then_merged(op: Any, cond: ir.Value, a: ir.Value, x: ir.Value, shape: ir.Value) -> ir.Value:
    guarded = op.Where(cond, a, x, _outputs=["guarded"])
    merged = op.Transpose(guarded, perm=list(_SWAP_1_2), _outputs=["transposed"])
    return op.Reshape(merged, shape, _outputs=["out"])


def _guard_per_query_row(
    context: Any, cond: ir.Value, a: ir.Value, transposed: ir.Value, out: ir.Value, **_: Any
) -> bool:
    """Main graph only; ``cond`` is ``[B, 1, S, 1]`` (one value per query row, for every head), ``a`` a scalar,
    the result ``[B, S, H*D]`` with ``H`` and ``D`` known.

    Not when the heads merge into ``[B*S, H*D]`` (GPT-2's ``Conv1D``): onnxscript's attention fusion then
    replaces that ``Reshape`` by one to ``[B, S, H*D]`` and the ``Gemm`` after it gets a rank-3 input
    (onnxruntime refuses the model; it happens to ``torch.onnx.export``'s GPT-2 too)."""
    if context.graph_or_function is not context.model.graph:
        return False
    if out.shape is None or len(out.shape) != 3:
        return False
    merged = transposed.shape
    if merged is None or len(merged) != 4 or not all(isinstance(d, int) for d in (merged[2], merged[3])):
        return False
    if out.shape[-1] != merged[2] * merged[3]:
        return False
    if _scalar(a) is None or cond is None or cond.shape is None or len(cond.shape) != 4:
        return False
    return cond.shape[1] == 1 and cond.shape[3] == 1


def _guard_after_merge(
    op: Any, cond: ir.Value, a: ir.Value, x: ir.Value, shape: ir.Value, guarded: ir.Value, transposed: ir.Value,
    out: ir.Value, **_: Any,
) -> ir.Value:
    """``Where(Squeeze(cond, [1]), a, Reshape(Transpose(x, (0, 2, 1, 3)), shape))``, each new node with the
    metadata of the node it comes from."""
    where, transpose, reshape = guarded.producer(), transposed.producer(), out.producer()
    name = f"{where.name}_axes"
    axes = op.initializer(ir.tensor(np.array([1], dtype=np.int64), name=name), name=name)
    squeeze = op.Squeeze(cond, axes, _name=f"{where.name}_Squeeze")
    new_t = op.Transpose(x, perm=list(_SWAP_1_2), _name=f"{transpose.name}_x")
    new_r = op.Reshape(new_t, shape, _name=f"{reshape.name}_x", **dict(reshape.attributes))
    new_w = op.Where(squeeze, a, new_r, _name=f"{where.name}_merged")
    squeeze.dtype = cond.dtype
    squeeze.shape = ir.Shape([cond.shape[0], cond.shape[2], 1])
    new_t.type, new_t.shape = transposed.type, transposed.shape
    for value in (new_r, new_w):
        value.type, value.shape = out.type, out.shape
    for new, old in ((squeeze, where), (new_w, where), (new_t, transpose), (new_r, reshape)):
        copy_provenance(old, new.producer())
    return new_w


#: ``Reshape(Transpose(Where(cond, a, x), (0, 2, 1, 3)), shape)`` → ``Where(Squeeze(cond, [1]), a,
#: Reshape(Transpose(x, (0, 2, 1, 3)), shape))`` when ``cond`` is ``[B, 1, S, 1]`` and the result ``[B, S, H*D]``
#: (the condition: :func:`_guard_per_query_row`): the guard moves after the heads are merged. An unnamed rule:
#: onnxscript tags the nodes of a named rule with its name, which would add a key to their metadata.
GUARD_AFTER_MERGE_HEADS = pattern.RewriteRuleSet(
    [pattern.RewriteRule(_guarded_then_merged, _guard_after_merge, _guard_per_query_row)]
)


class WhereBetweenTransposesPass(CountingPass):
    """``Transpose(Where(cond, a, Transpose(x, p)), p)`` → ``Where(Transpose(cond, p), a, x)`` with
    ``p = (0, 2, 1, 3)`` (its own inverse), ``cond`` of rank 4 and ``a`` a scalar; ``count`` is the guards moved.

    Written by hand: the new nodes carry the metadata of the ``Where`` alone, where onnxscript's rewriter would
    merge into them the metadata of every matched node (the ``Transpose`` nodes made by onnxscript's attention
    fusion carry the name of its rule).

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.masked_rows import WhereBetweenTransposesPass
        >>> x = ir.val("x", ir.DataType.FLOAT, [1, 2, 3, 4])
        >>> c = ir.val("c", ir.DataType.BOOL, [1, 3, 2, 1])
        >>> zero = ir.Value(name="zero", const_value=ir.tensor(np.array(0.0, dtype=np.float32)))
        >>> t1 = ir.node("Transpose", [x], attributes={"perm": [0, 2, 1, 3]})
        >>> w = ir.node("Where", [c, zero, t1.outputs[0]])
        >>> t2 = ir.node("Transpose", [w.outputs[0]], attributes={"perm": [0, 2, 1, 3]})
        >>> t2.outputs[0].name = "y"
        >>> g = ir.Graph([x, c], t2.outputs, nodes=[t1, w, t2], initializers=[zero], opset_imports={"": 18})
        >>> m = ir.Model(g, ir_version=10)
        >>> rewrite = WhereBetweenTransposesPass()
        >>> _ = rewrite(m)
        >>> rewrite.count, [n.op_type for n in m.graph], m.graph.outputs[0].name
        (1, ['Transpose', 'Where'], 'y')
    """

    def rewrite(self, model: ir.Model) -> int:
        graph, count = model.graph, 0
        for outer in list(graph):
            if outer.op_type != "Transpose" or outer.domain not in ("", "ai.onnx"):
                continue
            if tuple(outer.attributes.get_ints("perm", ())) != _SWAP_1_2:
                continue
            where = producer(outer.inputs[0], "Where")
            if where is None or not only_used_by(where.outputs[0], outer):
                continue
            cond, a, inner_out = where.inputs
            inner = producer(inner_out, "Transpose")
            if inner is None or tuple(inner.attributes.get_ints("perm", ())) != _SWAP_1_2:
                continue
            if not only_used_by(inner_out, where) or _scalar(a) is None:
                continue
            if cond is None or cond.shape is None or len(cond.shape) != 4:
                continue
            new_cond = ir.node("Transpose", [cond], attributes={"perm": list(_SWAP_1_2)}, name=f"{where.name}_cond_T")
            new_where = ir.node("Where", [new_cond.outputs[0], a, inner.inputs[0]], name=f"{where.name}_T")
            new_cond.outputs[0].dtype = cond.dtype
            new_cond.outputs[0].shape = ir.Shape([cond.shape[i] for i in _SWAP_1_2])
            new_where.outputs[0].type = outer.outputs[0].type
            new_where.outputs[0].shape = outer.outputs[0].shape
            copy_provenance(where, new_cond, new_where)
            ir.convenience.replace_nodes_and_values(
                graph, outer, [inner, where, outer], [new_cond, new_where], [outer.outputs[0]], [new_where.outputs[0]]
            )
            count += 1
        return count
