"""Small matching helpers the rewrites of the onnxruntime level share: producers, constants, dimensions."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..names import unique_name


def producer(value: ir.Value | None, op_type: str, domain: str = "") -> ir.Node | None:
    """The node of type ``op_type`` (main domain unless ``domain``) that computes ``value``, else None."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != op_type:
        return None
    return node if node.domain == domain or (domain == "" and node.domain == "ai.onnx") else None


def ints(value: ir.Value | None) -> list[int] | None:
    """The integers a constant holds (flattened), else None."""
    if value is None or value.const_value is None:
        return None
    return [int(v) for v in np.asarray(value.const_value.numpy()).reshape(-1)]


def dims(value: ir.Value | None) -> list | None:
    return list(value.shape) if value is not None and value.shape is not None else None


def same_dim(a: object, b: object) -> bool:
    """Two dimensions known equal: equal integers, or the same named symbol."""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    name_a, name_b = getattr(a, "value", None), getattr(b, "value", None)
    return name_a is not None and name_a == name_b


def only_used_by(value: ir.Value, node: ir.Node) -> bool:
    """``value`` is read by ``node`` alone and is no graph output."""
    return not value.is_graph_output() and [u.node for u in value.uses()] == [node]


def initializer(graph: ir.Graph, name: str, tensor: ir.TensorProtocol) -> ir.Value:
    """A new initializer of ``graph`` holding ``tensor`` (lazy or not), named after ``name`` (made unique)."""
    name = unique_name(name, graph.initializers)
    value = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=ir.Shape(tensor.shape), const_value=tensor)
    graph.register_initializer(value)
    return value


def int64s(graph: ir.Graph, name: str, values: list[int]) -> ir.Value:
    """A new 1-D INT64 initializer of ``graph`` named after ``name`` (made unique)."""
    return initializer(graph, name, ir.tensor(np.array(values, dtype=np.int64)))


def typed(node: ir.Node, like: ir.Value | None = None, dtype: ir.DataType | None = None, shape: list | None = None) -> ir.Node:
    """Sets the type and shape of ``node``'s first output (from ``like``, or ``dtype`` and ``shape``)."""
    out = node.outputs[0]
    if like is not None:
        out.type, out.shape = like.type, like.shape
    if dtype is not None:
        out.dtype = dtype
    if shape is not None:
        out.shape = ir.Shape(shape)
    return node
