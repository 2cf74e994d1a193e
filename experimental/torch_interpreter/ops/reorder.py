"""Reordering and repeating elements: flip/fliplr/flipud/rot90, roll, repeat/tile, repeat_interleave,
channel and pixel shuffles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    concat_shape,
    dim_of,
    dims_of,
    expand_to,
    has_kernel,
    kernel_dtype,
    normalize_dim,
    numel,
    roll_axis,
    static_dim,
    static_ints,
    static_shape,
    unsqueeze_axes,
    widen,
)


def _div(ctx: NodeContext, d: int | ir.Value, r: int) -> int | ir.Value:
    return d // r if isinstance(d, int) else ctx.op("Div", d, ctx.const(r, INT64))


@register("aten::pixel_shuffle.default")
def aten_pixel_shuffle(ctx: NodeContext, self: ir.Value, upscale_factor: int) -> ir.Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor: DepthToSpace in CRD mode."""
    rank = ctx.rank(self)
    dtype = ctx.out_dtype
    if not (dtype.is_floating_point() or has_kernel("DepthToSpace", dtype)):
        return _pixel_shuffle_moved(ctx, self, upscale_factor)  # no exact wider type (int64, int32, bool)
    compute = kernel_dtype("DepthToSpace", dtype)
    if rank == 4:
        y = ctx.op("DepthToSpace", ctx.cast(self, compute), blocksize=upscale_factor, mode="CRD")
        return ctx.cast(y, dtype)
    # fold the leading dimensions into one batch dimension and back
    x4 = ctx.op("Reshape", self, ctx.int64s([-1, dim_of(ctx, self, -3), dim_of(ctx, self, -2), dim_of(ctx, self, -1)]))
    y = ctx.op("DepthToSpace", ctx.cast(x4, compute), blocksize=upscale_factor, mode="CRD")
    shape = ctx.op("Concat", ctx.op("Shape", self, end=-3), ctx.op("Shape", y, start=1), axis=0)
    return ctx.cast(ctx.op("Reshape", y, shape), dtype)


