"""``torchvision.ops.roi_align``: ONNX ``RoiAlign``."""

from __future__ import annotations

import onnx_ir as ir

from ...translation.context import NodeContext
from ...translation.registry import register
from ._rois import align, checked_sizes


@register("torchvision::roi_align.default")
def torchvision_roi_align(ctx: NodeContext, input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int,
                          pooled_width: int, sampling_ratio: int, aligned: bool) -> ir.Value:
    """roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,
    int sampling_ratio, bool aligned) -> Tensor: ONNX RoiAlign (opset 16's coordinate_transformation_mode), adaptive
    sampling included"""
    ph, pw = checked_sizes(ctx, input, rois, pooled_height, pooled_width)
    y = align(ctx, input, rois, spatial_scale, ph, pw, sampling_ratio, aligned)
    return ctx.cast(y, ctx.out_dtype)
