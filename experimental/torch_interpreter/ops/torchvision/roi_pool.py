"""``torchvision.ops.roi_pool``: ONNX ``MaxRoiPool``."""

from __future__ import annotations

import onnx_ir as ir

from ...translation.context import NodeContext
from ...translation.registry import register
from .._common import check_kernel_opset, uses_output, widen
from ._rois import checked_sizes


@register("torchvision::roi_pool.default")
def torchvision_roi_pool(
    ctx: NodeContext, input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int, pooled_width: int
) -> tuple[ir.Value, None]:
    """roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)
    -> (Tensor, Tensor): ONNX MaxRoiPool, which rounds the rois and cuts the bins as torchvision's CPU kernel (measured
    equal); the argmax output, which only the gradient reads, is not converted"""
    ph, pw = checked_sizes(ctx, input, rois, pooled_height, pooled_width)
    if uses_output(ctx, 1):
        raise NotImplementedError(
            "roi_pool: the argmax output (where the gradient goes) has no ONNX equivalent; torchvision.ops.roi_pool "
            "reads the pooled values only"
        )
    check_kernel_opset(ctx, "MaxRoiPool")
    x = widen(ctx, input, "MaxRoiPool")
    y = ctx.op("MaxRoiPool", x, ctx.cast(rois, x.dtype), pooled_shape=[ph, pw], spatial_scale=float(spatial_scale))
    return ctx.cast(y, ctx.out_dtype), None
