"""The decoder's attention as onnxruntime's ``com.microsoft::GroupQueryAttention``, the form onnxruntime-genai
decodes fastest: the rotary embedding of the query and key computed inside it, the cache written in place
(``past_present_share_buffer``: one buffer of the context length for past and present, no copy of the cache per
token), the query/key/value projection read packed.

The exported decoder computes its attention as ONNX ``Attention`` (opset 23) on ``[batch, sequence, hidden]``
inputs, with the cache as its past inputs and a boolean mask built from ``attention_mask``, after a
``RotaryEmbedding`` of the query and of the key whose cosines and sines come from ``position_ids``.
``GroupQueryAttention`` reads the same things otherwise: the number of kept tokens of each row (``seqlens_k``, the
mask's sum minus one) instead of the mask (causal, keys after a row's kept tokens ignored), and positions counted
from them instead of ``position_ids``, with tables of the cosines and sines of every position up to the context
length. The tables are the model's own: the part of the graph computing the cosines and sines from
``position_ids`` run once on the positions ``0 .. context - 1``.

It is the same computation only when the model's mask and positions are transformers' usual ones (no sliding
window shorter than the context, no position scaling that depends on the sequence length...): the rewrite
(:func:`fuse_group_query_attention`) checks the graph's form, and :mod:`.shared_buffer_check` then compares the
rewritten decoder with PyTorch before it is kept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from ..errors import GenAIError
from ..optimize.graph_match import initializer, int64s, producer
from ..provenance import copy_provenance

logger = logging.getLogger(__name__)

MS_DOMAIN = "com.microsoft"


@dataclass
class _Layer:
    """One attention to rewrite: the node, its query/key/value before any rotary embedding, the rotary nodes, the
    packed projection when the three come from one, and, in the heads-first form, the cache ``Concat`` nodes."""

    attention: ir.Node
    query: ir.Value
    key: ir.Value
    value: ir.Value
    rotary: tuple[ir.Node, ir.Node] | None
    packed: ir.Value | None = None
    #: heads first (``[batch, heads, sequence, head_size]`` inputs, the cache appended by two ``Concat``)
    concats: tuple[ir.Node, ir.Node] | None = None
    heads: tuple[int, int] = (0, 0)


@dataclass
class Fusion:
    """What :func:`fuse_group_query_attention` did: the layers rewritten, the inputs removed, or why nothing."""

    layers: int = 0
    removed_inputs: list[str] = field(default_factory=list)
    reason: str = ""


def _layers(graph: ir.Graph) -> tuple[list[_Layer], str]:
    layers = []
    for node in graph:
        if node.op_type != "Attention" or node.domain not in ("", "ai.onnx"):
            continue
        layer = _sequence_first(graph, node) if len(node.inputs) == 6 else _heads_first(graph, node)
        if isinstance(layer, str):
            return [], f"{layer} ({node.name})"
        layers.append(layer)
    if not layers:
        return [], "no Attention with a cache"
    if len(layers) * 2 != sum(1 for v in graph.inputs if v.name and v.name.endswith((".key", ".value"))):
        return [], "not every layer's cache is read by an Attention"
    return layers, ""


def _common(node: ir.Node) -> str:
    attrs = node.attributes
    if attrs.get_int("is_causal", 0) or attrs.get_int("qk_matmul_output_mode", 0):
        return "an Attention of another form"
    if len(node.outputs) > 1 and any(o is not None and (o.uses() or o.is_graph_output()) for o in node.outputs[3:]):
        return "an Attention whose scores are read"
    return ""


def _rotary(query: ir.Value, key: ir.Value) -> tuple[ir.Value, ir.Value, tuple[ir.Node, ir.Node] | None] | str:
    """The query and key before their rotary embeddings, and those (None without any)."""
    rope_q, rope_k = producer(query, "RotaryEmbedding"), producer(key, "RotaryEmbedding")
    if rope_q is None and rope_k is None:
        return query, key, None
    if rope_q is None or rope_k is None or len(rope_q.inputs) != 3 or len(rope_k.inputs) != 3:
        return "a rotary embedding of the query or the key alone"
    if rope_q.inputs[1:] != rope_k.inputs[1:] or any(
            rope_q.attributes.get_int(a, 0) != rope_k.attributes.get_int(a, 0)
            for a in ("interleaved", "rotary_embedding_dim")):
        return "rotary embeddings of the query and the key that differ"
    if any(len(r.outputs[0].uses()) != 1 for r in (rope_q, rope_k)):
        return "a rotary embedding read elsewhere"
    return rope_q.inputs[0], rope_k.inputs[0], (rope_q, rope_k)


def _sequence_first(graph: ir.Graph, node: ir.Node) -> _Layer | str:
    """``Attention(q, k, v, mask, past_key, past_value)`` on ``[batch, sequence, heads * head_size]``."""
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    if node.inputs[4] not in inputs or node.inputs[5] not in inputs:
        return "an Attention without the cache as its past inputs"
    if len(node.outputs) < 3 or node.outputs[1] not in outputs or node.outputs[2] not in outputs:
        return "an Attention whose present outputs are not the decoder's"
    problem = _common(node)
    if problem:
        return problem
    if "q_num_heads" not in node.attributes or "kv_num_heads" not in node.attributes:
        return "an Attention without its numbers of heads"
    found = _rotary(node.inputs[0], node.inputs[1])
    if isinstance(found, str):
        return found
    query, key, rotary = found
    value = node.inputs[2]
    heads = (node.attributes.get_int("q_num_heads"), node.attributes.get_int("kv_num_heads"))
    return _Layer(node, query, key, value, rotary, _packed(query, key, value), heads=heads)


def _heads_first(graph: ir.Graph, node: ir.Node) -> _Layer | str:
    """``Attention(q, Concat(past_key, k), Concat(past_value, v), mask)`` on ``[batch, heads, sequence,
    head_size]``, the concatenations being the decoder's present outputs."""
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    problem = _common(node)
    if problem or len(node.inputs) not in (3, 4):
        return problem or "an Attention of another form"
    concats = []
    for value in node.inputs[1:3]:
        concat = producer(value, "Concat")
        if concat is None or len(concat.inputs) != 2 or concat.inputs[0] not in inputs or value not in outputs or \
                concat.attributes.get_int("axis", 0) not in (2, -2):
            return "an Attention without the cache appended to its keys and values"
        concats.append(concat)
    found = _rotary(node.inputs[0], concats[0].inputs[1])
    if isinstance(found, str):
        return found
    query, key, rotary = found
    value = concats[1].inputs[1]
    shapes = [v.shape for v in (query, key, value)]
    if any(s is None or len(s) != 4 or not isinstance(s[1], int) or not isinstance(s[3], int) for s in shapes):
        return "an Attention whose heads are not known"
    heads = (shapes[0][1], shapes[1][1])
    return _Layer(node, query, key, value, rotary, None, tuple(concats), heads)


