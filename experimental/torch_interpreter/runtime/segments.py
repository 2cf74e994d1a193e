"""The cut of a model at its PythonOp nodes, for standard onnxruntime, which has no PythonOp kernel.

Every value gets a *stage*, the largest number of PythonOp nodes on a path from the graph inputs to it. ONNX
nodes of stage ``k`` form segment ``k``; PythonOp nodes (and control-flow nodes holding one) whose inputs have
stage ``k`` run after segment ``k`` and produce values of stage ``k + 1``. A model with PythonOp nodes on ``n``
successive levels thus needs at most ``n + 1`` sessions, however many PythonOp nodes each level has. Nodes
without inputs (constants) are copied into every segment that reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
from onnx.reference import ReferenceEvaluator

from ..errors import MalformedModelError
from ..python_op.attributes import GRAD_OP_TYPE
from .node_checks import grad_node_attributes, node_attributes
from .python_op_nodes import holds_python_op, is_python_op, node_inputs

logger = logging.getLogger(__name__)


@dataclass
class NodeArg:
    """What ``get_inputs()`` / ``get_outputs()`` return, as onnxruntime's ``NodeArg``."""

    name: str
    type: str
    shape: list[int | str | None]


def node_arg(vi: onnx.ValueInfoProto) -> NodeArg:
    """The :class:`NodeArg` of a graph input or output.

    >>> node_arg(onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3]))
    NodeArg(name='x', type='tensor(float)', shape=['batch', 3])
    """
    tt = vi.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
    return NodeArg(vi.name, f"tensor({ir.DataType(tt.elem_type).name.lower()})", shape)


@dataclass
class Segment:
    """ONNX nodes run by one onnxruntime session (``session``, set once the segment's model is made)."""

    nodes: list[onnx.NodeProto]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    session: Any = None


def plan(graph: onnx.GraphProto) -> tuple[list[Segment | onnx.NodeProto], dict[str, onnx.NodeProto]]:
    """Segments and PythonOp nodes in execution order (see the module's docstring), and the nodes without
    inputs (constants) by output name, copied into every segment that reads them instead of making a segment
    of their own.

    >>> graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [], [])
    >>> steps, free = plan(graph)
    >>> [type(s).__name__ for s in steps], free
    (['Segment'], {})
    """
    stage: dict[str, int] = {}
    segments: dict[int, list[onnx.NodeProto]] = {}
    calls: dict[int, list[onnx.NodeProto]] = {}
    free: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        inputs = node_inputs(node)
        level = max((stage.get(n, 0) for n in inputs), default=0)
        if is_python_op(node) or holds_python_op(node):  # run in Python (control flow: node by node)
            calls.setdefault(level, []).append(node)
            stage.update((o, level + 1) for o in node.output if o)
        elif not inputs:
            free.update((o, node) for o in node.output if o)
        else:
            segments.setdefault(level, []).append(node)
            stage.update((o, level) for o in node.output if o)
    steps: list[Segment | onnx.NodeProto] = []
    for level in range(max([*segments, *calls], default=-1) + 1):
        if level in segments:
            nodes = segments[level]
            used = {n for node in nodes for n in node_inputs(node)}
            constants = {id(free[n]): free[n] for n in used if n in free}
            steps.append(Segment([n for n in graph.node if id(n) in constants] + nodes))
        steps.extend(calls.get(level, []))
    return steps, free


def value_infos(model: onnx.ModelProto, infer: bool = False) -> dict[str, onnx.ValueInfoProto]:
    """The type of every value the model knows (with ``infer``, shape inference too), PythonOp outputs from
    their attributes.

    >>> x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    >>> graph = onnx.helper.make_graph([], "g", [x], [])
    >>> list(value_infos(onnx.helper.make_model(graph)))
    ['x']
    """
    infos: dict[str, onnx.ValueInfoProto] = {}
    inferred: Sequence[onnx.ValueInfoProto] = ()
    if infer:
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph.value_info
        except Exception as e:  # noqa: BLE001 - types then come from the model alone
            logger.debug("shape inference failed: %s", e)
    for vi in [*inferred, *model.graph.value_info, *model.graph.input, *model.graph.output]:
        if vi.type.tensor_type.elem_type:
            infos[vi.name] = vi
    for node in model.graph.node:
        if not is_python_op(node):
            continue
        grad = node.op_type == GRAD_OP_TYPE
        attrs = grad_node_attributes(node) if grad else node_attributes(node)  # checked: bounded ranks
        outputs = list(node.output) if grad else list(node.output[1:])
        if not grad and node.output[0] and node.output[0] not in infos:
            infos[node.output[0]] = onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.INT64, [1])
        for name, elem, rank in zip(outputs, attrs.get("output_tensor_types", []), attrs.get("output_tensor_ranks", [])):
            if name and name not in infos:
                infos[name] = onnx.helper.make_tensor_value_info(name, elem, [None] * rank)
    return infos


def segment_model(
    model: onnx.ModelProto,
    segment: Segment,
    initializers: Mapping[str, onnx.TensorProto],
    types: Mapping[str, onnx.ValueInfoProto],
    index: int,
) -> onnx.ModelProto:
    """The model of one segment: its nodes, its inputs typed from ``types``, the initializers it reads."""
    used = {n for node in segment.nodes for n in node_inputs(node)}
    missing = [n for n in segment.inputs if n not in types]
    if missing:
        producers = [f"{n.op_type} node {n.name!r}" for n in model.graph.node if set(n.output) & set(missing)]
        raise MalformedModelError(
            f"the types of {missing[:8]} are unknown: cannot cut the model at its PythonOp nodes (the nodes producing "
            f"them, {producers[:8]}, declare no output_tensor_types and output_tensor_ranks)"
        )
    outputs = [types[o] if o in types else onnx.helper.make_empty_tensor_value_info(o) for o in segment.outputs]
    graph = onnx.helper.make_graph(
        segment.nodes,
        f"{model.graph.name}_segment{index}",
        [types[n] for n in segment.inputs],
        outputs,
        initializer=[initializers[n] for n in sorted(used & set(initializers))],
    )
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
    sub.ir_version = model.ir_version
    return sub


def evaluate_constant(node: onnx.NodeProto, model: onnx.ModelProto) -> dict[str, torch.Tensor]:
    """The outputs of a node without inputs (a constant a PythonOp node or the graph output reads).

    >>> node = onnx.helper.make_node("Constant", [], ["c"], value_int=3)
    >>> evaluate_constant(node, onnx.helper.make_model(onnx.helper.make_graph([node], "g", [], [])))
    {'c': tensor(3)}
    """
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output]
    graph = onnx.helper.make_graph([node], "constant", [], outputs)
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import)
    values = ReferenceEvaluator(sub).run(None, {})
    return {name: torch.from_numpy(np.array(v)) for name, v in zip(node.output, values) if name}
