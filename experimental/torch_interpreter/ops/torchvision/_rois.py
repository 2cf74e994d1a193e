"""What the region-of-interest ops of torchvision share: the checks of their arguments, ``rois`` (``[K, 5]``: batch
index, then ``x1, y1, x2, y2``) split into what ONNX takes, ONNX ``RoiAlign``, and the channel each output bin of a
position-sensitive op reads."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...translation.context import NodeContext
from .._common import INT64, check_kernel_opset, dim_of, int_op, widen


def checked_sizes(ctx: NodeContext, input: ir.Value, rois: ir.Value, pooled_height: int, pooled_width: int,
                  ) -> tuple[int, int]:
    """The output size ``(pooled_height, pooled_width)``, after the checks torchvision's meta function leaves to its
    kernels: a 4-D input, 2-D rois, a static, positive output size."""
    op = ctx.op_name
    if ctx.rank(input) != 4:
        raise ValueError(f"{op}: input must be a batch of feature maps [N, C, H, W], got a tensor of rank "
                         f"{ctx.rank(input)}")
    if ctx.rank(rois) != 2:
        raise ValueError(f"{op}: rois must be a [K, 5] tensor (batch index, x1, y1, x2, y2), got a tensor of rank "
                         f"{ctx.rank(rois)}")
    for name, size in (("pooled_height", pooled_height), ("pooled_width", pooled_width)):
        if not isinstance(size, int):
            raise NotImplementedError(f"{op}: {name} must be known at export time, got a dynamic size")
        if size < 1:
            raise ValueError(f"{op}: {name}={size}: the output size must be positive")
    return pooled_height, pooled_width


def batch_indices(ctx: NodeContext, rois: ir.Value) -> ir.Value:
    """Column 0 of ``rois`` as INT64 ``[K]``, truncated as torchvision's ``int roi_batch_ind = rois[0]``."""
    return ctx.op("Cast", ctx.op("Gather", rois, ctx.const(0, INT64), axis=1), to=INT64)


def boxes(ctx: NodeContext, rois: ir.Value) -> ir.Value:
    """Columns 1 to 4 of ``rois``: ``[K, 4]``, ``x1, y1, x2, y2``."""
    return ctx.op("Slice", rois, ctx.const([1], INT64), ctx.const([5], INT64), ctx.const([1], INT64))


def align(ctx: NodeContext, input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int,
          pooled_width: int, sampling_ratio: int, aligned: bool) -> ir.Value:
    """ONNX ``RoiAlign`` (average mode) giving torchvision's ``roi_align``, in a type onnxruntime has a kernel for
    (float16 computed in float32, the caller casts back): ``aligned`` is ``half_pixel`` (coordinates shifted by
    -0.5), else ``output_half_pixel`` (rois at least 1x1); a ``sampling_ratio`` of 0 or less is RoiAlign's adaptive
    0, the same ``ceil(roi size / output size)`` samples per bin and roi, measured equal to torchvision's CPU kernel
    (onnxruntime 1.32, torchvision 0.28: no difference at all in float32)."""
    check_kernel_opset(ctx, "RoiAlign")
    x = widen(ctx, input, "RoiAlign")
    return ctx.op(
        "RoiAlign", x, ctx.cast(boxes(ctx, rois), x.dtype), batch_indices(ctx, rois),
        mode="avg", output_height=pooled_height, output_width=pooled_width, sampling_ratio=max(sampling_ratio, 0),
        spatial_scale=float(spatial_scale),
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )


def position_sensitive(ctx: NodeContext, pooled: ir.Value, channels: int | ir.Value, pooled_height: int,
                       pooled_width: int) -> ir.Value:
    """``[K, C // (PH * PW), PH, PW]`` from ``pooled`` (``[K, C, PH, PW]``, every channel pooled in every bin): bin
    ``(ph, pw)`` of output channel ``c`` reads input channel ``(c * PH + ph) * PW + pw``, one Gather of the
    diagonal."""
    bins = pooled_height * pooled_width
    outputs = int_op(ctx, "Div", channels, bins)  # no -1 in the shapes: K may be 0
    square = ctx.op("Reshape", pooled, ctx.int64s([0, outputs, bins * bins]))
    diagonal = ctx.op("Gather", square, ctx.const(np.arange(bins, dtype=np.int64) * (bins + 1)), axis=2)
    return ctx.op("Reshape", diagonal, ctx.int64s([0, outputs, pooled_height, pooled_width]))


def channel_mapping(ctx: NodeContext, input: ir.Value, rois: ir.Value, pooled_height: int, pooled_width: int,
                    ) -> ir.Value:
    """The second output of the position-sensitive ops: the input channel each output element read, INT32
    ``[K, C // (PH * PW), PH, PW]``, the same for every roi."""
    channels = dim_of(ctx, input, 1)
    if not isinstance(channels, int):
        raise NotImplementedError(f"{ctx.op_name}: its channel_mapping output needs a static number of channels")
    mapping = np.arange(channels, dtype=np.int32).reshape(-1, pooled_height, pooled_width)
    return ctx.op("Expand", ctx.const(mapping), ctx.int64s([dim_of(ctx, rois, 0), *mapping.shape]))
