"""Rotary position embedding into one ONNX ``RotaryEmbedding`` node (opset 23).

transformers applies it as ``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = cat(-x[..., h:], x[..., :h])``,
``cos = cat(f, f).cos()[:, None]`` (``f``: positions times inverse frequencies, ``[B, S, D/2]``), which the
translation writes as 2 ``Slice``, ``Neg``, ``Concat``, 2 ``Mul``, ``Add`` per tensor. onnxscript's fusion of it
expects ``torch.onnx.export``'s spelling of ``cos`` (a ``MatMul`` of the frequencies by the positions) and finds
none in ours. :class:`RotaryPass` matches ours and writes ``RotaryEmbedding(x, cos(f), sin(f))``: the caches of
half width, one row per position of ``x`` (no ``position_ids``), computed once for all layers; onnxruntime wants
their batch equal to the input's, they are expanded when ``f`` has a batch of 1.

Written by hand: the caches are shared by every rotation of the same frequencies (made once, before the first),
state that spans the matches; the replaced ``Mul``/``Neg``/``Slice`` nodes, left unused, are removed after it.
"""

from __future__ import annotations

import itertools

import onnx_ir as ir

from ..provenance import copy_provenance
from ..providers import of_model
from .graph_match import dims, int64s, ints, producer, same_dim, typed
from .rewrite import CountingPass

