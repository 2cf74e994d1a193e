"""Strategy ``ultralytics_heads``: YOLO heads make their anchors for the size at hand during the export.

A model holding an ultralytics ``Detect`` head (YOLOv8, YOLO11, YOLO26: detect, segment, pose, oriented boxes)
that already ran in eager mode keeps the example's size and compares it with the size at hand: the comparison
fixes a dynamic batch, height or width. The head's own ``dynamic=True`` is set for each call of the export
(``patches/ultralytics_heads.py``), as ultralytics' exporter does; the outputs stay the model's.
"""

from __future__ import annotations

import torch

from ...patches.base import imported_owner
from ...patches.ultralytics_heads import HEAD_MODULE
from ..report import CaptureReport  # noqa: F401  (the doctest)
from .patch_family import PatchFamily


def has_yolo_head(model: object) -> bool:
    """Whether ``model`` holds an ultralytics ``Detect`` head (or a subclass), ultralytics being imported.

    >>> has_yolo_head(torch.nn.Linear(2, 2))
    False
    """
    detect = imported_owner(HEAD_MODULE, "Detect")
    return detect is not None and isinstance(model, torch.nn.Module) and any(
        isinstance(m, detect) for m in model.modules())


class UltralyticsHeads(PatchFamily):
    """Applies the ``ultralytics_heads`` patches around the capture of a model holding a YOLO head.

    >>> with UltralyticsHeads().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    name = "ultralytics_heads"
    family = "ultralytics_heads"
    why = "YOLO heads make their anchors at every call"

    def applies_to(self, model: torch.nn.Module) -> bool:
        return has_yolo_head(model)
