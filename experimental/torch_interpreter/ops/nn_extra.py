"""Neural-network ops of several ONNX nodes: grid sampling, max unpooling and the max-pooling gradient,
embedding bags, FFT shifts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..context import NodeContext
from ..registry import register
from ._helpers import INT64, kernel_op, opmath_dtype, uses_output
from .indexing import _scatter
from .shape import aten_roll, dim_of, static_dim, static_shape

_INTERPOLATION = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@register("aten::grid_sampler.default", "aten::grid_sampler_2d.default", "aten::grid_sampler_3d.default")
def aten_grid_sampler(
    ctx: NodeContext, input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners)
    -> Tensor: ONNX GridSample (5-D inputs need opset 20)."""
    rank = ctx.rank(input)
    if rank == 5 and ctx.opset < 20:
        raise NotImplementedError("grid_sampler on 5-D inputs needs GridSample from opset 20 (target_opset=20)")
    mode = _INTERPOLATION[interpolation_mode]
    if ctx.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    dtype = ctx.out_dtype
    return kernel_op(
        ctx,
        "GridSample",
        input,
        grid,
        dtype=dtype,
        mode=mode,
        padding_mode=_PADDING[padding_mode],
        align_corners=int(align_corners),
    )


def _unpool(ctx: NodeContext, values: ir.Value, indices: ir.Value, out_spatial: Sequence[int], reduction: str | None):
    """Scatters ``values`` at the plane positions ``indices`` (both ``[N, C, *in]`` or ``[C, *in]``) into zeros
    of shape ``[N, C, *out_spatial]``."""
    k = len(out_spatial)
    lead = [dim_of(ctx, values, i) for i in range(ctx.rank(values) - k)]
    flat_shape = ctx.int64s([*lead, -1])
    plane = int(np.prod(out_spatial))
    dtype = ctx.out_dtype
    c = ir.DataType.FLOAT if dtype == ir.DataType.BFLOAT16 else dtype  # no bfloat16 ConstantOfShape before opset 20
    zeros = ctx.op(
        "ConstantOfShape", ctx.int64s([*lead, plane]), value=ir.tensor(np.zeros(1, dtype=c.numpy()), dtype=c)
    )
    out = _scatter(
        ctx,
        "ScatterElements",
        zeros,
        ctx.op("Reshape", indices, flat_shape),
        ctx.op("Reshape", ctx.cast(values, c), flat_shape),
        reduction,
        axis=len(lead),
    )
    return ctx.cast(ctx.op("Reshape", out, ctx.int64s([*lead, *out_spatial])), dtype)


