"""The export report ``to_onnx(..., report=...)`` fills: steps and timings, op histograms, dynamic axes,
missing ops, verification. The same text is logged at ``verbose=1``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir
import torch

from ..errors import TorchInterpreterWarning, UnsupportedOpError
from ..logs import warn_at_user
from ..metadata import RANGE_CONSTRAINTS, capture_entries
from ..provenance import target_key

logger = logging.getLogger(__name__)


@dataclass
class ExportReport:
    """What one :func:`to_onnx` call did. Pass an instance as ``report=`` to get it filled, or a path
    to get its markdown written there (also when the export fails).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import ExportReport, to_onnx
        >>> report = ExportReport()
        >>> onx = to_onnx(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), (torch.randn(2, 4),),
        ...               report=report)
        >>> [name for name, _, _ in report.steps]
        ['capture', 'translation', 'optimization']
        >>> dict(report.fx_ops)
        {'aten::linear.default': 1, 'aten::relu.default': 1}
        >>> dict(report.onnx_ops)
        {'Gemm': 1, 'Relu': 1}
    """

    steps: list[tuple[str, float, str]] = field(default_factory=list)
    fx_ops: Counter = field(default_factory=Counter)
    onnx_ops: Counter = field(default_factory=Counter)
    dynamic_axes: dict[str, list[str | int]] = field(default_factory=dict)
    constraints: dict[str, str] = field(default_factory=dict)
    refinements: list[str] = field(default_factory=list)
    capture: dict[str, str] = field(default_factory=dict)
    missing_ops: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    verification: str = ""
    error: str = ""
    #: what torch printed while the failed capture ran (partial graphs, its warnings), kept off the terminal
    torch_output: str = ""
    exported_program: torch.export.ExportedProgram | None = field(default=None, repr=False)
    onnx_model: ir.Model | None = field(default=None, repr=False)
    discrepancies: Any = field(default=None, repr=False)
    _last: float = field(default=0.0, repr=False)

    # -- filled by to_onnx -------------------------------------------------------------------------------
    def step(self, name: str, detail: str = "") -> None:
        """Records a step ending now, its time measured from the previous step."""
        now = time.perf_counter()
        self.steps.append((name, now - self._last, detail))
        self._last = now
        logger.info("%s: %.3fs %s", name, self.steps[-1][1], detail)

    def exported(self, ep: torch.export.ExportedProgram, detail: str = "") -> None:
        """The capture ended: keeps the program, counts its ops and its dynamic dimensions' ranges."""
        self.exported_program = ep
        self.step("capture", detail)
        self.fx_ops = Counter(_fx_ops(ep.graph_module))
        for sym, rng in ep.range_constraints.items():
            self.constraints[str(sym)] = f"[{rng.lower}, {rng.upper}]"

    def translated(self, model: ir.Model) -> None:
        """The translation ended (before optimization)."""
        self.step("translation", f"{len(model.graph)} ONNX nodes")

    def optimized(self, model: ir.Model) -> None:
        """The model is final: counts the ONNX ops, reads the dynamic axes and the capture strategies."""
        self.onnx_model = model
        self.step("optimization", f"{len(model.graph)} ONNX nodes")
        self.onnx_ops = Counter(_onnx_ops(model.graph))
        for value in model.graph.inputs:
            dims = list(value.shape) if value.shape is not None else []
            named = [d if isinstance(d, int) else str(d) for d in dims]
            if any(not isinstance(d, int) for d in named):
                self.dynamic_axes[value.name] = named
        self.capture = capture_entries(model.metadata_props)
        self.refinements = _ranges(model.metadata_props.get(RANGE_CONSTRAINTS))

    # -- reading -----------------------------------------------------------------------------------------
    def to_markdown(self) -> str:
        """The report as markdown."""
        total = sum(t for _, t, _ in self.steps)
        lines = ["# Export report", ""]
        if self.error:
            lines += ["**The export failed:**", "", "```", self.error, "```", ""]
        if self.torch_output:
            lines += ["What torch printed while capturing:", "", "```", self.torch_output.rstrip(), "```", ""]
        lines += ["## Steps", "", "| step | seconds | detail |", "| --- | --- | --- |"]
        lines += [f"| {name} | {t:.3f} | {detail} |" for name, t, detail in self.steps]
        lines += [f"| total | {total:.3f} | |", ""]
        if self.capture:
            # no strategy applied: the first capture worked
            lines += ["## Capture", ""] + [f"- {k}: {v or 'none needed'}" for k, v in sorted(self.capture.items())]
            lines.append("")
        lines += ["## Dynamic axes", ""]
        if self.dynamic_axes:
            lines += [f"- {name}: {dims}" for name, dims in self.dynamic_axes.items()]
        else:
            lines.append("- none: every input shape is static")
        if self.refinements:
            lines += ["", "Ranges of the dynamic axes (the ONNX model does not check them):", ""]
            lines += [f"- {r}" for r in self.refinements]
        elif self.constraints:
            lines += ["", "Ranges torch.export inferred for the dynamic dimensions:", ""]
            lines += [f"- {sym}: {rng}" for sym, rng in sorted(self.constraints.items())]
        lines.append("")
        if self.missing_ops:
            lines += ["## Missing converters", ""]
            for key, uses in sorted(self.missing_ops.items()):
                lines.append(f"- {key}: {len(uses)} node(s), first {uses[0][0]} at {uses[0][1]}")
            lines.append("")
        lines += ["## Verification", "", self.verification or "not run (`verify=True` runs it)", ""]
        lines += _histogram("FX ops (in)", self.fx_ops) + _histogram("ONNX ops (out)", self.onnx_ops)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()

    def _repr_markdown_(self) -> str:  # notebooks show the report
        return self.to_markdown()

    def save(self, path: str | os.PathLike) -> str:
        """Writes the markdown to ``path``; returns the path."""
        path = os.fspath(path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_markdown())
        return path


