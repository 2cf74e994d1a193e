"""A standalone repro of one FX node for a bug report: its ONNX nodes alone, the values they read, and the
aten op run by PyTorch on the same values."""

from __future__ import annotations

import logging
import operator
import os
import textwrap
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
import torch.fx
from torch.export.graph_signature import InputKind

from ..metadata import FX_NODE
from ..runtime import to_numpy
from .onnx_run import observed, result_values, run_unoptimized

logger = logging.getLogger(__name__)


def save_repro(row: Any, context: Any, folder: str | os.PathLike) -> list[str]:
    """Writes ``model.onnx``, ``inputs.npz``, ``inputs.pt`` and ``repro.py`` for the FX node of ``row``
    (a :class:`~experimental.torch_interpreter.NodeDiscrepancy`) into ``folder``; returns the paths.

    ``model.onnx`` holds the ONNX nodes whose ``metadata_props[FX_NODE]`` is the node, its inputs
    are the values they read (given in ``inputs.npz``, computed by PyTorch when the value is an FX node's
    result), the weights they read are initializers. ``repro.py`` calls the aten op on ``inputs.pt`` and
    compares with onnxruntime on ``model.onnx``.
    """
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    name = row.via.split(", ")[0] if row.via else row.fx_node  # no ONNX node of its own: its source's
    model: ir.Model = context.model
    nodes = [n for n in model.graph if n.metadata_props.get(FX_NODE) == name]
    if not nodes:
        raise ValueError(f"the ONNX model has no node made for FX node {name!r}")
    proto = _standalone(model, nodes, name, context, row.onnx_values)
    onnx_path = os.path.join(folder, "model.onnx")
    onnx.save(proto, onnx_path)

    feeds = _input_values(context, [i.name for i in proto.graph.input])
    npz_path = os.path.join(folder, "inputs.npz")
    np.savez(npz_path, **feeds)

    fx_node = next(n for n in context.ep.graph.nodes if n.name == name)
    args, kwargs = _torch_args(fx_node, context)
    paths = list(row.paths)
    if row.via:  # a getitem of the node the repro runs: its paths start with the item's index
        item = next(n for n in context.ep.graph.nodes if n.name == row.fx_node)
        if item.target is operator.getitem and isinstance(item.args[1], int):
            paths = [(item.args[1], *p) for p in paths]
    pt_path = os.path.join(folder, "inputs.pt")
    torch.save({"args": args, "kwargs": kwargs}, pt_path)

    py_path = os.path.join(folder, "repro.py")
    with open(py_path, "w", encoding="utf-8") as f:
        f.write(_script(row, fx_node, paths))
    logger.info("repro of FX node %r written in %s", name, folder)
    return [onnx_path, npz_path, pt_path, py_path]


def _outer_inputs(nodes: list[ir.Node]) -> list[ir.Value]:
    """Values read by ``nodes`` (and their subgraphs) that they do not produce, in first-use order."""
    produced = {id(v) for n in nodes for v in n.outputs}
    seen: dict[int, ir.Value] = {}

    def visit(node_list: Any, local: set[int]) -> None:
        for node in node_list:
            for value in node.inputs:
                if value is not None and id(value) not in local and id(value) not in produced:
                    seen.setdefault(id(value), value)
            local.update(id(v) for v in node.outputs)
            for attr in node.attributes.values():
                graphs = (
                    [attr.value] if attr.type == ir.AttributeType.GRAPH
                    else list(attr.value) if attr.type == ir.AttributeType.GRAPHS else []
                )
                for g in graphs:
                    visit(g, set(local) | {id(v) for v in g.inputs} | {id(v) for v in g.initializers.values()})

    visit(nodes, set())
    return list(seen.values())


def _standalone(
    model: ir.Model, nodes: list[ir.Node], name: str, context: Any, compared: list[str]
) -> onnx.ModelProto:
    """The nodes alone; its outputs are the values ``compared`` (in that order, each standing for one PyTorch output
    of the row), then the group's other results."""
    proto_nodes = [ir.serde.serialize_node(n) for n in nodes]
    inputs, initializers, constants = [], [], []
    for value in _outer_inputs(nodes):
        producer = value.producer()
        if value.const_value is not None:
            initializers.append(ir.serde.serialize_tensor(value.const_value))
            initializers[-1].name = value.name
        elif producer is not None and producer.op_type == "Constant" and not producer.metadata_props.get(FX_NODE):
            constants.append(ir.serde.serialize_node(producer))
        else:
            inputs.append(_value_info(value, context))
    results = result_values(name, nodes)
    produced = {v.name: v for n in nodes for v in n.outputs if v.name}
    first = [produced[n] for n in compared if n in produced]
    outputs = [_value_info(v, context) for v in [*first, *(v for n, v in results.items() if n not in compared)]]
    graph = onnx.helper.make_graph(constants + proto_nodes, f"repro_{name}", inputs, outputs, initializers)
    opsets = [onnx.helper.make_opsetid(domain, version) for domain, version in model.opset_imports.items()]
    proto = onnx.helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)
    proto.producer_name = "aten2onnx find_discrepancies"
    return proto


