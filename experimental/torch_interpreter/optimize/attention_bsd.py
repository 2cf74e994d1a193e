"""ONNX ``Attention`` on ``[batch, sequence, heads * head_size]`` tensors, with the cache as its past inputs.

Transformers splits the heads of the projections (``view(B, S, H, D).transpose(1, 2)``), appends the new keys and
values to the cache (``cat(past, new, dim=2)``), and merges the heads of the result
(``transpose(1, 2).reshape(B, S, H * D)``): a ``Reshape`` and a ``Transpose`` per input, a ``Concat`` per cache
tensor, a ``Transpose`` and a ``Reshape`` after. ONNX ``Attention`` (opset 23) does all of it itself when given
3-D inputs with ``q_num_heads``/``kv_num_heads``, the cache as ``past_key``/``past_value`` and the concatenation
as outputs ``present_key``/``present_value``: :class:`AttentionOnBsdPass` gives it that form. A rotary embedding
between the split and the attention (:mod:`.rotary`) moves before the split, with ``num_heads``.

Only with ``is_causal=0`` when there is a cache (the causal alignment of a query shorter than the keys is not
the same in both), and only where every dimension is checked from the recorded shapes.

Written by hand: each of the three inputs may or may not go through a cache ``Concat`` or a ``RotaryEmbedding``
(no fixed pattern), and the new node also replaces the concatenations read as outputs (values that are not the
matched root's); the split and merge nodes, left unused, are removed after it.
"""

from __future__ import annotations

import onnx_ir as ir

from ..provenance import copy_provenance
from .graph_match import dims, int64s, producer, same_dim, typed
from .rewrite import CountingPass

_SWAP = [0, 2, 1, 3]


def _perm(node: ir.Node | None) -> bool:
    return node is not None and list(node.attributes.get_ints("perm", ())) == _SWAP


def split_heads(value: ir.Value) -> tuple[ir.Value, int, list[ir.Node]] | None:
    """``(x, heads, nodes)`` when ``value = Transpose(Reshape(x, [B, S, heads, D]), (0, 2, 1, 3))`` with ``x``
    ``[B, S, heads * D]``, possibly followed by a ``RotaryEmbedding`` (given as the node to redo on ``x``)."""
    rope = producer(value, "RotaryEmbedding")
    if rope is not None and (len(rope.inputs) != 3 or "num_heads" in rope.attributes):
        return None
    if len(value.uses()) != 1 or value.is_graph_output():
        return None
    transpose = producer(rope.inputs[0] if rope is not None else value, "Transpose")
    reshape = producer(transpose.inputs[0], "Reshape") if _perm(transpose) else None
    if reshape is None or len(transpose.outputs[0].uses()) != 1 or len(reshape.outputs[0].uses()) != 1:
        return None
    x = reshape.inputs[0]
    src, split = dims(x), dims(reshape.outputs[0])
    if src is None or split is None or len(src) != 3 or len(split) != 4:
        return None
    heads, size = split[2], split[3]
    if not (isinstance(heads, int) and isinstance(size, int) and same_dim(src[2], heads * size)):
        return None
    if not (same_dim(src[0], split[0]) and same_dim(src[1], split[1])):
        return None
    return x, heads, [rope] if rope is not None else []


def merged_heads(value: ir.Value) -> ir.Node | None:
    """The ``Reshape`` of ``Transpose(value, (0, 2, 1, 3))`` to ``[B, S, H * D]`` (or ``[B * S, H * D]``, GPT-2's
    ``Conv1D``) that alone reads ``value``."""
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    transpose = uses[0].node
    if transpose.op_type != "Transpose" or transpose.domain not in ("", "ai.onnx") or not _perm(transpose):
        return None
    out = transpose.outputs[0]
    if len(out.uses()) != 1 or out.is_graph_output():
        return None
    reshape = out.uses()[0].node
    if reshape.op_type != "Reshape" or reshape.domain not in ("", "ai.onnx"):
        return None
    shape, merged = dims(value), dims(reshape.outputs[0])
    if shape is None or merged is None or len(shape) != 4 or len(merged) not in (2, 3):
        return None
    if not (isinstance(shape[1], int) and isinstance(shape[3], int) and same_dim(merged[-1], shape[1] * shape[3])):
        return None
    if len(merged) == 3 and not (same_dim(merged[0], shape[0]) and same_dim(merged[1], shape[2])):
        return None
    return reshape


