"""``to_onnx(..., verify=True)``: onnxruntime on the export inputs against the exported program, compared node by
node by the engine (:mod:`.engine`), without exporting anything itself."""

from __future__ import annotations

import logging
from typing import Any

import onnx_ir as ir
import torch

from ..errors import ArgumentError, VerificationError
from ..metadata import FX_NODE
from .compare import describe_tolerance
from .discrepancy_report import DiscrepancyReport
from .engine import compare_exported
from .report import ExportReport

logger = logging.getLogger(__name__)


def verify_tolerances(verify: Any) -> dict[str, float]:
    """The tolerances ``to_onnx(verify=...)`` asks for: none for ``True`` (each type's), else the dictionary's.

    >>> verify_tolerances(True), verify_tolerances({"atol": 1e-2})
    ({}, {'atol': 0.01})
    """
    if verify is True:
        return {}
    if not isinstance(verify, dict) or not set(verify) <= {"atol", "rtol"} or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in verify.values()
    ):
        raise ArgumentError(
            f"verify={verify!r}: True, or a dictionary of non-negative tolerances such as "
            "{'atol': 1e-2, 'rtol': 1e-2}"
        )
    return {k: float(v) for k, v in verify.items()}


def verify_export(
    ep: torch.export.ExportedProgram,
    model: ir.Model,
    args: Any,
    kwargs: dict[str, Any] | None,
    report: ExportReport,
    atol: float | None = None,
    rtol: float | None = None,
) -> DiscrepancyReport:
    """Compares ``model`` with ``ep`` node by node on the inputs of the export; raises
    :class:`VerificationError` naming the first FX node that differs."""
    if not args and not kwargs and ep.example_inputs is not None:
        args, kwargs = ep.example_inputs
    found = compare_exported(ep, model, args, kwargs, atol=atol, rtol=rtol)
    report.discrepancies = found
    report.step("verification", f"{found.compared}/{found.total} FX nodes compared")
    first = found.first
    if first is None:
        report.verification = f"passed: {found}"
        return found
    report.verification = f"**failed**: {found}"
    raise VerificationError(
        f"verify: the ONNX model differs from PyTorch on the export inputs ({describe_tolerance(atol, rtol)}); "
        f"the first FX node that differs is\n{first.describe()}\n"
        f"Check the converter of this aten op (its ONNX nodes carry metadata_props {FX_NODE}="
        f"{first.fx_node!r}); find_discrepancies(...).first.save_repro(folder) writes a standalone repro.",
        found,
    )
