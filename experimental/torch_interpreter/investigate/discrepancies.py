"""``find_discrepancies``: the first FX node whose ONNX translation disagrees with PyTorch.

The exported program runs node by node in PyTorch (:mod:`.torch_run`), the ONNX model runs once in
onnxruntime with every value named after an FX node as an output and graph optimizations off
(:mod:`.onnx_run`); both are aligned through the node metadata and compared in graph order.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
import torch.fx

from ..dtypes import value_type
from ..errors import InputMismatchError, InvalidModelError
from ..provenance import module_scope, source_line
from ..provenance import target_key
from ..registry import Registry
from ..runtime import to_numpy
from .compare import compare_arrays
from .onnx_run import fx_groups, fx_outputs, observed, result_values, run_unoptimized
from .torch_run import run_exported_program, user_inputs

logger = logging.getLogger(__name__)


@dataclass
class NodeDiscrepancy:
    """One FX node compared: its result in PyTorch against the ONNX value standing for it.

    ``max_abs`` and ``max_rel`` are taken over every tensor output of the node; ``via`` names the FX
    node whose ONNX value was used when this node has no ONNX node of its own (``getitem``, ``alias``).
    """

    fx_node: str
    target: str
    module: str
    source: str
    ok: bool
    max_abs: float
    max_rel: float
    torch_shapes: list[tuple[int, ...]]
    onnx_shapes: list[tuple[int, ...]]
    torch_dtypes: list[str]
    onnx_dtypes: list[str]
    onnx_values: list[str]
    reason: str = ""
    via: str = ""
    position: int = 0
    _context: Any = field(default=None, repr=False, compare=False)

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """Shape of the first output in PyTorch."""
        return self.torch_shapes[0]

    @property
    def onnx_shape(self) -> tuple[int, ...]:
        """Shape of the first output in onnxruntime."""
        return self.onnx_shapes[0]

    @property
    def torch_dtype(self) -> str:
        """Element type of the first output in PyTorch."""
        return self.torch_dtypes[0]

    @property
    def onnx_dtype(self) -> str:
        """Element type of the first output in onnxruntime."""
        return self.onnx_dtypes[0]

    def describe(self) -> str:
        """A few lines naming the node, where it comes from and how far both sides are."""
        scope = f" in module {self.module}" if self.module else ""
        lines = [
            f"FX node {self.fx_node!r} ({self.target}){scope}, from {self.source}",
            f"  max abs diff {self.max_abs:.3g}, max rel diff {self.max_rel:.3g}"
            + (f" ({self.reason} differ)" if self.reason and self.reason != "values" else ""),
            f"  torch {self.torch_dtypes} {self.torch_shapes}; onnx {self.onnx_dtypes} {self.onnx_shapes}",
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def save_repro(self, folder: str | os.PathLike) -> list[str]:
        """Writes a standalone repro of this node in ``folder`` (see :func:`.repro.save_repro`):
        ``model.onnx`` (the node's ONNX nodes alone), ``inputs.npz`` and ``inputs.pt`` (the values
        they read), ``repro.py`` (the aten op on the same inputs, compared with onnxruntime). Returns
        the paths written."""
        from .repro import save_repro

        if self._context is None:
            raise InvalidModelError("this row was not produced by find_discrepancies: nothing to save")
        return save_repro(self, self._context, folder)


@dataclass
class DiscrepancyReport:
    """What :func:`find_discrepancies` found: ``rows`` (one per compared FX node, in graph order),
    ``first`` (the first that differs, None when everything agrees) and ``skipped`` (the FX nodes
    producing tensors that could not be compared, with the reason)."""

    rows: list[NodeDiscrepancy]
    skipped: list[tuple[str, str]]
    total: int
    atol: float
    rtol: float
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def first(self) -> NodeDiscrepancy | None:
        """The first FX node, in graph order, whose ONNX result differs; None when all agree."""
        return next((r for r in self.rows if not r.ok), None)

    @property
    def compared(self) -> int:
        """Number of FX nodes compared."""
        return len(self.rows)

    @property
    def share(self) -> float:
        """Compared nodes over the FX ``call_function`` nodes producing tensors."""
        return self.compared / self.total if self.total else 1.0

    def __str__(self) -> str:
        head = (
            f"{self.compared}/{self.total} FX nodes producing tensors compared "
            f"({100 * self.share:.1f}%), atol={self.atol:g}, rtol={self.rtol:g}: "
        )
        first = self.first
        if first is None:
            return head + "no discrepancy"
        bad = sum(not r.ok for r in self.rows)
        return head + f"{bad} differ, the first is\n" + first.describe()

    def to_markdown(self, only_differing: bool = False) -> str:
        """The report as a markdown table, one line per compared node (``only_differing`` keeps those
        that differ), followed by the nodes that were not compared."""
        lines = [str(self).replace("\n", "\n\n"), ""]
        lines.append("| # | FX node | target | ok | max abs | max rel | torch | onnx | module |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in self.rows:
            if only_differing and r.ok:
                continue
            via = f" (via {r.via})" if r.via else ""
            lines.append(
                f"| {r.position} | {r.fx_node}{via} | {r.target} | {'yes' if r.ok else '**no**'} | "
                f"{r.max_abs:.3g} | {r.max_rel:.3g} | {r.torch_dtype} {list(r.torch_shape)} | "
                f"{r.onnx_dtype} {list(r.onnx_shape)} | {r.module} |"
            )
        if self.skipped:
            lines += ["", f"Not compared ({len(self.skipped)}):", ""]
            lines += [f"- {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines) + "\n"

    def _repr_markdown_(self) -> str:  # notebooks show the table
        return self.to_markdown()

    def plot(self, ax: Any = None, title: str | None = None) -> Any:
        """The absolute error per node in graph order (log scale), the first differing node marked;
        returns the matplotlib ``Axes``."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(8, 3.5))
        xs = [r.position for r in self.rows]
        ys = [max(r.max_abs, 1e-12) if np.isfinite(r.max_abs) else 1e3 for r in self.rows]
        colors = ["tab:blue" if r.ok else "tab:red" for r in self.rows]
        ax.scatter(xs, ys, c=colors, s=12)
        ax.plot(xs, ys, color="lightgray", linewidth=0.8, zorder=0)
        ax.axhline(self.atol, color="gray", linestyle="--", linewidth=0.8, label=f"atol={self.atol:g}")
        ax.set_yscale("log")
        ax.set_xlabel("FX node (graph order)")
        ax.set_ylabel("max |onnx - torch|")
        first = self.first
        if first is not None:
            ax.annotate(
                first.fx_node, (first.position, max(first.max_abs, 1e-12) if np.isfinite(first.max_abs) else 1e3),
                textcoords="offset points", xytext=(5, 8), color="tab:red",
            )
        ax.set_title(title or f"{self.compared}/{self.total} nodes compared")
        ax.legend(loc="lower right")
        return ax


