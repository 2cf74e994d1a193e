"""Strategy ``transformers_recurrences``: Python loops over the sequence replaced by ``scan`` for the export.

For a ``PreTrainedModel``, the Python loops over the sequence of recurrent models (Mamba, Falcon-Mamba, Jamba,
RWKV, RecurrentGemma; CPM-Ant's mask) are replaced for the export by the same computation through ``scan``
(``patches/transformers_recurrences.py``): unrolled, they make the sequence axis static ("Constraints
violated"); FSMT's decoder padding mask, dropped on a condition on the input's values, is always kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ...patches import applied, select
from ..report import CaptureReport
from ..strategy import Strategy
from ..transformers_inputs import is_transformers_model


class TransformersRecurrences(Strategy):
    """Patches the recurrences of transformers models around the capture.

    >>> with TransformersRecurrences().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    name = "transformers_recurrences"

    @contextlib.contextmanager
    def scope(self, model: torch.nn.Module, args: tuple, kwargs: dict, report: CaptureReport) -> Iterator[None]:
        if not is_transformers_model(model):
            yield
            return
        with applied(select(families=["transformers_recurrences"])) as patches:
            if patches:
                report.use(self.name, "loops over the sequence as scan: " + ", ".join(p.name for p in patches))
            yield