def _value_info(value: ir.Value, context: Any) -> onnx.ValueInfoProto:
    if value.type is not None:
        return ir.serde.serialize_value(value)
    # untyped: the type of the value computed by onnxruntime or PyTorch
    array = _input_values(context, [value.name])[value.name]
    elem = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    return onnx.helper.make_tensor_value_info(value.name, elem, list(array.shape))


def _input_values(context: Any, names: list[str]) -> dict[str, np.ndarray]:
    """Values of ONNX ``names``: PyTorch's result for a value named after an FX node, the feeds, what
    onnxruntime computed, or a second run of onnxruntime observing the others."""
    values: dict[str, np.ndarray] = {}
    missing = []
    for name in names:
        torch_value = context.torch_results.get(name)
        if isinstance(torch_value, torch.Tensor):
            values[name] = to_numpy(torch_value)
        elif name in context.feeds:
            values[name] = to_numpy(context.feeds[name])
        elif name in context.onnx_results:
            values[name] = np.asarray(context.onnx_results[name])
        else:
            missing.append(name)
    if missing:
        by_name = {v.name: v for node in context.model.graph for v in node.outputs}
        wanted = [by_name[n] for n in missing if n in by_name and by_name[n].type is not None]
        with observed(context.model, wanted, {}):
            found = run_unoptimized(context.model, context.feeds)
        values.update({n: found[n] for n in missing if n in found})
    return values


def _torch_args(node: torch.fx.Node, context: Any) -> tuple[Any, Any]:
    """The FX node's arguments with every FX node replaced by its value in PyTorch."""
    placeholders = [n.name for n in context.ep.graph.nodes if n.op == "placeholder"]
    flat = dict(zip(placeholders, _all_inputs(context)))

    def value(arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node):
            if arg.op == "placeholder":
                return flat.get(arg.name)
            return context.torch_results.get(arg.name)
        if isinstance(arg, (list, tuple)):
            return type(arg)(value(a) for a in arg)
        if isinstance(arg, dict):
            return {k: value(v) for k, v in arg.items()}
        return arg

    return value(node.args), value(node.kwargs)


def _all_inputs(context: Any) -> list[Any]:
    user = iter(context.user_inputs)
    out = []
    for spec in context.ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(next(user, None))
        elif spec.target in context.ep.state_dict:
            out.append(context.ep.state_dict[spec.target])
        else:
            out.append(context.ep.constants.get(spec.target))
    return out


def _script(row: Any, node: torch.fx.Node, paths: list[tuple[int, ...]]) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        call = f"torch.ops.{target.namespace}.{target._opname}.{target._overloadname}"
    else:
        call = None
    torch_part = (
        textwrap.dedent(f"""
        inputs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=False)
        result = {call}(*inputs["args"], **inputs["kwargs"])
        # the PyTorch output each ONNX output stands for (its indices in the op's outputs)
        for path, g in zip(PATHS, got):
            e = result
            for i in path:
                e = e[i]
            e = e.detach().float().numpy() if e.dtype == torch.bfloat16 else e.detach().numpy()
            g = g.astype(np.float32) if g.dtype.kind == "V" else g
            diff = np.abs(e.astype(np.float64) - g.astype(np.float64)).max() if e.size else 0.0
            print(f"torch output {{list(path)}}: torch {{e.dtype}} {{e.shape}}, onnx {{g.dtype}} {{g.shape}}, "
                  f"max abs diff {{diff:.3g}}")
        """)
        if call
        else "\nprint('not an aten op: compare the outputs with the FX graph by hand')\n"
    )
    header = textwrap.dedent(f'''\
        """Repro of FX node {node.name!r} ({row.target}).

        Module: {row.module or "(top level)"}
        Source: {row.source}
        find_discrepancies measured max abs diff {row.max_abs:.3g}, max rel diff {row.max_rel:.3g}.
        model.onnx holds the ONNX nodes made for this node only; inputs.npz its inputs; inputs.pt the aten op's.
        """

        import os

        import numpy as np
        import onnxruntime as ort
        import torch

        HERE = os.path.dirname(os.path.abspath(__file__))
        PATHS = {[tuple(p) for p in paths]!r}
        feeds = dict(np.load(os.path.join(HERE, "inputs.npz")))
        sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), providers=["CPUExecutionProvider"])
        got = sess.run(None, feeds)
        ''')
    return header + torch_part