def find_discrepancies(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    *,
    onnx_model: onnx.ModelProto | ir.Model | str | os.PathLike | None = None,
    registry: Registry | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    **to_onnx_kwargs: Any,
) -> DiscrepancyReport:
    """Exports ``model`` (or takes ``onnx_model``), runs the exported program node by node in PyTorch and
    the ONNX model in onnxruntime with every FX-named value observable, and compares them in graph order.

    :param model: the model, or its ``ExportedProgram`` (``args``/``kwargs`` then default to its example inputs)
    :param args: positional inputs
    :param kwargs: keyword inputs
    :param dynamic_shapes: as for :func:`to_onnx`
    :param onnx_model: the ONNX model to check (made by :func:`to_onnx` from the same model);
        exported with ``registry`` when not given
    :param registry: converters to use for the export (default: the project's)
    :param atol: absolute tolerance
    :param rtol: relative tolerance (``|onnx - torch| <= atol + rtol * |torch|``); integers and booleans
        must be equal, NaN in both places is equal
    :param to_onnx_kwargs: other options given to :func:`to_onnx` (``strict``, ``target_opset``, ...)
    :return: a :class:`DiscrepancyReport`; ``report.first`` is the first FX node that differs, or None

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import find_discrepancies
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Softplus(beta=2.0))
        >>> report = find_discrepancies(model, (torch.randn(3, 4),))
        >>> print(report.first)
        None
        >>> [r.fx_node for r in report.rows]
        ['linear', 'softplus']
    """
    from ..convert import to_onnx
    from .report import ExportReport

    begin = time.perf_counter()
    export = ExportReport()
    if "optimize" in inspect.signature(to_onnx).parameters:
        # fusions and common subexpression elimination remove values named after FX nodes
        to_onnx_kwargs.setdefault("optimize", False)
    if isinstance(model, torch.export.ExportedProgram):
        if not args and not kwargs and model.example_inputs is not None:
            args, kwargs = model.example_inputs
        if onnx_model is None:
            onnx_model = to_onnx(model, registry=registry, as_ir=True, **to_onnx_kwargs)
        ep = model
    elif isinstance(model, torch.nn.Module):
        args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
        exported = to_onnx(
            model, args, kwargs, dynamic_shapes, registry=registry, as_ir=True, report=export, **to_onnx_kwargs
        )
        ep = export.exported_program
        onnx_model = exported if onnx_model is None else onnx_model
    else:
        raise InvalidModelError(
            f"find_discrepancies expects a torch.nn.Module or an ExportedProgram, not {type(model).__name__}"
        )
    exported_at = time.perf_counter()
    report = compare_exported(ep, _as_ir(onnx_model), args, kwargs, atol=atol, rtol=rtol)
    report.seconds = {"export": exported_at - begin, **report.seconds}
    logger.info("find_discrepancies: %s", report)
    return report


