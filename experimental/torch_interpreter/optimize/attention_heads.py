"""Grouped-query attention: the key and value heads repeated before ONNX ``Attention`` are given to it unrepeated.

transformers repeats the key and value heads in Python when a mask is given (``repeat_kv``:
``x[:, :, None].expand(B, Hkv, g, S, D).reshape(B, Hkv * g, S, D)``), which the translation writes as
``Unsqueeze``, ``Expand``, ``Reshape`` on each of the two. ONNX ``Attention`` (opset 23) takes fewer key/value
heads than query heads and maps query head ``h`` to key/value head ``h // g``, which is what the repetition
computes: :class:`RepeatedHeadsIntoAttentionPass` removes it (six nodes per layer, and the copies of the
cache they make).

Written by hand: it changes two inputs of the ``Attention`` node in place (the repetitions, left unused, are
removed after it) and needs the same number of groups on the key and the value, two chains of three nodes.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from .graph_match import dims, producer, same_dim
from .rewrite import CountingPass

logger = logging.getLogger(__name__)


def unrepeated_heads(value: ir.Value) -> ir.Value | None:
    """The tensor ``[B, Hkv, S, D]`` whose heads ``value`` repeats (``Unsqueeze(x, 2)``, ``Expand`` to
    ``[B, Hkv, g, S, D]``, ``Reshape`` to ``[B, Hkv * g, S, D]``), or None when ``value`` is not such a
    repetition (every dimension checked from the shapes the translation recorded)."""
    reshape = producer(value, "Reshape")
    expand = producer(reshape.inputs[0], "Expand") if reshape is not None else None
    unsqueeze = producer(expand.inputs[0], "Unsqueeze") if expand is not None else None
    if unsqueeze is None or len(unsqueeze.inputs) != 2 or unsqueeze.inputs[1] is None:
        return None
    source = unsqueeze.inputs[0]
    axes = unsqueeze.inputs[1].const_value
    if source is None or axes is None or [int(a) for a in np.asarray(axes.numpy()).reshape(-1)] not in ([2], [-3]):
        return None
    src, expanded, out = dims(source), dims(expand.outputs[0]), dims(reshape.outputs[0])
    if src is None or expanded is None or out is None or (len(src), len(expanded), len(out)) != (4, 5, 4):
        return None
    b, hkv, s, d = src
    groups = expanded[2]
    if not (isinstance(hkv, int) and isinstance(groups, int)):
        return None
    if not all(same_dim(x, y) for x, y in zip(expanded, [b, hkv, groups, s, d])):
        return None
    if not all(same_dim(x, y) for x, y in zip(out, [b, hkv * groups, s, d])):
        return None
    return source


class RepeatedHeadsIntoAttentionPass(CountingPass):
    """``Attention(q, repeat(k), repeat(v), ...)`` → ``Attention(q, k, v, ...)`` (ONNX ``Attention``, main
    domain, 4-D inputs), both or neither: :func:`unrepeated_heads` must find the repetition on the key and on
    the value, with the same number of groups; ``count`` is the attention nodes changed.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.pipeline import named
        >>> q = ir.val("q", ir.DataType.FLOAT, [2, 4, 5, 8])
        >>> kv = [ir.val(n, ir.DataType.FLOAT, [2, 2, 5, 8]) for n in "kv"]
        >>> def const(name, values):
        ...     return ir.Value(name=name, const_value=ir.tensor(np.array(values, dtype=np.int64), name=name))
        >>> axes, shape5, shape4 = const("axes", [2]), const("s5", [2, 2, 2, 5, 8]), const("s4", [2, 4, 5, 8])
        >>> nodes, repeated = [], []
        >>> for x in kv:
        ...     u = ir.node("Unsqueeze", [x, axes])
        ...     e = ir.node("Expand", [u.outputs[0], shape5])
        ...     r = ir.node("Reshape", [e.outputs[0], shape4])
        ...     e.outputs[0].shape, r.outputs[0].shape = ir.Shape([2, 2, 2, 5, 8]), ir.Shape([2, 4, 5, 8])
        ...     nodes += [u, e, r]
        ...     repeated.append(r.outputs[0])
        >>> att = ir.node("Attention", [q, *repeated])
        >>> att.outputs[0].name = "y"
        >>> g = ir.Graph([q, *kv], att.outputs, nodes=[*nodes, att], initializers=[axes, shape5, shape4],
        ...              opset_imports={"": 23})
        >>> m = ir.Model(g, ir_version=10)
        >>> named("attention_gqa").apply(m), [n.op_type for n in m.graph]
        (1, ['Attention'])
    """

    def rewrite(self, model: ir.Model) -> int:
        count = 0
        for node in list(model.graph):
            if node.op_type != "Attention" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 3:
                continue
            k, v = unrepeated_heads(node.inputs[1]), unrepeated_heads(node.inputs[2])
            if k is None or v is None or not same_dim(node.inputs[1].shape[1], node.inputs[2].shape[1]):
                continue
            if not same_dim(k.shape[1], v.shape[1]):
                continue
            node.replace_input_with(1, k)
            node.replace_input_with(2, v)
            count += 1
        return count
