"""Backward of the poolings: max pools (with their indices), adaptive max pools, average pools and adaptive
average pools, 2-D and 3-D (the 1-D ops go through the 2-D ones in PyTorch).

- Max pools: each gradient is added at the input position its index names (``ScatterElements`` with ``add``).
- Average pools: each gradient is divided by its window's divisor (PyTorch's: the window cut to the padded input
  with ``count_include_pad``, to the input without, or ``divisor_override``), then spread over its window by a
  transposed convolution with a kernel of ones, the channels folded into the batch. Computed in float32
  (onnxruntime has no double ConvTranspose); kernel, stride and padding static, sizes may be dynamic.
- Adaptive average pools: one axis at a time, each gradient divided by its window's length then added to the
  positions of the window (a mask ``[out, size]``, so that an infinite gradient stays in its window).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    FLOAT,
    INT64,
    Ints,
    adaptive_windows,
    concat_shape,
    dim_of,
    dims_of,
    int_op,
    int_range,
    opmath_dtype,
    separable,
    spatial_ints,
    spatial_rank,
    unpool,
    with_batch,
)


@register(
    "aten::max_pool2d_with_indices_backward.default",
    "aten::max_pool3d_with_indices_backward.default",
)
def aten_max_pool_with_indices_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    self: ir.Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
    indices: ir.Value,
) -> ir.Value:
    """max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride,
    int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor: the gradients summed at the
    positions of the maxima."""
    return _scatter_at_indices(ctx, grad_output, self, indices)


@register("aten::adaptive_max_pool2d_backward.default", "aten::adaptive_max_pool3d_backward.default")
def aten_adaptive_max_pool_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, indices: ir.Value
) -> ir.Value:
    """adaptive_max_pool2d_backward(Tensor grad_output, Tensor self, Tensor indices) -> Tensor"""
    return _scatter_at_indices(ctx, grad_output, self, indices)


def _scatter_at_indices(ctx: NodeContext, grad_output: ir.Value, self: ir.Value, indices: ir.Value) -> ir.Value:
    rank, n = ctx.rank(self), spatial_rank(ctx)
    sizes = [dim_of(ctx, self, a, ctx.arg_val(1).shape[a]) for a in range(rank - n, rank)]
    return unpool(ctx, grad_output, indices, sizes, "add")


# -- average pools -------------------------------------------------------------------------------------------


def _window_counts(ctx: NodeContext, size: int | ir.Value, out: int | ir.Value, k: int, s: int, p: int,
                   include_pad: bool) -> np.ndarray | ir.Value:
    """PyTorch's divisor of each window along one axis (``out`` windows over ``size`` elements), as int64."""
    if isinstance(size, int) and isinstance(out, int):
        start = np.arange(out, dtype=np.int64) * s - p
        end = np.minimum(start + k, size + p)
        return end - start if include_pad else np.minimum(end, size) - np.maximum(start, 0)
    start = ctx.op("Sub", ctx.op("Mul", int_range(ctx, out), ctx.const(s, INT64)), ctx.const(p, INT64))
    end = ctx.op("Min", ctx.op("Add", start, ctx.const(k, INT64)), ctx.operand(int_op(ctx, "Add", size, p), INT64))
    if include_pad:
        return ctx.op("Sub", end, start)
    inside_end = ctx.op("Min", end, ctx.operand(size, INT64))
    return ctx.op("Sub", inside_end, ctx.op("Max", start, ctx.const(0, INT64)))


def _divisors(ctx: NodeContext, sizes: list, outs: list, k: Ints, s: Ints, p: Ints, include_pad: bool) -> ir.Value:
    """The divisor of each window, ``[*outs]`` in float32: the product of the per-axis counts."""
    n = len(k)
    counts = [_window_counts(ctx, *a, include_pad) for a in zip(sizes, outs, k, s, p)]
    if all(isinstance(c, np.ndarray) for c in counts):
        grid = np.ones([1] * n, dtype=np.int64)
        for i, c in enumerate(counts):
            grid = grid * c.reshape([-1 if a == i else 1 for a in range(n)])
        return ctx.const(grid.astype(np.float32))
    total = None
    for i, c in enumerate(counts):
        c = ctx.const(c) if isinstance(c, np.ndarray) else c
        c = ctx.op("Reshape", c, ctx.const([-1 if a == i else 1 for a in range(n)], INT64))
        total = c if total is None else ctx.op("Mul", total, c)
    return ctx.cast(total, FLOAT)


