"""Self-attention of an encoder as onnxruntime's ``com.microsoft::Attention``: projection and attention in one
kernel (BERT, RoBERTa, ViT...).

After :mod:`.packed_projections`, an encoder layer reads ``Split(MatMul(x, W) + b)`` into ONNX ``Attention``
(3-D query, key and value, no cache). ``com.microsoft::Attention(x, W, b, attention_bias=...)`` computes the
same: onnxruntime runs the packed product with its bias and the attention in one kernel (the official
exporter's BERT after onnxscript's fusions uses it; 4 % faster than the separate nodes on the medium BERT).

Masked rows: that kernel adds the mask as a bias, so a query row the boolean mask hides entirely gets the mean
of the values where PyTorch (and ONNX ``Attention``) give 0. A ``Where`` on "the row sees a key" (computed
once per mask) sets those rows to 0 after the kernel. Additive (float) masks and causal attention are left
to ONNX ``Attention``.

Written by hand: the mask's bias and row guard are made once per mask and shared by the layers, state that spans
the matches; the packed projections and ONNX ``Attention`` nodes, left unused, are removed after it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..provenance import copy_provenance
from .graph_match import dims, initializer, int64s, only_used_by, producer, same_dim, typed
from .rewrite import CountingPass

#: the attributes of ONNX ``Attention`` this rewrite knows (any other: the node is left alone)
_KNOWN = frozenset({"q_num_heads", "kv_num_heads", "scale", "is_causal"})
_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


def _attribute(node: ir.Node, name: str, default: object) -> object:
    attr = node.attributes.get(name)
    return attr.value if attr is not None else default


def _packed_qkv(attention: ir.Node) -> tuple[ir.Value, ir.Value, ir.Value, list[int]] | None:
    """``(x, W, b, sizes)`` when the query, key and value of ``attention`` are the outputs of
    ``Split(MatMul(x, W) + b)`` in that order, read by ``attention`` alone."""
    split = producer(attention.inputs[0], "Split")
    if split is None or len(split.outputs) != 3 or list(split.outputs) != list(attention.inputs[:3]):
        return None
    if any(not only_used_by(v, attention) for v in split.outputs) or _attribute(split, "axis", 0) != -1:
        return None
    add = producer(split.inputs[0], "Add")
    matmul = producer(add.inputs[0], "MatMul") if add is not None else None
    if matmul is None or not only_used_by(add.inputs[0], add) or not only_used_by(split.inputs[0], split):
        return None
    x, weight, bias = matmul.inputs[0], matmul.inputs[1], add.inputs[1]
    sizes = split.inputs[1].const_value if len(split.inputs) > 1 and split.inputs[1] is not None else None
    if weight.const_value is None or bias is None or bias.const_value is None or sizes is None:
        return None
    return x, weight, bias, [int(s) for s in sizes.numpy()]


def _bool_mask(attention: ir.Node, x: ir.Value) -> ir.Value | None | bool:
    """The boolean mask ``[B or 1, 1, S, T]`` of ``attention``, None without a mask, False when the mask
    cannot be given to the kernel."""
    mask = attention.inputs[3] if len(attention.inputs) > 3 else None
    if mask is None:
        return None
    shape, xshape = dims(mask), dims(x)
    if mask.dtype != ir.DataType.BOOL or shape is None or len(shape) != 4 or shape[1] != 1:
        return False
    if not same_dim(shape[2], xshape[1]) or not (shape[0] == 1 or same_dim(shape[0], xshape[0])):
        return False
    return mask


class PackedAttentionPass(CountingPass):
    """See the module's docstring; ``count`` is the attention nodes rewritten.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> class SelfAttention(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.q, self.k, self.v = (torch.nn.Linear(16, 16) for _ in range(3))
        ...     def forward(self, x, mask):
        ...         split = lambda t: t.view(t.shape[0], t.shape[1], 4, 4).transpose(1, 2)
        ...         y = torch.nn.functional.scaled_dot_product_attention(
        ...             split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask)
        ...         return y.transpose(1, 2).reshape(x.shape) * 2
        >>> x, mask = torch.randn(2, 5, 16), torch.ones(2, 1, 5, 5, dtype=torch.bool)
        >>> m = to_onnx(SelfAttention(), (x, mask), optimize="onnxruntime", as_ir=True)
        >>> [(n.domain, n.op_type) for n in m.graph if n.op_type in ("Attention", "MatMul", "Split")]
        [('com.microsoft', 'Attention')]
    """

    def rewrite(self, model: ir.Model) -> int:
        graph, count = model.graph, 0
        masks: dict[int, tuple[ir.Value, ir.Value]] = {}
        for node in list(graph):
            if node.op_type == "Attention" and node.domain in ("", "ai.onnx") and self._rewrite(graph, node, masks):
                count += 1
        if count:
            model.opset_imports.setdefault("com.microsoft", 1)
        return count

    @staticmethod
    def _rewrite(graph: ir.Graph, node: ir.Node, masks: dict) -> bool:
        if set(node.attributes) - _KNOWN or _attribute(node, "is_causal", 0) or len(node.inputs) > 4:
            return False
        heads = _attribute(node, "q_num_heads", None)
        if heads is None or heads != _attribute(node, "kv_num_heads", None):
            return False
        if any(out.uses() or out.is_graph_output() for out in node.outputs[1:]):
            return False
        packed = _packed_qkv(node)
        if packed is None:
            return False
        x, weight, bias, sizes = packed
        xshape, out = dims(x), node.outputs[0]
        if x.dtype not in _FLOATS or xshape is None or len(xshape) != 3 or out.is_graph_output():
            return False
        if sizes[0] != sizes[1] or any(s % heads for s in sizes):
            return False
        mask = _bool_mask(node, x)
        if mask is False:
            return False
        attributes = {"num_heads": heads, "qkv_hidden_sizes": sizes}
        scale = _attribute(node, "scale", None)
        if scale is not None:
            attributes["scale"] = float(scale)
        nodes: list[ir.Node] = []
        inputs = [x, weight, bias]
        if mask is not None:
            bias_value, sees_a_key, zero = PackedAttentionPass._mask_values(graph, mask, x.dtype, masks, nodes)
            inputs += [None, None, bias_value]
        fused = ir.node("Attention", inputs, attributes=attributes, domain="com.microsoft", name=f"{node.name}_packed")
        typed(fused, out)
        nodes.append(fused)
        result = fused.outputs[0]
        if mask is not None:
            guard = typed(ir.node("Where", [sees_a_key, result, zero], name=f"{node.name}_masked_rows"), out)
            nodes.append(guard)
            result = guard.outputs[0]
        copy_provenance(node, *nodes)
        graph.insert_before(node, nodes)
        out.replace_all_uses_with(result)
        result.name, out.name = out.name, None
        return True

    @staticmethod
    def _mask_values(graph: ir.Graph, mask: ir.Value, dtype: ir.DataType, masks: dict,
                     nodes: list[ir.Node]) -> tuple[ir.Value, ir.Value, ir.Value]:
        """The additive bias of ``mask`` (0 or the lowest float), ``[B, S, 1]``: the query row sees a key, and
        the 0 of ``dtype``; made once per mask and type (the nodes, when new, go to ``nodes``)."""
        key = (id(mask), dtype)
        if key in masks:
            return masks[key]
        np_type = dtype.numpy()
        zero, lowest = (
            initializer(graph, f"{mask.name}_{name}", ir.tensor(np.array(v, dtype=np_type)))
            for name, v in (("keep", 0), ("hide", np.finfo(np_type).min))
        )
        shape = dims(mask)
        where = typed(ir.node("Where", [mask, zero, lowest], name=f"{mask.name}_bias"), dtype=dtype, shape=shape)
        seen = typed(ir.node("ReduceMax", [mask, int64s(graph, f"{mask.name}_keys", [3])], attributes={"keepdims": 1},
                             name=f"{mask.name}_sees_a_key"), dtype=ir.DataType.BOOL, shape=[*shape[:3], 1])
        rows = typed(ir.node("Squeeze", [seen.outputs[0], int64s(graph, f"{mask.name}_heads", [1])]),
                     dtype=ir.DataType.BOOL, shape=[shape[0], shape[2], 1])
        nodes += [where, seen, rows]
        masks[key] = (where.outputs[0], rows.outputs[0], zero)
        return masks[key]

