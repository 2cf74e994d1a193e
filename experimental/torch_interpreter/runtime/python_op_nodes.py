"""Where the ``com.microsoft::PythonOp`` nodes of a model are, and what a node reads: whether a model has any
(without loading it when its bytes do not spell ``PythonOp``), the control-flow nodes holding one in a body, the
names a node reads from its own inputs and, through its subgraphs, from the enclosing scopes.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Iterator
from typing import Any

import onnx
import onnx_ir as ir

from ..python_op.attributes import DOMAIN, GRAD_OP_TYPE, OP_TYPE
from .model_loading import load


def is_python_op(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a ``com.microsoft::PythonOp`` node or the ``PythonOpGrad`` node of its backward.

    >>> is_python_op(onnx.helper.make_node("PythonOp", [], [], domain="com.microsoft"))
    True
    """
    return node.op_type in (OP_TYPE, GRAD_OP_TYPE) and node.domain == DOMAIN


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The bodies of a control-flow node (If, Loop, Scan), none for another node.

    >>> body = onnx.helper.make_graph([], "body", [], [])
    >>> [g.name for g in subgraphs(onnx.helper.make_node("If", ["c"], [], then_branch=body, else_branch=body))]
    ['body', 'body']
    """
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def graph_has_python_op(graph: onnx.GraphProto) -> bool:
    """Whether ``graph`` or one of its subgraphs has a PythonOp node.

    >>> graph_has_python_op(onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [], []))
    False
    """
    return _nodes_have_python_op(graph.node)


def _nodes_have_python_op(nodes: Iterable[onnx.NodeProto]) -> bool:
    return any(is_python_op(n) or any(graph_has_python_op(g) for g in subgraphs(n)) for n in nodes)


def holds_python_op(node: onnx.NodeProto) -> bool:
    """A control-flow node (If, Loop, Scan) with a PythonOp node in one of its bodies.

    >>> holds_python_op(onnx.helper.make_node("Relu", ["x"], ["y"]))
    False
    """
    return any(graph_has_python_op(g) for g in subgraphs(node))


def has_python_ops(model: Any) -> bool:
    """Whether ``model`` (path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model``) has PythonOp nodes.

    >>> has_python_ops(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [])))
    False
    """
    if isinstance(model, ir.Model):
        graphs = [model.graph, *model.functions.values()]
        return any(
            n.op_type in (OP_TYPE, GRAD_OP_TYPE) and n.domain == DOMAIN
            for g in graphs for n in ir.traversal.RecursiveGraphIterator(g)
        )
    if isinstance(model, onnx.ModelProto):
        return _proto_has_python_op(model)
    if isinstance(model, bytes):
        return OP_TYPE.encode() in model and _proto_has_python_op(load(model))
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(OP_TYPE.encode()) < 0 or data.find(DOMAIN.encode()) < 0:
                    return False
        except (OSError, ValueError):  # missing or empty file: onnxruntime says what is wrong
            return False
        return _proto_has_python_op(load(model, external_data=False))
    return False


def _proto_has_python_op(model: onnx.ModelProto) -> bool:
    """The main graph or a local function (a PythonOp there ran in plain onnxruntime: a raw error)."""
    return graph_has_python_op(model.graph) or any(_nodes_have_python_op(f.node) for f in model.functions)


def _python_ops_in(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    for node in nodes:
        if is_python_op(node):
            yield node
        for g in subgraphs(node):
            yield from _python_ops_in(g.node)


def python_op_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every PythonOp node of ``model``: in its graph, the bodies of its control-flow nodes and its local
    functions.

    >>> node = onnx.helper.make_node("PythonOp", [], [], domain="com.microsoft")
    >>> body = onnx.helper.make_graph([node], "body", [], [])
    >>> graph = onnx.helper.make_graph([onnx.helper.make_node("If", ["c"], [], then_branch=body, else_branch=body)],
    ...                                "g", [], [])
    >>> len(list(python_op_nodes(onnx.helper.make_model(graph))))
    2
    """
    yield from _python_ops_in(model.graph.node)
    for function in model.functions:
        yield from _python_ops_in(function.node)


def outer_names(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads from the enclosing scopes.

    >>> body = onnx.helper.make_graph([onnx.helper.make_node("Add", ["x", "outer"], ["y"])], "body",
    ...                               [onnx.helper.make_empty_tensor_value_info("x")],
    ...                               [onnx.helper.make_empty_tensor_value_info("y")])
    >>> outer_names(body)
    {'outer'}
    """
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(n for n in node.input if n)
        for g in subgraphs(node):
            used |= outer_names(g)
        defined.update(node.output)
    used.update(o.name for o in graph.output)
    return used - defined


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """The names ``node`` reads: its inputs, then what its bodies read from the enclosing scopes.

    >>> node_inputs(onnx.helper.make_node("Add", ["a", "", "b"], ["c"]))
    ['a', 'b']
    """
    names = [n for n in node.input if n]
    for g in subgraphs(node):
        names.extend(sorted(outer_names(g)))
    return names
