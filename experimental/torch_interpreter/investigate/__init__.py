"""Investigating an export: the node-by-node comparison of an ONNX model with its exported program
(:mod:`.engine`, behind ``to_onnx(verify=True)``), a standalone repro of one node, and the export report
``to_onnx(report=...)`` fills. :func:`~experimental.torch_interpreter.find_discrepancies`, which exports the model
first, is in :mod:`.discrepancies`, which this package does not import (it imports ``to_onnx``)."""

from .discrepancy_report import DiscrepancyReport, NodeDiscrepancy
from .report import ExportReport

__all__ = ["DiscrepancyReport", "ExportReport", "NodeDiscrepancy"]
