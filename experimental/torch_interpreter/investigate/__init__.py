"""Investigating an export: the first FX node whose ONNX translation disagrees with PyTorch
(:func:`find_discrepancies`), a standalone repro of it, and the export report ``to_onnx(report=...)`` fills."""

from .discrepancies import DiscrepancyReport, NodeDiscrepancy, find_discrepancies
from .report import ExportReport

__all__ = ["DiscrepancyReport", "ExportReport", "NodeDiscrepancy", "find_discrepancies"]