#: the lower bound torch.export gives a dynamic axis it was not told more about (sizes 0 and 1 are specialized):
#: not a limit of the ONNX model, which runs a size of 1 there
_TORCH_LOW = 2


def _ranges(text: str | None) -> list[str]:
    """One line per dynamic axis from the JSON list ``range_constraints.py`` writes in the metadata."""
    if not text:
        return []
    try:
        entries = json.loads(text)
    except ValueError:
        return [text]
    lines = []
    for e in entries:
        high = "inf" if e.get("high") is None else e["high"]
        low, note = e.get("low"), ", narrowed by the model's code" if e.get("narrowed") else ""
        if low == _TORCH_LOW and not e.get("narrowed"):
            note = " (torch.export's bound 2 comes from its specialization of sizes 0 and 1, not from the model)"
            low = 1
        lines.append(
            f"input {e.get('input')!r} axis {e.get('axis')} ({e.get('dim')!r}) = {e.get('expr')} in "
            f"[{low}, {high}]{note}"
        )
    return lines


def _histogram(title: str, counts: Counter) -> list[str]:
    if not counts:
        return []
    lines = [f"## {title}", "", "| op | count |", "| --- | --- |"]
    lines += [f"| {op} | {n} |" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines + [""]


def _fx_ops(gm: torch.fx.GraphModule) -> Iterator[str]:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            yield target_key(node.target)
        elif node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _fx_ops(sub)


def _onnx_ops(graph: ir.Graph) -> Iterator[str]:
    for node in graph:
        yield f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                yield from _onnx_ops(attr.value)
            elif attr.type == ir.AttributeType.GRAPHS:
                for g in attr.value:
                    yield from _onnx_ops(g)


@contextlib.contextmanager
def recording(report: Any, filename: Any = None) -> Iterator[ExportReport]:
    """The report of one :func:`to_onnx` call: ``report`` is None/False (nothing kept, the content is
    still logged at DEBUG level, a line with the total time at INFO), an :class:`ExportReport` (filled), a path (the markdown is written there,
    also when the export fails) or True (written to ``filename + '.report.md'``)."""
    if report is True:
        if filename is None:
            raise ValueError("report=True writes next to filename=..., give filename or a path: report='report.md'")
        report = os.fspath(filename) + ".report.md"
    rep = report if isinstance(report, ExportReport) else ExportReport()
    rep._last = time.perf_counter()
    try:
        yield rep
    except Exception as e:
        if isinstance(e, UnsupportedOpError):
            rep.missing_ops = dict(e.missing)
        rep.error = f"{type(e).__name__}: {e}"
        rep.torch_output = getattr(e, "torch_output", "")
        raise
    finally:
        total = sum(t for _, t, _ in rep.steps)
        if not rep.error:  # verbose=1: the steps were logged, one line ends them; verbose=2: the whole report
            logger.info("to_onnx done in %.3fs%s; the whole report: to_onnx(..., report='export.md')", total,
                        f", {len(rep.onnx_model.graph)} nodes" if rep.onnx_model is not None else "")
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("export report\n%s", rep.to_markdown())
        if isinstance(report, (str, os.PathLike)):
            _save_beside(rep, report)


def _save_beside(rep: ExportReport, path: str | os.PathLike) -> None:
    """Writes the report without hiding what the export gave: the model, or the export's own error (a folder
    that refuses the model refuses its report too) comes first, a report that cannot be written is a warning."""
    try:
        rep.save(path)
    except OSError as e:
        warn_at_user(
            f"the export report could not be written to {os.fspath(path)!r} ({type(e).__name__}: {e}); "
            "report=ExportReport() keeps it in memory",
            TorchInterpreterWarning,
        )
