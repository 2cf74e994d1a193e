"""Strategy ``unsolved_constraints``: a capture that fails where torch simplifies the guards for its suggestions.

After tracing, torch.export hands the guards on the dynamic sizes to sympy to suggest simpler specs
(``DimConstraints.solve``). A guard mixing floor divisions of a size (a Python branch on the parity of a feature
map after a stride: timm's ``cpubone``, ``if (-H) % 2``) is beyond sympy's inequality solver, which raises
``NotImplementedError: The inequality ... cannot be solved`` and ends the export although nothing was violated.
The capture is retried with that simplification skipped when sympy gives up (the suggestions only): the guards
stay as they are, and those made by the model's code are kept with the ONNX model
(:mod:`..shape_guards`), where :class:`~experimental.torch_interpreter.InferenceSession` checks them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace

from torch.fx.experimental.symbolic_shapes import DimConstraints

from ..failures import Failure, FailureKind
from ..report import CaptureReport
from ..strategy import Attempt, Strategy

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def tolerant_solver() -> Iterator[None]:
    """``DimConstraints.solve`` returns without its simplifications where sympy cannot solve an inequality.

    >>> with tolerant_solver():
    ...     pass
    """
    original = DimConstraints.solve

    @functools.wraps(original)
    def solve(self: DimConstraints) -> None:
        try:
            original(self)
        except NotImplementedError as e:
            logger.info("sympy could not simplify the guards (%s): no suggested fixes", str(e).strip()[:200])

    DimConstraints.solve = solve
    try:
        yield
    finally:
        DimConstraints.solve = original


class UnsolvedConstraints(Strategy):
    """Retries a capture that sympy's inequality solver ended, with :func:`tolerant_solver`."""

    name = "unsolved_constraints"

    def during(self, attempt: Attempt) -> AbstractContextManager:
        return tolerant_solver() if self.name in attempt.active else contextlib.nullcontext()

    def retry(self, attempt: Attempt, failure: Failure, report: CaptureReport) -> Attempt | None:
        if FailureKind.UNSOLVED_GUARDS not in failure.kinds or self.name in attempt.active:
            return None
        report.use(self.name, "sympy could not simplify torch.export's guards on the sizes (an inequality of "
                   "floor divisions): retried without the suggested fixes")
        return replace(attempt, active=attempt.active | {self.name}, retries=(*attempt.retries, self.name))