def _pixel_shuffle_moved(ctx: NodeContext, self: ir.Value, r: int) -> ir.Value:
    """pixel_shuffle as Reshape ``(B, C, r, r, H, W)``, Transpose, Reshape: exact in every type, for the
    types onnxruntime's DepthToSpace lacks."""
    c, h, w = (dim_of(ctx, self, a) for a in (-3, -2, -1))
    if all(isinstance(d, int) for d in self.shape):  # static: exact shapes, empty tensors included
        lead = int(np.prod(self.shape[:-3]))
        six = ctx.op("Reshape", self, ctx.const([lead, c // (r * r), r, r, h, w], INT64), allowzero=1)
        y = ctx.op("Transpose", six, perm=[0, 1, 4, 2, 5, 3])
        return ctx.op("Reshape", y, ctx.const([int(d) for d in ctx.val.shape], INT64), allowzero=1)
    six = ctx.op("Reshape", self, ctx.int64s([-1, _div(ctx, c, r * r), r, r, h, w]))
    y = ctx.op("Transpose", six, perm=[0, 1, 4, 2, 5, 3])
    scaled = [d * r if isinstance(d, int) else ctx.op("Mul", d, ctx.const(r, INT64)) for d in (h, w)]
    four = ctx.op("Reshape", y, ctx.int64s([-1, _div(ctx, c, r * r), *scaled]))
    shape = ctx.op("Concat", ctx.op("Shape", self, end=-3), ctx.op("Shape", four, start=1), axis=0)
    return ctx.op("Reshape", four, shape)


@register("aten::pixel_unshuffle.default")
def aten_pixel_unshuffle(ctx: NodeContext, self: ir.Value, downscale_factor: int) -> ir.Value:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor

    Reshape ``(B, C, H/r, r, W/r, r)``, Transpose, Reshape: SpaceToDepth orders channels otherwise.
    """
    r = downscale_factor
    rank = ctx.rank(self)
    c, h, w = (dim_of(ctx, self, a) for a in (-3, -2, -1))
    batch = ctx.op("Shape", self, end=-3) if rank > 4 else None
    if all(isinstance(d, int) for d in self.shape):  # static: exact shapes, empty tensors included
        lead = int(np.prod(self.shape[:-3]))
        six = ctx.op("Reshape", self, ctx.const([lead, c, h // r, r, w // r, r], INT64), allowzero=1)
        y = ctx.op("Transpose", six, perm=[0, 1, 3, 5, 2, 4])
        return ctx.op("Reshape", y, ctx.const([int(d) for d in ctx.val.shape], INT64), allowzero=1)
    six = ctx.op("Reshape", self, ctx.int64s([-1, c, _div(ctx, h, r), r, _div(ctx, w, r), r]))
    y = ctx.op("Transpose", six, perm=[0, 1, 3, 5, 2, 4])
    c_out = c * r * r if isinstance(c, int) else ctx.op("Mul", c, ctx.const(r * r, INT64))
    if rank == 4:  # Reshape copies the batch dimension (0)
        shape = ctx.int64s([0, c_out, _div(ctx, h, r), _div(ctx, w, r)])
    else:
        tail = ctx.int64s([c_out, _div(ctx, h, r), _div(ctx, w, r)])
        shape = tail if batch is None else ctx.op("Concat", batch, tail, axis=0)
    return ctx.op("Reshape", y, shape)


INT64_MIN = -9223372036854775808


@register("aten::repeat.default", "aten::tile.default")
def aten_repeat(ctx: NodeContext, self: ir.Value, repeats: Sequence[int | ir.Value]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor (tile: fewer repeats than dimensions allowed)"""
    rank = ctx.rank(self)
    repeats = [1] * (rank - len(repeats)) + list(repeats)
    extra = len(repeats) - rank
    x = self
    if extra:
        x = ctx.op("Unsqueeze", x, ctx.const(list(range(extra)), INT64))
    if all(isinstance(r, int) and r == 1 for r in repeats):
        return x
    return ctx.cast(ctx.op("Tile", widen(ctx, x, "Tile"), ctx.int64s(repeats)), self.dtype)


@register("aten::flip.default")
def aten_flip(ctx: NodeContext, self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """flip(Tensor self, int[] dims) -> Tensor"""
    rank = ctx.rank(self)
    if rank == 0 or not dims:
        return self
    axes = sorted({normalize_dim(d, rank) for d in dims})
    k = len(axes)
    return ctx.op(
        "Slice",
        self,
        ctx.const([-1] * k, INT64),
        ctx.const([INT64_MIN] * k, INT64),
        ctx.const(axes, INT64),
        ctx.const([-1] * k, INT64),
    )


@register("aten::roll.default")
def aten_roll(ctx: NodeContext, self: ir.Value, shifts: Sequence[int | ir.Value], dims: Sequence[int] = ()) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor: two slices concatenated per axis."""
    if isinstance(shifts, (int, ir.Value)):
        shifts = [shifts]
    if isinstance(dims, int):
        dims = [dims]
    rank = ctx.rank(self)
    if static_dim(ctx.arg_val(0).numel()) == 0:
        return self
    if not dims:
        flat = ctx.op("Reshape", self, ctx.const([-1], INT64))
        size = static_dim(ctx.arg_val(0).numel())
        shape = static_shape(ctx.arg_val(0))
        rolled = roll_axis(ctx, flat, shifts[0], 0, size if size is not None else numel(ctx, self))
        return ctx.op("Reshape", rolled, ctx.const(shape, INT64) if shape is not None else ctx.op("Shape", self))
    x = self
    for shift, dim in zip(shifts, dims):
        axis = normalize_dim(dim, rank)
        x = roll_axis(ctx, x, shift, axis, dim_of(ctx, self, axis))
    return x


# -- flips and rotations ----------------------------------------------------------------------------------
@register("aten::fliplr.default")
def aten_fliplr(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """fliplr(Tensor self) -> Tensor"""
    return aten_flip(ctx, self, [1])


@register("aten::flipud.default")
def aten_flipud(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """flipud(Tensor self) -> Tensor"""
    return aten_flip(ctx, self, [0])


@register("aten::rot90.default")
def aten_rot90(ctx: NodeContext, self: ir.Value, k: int = 1, dims: Sequence[int] = (0, 1)) -> ir.Value:
    """rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor: flips and a transposition."""
    rank = ctx.rank(self)
    a, b = normalize_dim(dims[0], rank), normalize_dim(dims[1], rank)
    k %= 4
    if k == 0:
        return self
    if k == 2:
        return aten_flip(ctx, self, [a, b])
    perm = list(range(rank))
    perm[a], perm[b] = b, a
    return ctx.op("Transpose", aten_flip(ctx, self, [b] if k == 1 else [a]), perm=perm)


# -- repetitions and chunks ---------------------------------------------------------------------------------
@register("aten::repeat_interleave.self_int")
def aten_repeat_interleave_self_int(
    ctx: NodeContext, self: ir.Value, repeats: int | ir.Value, dim: int | None = None, *, output_size: int | None = None
) -> ir.Value:
    """repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor

    Each element repeated in a new axis after ``dim`` (``Expand``), merged with ``dim`` (``Reshape``).
    """
    if dim is None:
        x, axis, dims = ctx.op("Reshape", self, ctx.const([-1], INT64)), 0, [-1]
    else:
        x, axis = self, normalize_dim(dim, ctx.rank(self))
        dims = [dim_of(ctx, self, i) for i in range(ctx.rank(self))]
    x = unsqueeze_axes(ctx, x, [axis + 1])
    expanded = [*dims[: axis + 1], repeats, *dims[axis + 1 :]]
    if dim is None:
        expanded[0] = static_dim(ctx.arg_val(0).numel())
        if expanded[0] is None:
            expanded[0] = numel(ctx, self)
    x = expand_to(ctx, x, concat_shape(ctx, expanded))
    return ctx.op("Reshape", x, concat_shape(ctx, [*dims[:axis], -1, *dims[axis + 1 :]]))


def _repeat_index(ctx: NodeContext, repeats: ir.Value) -> ir.Value:
    """``repeat_interleave(repeats)``: ``i`` repeated ``repeats[i]`` times, counted as the number of cumulated
    repeats each output position has passed."""
    repeats = ctx.op("Reshape", ctx.cast(repeats, INT64), ctx.const([-1], INT64))
    ends = ctx.op("CumSum", repeats, ctx.const(0, INT64))
    total = ctx.op("ReduceSum", repeats, keepdims=0)
    positions = ctx.op("Range", ctx.const(0, INT64), total, ctx.const(1, INT64))
    passed = ctx.op("GreaterOrEqual", ctx.op("Unsqueeze", positions, ctx.const([1], INT64)), ends)
    return ctx.op("ReduceSum", ctx.cast(passed, INT64), ctx.const([1], INT64), keepdims=0)


@register("aten::repeat_interleave.Tensor")
def aten_repeat_interleave_tensor(ctx: NodeContext, repeats: ir.Value, *, output_size: int | None = None) -> ir.Value:
    """repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor"""
    return ctx.cast(_repeat_index(ctx, repeats), ctx.out_dtype)


@register("aten::repeat_interleave.self_Tensor")
def aten_repeat_interleave_self_tensor(
    ctx: NodeContext, self: ir.Value, repeats: ir.Value, dim: int | None = None, *, output_size: int | None = None
) -> ir.Value:
    """repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor"""
    x, axis = (ctx.op("Reshape", self, ctx.const([-1], INT64)), 0) if dim is None else (self, dim)
    axis = normalize_dim(axis, ctx.rank(x))
    repeats = ctx.cast(repeats, INT64)
    if ctx.rank(repeats) == 0 or static_dim(ctx.arg_val(1).numel()) == 1:  # one count for every element
        size = ctx.op("Shape", x, start=axis, end=axis + 1)
        repeats = ctx.op("Expand", ctx.op("Reshape", repeats, ctx.const([-1], INT64)), size)
    return ctx.op("Gather", x, _repeat_index(ctx, repeats), axis=axis)


@register("aten::channel_shuffle.default", "aten::native_channel_shuffle.default")
def aten_channel_shuffle(ctx: NodeContext, self: ir.Value, groups: int) -> ir.Value:
    """channel_shuffle(Tensor self, SymInt groups) -> Tensor: ``[N, g, C/g, ...]`` transposed to ``[N, C/g, g, ...]``."""
    rank = ctx.rank(self)
    channels = static_ints(ctx, [ctx.arg_val(0).shape[1]], "channel_shuffle")[0]
    batch, rest = dims_of(ctx, self, 0, 1), dims_of(ctx, self, 2)
    x = ctx.op("Reshape", self, concat_shape(ctx, [*batch, groups, channels // groups, *rest]))
    x = ctx.op("Transpose", x, perm=[0, 2, 1, *range(3, rank + 1)])
    return ctx.op("Reshape", x, concat_shape(ctx, [*batch, channels, *rest]))
