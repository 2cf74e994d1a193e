"""The node-by-node comparison engine: the exported program runs node by node in PyTorch (:mod:`.torch_run`),
the ONNX model once in onnxruntime with every value named after an FX node as an output and graph optimizations
off (:mod:`.onnx_run`); both are aligned (:mod:`.alignment`) and compared in graph order (:mod:`.compare`).

:func:`compare_exported` compares a model already exported: ``to_onnx(..., verify=True)`` calls it
(:mod:`.verify`) and so does :func:`~experimental.torch_interpreter.find_discrepancies`, which exports first.
:func:`compare_graph_module` compares the translation of a graph that was not exported (the ``torch.compile``
backend's ``verify=True`` calls it on AOTAutograd's graphs); both share :func:`compare_graph`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from ..dtypes import value_type
from ..errors import InputMismatchError
from ..provenance import module_scope, source_line, target_key
from ..runtime import to_numpy
from .alignment import Aligner, index_path, pick
from .compare import compare_arrays, least_precise, tolerance
from .discrepancy_report import DiscrepancyReport, NodeDiscrepancy
from .onnx_run import observed, run_unoptimized
from .torch_run import flat_inputs, run_exported_program, run_graph_module, user_inputs

#: one output of an FX node: its index path, the ONNX value standing for it (None: not found), the FX node it was
#: found under
Entry = tuple[tuple[int, ...], ir.Value | None, str]


def compare_exported(
    ep: torch.export.ExportedProgram,
    model: ir.Model,
    args: Any,
    kwargs: dict[str, Any] | None,
    atol: float | None = None,
    rtol: float | None = None,
) -> DiscrepancyReport:
    """Compares the ONNX ``model`` translated from ``ep`` with ``ep`` itself on one set of inputs,
    FX node by FX node (see :func:`~experimental.torch_interpreter.find_discrepancies`, which exports first);
    ``model`` is left unchanged.

    >>> from experimental.torch_interpreter import to_onnx
    >>> model, x = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), torch.randn(4, 2)
    >>> ep = torch.export.export(model, (x,))
    >>> report = compare_exported(ep, to_onnx(ep, as_ir=True, optimize=False), (x,), None)
    >>> report.first is None, [r.fx_node for r in report.rows]
    (True, ['linear', 'relu'])
    """
    begin = time.perf_counter()
    args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
    feeds, flat_user, flat_all = onnx_feeds(ep, model, args, kwargs)
    torch_results, _ = run_exported_program(ep, args, kwargs)
    torch_done = time.perf_counter()

    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    aligner = Aligner.exported(ep, model, torch_results, dict(zip(placeholders, flat_all)))
    report, onnx_results = compare_graph(ep.graph, model, aligner, feeds, atol, rtol)
    context = ComparisonContext(ep, model, torch_results, onnx_results, feeds, flat_user)
    for row in report.rows:
        row._context = context
    report.seconds = {"torch": torch_done - begin, **report.seconds}
    return report


def compare_graph_module(
    gm: torch.fx.GraphModule,
    model: ir.Model,
    inputs: Sequence[Any],
    input_indices: Sequence[int] | None = None,
    output_nodes: Sequence[str] | None = None,
    values: Mapping[str, ir.Value] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
) -> DiscrepancyReport:
    """Compares the ONNX ``model`` translated from ``gm`` (a graph that was not exported: one of AOTAutograd's
    forward or backward graphs) with ``gm`` run node by node on ``inputs`` (one per placeholder, in order),
    FX node by FX node; ``model`` is left unchanged. The rows have no repro (:meth:`NodeDiscrepancy.save_repro`
    needs an exported program).

    :param input_indices: for each input of ``model``, the index of the placeholder it reads (default: the
        placeholders holding tensors or dynamic sizes, in order)
    :param output_nodes: for each output of ``model``, the name of the FX node it returns (default: none known,
        the values' tags are enough unless an output was renamed)
    :param values: ONNX values by FX output tag (``name``, ``name:1``) the model's tags do not give (see
        :class:`~.alignment.Aligner`)

    >>> from torch.fx.experimental.proxy_tensor import make_fx
    >>> from experimental.torch_interpreter import ops  # fills the registry
    >>> from experimental.torch_interpreter.translation.interpreter import Interpreter
    >>> from experimental.torch_interpreter.translation.registry import default_registry
    >>> gm = make_fx(lambda x: torch.relu(x) * 2, tracing_mode="fake")(torch.randn(3))
    >>> interpreter = Interpreter.for_model(default_registry, 18, ("cpu",))
    >>> [x] = [n for n in gm.graph.nodes if n.op == "placeholder"]
    >>> [y] = interpreter.run(gm, {x: interpreter.input("x", x.meta["val"])})
    >>> _ = interpreter.output(y, "y")
    >>> report = compare_graph_module(gm, interpreter.to_model(), [torch.tensor([-1.0, 0.5, 2.0])])
    >>> [(r.fx_node, r.ok) for r in report.rows]
    [('relu', True), ('mul', True)]
    """
    begin = time.perf_counter()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise InputMismatchError(f"the graph has {len(placeholders)} inputs, {len(inputs)} were given")
    if input_indices is None:
        input_indices = [
            i for i, (n, v) in enumerate(zip(placeholders, inputs))
            if isinstance(n.meta.get("val", v), (torch.Tensor, torch.SymInt))
        ]
    graph_inputs = list(model.graph.inputs)
    if len(graph_inputs) != len(input_indices):
        raise InputMismatchError(
            f"the ONNX model has {len(graph_inputs)} inputs but {len(input_indices)} placeholders are given to it"
        )
    # the model runs on the CPU (run_unoptimized), wherever the graph's inputs are
    feeds = {value.name: _feed(inputs[index], "cpu") for value, index in zip(graph_inputs, input_indices)}
    torch_results, _ = run_graph_module(gm, inputs)
    torch_done = time.perf_counter()

    outputs = {
        name: value
        for name, value in zip(output_nodes or [], model.graph.outputs)
        if value.producer() is not None
    }
    aligner = Aligner(
        gm.graph,
        model,
        torch_results,
        {n.name: v for n, v in zip(placeholders, inputs)},
        outputs,
        {placeholders[index].name: value for value, index in zip(graph_inputs, input_indices)},
        values,
    )
    report, _ = compare_graph(gm.graph, model, aligner, feeds, atol, rtol)
    report.seconds = {"torch": torch_done - begin, **report.seconds}
    return report


def compare_graph(
    graph: torch.fx.Graph,
    model: ir.Model,
    aligner: Aligner,
    feeds: dict[str, Any],
    atol: float | None,
    rtol: float | None,
) -> tuple[DiscrepancyReport, dict[str, np.ndarray]]:
    """The comparison once PyTorch has run (``aligner.results``): the ONNX value of every ``call_function`` node
    of ``graph`` producing tensors is found by ``aligner``, ``model`` runs once on ``feeds`` with those values as
    outputs, both are compared in graph order. Returns the report (its ``seconds`` for onnxruntime and the
    comparison) and onnxruntime's results by value name."""
    begin = time.perf_counter()
    plan: list[tuple[torch.fx.Node, list[Entry]]] = []
    skipped: list[tuple[str, str]] = []
    types: dict[str, ir.TypeProtocol] = {}
    total = 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        paths = index_path(node.meta.get("val"))
        if not paths:
            continue
        total += 1
        entries = []
        for path in paths:
            value, via = aligner.resolve(node.name, path)
            if value is not None:
                dtype = value_type(pick(node.meta["val"], path))
                if value.type is None and dtype is not None:
                    types[value.name] = ir.TensorType(dtype)
            entries.append((path, value, via))
        if not any(v is not None for _, v, _ in entries):
            skipped.append((node.name, aligner.missing_reason.get(node.name, "no ONNX value")))
            continue
        plan.append((node, entries))

    observe = [v for _, entries in plan for _, v, _ in entries if v is not None]
    known = {v.name: v.const_value.numpy() for v in observe if v.const_value is not None}
    known.update({v.name: to_numpy(feeds[v.name]) for v in observe if v.name in feeds})
    with observed(model, [v for v in observe if v.name not in known], types):
        onnx_results = run_unoptimized(model, feeds)
    onnx_results.update(known)
    onnx_done = time.perf_counter()

    rows = []
    lowest = _least_precise_upstream(graph)
    for position, (node, entries) in enumerate(plan):
        node_atol, node_rtol = tolerance(lowest.get(node.name, torch.float32), atol, rtol)
        row = _compare_node(node, entries, aligner.results[node.name], onnx_results, node_atol, node_rtol)
        if row is None:
            skipped.append((node.name, "its ONNX value could not be observed (untyped)"))
            continue
        row.position = position
        rows.append(row)
    report = DiscrepancyReport(rows, skipped, total, atol, rtol)
    report.seconds = {"onnxruntime": onnx_done - begin, "compare": time.perf_counter() - onnx_done}
    return report, onnx_results


