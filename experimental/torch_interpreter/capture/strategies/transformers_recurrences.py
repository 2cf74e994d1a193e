"""Strategy ``transformers_recurrences``: Python loops over the sequence replaced by ``scan`` for the export.

For a ``PreTrainedModel``, the Python loops over the sequence of recurrent models (Mamba, Falcon-Mamba, Jamba,
RWKV, RecurrentGemma; CPM-Ant's mask) are replaced for the export by the same computation through ``scan``
(``patches/transformers_recurrences.py``): unrolled, they make the sequence axis static ("Constraints
violated"); FSMT's decoder padding mask, dropped on a condition on the input's values, is always kept.
"""

from __future__ import annotations

import torch

from ..report import CaptureReport  # noqa: F401  (the doctest)
from ..transformers_inputs import is_transformers_model
from .patch_family import PatchFamily


class TransformersRecurrences(PatchFamily):
    """Patches the recurrences of transformers models around the capture.

    >>> with TransformersRecurrences().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    name = "transformers_recurrences"
    family = "transformers_recurrences"
    why = "loops over the sequence as scan"

    def applies_to(self, model: torch.nn.Module) -> bool:
        return is_transformers_model(model)