def _spread(ctx: NodeContext, planes: ir.Value, sizes: list, outs: list, k: Ints, s: Ints, p: Ints) -> ir.Value:
    """Each value of ``planes`` ``[M, 1, *outs]`` added over its window of the input ``[M, 1, *sizes]``."""
    n = len(k)
    ones = ctx.const(np.ones([1, 1, *k], dtype=np.float32))
    if all(isinstance(v, int) for v in [*sizes, *outs]):
        # ConvTranspose's size is s * (out - 1) + k - begin - end: ``end`` cuts what passed the input; positions
        # no window reached (the end of the input in floor mode) are zeros added after
        ends = [si * (o - 1) + ki - pi - size for size, o, ki, si, pi in zip(sizes, outs, k, s, p)]
        y = ctx.op("ConvTranspose", planes, ones, strides=list(s), pads=[*p, *(max(e, 0) for e in ends)])
        if any(e < 0 for e in ends):
            y = ctx.op("Pad", y, ctx.const([0, 0] + [0] * n + [0, 0] + [max(-e, 0) for e in ends], INT64))
        return y
    y = ctx.op("ConvTranspose", planes, ones, strides=list(s), pads=[*p, *([0] * n)])
    axes = ctx.const(list(range(2, n + 2)), INT64)
    y = ctx.op("Slice", y, ctx.const([0] * n, INT64), ctx.int64s(sizes), axes)
    reached = ctx.op("Shape", y, start=2)
    missing = ctx.op("Max", ctx.op("Sub", ctx.int64s(sizes), reached), ctx.const(0, INT64))
    return ctx.op("Pad", y, ctx.op("Concat", ctx.const([0, 0] + [0] * n + [0, 0], INT64), missing, axis=0))


@register("aten::avg_pool2d_backward.default", "aten::avg_pool3d_backward.default")
def aten_avg_pool_backward(
    ctx: NodeContext,
    grad_output: ir.Value,
    self: ir.Value,
    kernel_size: Ints,
    stride: Ints,
    padding: Ints,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None = None,
) -> ir.Value:
    """avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding,
    bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor"""
    n = spatial_rank(ctx)
    k = spatial_ints(kernel_size, n, "kernel_size")
    s, p = spatial_ints(stride, n, "stride", k), spatial_ints(padding, n, "padding")
    rank = ctx.rank(grad_output)
    sizes = [dim_of(ctx, self, a, ctx.arg_val(1).shape[a]) for a in range(rank - n, rank)]
    outs = [dim_of(ctx, grad_output, a, ctx.arg_val(0).shape[a]) for a in range(rank - n, rank)]
    if divisor_override:
        divisor = ctx.const(float(divisor_override), FLOAT)
    else:
        divisor = _divisors(ctx, sizes, outs, k, s, p, count_include_pad)
    g = ctx.op("Div", ctx.cast(grad_output, FLOAT), divisor)
    planes = ctx.op("Reshape", g, concat_shape(ctx, [-1, 1, *dims_of(ctx, grad_output, rank - n)]))
    y = _spread(ctx, planes, sizes, outs, k, s, p)
    return ctx.cast(ctx.op("Reshape", y, ctx.op("Shape", self)), ctx.out_dtype)


@register("aten::_adaptive_avg_pool2d_backward.default", "aten::_adaptive_avg_pool3d_backward.default")
def aten__adaptive_avg_pool_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value) -> ir.Value:
    """_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor

    Along each axis, in order (PyTorch divides by the window's height, then by its width), every gradient
    divided by its window's length, then added to each position of the window.
    """
    n = spatial_rank(ctx)
    rank = ctx.rank(grad_output)
    outs = [ctx.arg_val(0).shape[a] for a in range(rank - n, rank)]
    if not all(isinstance(o, int) for o in outs):
        raise NotImplementedError(f"{ctx.op_name} to an output size known at run time only")
    sizes = [dim_of(ctx, self, a, ctx.arg_val(1).shape[a]) for a in range(rank - n, rank)]
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    windows = {}

    def spread(moved: ir.Value, out: int, size: int | ir.Value) -> ir.Value:
        key = (out, size if isinstance(size, int) else id(size))
        if key not in windows:
            windows[key] = adaptive_windows(ctx, size, out)
        mask, lengths = windows[key]
        scaled = ctx.op("Div", moved, ctx.cast(lengths, c))
        column = ctx.op("Unsqueeze", scaled, ctx.const([-1], INT64))  # [..., out, 1]
        placed = ctx.op("Where", mask, column, ctx.const(0, c))  # [..., out, size]
        return ctx.op("ReduceSum", placed, ctx.const([-2], INT64), keepdims=0)

    def backward(g: ir.Value) -> ir.Value:
        return separable(ctx, g, sizes, lambda moved, out, size: spread(moved, out, size))

    return ctx.cast(with_batch(ctx, ctx.cast(grad_output, c), n, backward), dtype)