def _least_precise_upstream(graph: torch.fx.Graph) -> dict[str, torch.dtype]:
    """For each node, the least precise floating type among its own values and those of every node it depends on
    (:func:`.compare.least_precise`): the type whose tolerance its comparison takes."""
    lowest: dict[str, torch.dtype] = {}
    for node in graph.nodes:
        own = [t.dtype for t in tree_leaves(node.meta.get("val")) if isinstance(t, torch.Tensor)]
        lowest[node.name] = least_precise(own + [lowest[a.name] for a in node.all_input_nodes if a.name in lowest])
    return lowest


def _feed(value: Any, device: str | None = None) -> Any:
    """An onnxruntime feed: a detached copy of a tensor (on ``device`` if given), an int64 scalar for a size."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.clone() if device is None else value.to(device, copy=True)
    return np.array(int(value), dtype=np.int64)


@dataclass
class ComparisonContext:
    """What a repro needs after the comparison."""

    ep: torch.export.ExportedProgram
    model: ir.Model
    torch_results: dict[str, Any]
    onnx_results: dict[str, np.ndarray]
    feeds: dict[str, Any]
    user_inputs: list[Any]


def _compare_node(
    node: torch.fx.Node,
    entries: list[Entry],
    expected: Any,
    onnx_results: dict[str, np.ndarray],
    atol: float | None,
    rtol: float | None,
) -> NodeDiscrepancy | None:
    """The row of ``node``: every output found in ``onnx_results`` compared with PyTorch's (``expected``)."""
    ok, max_abs, max_rel, reasons = True, 0.0, 0.0, []
    t_shapes, o_shapes, t_dtypes, o_dtypes, names, paths, vias = [], [], [], [], [], [], set()
    for path, value, via in entries:
        if value is None or value.name not in onnx_results:
            continue
        exp = pick(expected, path)
        got = onnx_results[value.name]
        cmp = compare_arrays(exp, got, atol, rtol)
        ok = ok and cmp.ok
        max_abs, max_rel = max(max_abs, cmp.max_abs), max(max_rel, cmp.max_rel)
        if cmp.reason:
            reasons.append(cmp.reason)
        t_shapes.append(tuple(exp.shape))
        o_shapes.append(tuple(np.shape(got)))
        t_dtypes.append(str(exp.dtype).replace("torch.", ""))
        o_dtypes.append(str(np.asarray(got).dtype))
        names.append(value.name)
        paths.append(tuple(path))
        if via and via != node.name:
            vias.add(via)
    if not names:
        return None
    return NodeDiscrepancy(
        fx_node=node.name,
        target=target_key(node.target),
        module=module_scope(node),
        source=source_line(node),
        ok=ok,
        max_abs=max_abs,
        max_rel=max_rel,
        torch_shapes=t_shapes,
        onnx_shapes=o_shapes,
        torch_dtypes=t_dtypes,
        onnx_dtypes=o_dtypes,
        onnx_values=names,
        reason=", ".join(sorted(set(reasons))),
        via=", ".join(sorted(vias)),
        paths=paths,
    )


def onnx_feeds(
    ep: torch.export.ExportedProgram, model: ir.Model, args: tuple, kwargs: dict | None
) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """onnxruntime feeds: the user inputs that are tensors or dynamic sizes, in placeholder order,
    named as the ONNX model's inputs; then the user inputs and every input of ``ep`` (flat)."""
    try:
        flat = flat_inputs(ep, args, kwargs)
    except Exception as e:
        raise InputMismatchError(
            f"the inputs do not match the exported program's inputs: {e}; give the inputs the model was "
            "exported with"
        ) from e
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user = user_inputs(ep, flat)
    user_nodes = user_inputs(ep, placeholders)
    values = [
        v for v, n in zip(user, user_nodes) if isinstance(n.meta.get("val"), (torch.Tensor, torch.SymInt))
    ]
    names = [v.name for v in model.graph.inputs]
    if len(names) != len(values):
        raise InputMismatchError(
            f"the ONNX model has {len(names)} inputs {names} but the exported program takes {len(values)} "
            "tensors or dynamic sizes: was it exported from this model?"
        )
    feeds = {name: _feed(v) for name, v in zip(names, values)}
    return feeds, user, flat
