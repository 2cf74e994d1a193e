"""Strategy ``transformers_sizes``: transformers' ``torch_int`` / ``torch_float`` keep a dynamic size symbolic.

For a ``PreTrainedModel`` whose modules call transformers' ``torch_int`` (RT-DETR, ViT...), ``int(height)`` there
(RT-DETR's anchors, position embeddings interpolated to the image's size) would fix a dynamic image size to the
example's: the patch (``patches/transformers_sizes.py``) returns a symbolic size as it is during the capture.
"""

from __future__ import annotations

import torch

from ...patches.transformers_sizes import used_by
from ..report import CaptureReport  # noqa: F401  (the doctest)
from ..transformers_inputs import is_transformers_model
from .patch_family import PatchFamily


class TransformersSizes(PatchFamily):
    """Applies the ``transformers_sizes`` patch around the capture of a transformers model.

    >>> with TransformersSizes().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    name = "transformers_sizes"
    family = "transformers_sizes"
    why = "sizes kept symbolic"

    def applies_to(self, model: torch.nn.Module) -> bool:
        return is_transformers_model(model) and used_by(model)
