"""What the node-by-node comparison finds: one :class:`NodeDiscrepancy` per FX node compared, gathered in a
:class:`DiscrepancyReport` (the first node that differs, a markdown table, a plot, a repro of one node)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidModelError, require
from .compare import describe_tolerance
from .repro import save_repro


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
    #: for each of ``onnx_values``, the place of the PyTorch output it was compared with (indices into the node's
    #: nested outputs: ``()`` for a single tensor)
    paths: list[tuple[int, ...]] = field(default_factory=list)
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
    atol: float | None  # None: each value's type's (compare.TOLERANCES)
    rtol: float | None
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
            f"({100 * self.share:.1f}%), {describe_tolerance(self.atol, self.rtol)}: "
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
        """The absolute error per node in graph order (log scale), the first differing node marked, the legend
        outside the axes, right of them (no point under it); returns the matplotlib ``Axes``.

        >>> import os, torch
        >>> from experimental.torch_interpreter import find_discrepancies
        >>> ax = find_discrepancies(torch.nn.Sequential(torch.nn.Linear(4, 2)), (torch.randn(3, 4),)).plot()
        >>> ax.get_yscale()
        'log'
        >>> ax.figure.savefig(os.devnull, format="png", bbox_inches="tight")  # "tight" keeps the legend
        """
        require("matplotlib", "plots", "matplotlib")
        import matplotlib.pyplot as plt

        created = ax is None
        if created:
            _, ax = plt.subplots(figsize=(8, 3.5))
        xs = [r.position for r in self.rows]
        ys = [max(r.max_abs, 1e-12) if np.isfinite(r.max_abs) else 1e3 for r in self.rows]
        colors = ["tab:blue" if r.ok else "tab:red" for r in self.rows]
        ax.scatter(xs, ys, c=colors, s=12)
        ax.plot(xs, ys, color="lightgray", linewidth=0.8, zorder=0)
        if self.atol is not None:
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
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
        if created:
            ax.figure.tight_layout()  # the figure makes room for the legend
        return ax
