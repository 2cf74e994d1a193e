"""``torchvision.ops.nms``: ONNX ``NonMaxSuppression`` (``batched_nms`` is Python around it: its coordinate offsets
are aten ops)."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from ...translation.registry import register
from .._common import FLOAT, INT64


def _threshold(iou_threshold: float) -> float:
    """The float32 threshold NonMaxSuppression compares the float32 IoU with as torchvision compares it with the
    double ``iou_threshold``: ``iou > t`` for a float ``iou`` is ``iou > float32 rounded down(t)``. Above 1 (or NaN)
    nothing is suppressed, as with 1: an IoU is at most 1."""
    if math.isnan(iou_threshold) or iou_threshold >= 1:
        return 1.0
    t = np.float32(iou_threshold)
    if float(t) > iou_threshold:
        t = np.nextafter(t, np.float32(-np.inf))
    return float(t)


@register("torchvision::nms.default")
def torchvision_nms(ctx: NodeContext, dets: ir.Value, scores: ir.Value, iou_threshold: float) -> ir.Value:
    """nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor: ONNX NonMaxSuppression of one batch and one
    class, in float32 (float64 boxes too); its output is in torchvision's order (decreasing score, equal scores by
    increasing index)"""
    if ctx.rank(dets) != 2 or dets.shape[1] != 4:
        raise ValueError(f"nms: boxes must be a [N, 4] tensor (x1, y1, x2, y2), got shape {list(dets.shape)}")
    if ctx.rank(scores) != 1:
        raise ValueError(f"nms: scores must be a 1-D tensor, got a tensor of rank {ctx.rank(scores)}")
    if not isinstance(iou_threshold, (int, float)):
        raise NotImplementedError("nms: iou_threshold must be known at export time")
    if iou_threshold < 0:
        raise NotImplementedError(
            f"nms: iou_threshold={iou_threshold} suppresses every box overlapping the best one or not; ONNX "
            "NonMaxSuppression takes a threshold in [0, 1]"
        )
    boxes = ctx.op("Unsqueeze", ctx.cast(dets, FLOAT), ctx.const([0], INT64))
    batch_scores = ctx.op("Unsqueeze", ctx.cast(scores, FLOAT), ctx.const([0, 1], INT64))
    count = ctx.op("Shape", dets, start=0, end=1)  # every box may be kept
    selected = ctx.op("NonMaxSuppression", boxes, batch_scores, count, ctx.const([_threshold(iou_threshold)], FLOAT))
    return ctx.op("Gather", selected, ctx.const(2, INT64), axis=1)
