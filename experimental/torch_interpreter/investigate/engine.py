"""The node-by-node comparison engine: the exported program runs node by node in PyTorch (:mod:`.torch_run`),
the ONNX model once in onnxruntime with every value named after an FX node as an output and graph optimizations
off (:mod:`.onnx_run`); both are aligned (:mod:`.alignment`) and compared in graph order (:mod:`.compare`).

:func:`compare_exported` compares a model already exported: ``to_onnx(..., verify=True)`` calls it
(:mod:`.verify`) and so does :func:`~experimental.torch_interpreter.find_discrepancies`, which exports first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx

from ..dtypes import value_type
from ..errors import InputMismatchError
from ..provenance import module_scope, source_line, target_key
from ..runtime import to_numpy
from .alignment import Aligner, index_path, pick
from .compare import compare_arrays
from .discrepancy_report import DiscrepancyReport, NodeDiscrepancy
from .onnx_run import observed, run_unoptimized
from .torch_run import flat_inputs, run_exported_program, user_inputs

#: one output of an FX node: its index path, the ONNX value standing for it (None: not found), the FX node it was
#: found under
Entry = tuple[tuple[int, ...], ir.Value | None, str]


def compare_exported(
    ep: torch.export.ExportedProgram,
    model: ir.Model,
    args: Any,
    kwargs: dict[str, Any] | None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
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
    aligner = Aligner(ep, model, torch_results, dict(zip(placeholders, flat_all)))
    plan: list[tuple[torch.fx.Node, list[Entry]]] = []
    skipped: list[tuple[str, str]] = []
    types: dict[str, ir.TypeProtocol] = {}
    total = 0
    for node in ep.graph.nodes:
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

    context = ComparisonContext(ep, model, torch_results, onnx_results, feeds, flat_user)
    rows = []
    for position, (node, entries) in enumerate(plan):
        row = _compare_node(node, entries, torch_results[node.name], onnx_results, atol, rtol)
        if row is None:
            skipped.append((node.name, "its ONNX value could not be observed (untyped)"))
            continue
        row.position = position
        row._context = context
        rows.append(row)
    report = DiscrepancyReport(rows, skipped, total, atol, rtol)
    report.seconds = {
        "torch": torch_done - begin,
        "onnxruntime": onnx_done - torch_done,
        "compare": time.perf_counter() - onnx_done,
    }
    return report


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
    atol: float,
    rtol: float,
) -> NodeDiscrepancy | None:
    """The row of ``node``: every output found in ``onnx_results`` compared with PyTorch's (``expected``)."""
    ok, max_abs, max_rel, reasons = True, 0.0, 0.0, []
    t_shapes, o_shapes, t_dtypes, o_dtypes, names, vias = [], [], [], [], [], set()
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
    feeds = {
        name: (v.detach().clone() if isinstance(v, torch.Tensor) else np.array(int(v), dtype=np.int64))
        for name, v in zip(names, values)
    }
    return feeds, user, flat
