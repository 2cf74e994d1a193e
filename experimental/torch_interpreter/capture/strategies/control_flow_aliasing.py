"""Strategy ``control_flow_aliasing``: a control-flow body returning an input unchanged, retried with a copy.

A ``torch.cond`` branch (``while_loop`` body, ``scan`` combine_fn) returning an input unchanged is refused by
torch ("aliasing"); the capture is retried with the patches of ``patches/control_flow.py`` (the aliased
outputs are cloned), as ``bypass_export_some_errors`` applies them.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import replace

from ...patches import applied, select
from ..failures import Failure, FailureKind
from ..report import CaptureReport
from ..strategy import Attempt, Strategy


class ControlFlowAliasing(Strategy):
    """Answers :attr:`FailureKind.ALIASING` with a try under the control-flow patches.

    >>> from experimental.torch_interpreter.errors import ExportCaptureError
    >>> from experimental.torch_interpreter.capture.failures import classify
    >>> failure = classify(ExportCaptureError("Encountered aliasing during higher order op tracing"))
    >>> attempt = Attempt(None, (), {}, strict=False, spec=None, torch_spec=None)
    >>> sorted(ControlFlowAliasing().retry(attempt, failure, CaptureReport(strict=False)).active)
    ['control_flow_aliasing']
    """

    name = "control_flow_aliasing"

    def during(self, attempt: Attempt) -> AbstractContextManager:
        if self.name not in attempt.active:
            return contextlib.nullcontext()
        return applied(select(families=["control_flow"]))

    def retry(self, attempt: Attempt, failure: Failure, report: CaptureReport) -> Attempt | None:
        if FailureKind.ALIASING not in failure.kinds or self.name in attempt.active:
            return None
        report.use(
            self.name, "a control-flow body returned an input unchanged: retried with its aliased outputs cloned"
        )
        return replace(attempt, active=attempt.active | {self.name}, retries=(*attempt.retries, self.name))
