"""The projections of one input packed into one ``MatMul``: query/key/value (BERT, Llama, Qwen2...).

``MatMul(x, W_i) + b_i`` for ``i = 1..n``, the same ``x``, constant weights ``[K, N_i]`` and biases ``[N_i]``,
becomes ``Split(MatMul(x, [W_1 ... W_n]) + [b_1 ... b_n], [N_1 ... N_n], axis=-1)``: one product for
onnxruntime, and fewer nodes (``2n`` become 3 with biases, ``n`` become 2 without). Groups that would not
shrink (two projections without bias: Llama's gate and up) stay as they are.

The packed weight is a lazy tensor, concatenated when the model is serialized: the translation's weights are
not copied before, and a weight another node also reads is not packed (it would be stored twice).

Written by hand: a global rewrite, the projections are grouped by the value they read over the whole graph; the
``MatMul`` and ``Add`` nodes, left unused, are removed after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from ..saving import release_mapped
from .graph_match import initializer, int64s, only_used_by, producer
from .rewrite import CountingPass


def _constant_weight(value: ir.Value, matmul: ir.Node) -> tuple[Callable[[], np.ndarray], list[int], Any] | None:
    """``(array getter, [K, N], the tensor it reads)`` when ``value`` is a 2-D constant that ``matmul`` alone reads
    (or the ``Transpose`` of one, folded lazily), else None."""
    if not only_used_by(value, matmul):
        return None
    tensor = value.const_value
    if tensor is not None and len(tensor.shape) == 2:
        return tensor.numpy, [int(d) for d in tensor.shape], tensor
    transpose = producer(value, "Transpose")
    if transpose is None:
        return None
    source = transpose.inputs[0]
    perm = transpose.attributes.get("perm")
    tensor = source.const_value if source is not None else None
    if tensor is None or len(tensor.shape) != 2 or (perm is not None and list(perm.as_ints()) != [1, 0]):
        return None
    if not only_used_by(source, transpose):
        return None
    return (lambda: tensor.numpy().T), [int(tensor.shape[1]), int(tensor.shape[0])], tensor


def _projection(matmul: ir.Node) -> dict | None:
    """What packing needs of one ``MatMul(x, W) (+ b)``: its weight, its bias (or None) and the value that
    leaves it."""
    if matmul.op_type != "MatMul" or matmul.domain not in ("", "ai.onnx") or len(matmul.inputs) != 2:
        return None
    x, w = matmul.inputs
    if x is None or w is None or x.dtype != w.dtype or matmul.outputs[0].is_graph_output():
        return None
    weight = _constant_weight(w, matmul)
    if weight is None:
        return None
    out = matmul.outputs[0]
    uses = list(out.uses())
    add = uses[0].node if len(uses) == 1 else None
    bias = None
    if add is not None and add.op_type == "Add" and add.domain in ("", "ai.onnx"):
        other = add.inputs[1 - uses[0].idx]
        const = other.const_value if other is not None else None
        if const is not None and list(const.shape) == [weight[1][1]] and const.dtype == w.dtype:
            bias = (add, const)
    leaving = bias[0].outputs[0] if bias else out
    if leaving.is_graph_output():
        return None
    return {"node": matmul, "x": x, "weight": weight, "bias": bias, "out": leaving}


def _packed(parts: list[dict], dtype: ir.DataType) -> ir.LazyTensor:
    """The lazy ``[K, sum N_i]`` weight of ``parts``."""
    getters = [p["weight"][0] for p in parts]
    k = parts[0]["weight"][1][0]
    total = sum(p["weight"][1][1] for p in parts)

    sources = [p["weight"][2] for p in parts]

    def concat() -> ir.Tensor:
        packed = ir.tensor(np.concatenate([get() for get in getters], axis=1))
        release_mapped(*sources)
        return packed

    return ir.LazyTensor(concat, dtype=dtype, shape=ir.Shape([k, total]))


class PackedProjectionsPass(CountingPass):
    """Packs the projections of one input (see the module's docstring); ``count`` is the groups packed.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.pipeline import named
        >>> class QKV(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.q, self.k, self.v = (torch.nn.Linear(8, n) for n in (8, 4, 4))
        ...     def forward(self, x):
        ...         return self.q(x) * 2, self.k(x) - 1, self.v(x) + 1
        >>> m = to_onnx(QKV(), (torch.randn(2, 3, 8),), as_ir=True)
        >>> named("packed_projections").apply(m), [n.op_type for n in m.graph][:3]
        (1, ['MatMul', 'Add', 'Split'])
    """

    def rewrite(self, model: ir.Model) -> int:
        graph, count = model.graph, 0
        groups: dict[tuple, list[dict]] = {}
        for node in graph:
            part = _projection(node)
            if part is not None:
                key = (id(part["x"]), part["bias"] is not None, part["weight"][1][0])
                groups.setdefault(key, []).append(part)
        for (_, biased, _), parts in groups.items():
            if len(parts) >= (2 if biased else 3):
                self._pack(graph, parts, biased)
                count += 1
        return count

    @staticmethod
    def _pack(graph: ir.Graph, parts: list[dict], biased: bool) -> None:
        first = parts[0]["node"]
        x, dtype = parts[0]["x"], parts[0]["x"].dtype
        sizes = [p["weight"][1][1] for p in parts]
        weight = initializer(graph, f"{first.name}_packed_weight", _packed(parts, dtype))
        matmul = ir.node("MatMul", [x, weight], name=f"{first.name}_packed")
        nodes = [matmul]
        packed = matmul.outputs[0]
        if biased:
            bias_values = np.concatenate([p["bias"][1].numpy() for p in parts])
            bias = initializer(graph, f"{weight.name}_bias", ir.tensor(bias_values, dtype=dtype))
            add = ir.node("Add", [packed, bias], name=f"{first.name}_packed_bias")
            nodes.append(add)
            packed = add.outputs[0]
        split = ir.node(
            "Split", [packed, int64s(graph, f"{first.name}_packed_sizes", sizes)], attributes={"axis": -1},
            num_outputs=len(parts), name=f"{first.name}_packed_split",
        )
        nodes.append(split)
        shape = parts[0]["out"].shape
        for n in nodes:
            n.outputs[0].dtype = dtype
            if shape is not None:
                n.outputs[0].shape = ir.Shape([*list(shape)[:-1], sum(sizes) if n is not split else sizes[0]])
            for key, value in first.metadata_props.items():
                if all(p["node"].metadata_props.get(key) == value for p in parts):
                    n.metadata_props[key] = value
        graph.insert_before(first, nodes)
        for part, new in zip(parts, split.outputs):
            new.type, new.shape = part["out"].type, part["out"].shape
            part["out"].replace_all_uses_with(new)
            new.name, part["out"].name = part["out"].name, None

