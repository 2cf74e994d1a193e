"""torchvision's detection transforms written so that a symbolic image size stays symbolic.

``GeneralizedRCNNTransform`` resizes each image by ``min(min_size / min(h, w), max_size / max(h, w))`` and pads
the batch to a multiple of 32 with Python's ``min``, ``float`` and ``math.ceil`` on the sizes: each specializes
a dynamic height or width to the example's. Mask R-CNN pastes each mask into the image in a Python loop over the
detections (``Could not extract specialized integer from data-dependent expression Min(100, u9)``). The patches
compute the same sizes with ``torch.sym_min``, ``torch.sym_max`` and integer arithmetic, and paste all the masks
at once: one graph serves every image size and number of detections, equal to eager at each.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch

from .base import Patch, Undo, attribute_needed, replace_attribute

_TRANSFORM = "torchvision.models.detection.transform"


def resized_size(height: Any, width: Any, min_size: float, max_size: float) -> list[Any]:
    """The size ``_resize_image_and_masks`` gives an image of ``height x width`` without ``fixed_size``:
    ``interpolate(scale_factor=s, recompute_scale_factor=True)`` makes ``floor(size * s)`` in double, with
    ``s = min(min_size / min(h, w), max_size / max(h, w))``; written with ``torch.sym_min`` and ``torch.sym_max``
    so that symbolic sizes stay symbolic (Python's ``min`` guards on which side is the shorter).

    >>> resized_size(480, 640, 800, 1333)
    [800, 1066]
    """
    scale = torch.sym_min(min_size / torch.sym_min(height, width), max_size / torch.sym_max(height, width))
    return [math.floor(height * scale), math.floor(width * scale)]


def _resize_image_and_masks(original: Callable) -> Callable:
    """``torchvision.models.detection.transform._resize_image_and_masks`` called with the size of
    :func:`resized_size` as its ``fixed_size``: the same interpolation (``recompute_scale_factor=True`` makes
    torchvision interpolate to that size), the target's masks resized alike."""

    def resize(image: torch.Tensor, self_min_size: int, self_max_size: int, target: Any = None,
               fixed_size: tuple[int, int] | None = None) -> tuple[torch.Tensor, Any]:
        if fixed_size is None:
            height, width = resized_size(image.shape[-2], image.shape[-1], self_min_size, self_max_size)
            fixed_size = (width, height)
        return original(image, self_min_size, self_max_size, target, fixed_size)

    return resize


def batch_images(images: list[torch.Tensor], size_divisible: int = 32) -> torch.Tensor:
    """``GeneralizedRCNNTransform.batch_images``: the images padded with zeros at the bottom and right to the
    largest height and width rounded up to ``size_divisible``, with ``torch.sym_max`` and ``(s + d - 1) // d * d``
    where torchvision calls ``max``, ``float`` and ``math.ceil`` (each specializes a symbolic size).

    >>> batch_images([torch.ones(3, 20, 40), torch.ones(3, 33, 8)]).shape
    torch.Size([2, 3, 64, 64])
    """
    shape = list(images[0].shape)
    for image in images[1:]:
        shape = [torch.sym_max(a, b) for a, b in zip(shape, image.shape)]
    for axis in (1, 2):
        shape[axis] = (shape[axis] + size_divisible - 1) // size_divisible * size_divisible
    padded = [
        torch.nn.functional.pad(
            image, (0, shape[2] - image.shape[2], 0, shape[1] - image.shape[1], 0, shape[0] - image.shape[0])
        )
        for image in images
    ]
    return torch.stack(padded)


def _interpolation_weights(start: torch.Tensor, end: torch.Tensor, size: Any, mask_size: int) -> torch.Tensor:
    """For each box (``start``, ``end``: its first and last pixel on one axis, int64), the weights ``(N, size,
    mask_size)`` that resize a mask row of ``mask_size`` values to the box's ``max(end - start + 1, 1)`` pixels
    (bilinear, ``align_corners=False``, as PyTorch's CPU kernel computes its indices and lambdas in float32) and
    place them at the box's pixels inside ``[0, size)``; zero elsewhere."""
    length = torch.clamp(end - start + 1, min=1)
    pixels = torch.arange(size, device=start.device)
    local = pixels[None, :] - start[:, None]
    inside = (pixels[None, :] >= start.clamp(min=0)[:, None]) & (pixels[None, :] <= end[:, None])
    ratio = torch.tensor(float(mask_size), device=start.device) / length.to(torch.float32)
    source = (ratio[:, None] * (local.to(torch.float32) + 0.5) - 0.5).clamp(min=0)
    first = torch.floor(source).to(torch.int64).clamp(max=mask_size - 1)
    second_lambda = (source - first.to(torch.float32)).clamp(0, 1)
    second = first + (first < mask_size - 1).to(torch.int64)
    columns = torch.arange(mask_size, device=start.device)
    weights = (1 - second_lambda)[..., None] * (first[..., None] == columns) + second_lambda[..., None] * (
        second[..., None] == columns
    )
    return weights * inside[..., None]


def paste_masks_in_image(masks: torch.Tensor, boxes: torch.Tensor, img_shape: Any, padding: int = 1) -> torch.Tensor:
    """``torchvision.models.detection.roi_heads.paste_masks_in_image`` for all the detections at once: each mask
    (padded, its box expanded as torchvision does) resized to its box and written at the box's place in an image of
    ``img_shape``, as ``rows @ mask @ columns.T`` with the interpolation weights of each axis (the sum PyTorch's
    bilinear kernel computes, in its order), where torchvision loops over the detections in Python.

    >>> paste_masks_in_image(torch.ones(2, 1, 28, 28), torch.tensor([[2., 3., 9., 7.], [0., 0., 0., 0.]]),
    ...                      (10, 12)).shape
    torch.Size([2, 1, 10, 12])
    """
    from torchvision.models.detection.roi_heads import expand_boxes, expand_masks

    masks, scale = expand_masks(masks, padding=padding)
    boxes = expand_boxes(boxes, scale).to(dtype=torch.int64)
    height, width = img_shape
    mask_size = masks.shape[-1]
    rows = _interpolation_weights(boxes[:, 1], boxes[:, 3], height, mask_size)
    columns = _interpolation_weights(boxes[:, 0], boxes[:, 2], width, mask_size)
    image = masks[:, 0].to(torch.float32)
    pasted = rows @ (image @ columns.transpose(1, 2))
    return pasted.to(masks.dtype)[:, None]


def _patch_resize() -> Undo:
    owner = sys.modules[_TRANSFORM]
    return replace_attribute(owner, "_resize_image_and_masks", _resize_image_and_masks(owner._resize_image_and_masks))


def _patch_batch_images() -> Undo:
    owner = sys.modules[_TRANSFORM].GeneralizedRCNNTransform

    def method(self: Any, images: list[torch.Tensor], size_divisible: int = 32) -> torch.Tensor:
        return batch_images(images, size_divisible)

    method.__doc__ = batch_images.__doc__
    return replace_attribute(owner, "batch_images", method)


def _patch_paste_masks() -> Undo:
    def paste(masks: torch.Tensor, boxes: torch.Tensor, img_shape: Any, padding: int = 1) -> torch.Tensor:
        return paste_masks_in_image(masks, boxes, img_shape, padding)

    paste.__doc__ = paste_masks_in_image.__doc__
    return replace_attribute(sys.modules[_TRANSFORM], "paste_masks_in_image", paste)


PATCHES: list[Patch] = [
    Patch(
        name="detection images resized with symbolic sizes",
        group="torchvision",
        replaces="torchvision.models.detection.transform._resize_image_and_masks",
        fixes="a dynamic height or width specialized to the example's (`min`, `float` of the sizes)",
        versions="torchvision 0.28",
        needed=lambda: attribute_needed(_TRANSFORM, "_resize_image_and_masks"),
        apply=_patch_resize,
    ),
    Patch(
        name="detection batches padded with symbolic sizes",
        group="torchvision",
        replaces="torchvision.models.detection.transform.GeneralizedRCNNTransform.batch_images",
        fixes="a dynamic height or width specialized to the example's (`math.ceil(float(size) / 32)`)",
        versions="torchvision 0.28",
        needed=lambda: attribute_needed(_TRANSFORM, "batch_images", "GeneralizedRCNNTransform"),
        apply=_patch_batch_images,
    ),
    Patch(
        name="Mask R-CNN masks pasted all at once",
        group="torchvision",
        replaces="torchvision.models.detection.transform.paste_masks_in_image",
        fixes="`Could not extract specialized integer from data-dependent expression Min(100, u9)` "
        "(a Python loop over the detections)",
        versions="torchvision 0.28",
        needed=lambda: attribute_needed(_TRANSFORM, "paste_masks_in_image"),
        apply=_patch_paste_masks,
    ),
]