def _as_ir(model: Any) -> ir.Model:
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model)
    raise InvalidModelError(f"onnx_model must be an onnx.ModelProto, an onnx_ir.Model or a path, not {type(model)}")


def _tensor_elements(val: Any, name: str) -> list[tuple[str, Any]]:
    """``(onnx name, FakeTensor)`` of each tensor output, named as the interpreter names them."""
    if isinstance(val, (tuple, list)):
        out = []
        for i, v in enumerate(val):
            out.extend(_tensor_elements(v, f"{name}_{i}" if i else name))
        return out
    return [(name, val)] if isinstance(val, torch.Tensor) else []


def _index_path(val: Any, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    if isinstance(val, (tuple, list)):
        return [p for i, v in enumerate(val) for p in _index_path(v, path + (i,))]
    return [path] if isinstance(val, torch.Tensor) else []


def _pick(value: Any, path: tuple[int, ...]) -> Any:
    for i in path:
        value = value[i]
    return value


class _Aligner:
    """Finds the ONNX value standing for each (FX node, output) of the top-level graph."""

    def __init__(
        self, ep: torch.export.ExportedProgram, model: ir.Model, torch_results: dict[str, Any], inputs: dict[str, Any]
    ):
        self.groups = fx_groups(model.graph)
        self.tags = fx_outputs(model.graph)
        self.results = torch_results
        self.nodes = {n.name: n for n in ep.graph.nodes}
        self.outputs = self._graph_outputs(ep, model)
        self.placeholders = self._placeholders(ep, model)
        self.inputs = inputs
        self.missing_reason: dict[str, str] = {}

    @staticmethod
    def _graph_outputs(ep: torch.export.ExportedProgram, model: ir.Model) -> dict[str, ir.Value]:
        """FX node name -> ONNX graph output, for the nodes returned by the model (renamed ``logits``...)."""
        from torch.export.graph_signature import OutputKind

        out_node = next(n for n in ep.graph.nodes if n.op == "output")
        flat = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
        user = [a for a, spec in zip(flat, ep.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
        user = [a for a in user if a is not None]
        mapping: dict[str, ir.Value] = {}
        if len(user) != len(model.graph.outputs):
            return mapping
        for arg, value in zip(user, model.graph.outputs):
            producer = value.producer()
            if isinstance(arg, torch.fx.Node) and producer is not None:
                mapping.setdefault(arg.name, value)
        return mapping

    @staticmethod
    def _placeholders(ep: torch.export.ExportedProgram, model: ir.Model) -> dict[str, ir.Value]:
        """Placeholder name -> ONNX weight (initializer named after the parameter) or graph input."""
        from torch.export.graph_signature import InputKind

        mapping: dict[str, ir.Value] = {}
        graph_inputs = iter(model.graph.inputs)
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        for node, spec in zip(placeholders, ep.graph_signature.input_specs):
            if spec.kind == InputKind.USER_INPUT:
                if isinstance(node.meta.get("val"), (torch.Tensor, torch.SymInt)):
                    mapping[node.name] = next(graph_inputs, None)
            elif spec.target in model.graph.initializers:
                mapping[node.name] = model.graph.initializers[spec.target]
        return mapping

    def _torch_value(self, node: torch.fx.Node) -> Any:
        if node.op == "placeholder":
            return self.inputs.get(node.name)
        return self.results.get(node.name)

    def resolve(self, name: str, path: tuple[int, ...], depth: int = 0) -> tuple[ir.Value | None, str]:
        """The ONNX value of output ``path`` of FX node ``name`` and the FX node it was found under."""
        node = self.nodes[name]
        group = self.groups.get(name)
        tag = ":".join([name, *map(str, path)])
        if tag in self.tags:
            return self.tags[tag], name
        if group:
            if not self.tags:  # a model made before values were tagged: names, when they are unambiguous
                named = result_values(name, group)
                expected = {name + "".join(f"_{i}" for i in p if i) for p in _index_path(node.meta.get("val"))}
                onnx_name = name + "".join(f"_{i}" for i in path if i)
                if onnx_name in named and set(named) == expected:
                    return named[onnx_name], name
                if not path and name in self.outputs:
                    return self.outputs[name], name
            self.missing_reason.setdefault(name, "no ONNX value named after it (removed as unused or renamed)")
            return None, ""
        if not path and name in self.outputs:
            return self.outputs[name], name
        if depth > 8 or node.op != "call_function":
            return None, ""
        # no ONNX node of its own: getitem picks an output of another node, passthrough converters
        # (alias, detach, clone...) return their input; the latter only when PyTorch agrees they are equal
        if target_key(node.target) == "operator::getitem" and isinstance(node.args[0], torch.fx.Node):
            return self.resolve(node.args[0].name, (node.args[1],) + path, depth + 1)
        source = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
        if source is not None and not path and _same_tensor(self.results.get(name), self._torch_value(source)):
            if source.op == "placeholder":
                value = self.placeholders.get(source.name)
                if value is not None:
                    return value, source.name
            else:
                return self.resolve(source.name, (), depth + 1)
        self.missing_reason.setdefault(
            name,
            "nothing uses its result (removed)" if not node.users
            else "no ONNX value holds it (folded into a constant, or removed because nothing uses the result)",
        )
        return None, ""


def _same_tensor(a: Any, b: Any) -> bool:
    """Both are tensors of the same shape, type and values (NaN equal to NaN)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    return bool(torch.equal(a, b))


def compare_exported(
    ep: torch.export.ExportedProgram,
    model: ir.Model,
    args: Any,
    kwargs: dict[str, Any] | None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
) -> DiscrepancyReport:
    """Compares the ONNX ``model`` translated from ``ep`` with ``ep`` itself on one set of inputs,
    FX node by FX node (see :func:`find_discrepancies`); ``model`` is left unchanged."""
    begin = time.perf_counter()
    args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
    feeds, flat_user, flat_all = _feeds(ep, model, args, kwargs)
    torch_results, _ = run_exported_program(ep, args, kwargs)
    torch_done = time.perf_counter()

    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    aligner = _Aligner(ep, model, torch_results, dict(zip(placeholders, flat_all)))
    plan: list[tuple[torch.fx.Node, list[tuple[tuple[int, ...], ir.Value | None, str]]]] = []
    skipped: list[tuple[str, str]] = []
    types: dict[str, ir.TypeProtocol] = {}
    total = 0
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        paths = _index_path(node.meta.get("val"))
        if not paths:
            continue
        total += 1
        entries = []
        for path in paths:
            value, via = aligner.resolve(node.name, path)
            if value is not None:
                dtype = value_type(_pick(node.meta["val"], path))
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

    context = _Context(ep, model, torch_results, onnx_results, feeds, flat_user)
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
class _Context:
    """What a repro needs after the comparison."""

    ep: torch.export.ExportedProgram
    model: ir.Model
    torch_results: dict[str, Any]
    onnx_results: dict[str, np.ndarray]
    feeds: dict[str, Any]
    user_inputs: list[Any]


def _compare_node(node, entries, expected, onnx_results, atol, rtol) -> NodeDiscrepancy | None:
    ok, max_abs, max_rel, reasons = True, 0.0, 0.0, []
    t_shapes, o_shapes, t_dtypes, o_dtypes, names, vias = [], [], [], [], [], set()
    for path, value, via in entries:
        if value is None or value.name not in onnx_results:
            continue
        exp = _pick(expected, path)
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


def _feeds(ep, model: ir.Model, args: tuple, kwargs: dict | None) -> tuple[dict[str, Any], list[Any]]:
    """onnxruntime feeds: the user inputs that are tensors or dynamic sizes, in placeholder order,
    named as the ONNX model's inputs."""
    from .torch_run import flat_inputs

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
