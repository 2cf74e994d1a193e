"""torchvision's detection post-processing written without guards on the number of boxes.

Faster R-CNN, Mask R-CNN, Keypoint R-CNN, RetinaNet, FCOS and SSD keep a data-dependent number of boxes
(``torch.where(scores > thresh)``, ``remove_small_boxes``, ``nms``): its size is an unbacked symbol ``u0``, and
a Python branch on it stops ``torch.export``: ``Could not guard on data-dependent expression Eq(4*u1, 0)``
(``batched_nms``'s ``if boxes.numel() == 0`` and its choice between two algorithms by box count). Each patch
replaces one torchvision function by the same computation without that branch; the boxes, scores and labels
are the same.

The patches for the image size are in ``torchvision_image_sizes.py``.

The patches replace module and class attributes (``torchvision.ops.boxes.batched_nms``, ...); they apply only
when torchvision is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from .base import Patch, Undo, attribute_needed, replace_attribute

_BOXES = "torchvision.ops.boxes"
_OPS = "torchvision.ops"
_POOLERS = "torchvision.ops.poolers"


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """``torchvision.ops.boxes.batched_nms`` with the coordinate trick for every number of boxes.

    torchvision picks ``_batched_nms_vanilla`` (one ``nms`` per class) above 4,000 coordinates on CPU and the
    coordinate trick (one ``nms`` on boxes shifted apart by class) below, and returns early on no box: both
    guards on the number of boxes. Both algorithms keep the same boxes, in decreasing score. The maximum
    coordinate is taken with ``-inf`` appended, so that no box gives an empty result instead of an error.
    """
    from torchvision.ops.boxes import nms

    flat = torch.cat([boxes.reshape(-1), boxes.new_full((1,), float("-inf"))])
    max_coordinate = flat.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return nms(boxes_for_nms, scores, iou_threshold)


def multiscale_roi_align(
    x_filtered: list[torch.Tensor],
    boxes: list[torch.Tensor],
    output_size: list[int],
    sampling_ratio: int,
    scales: list[float] | None,
    mapper: Any,
) -> torch.Tensor:
    """``torchvision.ops.poolers._multiscale_roi_align`` sized by ``rois.shape[0]`` instead of ``len(rois)``.

    ``len()`` of a tensor asks for a Python int, which an unbacked number of boxes has not (``Could not extract
    specialized integer from data-dependent expression Min(1000, u2)``); the rest is torchvision's code: each
    box pooled from the level the mapper gives it, written in place at its row.
    """
    from torchvision.ops.poolers import _convert_to_roi_format
    from torchvision.ops.roi_align import roi_align

    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    rois = _convert_to_roi_format(boxes)
    if len(x_filtered) == 1:
        return roi_align(
            x_filtered[0], rois, output_size=output_size, spatial_scale=scales[0], sampling_ratio=sampling_ratio
        )
    levels = mapper(boxes)
    dtype, device = x_filtered[0].dtype, x_filtered[0].device
    result = torch.zeros(
        (rois.shape[0], x_filtered[0].shape[1], *output_size), dtype=dtype, device=device
    )
    for level, (per_level_feature, scale) in enumerate(zip(x_filtered, scales)):
        idx_in_level = torch.where(levels == level)[0]
        result_idx_in_level = roi_align(
            per_level_feature,
            rois[idx_in_level],
            output_size=output_size,
            spatial_scale=scale,
            sampling_ratio=sampling_ratio,
        )
        result[idx_in_level] = result_idx_in_level.to(result.dtype)
    return result


def _replace(modules: tuple[str, ...], name: str, new: Callable) -> Undo:
    """Replaces ``name`` in each of ``modules`` already imported (torchvision re-exports its functions)."""
    undo: list[Undo] = []
    for module in modules:
        if not attribute_needed(module, name):
            continue
        owner = sys.modules[module]

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return new(*args, **kwargs)

        wrapper.__doc__ = new.__doc__
        undo.append(replace_attribute(owner, name, wrapper))

    def undo_all() -> None:
        for fn in reversed(undo):
            fn()

    return undo_all


PATCHES: list[Patch] = [
    Patch(
        name="batched_nms with the coordinate trick for any number of boxes",
        group="torchvision",
        replaces="torchvision.ops.boxes.batched_nms (and torchvision.ops.batched_nms)",
        fixes="`Could not guard on data-dependent expression Eq(4*u1, 0)` in `_batched_nms_coordinate_trick`",
        versions="torchvision 0.28",
        needed=lambda: attribute_needed(_BOXES, "batched_nms"),
        apply=lambda: _replace((_BOXES, _OPS), "batched_nms", batched_nms),
    ),
    Patch(
        name="_multiscale_roi_align sized by shape[0]",
        group="torchvision",
        replaces="torchvision.ops.poolers._multiscale_roi_align",
        fixes="`Could not extract specialized integer from data-dependent expression Min(1000, u2)` (`len(rois)`)",
        versions="torchvision 0.28",
        needed=lambda: attribute_needed(_POOLERS, "_multiscale_roi_align"),
        apply=lambda: _replace((_POOLERS,), "_multiscale_roi_align", multiscale_roi_align),
    ),
]
