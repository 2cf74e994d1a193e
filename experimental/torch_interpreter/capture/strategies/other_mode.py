"""Strategy ``other_mode``: a capture failing in one strict mode is tried in the other; a warning says which worked.

Non-strict capture (tracing Python) failing is retried in strict mode (dynamo), and the reverse, with every
strategy after this one tried again; when both fail, the first error is raised, naming the second. A non-strict
capture whose model code made an axis declared dynamic static (``batch = len(x)``: a Python int) is retried in
strict mode too, where dynamo keeps such sizes symbolic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from ...errors import CaptureStrategyWarning
from ...logs import warn_at_user
from ..failures import Failure, FailureKind
from ..report import CaptureReport
from ..strategy import Attempt, Outcome, Strategy

logger = logging.getLogger(__name__)


def mode_name(strict: bool) -> str:
    """``"strict"`` or ``"non-strict"``.

    >>> mode_name(False)
    'non-strict'
    """
    return "strict" if strict else "non-strict"


class OtherMode(Strategy):
    """Falls back on the other strict mode when a capture (not its dynamic shapes) failed, and on the strict mode
    when tracing Python made a dynamic axis static."""

    name = "other_mode"

    def fallback(
        self, attempt: Attempt, failure: Failure, run: Callable[[Attempt], Outcome], report: CaptureReport
    ) -> Outcome | None:
        # a size made static by tracing Python may stay symbolic through dynamo (``len(x)`` is ``x.shape[0]``
        # there: RT-DETR's batch)
        made_static = FailureKind.MADE_STATIC in failure.kinds and not attempt.strict
        if FailureKind.CAPTURE not in failure.kinds and not made_static:
            return None
        first = failure.error
        other = not attempt.strict
        mode, other_mode = mode_name(attempt.strict), mode_name(other)
        logger.info("%s capture failed, trying %s: %s", mode, other_mode, failure.first_line)
        try:
            outcome = run(replace(attempt, strict=other))
        except Exception as second:
            first.args = (f"{first.args[0]}\n(the {other_mode} capture failed too: {str(second).splitlines()[0]})",)
            raise first from first.__cause__
        note = f"{mode} capture failed ({failure.first_line}); {other_mode} capture worked"
        report.use(self.name, note)
        warn_at_user(f"{note}: pass strict={other} to skip the failing attempt", CaptureStrategyWarning)
        return outcome
