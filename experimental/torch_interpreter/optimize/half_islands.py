"""float32 islands of a float16 or bfloat16 model computed in half precision, for a model made for CUDA only.

The converters compute some float16 and bfloat16 work in float32 between casts:

* PyTorch kernels that round once where ONNX needs several ops: ``linear`` with a bias (``MatMul`` then ``Add``),
  SiLU (``x * Sigmoid(x)``), GELU...: computed in float32 and rounded once, PyTorch's last bit on every provider;
* ops onnxruntime's CPU has no bfloat16 kernel for (``Attention``, ``LayerNormalization``, arithmetic).

onnxruntime's CUDA provider has float16 and bfloat16 kernels, and its fusions (packed projections, bias + GELU,
skip normalizations, attention) match the ops in half precision, not between casts. For a model made for CUDA only
(``to_onnx(..., providers="cuda")``), :func:`half_islands` computes each such island in half precision: a
connected set of float32 nodes of :data:`CUDA_FLOAT16` whose every float input is a ``Cast`` up from one half type
(or a constant that type holds exactly) and whose every result is read only through a ``Cast`` back down to it.
The casts go.

What it changes:

* a single op whose CUDA kernel computes in float32 and rounds once (``MatMul``, ``Softmax``,
  ``LayerNormalization``, ``Attention``...): nothing;
* a chain: one rounding per op instead of one for the chain (``(x @ W) + b`` and ``x * sigmoid(x)`` round twice
  where PyTorch rounds once), as onnxruntime's fused kernels and the official exporter's models do: within the
  type's tolerance, and never where a step jumps. An island whose result reaches, through selections and
  correctly rounded arithmetic (:data:`.half_precision.SELECTIONS`, :data:`.half_precision.CORRECTLY_ROUNDED`),
  a comparison, a rounding op, an index (:data:`.half_precision.JUMPS`) or a cast to an integer type stays in
  float32: such a result keeps PyTorch's rounding.

bfloat16 islands are computed in bfloat16 only when CUDA has a bfloat16 kernel for each of their ops
(:data:`~experimental.torch_interpreter.ort_kernels.CUDA_BFLOAT16`); a node CUDA has no kernel for would run on the
CPU's, which has no bfloat16 arithmetic. A model that may run on the CPU (``providers="any"``, the default, or
``"cpu"``) is left as it is.
"""

from __future__ import annotations

import logging

import ml_dtypes
import numpy as np
import onnx_ir as ir

from ..ort_kernels import CUDA_BFLOAT16, CUDA_FLOAT16, MOVES
from ..providers import of_model
from .half_precision import CORRECTLY_ROUNDED, SELECTIONS, JumpsAfter, cast_target, is_default

logger = logging.getLogger(__name__)

FLOAT = ir.DataType.FLOAT
F16 = ir.DataType.FLOAT16
BF16 = ir.DataType.BFLOAT16
_HALF_NUMPY = {F16: np.float16, BF16: ml_dtypes.bfloat16}

_FLOATS = frozenset({FLOAT, F16, BF16, ir.DataType.DOUBLE})


def _member(node: ir.Node) -> bool:
    """A node an island may hold: an op of :data:`CUDA_FLOAT16` with float32 results only."""
    return (
        is_default(node)
        and node.op_type in CUDA_FLOAT16
        and bool(node.outputs)
        and all(o.dtype == FLOAT for o in node.outputs)
        and not any(a.type == ir.AttributeType.GRAPH for a in node.attributes.values())
    )


def _has_kernel(op_type: str, half: ir.DataType) -> bool:
    return half == F16 or op_type in MOVES or op_type in CUDA_BFLOAT16


def _constant(value: ir.Value) -> np.ndarray | None:
    tensor = ir.convenience.get_const_tensor(value)
    return None if tensor is None else tensor.numpy()


def _islands(graph: ir.Graph) -> list[list[ir.Node]]:
    """The connected sets of :func:`_member` nodes of ``graph`` (joined by the float32 values between them), in
    the graph's order."""
    parent: dict[int, int] = {}

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    members = [n for n in graph if _member(n)]
    for node in members:
        parent[id(node)] = id(node)
    for node in members:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and id(producer) in parent:
                parent[find(id(node))] = find(id(producer))
    groups: dict[int, list[ir.Node]] = {}
    for node in members:
        groups.setdefault(find(id(node)), []).append(node)
    return list(groups.values())