@register("aten::max_unpool2d.default")
def aten_max_unpool2d(ctx: NodeContext, self: ir.Value, indices: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """max_unpool2d(Tensor self, Tensor indices, SymInt[2] output_size) -> Tensor: ``ScatterElements`` of the
    values at their positions in each output plane."""
    return _unpool(ctx, self, indices, list(output_size), None)


@register("aten::max_unpool3d.default")
def aten_max_unpool3d(
    ctx: NodeContext,
    self: ir.Value,
    indices: ir.Value,
    output_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> ir.Value:
    """max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size, int[3] stride, int[3] padding) -> Tensor"""
    return _unpool(ctx, self, indices, list(output_size), None)


@register("aten::max_pool2d_with_indices_backward.default", "aten::max_pool3d_with_indices_backward.default")
def aten_max_pool2d_with_indices_backward(
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
    shape = static_shape(ctx.arg_val(1))
    if shape is None:
        raise NotImplementedError("max_pool_with_indices_backward with a dynamic input shape")
    k = 3 if ctx.node.target._opname.startswith("max_pool3d") else 2
    return _unpool(ctx, grad_output, indices, shape[-k:], "add")


# -- embedding bags -----------------------------------------------------------------------------------------
@register("aten::embedding_bag.default", "aten::embedding_bag.padding_idx", "aten::_embedding_bag.default")
def aten_embedding_bag(
    ctx: NodeContext,
    weight: ir.Value,
    indices: ir.Value,
    offsets: ir.Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: ir.Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> tuple[ir.Value | None, ...]:
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode,
    bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx)
    -> (Tensor, Tensor, Tensor, Tensor)

    A ``[bags, n]`` membership mask built from the offsets, then a MatMul (sum, mean) or a masked ReduceMax;
    only the first output (the bags) is computed.
    """
    if any(uses_output(ctx, i) for i in (1, 2, 3)):
        raise NotImplementedError("embedding_bag: only the first output (the bags) is supported")
    bags = static_dim(ctx.val[0].shape[0])
    if bags is None:
        raise NotImplementedError("embedding_bag with a dynamic number of bags")
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    idx = ctx.op("Reshape", ctx.cast(indices, INT64), ctx.const([-1], INT64))
    rows = ctx.cast(ctx.op("Gather", weight, idx, axis=0), c)  # [n, D]
    n_offsets = static_dim(ctx.arg_val(2).shape[0])
    starts = ctx.cast(offsets, INT64)
    position = ctx.op(
        "Range",
        ctx.const(0, INT64),
        ctx.op("Squeeze", ctx.op("Shape", idx), ctx.const([0], INT64)),
        ctx.const(1, INT64),
    )  # [n]
    # bag of each position: the number of offsets <= position, minus 1
    passed = ctx.op(
        "LessOrEqual",
        ctx.op("Unsqueeze", starts, ctx.const([0], INT64)),
        ctx.op("Unsqueeze", position, ctx.const([1], INT64)),
    )  # [n, offsets]
    bag = ctx.op(
        "Sub", ctx.op("ReduceSum", ctx.cast(passed, INT64), ctx.const([1], INT64), keepdims=0), ctx.const(1, INT64)
    )
    member = ctx.op(
        "Equal",
        ctx.op("Unsqueeze", bag, ctx.const([0], INT64)),
        ctx.const(np.arange(bags, dtype=np.int64).reshape(-1, 1)),
    )  # [bags, n]
    if include_last_offset and n_offsets is not None:  # positions past the last offset belong to no bag
        end = ctx.op("Slice", starts, ctx.const([-1], INT64), ctx.const([2**62], INT64))
        member = ctx.op("And", member, ctx.op("Less", ctx.op("Unsqueeze", position, ctx.const([0], INT64)), end))
    if padding_idx is not None and padding_idx < 0 and ctx.node.target._overloadname == "padding_idx":
        padding_idx += static_dim(ctx.arg_val(0).shape[0])  # counts from the end; _embedding_bag's -1 is none
    if padding_idx is not None and padding_idx >= 0:
        keep = ctx.op("Not", ctx.op("Equal", idx, ctx.const(padding_idx, INT64)))
        member = ctx.op("And", member, ctx.op("Unsqueeze", keep, ctx.const([0], INT64)))
    if per_sample_weights is not None:
        rows = ctx.op("Mul", rows, ctx.op("Unsqueeze", ctx.cast(per_sample_weights, c), ctx.const([1], INT64)))
    weights = ctx.cast(member, c)
    if mode == 2:  # max, 0 for an empty bag
        masked = ctx.op(
            "Where",
            ctx.op("Unsqueeze", member, ctx.const([2], INT64)),
            ctx.op("Unsqueeze", rows, ctx.const([0], INT64)),
            ctx.const(float("-inf"), c),
        )
        out = ctx.op("ReduceMax", masked, ctx.const([1], INT64), keepdims=0)
        out = ctx.op("Where", ctx.op("IsInf", out, detect_positive=0), ctx.const(0.0, c), out)
    else:
        out = ctx.op("MatMul", weights, rows)
        if mode == 1:
            count = ctx.op("ReduceSum", weights, ctx.const([1], INT64), keepdims=1)
            out = ctx.op("Div", out, ctx.op("Max", count, ctx.const(1.0, c)))
    return ctx.cast(out, dtype), None, None, None


# -- FFT shifts ---------------------------------------------------------------------------------------------
def _shift(ctx: NodeContext, self: ir.Value, dim: int | Sequence[int] | None, inverse: bool) -> ir.Value:
    rank = ctx.rank(self)
    dims = list(range(rank)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    sizes = [static_dim(ctx.arg_val(0).shape[d]) for d in dims]
    if any(s is None for s in sizes):
        raise NotImplementedError("fftshift over a dynamic dimension")
    shifts = [-(s // 2) if inverse else s // 2 for s in sizes]
    return aten_roll(ctx, self, shifts, dims) if dims else self


@register("aten::fft_fftshift.default")
def aten_fft_fftshift(ctx: NodeContext, self: ir.Value, dim: Any = None) -> ir.Value:
    """fft_fftshift(Tensor self, int[1]? dim=None) -> Tensor: a roll by half of each axis."""
    return _shift(ctx, self, dim, False)


@register("aten::fft_ifftshift.default")
def aten_fft_ifftshift(ctx: NodeContext, self: ir.Value, dim: Any = None) -> ir.Value:
    """fft_ifftshift(Tensor self, int[1]? dim=None) -> Tensor"""
    return _shift(ctx, self, dim, True)
