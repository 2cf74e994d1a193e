"""The shape shared by the strategies that apply one family of patches (``patches/<family>.py``) around the capture
of the models it concerns: :class:`PatchFamily`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ...patches import applied, select
from ..report import CaptureReport
from ..strategy import Strategy


class PatchFamily(Strategy):
    """Applies the patches of ``family`` around the capture of a model :meth:`applies_to` accepts, and records
    them with ``why`` (the patches record themselves in ``aten2onnx.capture.patches``).

    >>> class Nothing(PatchFamily):
    ...     name, family, why = "nothing", "control_flow", "nothing to say"
    >>> with Nothing().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    #: the key of :data:`~experimental.torch_interpreter.patches.FAMILIES`
    family: str = ""
    #: what the patches do, for the report's note
    why: str = ""

    def applies_to(self, model: torch.nn.Module) -> bool:
        """Whether the model's code is what the family patches."""
        return False

    @contextlib.contextmanager
    def scope(self, model: torch.nn.Module, args: tuple, kwargs: dict, report: CaptureReport) -> Iterator[None]:
        if not self.applies_to(model):
            yield
            return
        with applied(select(families=[self.family])) as patches:
            if patches:
                report.use(self.name, f"{self.why}: " + ", ".join(p.name for p in patches))
            yield