def _packed(query: ir.Value, key: ir.Value, value: ir.Value) -> ir.Value | None:
    """The packed projection ``Split`` reads when ``query``, ``key`` and ``value`` are its three outputs in that
    order along the last axis, read by nothing else."""
    split = producer(query, "Split")
    if split is None or list(split.outputs) != [query, key, value]:
        return None
    axis = split.attributes.get_int("axis", 0)
    rank = len(split.inputs[0].shape) if split.inputs[0].shape is not None else None
    if rank is None or axis not in (-1, rank - 1):
        return None
    if any(len(v.uses()) != 1 or v.is_graph_output() for v in (query, key, value)):
        return None
    return split.inputs[0]


#: rotary tables up to this size are made whatever the model's size (a small model with a long context)
TABLES_FLOOR_BYTES = 256 * 2**20


def _check_table_size(model: ir.Model, cos: ir.Value, length: int) -> None:
    """Refuses, before computing them, rotary tables out of proportion to the model: above
    :data:`TABLES_FLOOR_BYTES` and above the bytes of its weights (a config asking for billions of positions)."""
    half = cos.shape[-1] if cos.shape is not None and isinstance(cos.shape[-1], int) else 1
    table_bytes = 2 * length * half * 4  # the cosines and the sines, computed in float32
    weights = sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)
    if table_bytes > max(TABLES_FLOOR_BYTES, weights):
        raise GenAIError(
            f"the rotary tables of a {length:,}-position context would take {table_bytes / 2**30:.1f} GiB, more than "
            f"the model's weights ({weights / 2**30:.2f} GiB): the context length of the model's config is out of "
            "proportion to the model; lower max_position_embeddings in its config.json"
        )