def _with_past(value: ir.Value, attention: ir.Node) -> tuple[ir.Value, ir.Value] | None:
    """``(past, new)`` when ``value = Concat(past, new, axis=2)`` read by ``attention`` (and the graph's outputs)."""
    concat = producer(value, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.attributes.get_int("axis", 0) not in (2, -2):
        return None
    if [u.node for u in value.uses()] != [attention] or len(dims(concat.inputs[0]) or []) != 4:
        return None
    return concat.inputs[0], concat.inputs[1]


class AttentionOnBsdPass(CountingPass):
    """``Attention`` whose query, key and value are split heads (and key and value maybe a cache concatenation),
    whose result is merged → ``Attention`` on the 3-D tensors, past and present as inputs and outputs; ``count``
    is the attention nodes rewritten.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.pipeline import named
        >>> class Heads(torch.nn.Module):
        ...     def forward(self, q, k, v, past_k, past_v):
        ...         split = lambda t: t.view(t.shape[0], t.shape[1], 2, 4).transpose(1, 2)
        ...         k, v = torch.cat([past_k, split(k)], 2), torch.cat([past_v, split(v)], 2)
        ...         y = torch.nn.functional.scaled_dot_product_attention(split(q), k, v)
        ...         return y.transpose(1, 2).reshape(q.shape), k, v
        >>> inputs = (*(torch.randn(2, 3, 8) for _ in "qkv"), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4))
        >>> m = to_onnx(Heads(), inputs, target_opset=23, as_ir=True)
        >>> named("attention_bsd").apply(m), [n.op_type for n in m.graph]
        (1, ['Attention'])
    """

    def rewrite(self, model: ir.Model) -> int:
        graph, count = model.graph, 0
        for node in list(graph):
            if node.op_type != "Attention" or node.domain not in ("", "ai.onnx"):
                continue
            if len(node.inputs) > 4 or len(node.outputs) != 1 or len(dims(node.inputs[0]) or []) != 4:
                continue
            if self._rewrite(graph, node):
                count += 1
        return count

    @staticmethod
    def _rewrite(graph: ir.Graph, node: ir.Node) -> bool:
        q, k, v = node.inputs[:3]
        merge = merged_heads(node.outputs[0])
        kpast, vpast = _with_past(k, node), _with_past(v, node)
        if merge is None or (kpast is None) != (vpast is None):
            return False
        if kpast is not None:
            if node.attributes.get_int("is_causal", 0):
                return False
            (past_k, k), (past_v, v) = kpast, vpast
        parts = [split_heads(x) for x in (q, k, v)]
        if None in parts:
            return False
        (q3, heads, q_rope), (k3, kv_heads, k_rope), (v3, v_heads, v_rope) = parts
        if kv_heads != v_heads or v_rope:
            return False
        new_nodes = []
        q3, k3 = (
            _rope_on_bsd(x, rope[0], n, new_nodes) if rope else x
            for x, rope, n in ((q3, q_rope, heads), (k3, k_rope, kv_heads))
        )
        attrs = dict(node.attributes)
        attrs["q_num_heads"] = ir.AttrInt64("q_num_heads", heads)
        attrs["kv_num_heads"] = ir.AttrInt64("kv_num_heads", kv_heads)
        inputs = [q3, k3, v3, node.inputs[3] if len(node.inputs) > 3 else None]
        old_values = [merge.outputs[0]]
        if kpast is not None:
            inputs += [past_k, past_v]
            old_values += [node.inputs[1], node.inputs[2]]
        attention = ir.node("Attention", inputs, attributes=attrs, num_outputs=len(old_values), name=f"{node.name}_bsd")
        for new, old in zip(attention.outputs, old_values):
            new.type, new.shape = old.type, old.shape
        copy_provenance(node, attention)
        new_nodes.append(attention)
        new_values = list(attention.outputs)
        merged = dims(merge.outputs[0])
        if len(merged) == 2:  # [B * S, H * D]: the 3-D result flattened
            y = attention.outputs[0]
            y.shape = ir.Shape([q3.shape[0], q3.shape[1], merged[1]])
            flat = ir.node("Reshape", [y, int64s(graph, f"{node.name}_flat", [-1, merged[1]])], name=f"{node.name}_flat")
            copy_provenance(merge, flat)
            new_nodes.append(flat)
            new_values[0] = flat.outputs[0]
        ir.convenience.replace_nodes_and_values(graph, merge, [], new_nodes, old_values, new_values)
        return True


def _rope_on_bsd(x: ir.Value, rope: ir.Node, heads: int, new_nodes: list[ir.Node]) -> ir.Value:
    """``RotaryEmbedding(x, cos, sin, num_heads=heads)`` on the 3-D ``x`` (the same rotation per head)."""
    node = typed(ir.node("RotaryEmbedding", [x, *rope.inputs[1:]], attributes={**rope.attributes, "num_heads": heads}), x)
    copy_provenance(rope, node)
    new_nodes.append(node)
    return node.outputs[0]