#: the first opset with ``RotaryEmbedding`` in the main domain
ROTARY_OPSET = 23
_FLOAT = frozenset({ir.DataType.FLOAT})
_HALF = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def _half_slices(rotated: ir.Value, x: ir.Value, half: int) -> bool:
    """``rotated`` is ``Concat(Neg(x[..., half:]), x[..., :half], axis=-1)``."""
    concat = producer(rotated, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.attributes.get_int("axis", 0) not in (-1, 3):
        return False
    neg = producer(concat.inputs[0], "Neg")
    upper = producer(neg.inputs[0], "Slice") if neg is not None else None
    lower = producer(concat.inputs[1], "Slice")
    if upper is None or lower is None:
        return False
    for node, start, end_ok in ((upper, half, lambda e: e >= 2 * half), (lower, 0, lambda e: e == half)):
        if node.inputs[0] is not x or len(node.inputs) < 4:
            return False
        starts, ends, axes = (ints(v) for v in node.inputs[1:4])
        steps = ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
        if starts != [start] or ends is None or len(ends) != 1 or not end_ok(ends[0]):
            return False
        if axes not in ([-1], [3]) or steps != [1]:
            return False
    return True


def _frequencies(cos4: ir.Value, sin4: ir.Value, dtype: ir.DataType) -> ir.Value | None:
    """``f`` when ``cos4 = Unsqueeze(Cos(Concat(f, f, axis=-1)), [1])`` and ``sin4`` the same with ``Sin``, the
    ``Cos`` and ``Sin`` of type ``dtype`` or cast to it from float32 (transformers' half-precision models compute
    them in float32, then round them to the model's type)."""
    found = []
    for value, op in ((cos4, "Cos"), (sin4, "Sin")):
        unsqueeze = producer(value, "Unsqueeze")
        if unsqueeze is None or ints(unsqueeze.inputs[1]) != [1] or unsqueeze.inputs[0].dtype != dtype:
            return None
        inner = unsqueeze.inputs[0]
        cast = producer(inner, "Cast")
        if cast is not None and cast.inputs[0].dtype == ir.DataType.FLOAT:
            inner = cast.inputs[0]
        trig = producer(inner, op)
        concat = producer(trig.inputs[0], "Concat") if trig is not None else None
        if concat is None or len(concat.inputs) != 2 or concat.inputs[0] is not concat.inputs[1]:
            return None
        if concat.attributes.get_int("axis", 0) not in (-1, 2):
            return None
        found.append(concat.inputs[0])
    return found[0] if found[0] is found[1] else None


class RotaryPass(CountingPass):
    """``x * cos + rotate_half(x) * sin`` (either operand order) → ``RotaryEmbedding(x, cos(f), sin(f))`` on a
    float32 ``x`` of shape ``[B, H, S, D]``, ``D`` known, ``f`` of shape ``[B or 1, S, D/2]``, from opset
    :data:`ROTARY_OPSET` on; ``count`` is the rotations fused. In a model made for CUDA only, ``x`` may be float16
    or bfloat16 too, with ``cos`` and ``sin`` computed in float32 and cast to its type (the caches are so): the
    fused kernel rounds the rotation once where PyTorch rounds its two products and their sum, as the other
    half-precision fusions for CUDA (:mod:`.half_islands`).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.pipeline import named
        >>> def rotate_half(x):
        ...     return torch.cat((-x[..., 4:], x[..., :4]), dim=-1)
        >>> class Rope(torch.nn.Module):
        ...     def forward(self, x, pos):
        ...         f = pos[:, :, None].float() * torch.arange(1, 5).float()
        ...         emb = torch.cat((f, f), dim=-1)
        ...         cos, sin = emb.cos()[:, None], emb.sin()[:, None]
        ...         return x * cos + rotate_half(x) * sin
        >>> x, pos = torch.randn(2, 3, 5, 8), torch.arange(5).expand(2, 5)
        >>> m = to_onnx(Rope(), (x, pos), target_opset=23, as_ir=True)
        >>> named("rotary_embedding").apply(m)
        1
        >>> [n.op_type for n in m.graph if n.op_type in ("RotaryEmbedding", "Neg", "Slice")]
        ['RotaryEmbedding']
    """

    def rewrite(self, model: ir.Model) -> int:
        graph, count = model.graph, 0
        if model.opset_imports.get("", 0) < ROTARY_OPSET:
            return 0
        dtypes = _FLOAT if "cpu" in of_model(model) else _FLOAT | _HALF
        caches: dict[tuple, tuple[ir.Value, ir.Value]] = {}
        for add in list(graph):
            if add.op_type != "Add" or add.domain not in ("", "ai.onnx"):
                continue
            match = self._match(add, dtypes)
            if match is None:
                continue
            x, f = match
            cos, sin = self._caches(graph, add, x, f, caches)
            rope = ir.node("RotaryEmbedding", [x, cos, sin], name=f"{add.name}_rotary")
            typed(rope, add.outputs[0])
            copy_provenance(add, rope)
            ir.convenience.replace_nodes_and_values(graph, add, [], [rope], [add.outputs[0]], [rope.outputs[0]])
            count += 1
        return count

    @staticmethod
    def _match(add: ir.Node, dtypes: frozenset) -> tuple[ir.Value, ir.Value] | None:
        muls = [producer(v, "Mul") for v in add.inputs]
        out = dims(add.outputs[0])
        if len(muls) != 2 or None in muls or out is None or len(out) != 4:
            return None
        # which Mul holds x * cos, which operand of each is x (cos) and rotate_half(x) (sin)
        for (direct, rotated), i, j in itertools.product((muls, muls[::-1]), (0, 1), (0, 1)):
            x, shape = direct.inputs[i], dims(direct.inputs[i])
            if x is None or x.dtype not in dtypes or shape is None or len(shape) != 4:
                continue
            if not isinstance(shape[3], int) or shape[3] % 2 or not same_dim(out[3], shape[3]):
                continue
            half = shape[3] // 2
            if not _half_slices(rotated.inputs[j], x, half):
                continue
            f = _frequencies(direct.inputs[1 - i], rotated.inputs[1 - j], x.dtype)
            fshape = dims(f)
            if fshape is None or len(fshape) != 3 or not same_dim(fshape[2], half):
                continue
            if same_dim(fshape[1], shape[2]) and (fshape[0] == 1 or same_dim(fshape[0], shape[0])):
                return x, f
        return None

    @staticmethod
    def _caches(graph: ir.Graph, after: ir.Node, x: ir.Value, f: ir.Value, caches: dict) -> tuple[ir.Value, ir.Value]:
        """``cos(f)``, ``sin(f)``, expanded to the batch of ``x`` when ``f`` has a batch of 1 (once per ``f``
        and batch dimension)."""
        batch = x.shape[0]
        expand = not same_dim(f.shape[0], batch)
        key = (id(f), getattr(batch, "value", batch) if expand else None, x.dtype)
        if key in caches:
            return caches[key]
        nodes, fshape = [], list(f.shape)
        source = f
        if expand:
            head, nodes = _batch_size(graph, x)
            tail = ir.node("Shape", [f], attributes={"start": 1, "end": 3})
            shape = ir.node("Concat", [head, tail.outputs[0]], attributes={"axis": 0})
            typed(tail, dtype=ir.DataType.INT64, shape=[2])
            typed(shape, dtype=ir.DataType.INT64, shape=[3])
            widened = ir.node("Expand", [f, shape.outputs[0]])
            typed(widened, dtype=f.dtype, shape=[batch, *fshape[1:]])
            nodes += [tail, shape, widened]
            source = widened.outputs[0]
        cos = typed(ir.node("Cos", [source]), source)
        sin = typed(ir.node("Sin", [source]), source)
        nodes += [cos, sin]
        if x.dtype != source.dtype:  # computed in float32, rounded to the model's type as transformers does
            cos, sin = (typed(ir.node("Cast", [v.outputs[0]], attributes={"to": x.dtype}), dtype=x.dtype,
                              shape=list(v.outputs[0].shape)) for v in (cos, sin))
            nodes += [cos, sin]
        # before the first rotation's Add: x and f are computed by then, every later rotation comes after it
        graph.insert_before(after, nodes)
        caches[key] = (cos.outputs[0], sin.outputs[0])
        return caches[key]


def _batch_size(graph: ir.Graph, x: ir.Value) -> tuple[ir.Value, list[ir.Node]]:
    """``[batch]`` of ``x`` as a 1-D tensor: a constant, else the shape of a graph input with the same batch
    dimension (a ``Shape`` of ``x`` itself would be one more reader of the heads the attention rewrite removes)."""
    batch = x.shape[0]
    if isinstance(batch, int):
        return int64s(graph, "rotary_batch", [batch]), []
    for value in graph.inputs:
        for axis, dim in enumerate(value.shape or []):
            if same_dim(dim, batch):
                node = typed(ir.node("Shape", [value], attributes={"start": axis, "end": axis + 1}),
                             dtype=ir.DataType.INT64, shape=[1])
                return node.outputs[0], [node]
    node = typed(ir.node("Shape", [x], attributes={"start": 0, "end": 1}), dtype=ir.DataType.INT64, shape=[1])
    return node.outputs[0], [node]