class _Plan:
    """What computing an island in half precision takes: its type, the casts up it reads, the float32 constants it
    reads (each exact in the type), the casts down that read it."""

    def __init__(self, nodes: list[ir.Node]) -> None:
        self.nodes = nodes
        self.ids = {id(n) for n in nodes}
        self.half: ir.DataType | None = None
        self.sources: list[tuple[ir.Node, int, ir.Node]] = []  # (node, input index, the cast up it reads)
        self.constants: list[tuple[ir.Node, int, np.ndarray]] = []
        self.sinks: list[ir.Node] = []

    def _type(self, half: ir.DataType) -> bool:
        if self.half is None:
            self.half = half
        return self.half == half

    def build(self) -> bool:
        """Fills the plan; False when the nodes are not an island (a float32 input of another origin, a result
        read otherwise than by a cast down, two half types)."""
        for node in self.nodes:
            for i, value in enumerate(node.inputs):
                if value is None or value.dtype != FLOAT:
                    continue
                producer = value.producer()
                if producer is not None and id(producer) in self.ids:
                    continue
                source = producer.inputs[0] if cast_target(producer) == FLOAT else None
                if source is not None and source.dtype in _HALF_NUMPY:
                    if not self._type(source.dtype):
                        return False
                    self.sources.append((node, i, producer))
                    continue
                array = _constant(value)
                if array is None:
                    return False
                self.constants.append((node, i, array))
            for value in node.outputs:
                if value.is_graph_output():
                    return False
                for user, _ in value.uses():
                    if id(user) in self.ids:
                        continue
                    to = cast_target(user)
                    if to not in _HALF_NUMPY or not self._type(to):
                        return False
                    self.sinks.append(user)
        if self.half is None or not self.sinks:
            return False
        if not all(_has_kernel(n.op_type, self.half) for n in self.nodes):
            return False
        kind = _HALF_NUMPY[self.half]
        return all(
            np.array_equal(a.astype(kind).astype(a.dtype), a, equal_nan=True) for _, _, a in self.constants
        )

    def apply(self) -> None:
        half = self.half
        for node, i, cast in self.sources:
            node.replace_input_with(i, cast.inputs[0])
        for node, i, array in self.constants:
            constant = ir.node(
                "Constant", [], {"value": ir.tensor(array.astype(_HALF_NUMPY[half]), dtype=half)},
                name=f"{node.name}/constant_{i}",
            )
            constant.outputs[0].dtype = half
            constant.outputs[0].shape = ir.Shape(array.shape)
            constant.outputs[0].name = f"{node.name}__constant_{i}"
            node.graph.insert_before(node, constant)
            node.replace_input_with(i, constant.outputs[0])
        for node in self.nodes:
            for value in node.outputs:
                value.dtype = half
        for sink in self.sinks:
            value, out = sink.inputs[0], sink.outputs[0]
            if out.is_graph_output():  # the graph output keeps its name
                name = out.name
                out.name = f"{name}__unused"
                value.name = name
            out.replace_all_uses_with(value, replace_graph_outputs=True)
            sink.graph.remove(sink, safe=True)
        for cast in {id(c): c for _, _, c in self.sources}.values():
            out = cast.outputs[0]
            if not out.uses() and not out.is_graph_output():
                cast.graph.remove(cast, safe=True)


def half_islands(model: ir.Model) -> int:
    """Computes in half precision the float32 islands of a float16/bfloat16 model made for CUDA only (see the
    module's docstring); returns how many nodes it moved to half precision.

    >>> import onnx_ir as ir
    >>> x = ir.val("x", ir.DataType.FLOAT16, [2, 3])
    >>> up = ir.node("Cast", [x], {"to": ir.DataType.FLOAT})
    >>> up.outputs[0].dtype = ir.DataType.FLOAT
    >>> sig = ir.node("Sigmoid", up.outputs)
    >>> sig.outputs[0].dtype = ir.DataType.FLOAT
    >>> mul = ir.node("Mul", [up.outputs[0], sig.outputs[0]])
    >>> mul.outputs[0].dtype = ir.DataType.FLOAT
    >>> down = ir.node("Cast", mul.outputs, {"to": ir.DataType.FLOAT16})
    >>> down.outputs[0].name = "y"
    >>> graph = ir.Graph([x], down.outputs, nodes=[up, sig, mul, down], opset_imports={"": 18})
    >>> model = ir.Model(graph, ir_version=10)
    >>> model.metadata_props["aten2onnx.providers"] = "cuda"
    >>> half_islands(model), [n.op_type for n in graph]
    (2, ['Sigmoid', 'Mul'])
    """
    if "cpu" in of_model(model):
        return 0  # onnxruntime's CPU computes float16 in float32 and has no bfloat16 arithmetic
    jumps = JumpsAfter(through=SELECTIONS | CORRECTLY_ROUNDED, kept=_FLOATS)
    count = 0
    for graph in model.graphs():
        for nodes in _islands(graph):
            plan = _Plan(nodes)
            if not plan.build():
                continue
            if any(jumps(sink.outputs[0]) for sink in plan.sinks):
                continue
            plan.apply()
            count += len(nodes)
    if count:
        logger.debug("%d float32 nodes computed in half precision", count)
    return count
