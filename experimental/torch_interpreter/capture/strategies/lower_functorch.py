"""Strategy ``lower_functorch``: ``torch.vmap`` batching ops lowered to aten ops after the capture.

``torch.vmap`` in ``forward`` leaves functorch batching ops in the exported graph (``_add_batch_dim``,
``_remove_batch_dim``, ``_vmap_increment_nesting``); ``run_decompositions({})`` applies the batching rules and
gives plain aten ops (nothing else is decomposed: the table is empty). Only graphs holding such ops are lowered.
"""

from __future__ import annotations

import torch

from ...errors import ExportCaptureError
from ..kernels import shape_only_rnn_kernels
from ..report import CaptureReport
from ..strategy import Attempt, Strategy


def functorch_nodes(ep: torch.export.ExportedProgram) -> list[str]:
    """The names of the nodes of ``ep`` (subgraphs included) calling a functorch op.

    >>> functorch_nodes(torch.export.export(torch.nn.ReLU(), (torch.zeros(2),)))
    []
    """
    found = []
    for module in ep.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            found += [
                n.name
                for n in module.graph.nodes
                if n.op == "call_function" and getattr(n.target, "__module__", "").startswith("torch._functorch")
            ]
    return found


def lower_functorch(ep: torch.export.ExportedProgram, report: CaptureReport) -> torch.export.ExportedProgram:
    """``ep`` with its functorch batching ops (``torch.vmap``) lowered to aten ops by their batching rules.

    >>> ep = torch.export.export(torch.nn.ReLU(), (torch.zeros(2),))
    >>> lower_functorch(ep, CaptureReport(strict=False)) is ep
    True
    """
    nodes = functorch_nodes(ep)
    if not nodes:
        return ep
    with shape_only_rnn_kernels():
        lowered = ep.run_decompositions({})
    left = functorch_nodes(lowered)
    if left:
        raise ExportCaptureError(
            f"torch.vmap could not be lowered: functorch ops {left} remain after run_decompositions"
        )
    report.use("lower_functorch", f"torch.vmap batching ops lowered to aten ops ({len(nodes)} functorch nodes)")
    return lowered


class LowerFunctorch(Strategy):
    """Lowers the functorch batching ops of the captured program."""

    name = "lower_functorch"

    def after(
        self, attempt: Attempt, ep: torch.export.ExportedProgram, report: CaptureReport
    ) -> torch.export.ExportedProgram:
        return lower_functorch(ep, report)
