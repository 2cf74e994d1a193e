"""What the capture did: the mode that worked, the strategies applied and why; written into the model's metadata."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from ..metadata import (CAPTURE_MODE, CAPTURE_NOTES, CAPTURE_PATCHES, CAPTURE_STRATEGIES, CONSTANT_INPUTS,
                        INFERRED_DYNAMIC_SHAPES, write)
from ..patches.base import active

logger = logging.getLogger(__name__)


@dataclass
class CaptureReport:
    """What the capture did: the mode that worked, the strategies applied (in the order they were first applied)
    and a note for each time one was, the patches of ``bypass_export_some_errors`` applied around it, the scalar
    inputs baked in as constants.

    >>> report = CaptureReport(strict=False)
    >>> report.use("size_oblivious", "a batch of 1")
    >>> report.metadata()
    {'aten2onnx.capture.mode': 'non-strict', 'aten2onnx.capture.strategies': 'size_oblivious', \
'aten2onnx.capture.notes': 'a batch of 1'}
    """

    strict: bool
    applied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)
    #: the dynamic shapes inferred from several input sets (None when the user gave them or none)
    inferred: dict[str, Any] | None = None
    #: the names of the patches applied while the model was captured
    patches: list[str] = field(default_factory=active)

    def use(self, strategy: str, note: str) -> None:
        """Records that ``strategy`` changed the capture, and why (logged at INFO level)."""
        if strategy not in self.applied:
            self.applied.append(strategy)
        self.notes.append(note)
        logger.info("capture strategy %s: %s", strategy, note)

    def metadata(self) -> dict[str, str]:
        """Entries for the ONNX model's ``metadata_props``.

        >>> CaptureReport(strict=False).metadata()["aten2onnx.capture.mode"]
        'non-strict'
        """
        meta = {
            CAPTURE_MODE: "strict" if self.strict else "non-strict",
            CAPTURE_STRATEGIES: ",".join(self.applied),
        }
        if self.notes:
            meta[CAPTURE_NOTES] = "\n".join(self.notes)
        if self.patches:
            meta[CAPTURE_PATCHES] = "\n".join(self.patches)
        if self.constants:
            meta[CONSTANT_INPUTS] = repr(self.constants)
        if self.inferred is not None:
            meta[INFERRED_DYNAMIC_SHAPES] = repr(self.inferred)
        return meta

    def record(self, model: ir.Model) -> None:
        """Writes :meth:`metadata` into the ``metadata_props`` of an ``onnx_ir.Model``.

        >>> model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
        >>> CaptureReport(strict=True).record(model)
        >>> model.metadata_props[CAPTURE_MODE]
        'strict'
        """
        write(model, self.metadata())