def rotary_tables(model: ir.Model, cos: ir.Value, sin: ir.Value, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The cosines and sines the model computes for the positions ``0 .. length - 1``: the part of the graph
    computing ``cos`` and ``sin`` run by onnxruntime on one row of ``length`` tokens (``[length, rotary / 2]``)."""
    import onnxruntime as ort

    graph = model.graph
    needed = _graph_inputs_of(graph, [cos, sin])
    sub = ir.convenience.extract(graph, needed, [cos, sin])
    sub.opset_imports.update(graph.opset_imports)
    for index, table in enumerate(list(sub.outputs)):
        if table.dtype == ir.DataType.BFLOAT16:  # read as float32 (exactly): numpy has no bfloat16 of its own
            cast = ir.node("Cast", [table], attributes={"to": ir.DataType.FLOAT}, name=f"rotary_table_{index}")
            sub.append(cast)
            sub.outputs[index] = cast.outputs[0]
    proto = ir.to_proto(ir.Model(sub, ir_version=model.ir_version))
    feeds = {}
    for value in needed:
        dtype = value.dtype.numpy()
        shape = [d if isinstance(d, int) else 1 for d in value.shape]
        if value.name == "position_ids":
            feeds[value.name] = np.arange(length, dtype=dtype)[None, :]
        elif value.name in ("input_ids", "attention_mask"):
            feeds[value.name] = np.ones((1, length), dtype=dtype)
        else:
            shape[2] = 0  # an empty cache
            feeds[value.name] = np.zeros(shape, dtype=dtype)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    cos_table, sin_table = session.run(None, feeds)
    return cos_table.reshape(length, -1), sin_table.reshape(length, -1)


def _graph_inputs_of(graph: ir.Graph, values: list[ir.Value]) -> list[ir.Value]:
    inputs, seen, stack = [], set(), list(values)
    graph_inputs = set(graph.inputs)
    while stack:
        value = stack.pop()
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        if value in graph_inputs:
            inputs.append(value)
            continue
        node = value.producer()
        if node is not None:
            stack.extend(node.inputs)
    return sorted(inputs, key=lambda v: graph.inputs.index(v))


def fuse_group_query_attention(model: ir.Model, context_length: int) -> Fusion:
    """Rewrites in place every ``Attention`` of the decoder ``model`` into ``com.microsoft::GroupQueryAttention``
    (every layer or none); removes ``position_ids`` when only the rotary embedding read it. Returns a
    :class:`Fusion` (``reason`` says why nothing was rewritten)."""
    graph = model.graph
    layers, reason = _layers(graph)
    if not layers:
        return Fusion(reason=reason)
    mask = next((v for v in graph.inputs if v.name == "attention_mask"), None)
    if mask is None:
        return Fusion(reason="no attention_mask input")
    tables = {}
    for layer in layers:
        if layer.rotary is not None:
            cos, sin = layer.rotary[0].inputs[1:]
            if (id(cos), id(sin)) not in tables:
                _check_table_size(model, cos, context_length)
                tables[id(cos), id(sin)] = rotary_tables(model, cos, sin, context_length)
    first = next(iter(graph))
    lengths = _lengths(graph, mask, first)
    caches = {}
    for key, (cos_table, sin_table) in tables.items():
        dtype = layers[0].query.dtype.numpy() if layers[0].query.dtype is not None else np.float32
        caches[key] = (initializer(graph, "cos_cache", ir.tensor(cos_table.astype(dtype))),
                       initializer(graph, "sin_cache", ir.tensor(sin_table.astype(dtype))))
    for layer in layers:
        _replace(graph, layer, lengths, caches)
    RemoveUnusedNodesPass()(model)
    removed = []
    for value in list(graph.inputs):
        if value.name == "position_ids" and not value.uses():
            graph.inputs.remove(value)
            removed.append(value.name)
    model.opset_imports.setdefault(MS_DOMAIN, 1)
    logger.info("GroupQueryAttention: %d layers, inputs removed: %s", len(layers), removed or "none")
    return Fusion(len(layers), removed)


def _lengths(graph: ir.Graph, mask: ir.Value, before: ir.Node) -> tuple[ir.Value, ir.Value]:
    """``seqlens_k`` (kept tokens of each row minus one, int32) and ``total_sequence_length`` (the mask's width,
    an int32 scalar), computed once from ``attention_mask``."""
    one = int64s(graph, "gqa_one", [1])
    nodes = [
        ir.node("ReduceSum", [mask, one], attributes={"keepdims": 0}, name="gqa/kept"),
    ]
    nodes.append(ir.node("Sub", [nodes[-1].outputs[0], one], name="gqa/kept_minus_one"))
    nodes.append(ir.node("Cast", [nodes[-1].outputs[0]], attributes={"to": ir.DataType.INT32}, name="gqa/seqlens_k"))
    seqlens = nodes[-1].outputs[0]
    nodes.append(ir.node("Shape", [mask], attributes={"start": 1, "end": 2}, name="gqa/width"))
    nodes.append(ir.node("Squeeze", [nodes[-1].outputs[0]], name="gqa/width_scalar"))
    nodes.append(ir.node("Cast", [nodes[-1].outputs[0]], attributes={"to": ir.DataType.INT32},
                         name="gqa/total_sequence_length"))
    total = nodes[-1].outputs[0]
    seqlens.name, total.name = "seqlens_k", "total_sequence_length"
    seqlens.dtype, total.dtype = ir.DataType.INT32, ir.DataType.INT32
    graph.insert_before(before, nodes)
    return seqlens, total


def _sequence_first_value(graph: ir.Graph, value: ir.Value, nodes: list[ir.Node]) -> ir.Value:
    """``value`` (``[batch, heads, sequence, head_size]``) as ``[batch, sequence, heads * head_size]``: the input
    of its head split when it is one (``Transpose(x, (0, 2, 1, 3))``), else transposed; then the heads merged."""
    transpose = producer(value, "Transpose")
    if transpose is not None and list(transpose.attributes.get_ints("perm", ())) == [0, 2, 1, 3]:
        source = transpose.inputs[0]
    else:
        nodes.append(ir.node("Transpose", [value], attributes={"perm": [0, 2, 1, 3]}))
        source = nodes[-1].outputs[0]
    shape = int64s(graph, "gqa_merge_heads", [0, 0, -1])
    nodes.append(ir.node("Reshape", [source, shape]))
    return nodes[-1].outputs[0]


def _replace(graph: ir.Graph, layer: _Layer, lengths: tuple[ir.Value, ir.Value], caches: dict) -> None:
    attention = layer.attention
    attrs = attention.attributes
    q_heads, kv_heads = layer.heads
    nodes: list[ir.Node] = []
    if layer.packed is not None:
        qkv = [layer.packed, None, None]
    elif layer.concats is not None:
        qkv = [_sequence_first_value(graph, v, nodes) for v in (layer.query, layer.key, layer.value)]
        past = [c.inputs[0] for c in layer.concats]
    else:
        qkv = [layer.query, layer.key, layer.value]
    if layer.concats is None:
        past = list(attention.inputs[4:6])
    inputs = [*qkv, *past, *lengths]
    new_attrs = {"num_heads": q_heads, "kv_num_heads": kv_heads, "local_window_size": -1,
                 "softcap": attrs.get_float("softcap", 0.0)}
    if "scale" in attrs:
        new_attrs["scale"] = attrs.get_float("scale")
    if layer.rotary is not None:
        rope = layer.rotary[0]
        cos, sin = rope.inputs[1:]
        inputs += list(caches[id(cos), id(sin)])
        new_attrs.update(do_rotary=1, rotary_interleaved=rope.attributes.get_int("interleaved", 0))
    gqa = ir.node("GroupQueryAttention", inputs, attributes=new_attrs, domain=MS_DOMAIN, num_outputs=3,
                  name=f"{attention.name}/gqa")
    nodes.append(gqa)
    if layer.concats is None:
        old_nodes, old = [attention], list(attention.outputs[:3])
        new = list(gqa.outputs)
    else:
        # the heads split again for the readers of the heads-first output (Transpose/Reshape pairs cancel)
        out = attention.outputs[0]
        head_size = layer.query.shape[3]
        shape = int64s(graph, "gqa_split_heads", [0, 0, q_heads, head_size])
        nodes.append(ir.node("Reshape", [gqa.outputs[0], shape]))
        nodes.append(ir.node("Transpose", [nodes[-1].outputs[0]], attributes={"perm": [0, 2, 1, 3]}))
        old_nodes = [*layer.concats, attention]
        old = [out, layer.concats[0].outputs[0], layer.concats[1].outputs[0]]
        new = [nodes[-1].outputs[0], gqa.outputs[1], gqa.outputs[2]]
    copy_provenance(attention, *nodes)
    for value, like in zip(new, old):
        value.dtype, value.shape = like.dtype, like.shape
    ir.convenience.replace_nodes_and_values(graph, attention, old_nodes, nodes, old, new)
