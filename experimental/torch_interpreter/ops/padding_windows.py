"""Padding and sliding windows: constant/reflection/replication/circular padding, ``unfold``,
``im2col``/``col2im``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BF16,
    BOOL,
    INT64,
    concat_shape,
    dim_of,
    int_op,
    normalize_dim,
    pad_axes,
    static_ints,
    unsqueeze_axes,
    widen,
)


# -- windows and strided views ------------------------------------------------------------------------------
@register("aten::unfold.default", "aten::unfold_copy.default")
def aten_unfold(ctx: NodeContext, self: ir.Value, dimension: int, size: int, step: int) -> ir.Value:
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a): one ``Gather`` of the windows."""
    shape = ctx.arg_val(0).shape
    rank = len(shape)
    if rank == 0:
        return ctx.op("Reshape", self, ctx.const([1], INT64))
    axis = normalize_dim(dimension, rank)
    length = static_ints(ctx, [shape[axis]], "unfold")[0]
    windows = (length - size) // step + 1
    index = np.arange(windows)[:, None] * step + np.arange(size)[None, :]
    out = ctx.op("Gather", self, ctx.const(index.astype(np.int64)), axis=axis)
    perm = [*range(axis + 1), *range(axis + 2, rank + 1), axis + 1]
    return out if perm == list(range(rank + 1)) else ctx.op("Transpose", out, perm=perm)


def _dynamic_pad(ctx: NodeContext, self: ir.Value, pad: Sequence[Any], mode: str, value: Any) -> ir.Value:
    """Constant padding whose amounts are computed at run time (``seq % chunk``): the ``pads`` input of
    ``Pad`` is built from them; ONNX crops where an amount is negative, as PyTorch does."""
    if mode != "constant":
        raise NotImplementedError(
            f"{mode!r} padding needs static amounts, got {list(pad)}; only constant padding takes dynamic ones"
        )
    rank = ctx.rank(self)
    begins: list[Any] = [0] * rank
    ends: list[Any] = [0] * rank
    for i in range(len(pad) // 2):  # pad lists the last axis first
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    # amounts for every axis, no ``axes`` input (onnxruntime's transpose optimizer mishandles it)
    amounts = ctx.int64s([*begins, *ends])
    dtype = self.dtype
    fill = 0 if value is None else value
    if dtype == BOOL:
        fill = bool(fill)
    elif not dtype.is_floating_point():
        fill = int(fill)
    wide = widen(ctx, self, "Pad")
    out = ctx.op("Pad", wide, amounts, ctx.const(fill, wide.dtype), mode="constant")
    return ctx.cast(out, dtype)


def _is_dynamic(pad: Sequence[Any]) -> bool:
    return any(isinstance(p, ir.Value) for p in pad)


@register("aten::constant_pad_nd.default")
def aten_constant_pad_nd(ctx: NodeContext, self: ir.Value, pad: Sequence[int], value: Any = 0) -> ir.Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    if _is_dynamic(pad):
        return _dynamic_pad(ctx, self, pad, "constant", value)
    return pad_axes(ctx, self, pad, "constant", value)


@register("aten::pad.default")
def aten_pad(
    ctx: NodeContext, self: ir.Value, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> ir.Value:
    """pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor"""
    if _is_dynamic(pad):
        return _dynamic_pad(ctx, self, pad, mode, value)
    return pad_axes(ctx, self, pad, mode, value)


def _pad_converter(name: str, mode: str):
    def converter(ctx: NodeContext, self: ir.Value, padding: Sequence[int]) -> ir.Value:
        return pad_axes(ctx, self, padding, mode)

    converter.__name__ = converter.__qualname__ = f"aten_{name}"
    converter.__doc__ = f"{name}(Tensor self, SymInt[] padding) -> Tensor: {mode} padding"
    return converter


for _name, _mode in (("reflection_pad", "reflect"), ("replication_pad", "replicate")):
    register(*(f"aten::{_name}{n}d.default" for n in (1, 2, 3)))(_pad_converter(_name, _mode))


register("aten::_pad_circular.default")(_pad_converter("_pad_circular", "circular"))


def _im2col_index(
    height: int, width: int, kernel: Sequence[int], dilation: Sequence[int], stride: Sequence[int]
) -> tuple[np.ndarray, int]:
    """``[kh * kw, L]`` flat positions in a (padded) ``height x width`` plane of each kernel offset for each
    of the ``L`` sliding positions."""
    kh, kw = kernel
    oh = (height - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (width - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    rows = np.arange(kh)[:, None, None, None] * dilation[0] + np.arange(oh)[None, None, :, None] * stride[0]
    cols = np.arange(kw)[None, :, None, None] * dilation[1] + np.arange(ow)[None, None, None, :] * stride[1]
    return (rows * width + cols).reshape(kh * kw, oh * ow).astype(np.int64), oh * ow


@register("aten::im2col.default")
def aten_im2col(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> ir.Value:
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor:
    the padded planes flattened, one ``Gather`` of every window, ``[N, C * kh * kw, L]``; the window
    positions computed in the graph when the planes are dynamic."""
    if not all(isinstance(d, int) for d in ctx.arg_val(0).shape):
        return _im2col_dynamic(ctx, self, kernel_size, dilation, padding, stride)
    shape = static_ints(ctx, ctx.arg_val(0).shape, "im2col")
    batched = len(shape) == 4
    x = self if batched else unsqueeze_axes(ctx, self, [0])
    n, c, h, w = shape if batched else [1, *shape]
    ph, pw = padding
    if ph or pw:
        x = ctx.cast(ctx.op("Pad", widen(ctx, x, "Pad"), ctx.const([0, 0, ph, pw, 0, 0, ph, pw], INT64)), self.dtype)
    h, w = h + 2 * ph, w + 2 * pw
    index, positions = _im2col_index(h, w, kernel_size, dilation, stride)
    planes = ctx.op("Reshape", x, ctx.const([n, c, h * w], INT64))
    cols = ctx.op("Gather", planes, ctx.const(index), axis=2)  # [N, C, kh*kw, L]
    out_shape = [n, c * index.shape[0], positions] if batched else [c * index.shape[0], positions]
    return ctx.op("Reshape", cols, ctx.const(out_shape, INT64), allowzero=1)


def _window_starts(
    ctx: NodeContext, size: int | ir.Value, kernel: int, dilation: int, stride: int, axis: int
) -> tuple[ir.Value, int | ir.Value]:
    """Positions ``k * dilation + i * stride`` of kernel offset ``k`` (axis ``axis``: 0 rows, 1 columns) and
    window ``i`` (axis ``axis + 2``) as a 4-D INT64 tensor of size 1 on the other axes; the window count."""
    count = int_op(ctx, "Add", int_op(ctx, "Div", int_op(ctx, "Sub", size, dilation * (kernel - 1) + 1), stride), 1)
    end = int_op(ctx, "Mul", count, stride)
    starts = ctx.op("Range", ctx.const(0, INT64), ctx.operand(end, INT64), ctx.const(stride, INT64))
    offsets_shape, starts_shape = [1, 1, 1, 1], [1, 1, 1, 1]
    offsets_shape[axis], starts_shape[axis + 2] = kernel, -1
    offsets = ctx.const((np.arange(kernel) * dilation).reshape(offsets_shape).astype(np.int64))
    return ctx.op("Add", offsets, ctx.op("Reshape", starts, ctx.const(starts_shape, INT64))), count


def _im2col_dynamic(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> ir.Value:
    """im2col over planes of dynamic sizes: the flat positions ``row * width + col`` built with ``Range``."""
    rank = ctx.arg_val(0).dim()
    x = self if rank == 4 else unsqueeze_axes(ctx, self, [0])
    ph, pw = padding
    h = int_op(ctx, "Add", dim_of(ctx, self, rank - 2, ctx.arg_val(0).shape[-2]), 2 * ph)
    w = int_op(ctx, "Add", dim_of(ctx, self, rank - 1, ctx.arg_val(0).shape[-1]), 2 * pw)
    if ph or pw:
        x = ctx.cast(ctx.op("Pad", widen(ctx, x, "Pad"), ctx.const([0, 0, ph, pw, 0, 0, ph, pw], INT64)), self.dtype)
    kh, kw = kernel_size
    rows, oh = _window_starts(ctx, h, kh, dilation[0], stride[0], 0)
    cols, ow = _window_starts(ctx, w, kw, dilation[1], stride[1], 1)
    index = ctx.op("Add", ctx.op("Mul", rows, ctx.operand(w, INT64)), cols)  # [kh, kw, oh, ow]
    index = ctx.op("Reshape", index, ctx.const([kh * kw, -1], INT64))
    planes = ctx.op("Reshape", x, ctx.const([0, 0, -1], INT64))
    cols = ctx.op("Gather", planes, index, axis=2)  # [N, C, kh*kw, L]
    positions = int_op(ctx, "Mul", oh, ow)
    out = ctx.op("Reshape", cols, concat_shape(ctx, [0, -1, positions]))
    return out if rank == 4 else ctx.op("Squeeze", out, ctx.const([0], INT64))


@register("aten::col2im.default")
def aten_col2im(
    ctx: NodeContext,
    self: ir.Value,
    output_size: Sequence[int],
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> ir.Value:
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding,
    int[2] stride) -> Tensor: the columns summed back into the padded planes (``ScatterElements`` add),
    the padding cut."""
    shape = static_ints(ctx, ctx.arg_val(0).shape, "col2im")
    batched = len(shape) == 3
    n, ckk, positions = shape if batched else [1, *shape]
    kh, kw = kernel_size
    c = ckk // (kh * kw)
    ph, pw = padding
    h, w = output_size[0] + 2 * ph, output_size[1] + 2 * pw
    index, _ = _im2col_index(h, w, kernel_size, dilation, stride)
    dtype = ctx.out_dtype
    compute = ir.DataType.FLOAT if dtype in (BF16, ir.DataType.FLOAT16) else dtype
    cols = ctx.op("Reshape", ctx.cast(self, compute), ctx.const([n, c, kh * kw * positions], INT64))
    zeros = ctx.op(
        "ConstantOfShape",
        ctx.const([n, c, h * w], INT64),
        value=ir.tensor(np.zeros(1, dtype=compute.numpy()), dtype=compute),
    )
    flat_index = ctx.op("Expand", ctx.const(index.reshape(1, 1, -1)), ctx.const([n, c, index.size], INT64))
    planes = ctx.op("ScatterElements", zeros, flat_index, cols, axis=2, reduction="add")
    out = ctx.op("Reshape", planes, ctx.const([n, c, h, w], INT64))
    if ph or pw:
        out = ctx.op(
            "Slice", out, ctx.const([ph, pw], INT64), ctx.const([h - ph, w - pw], INT64), ctx.const([2, 3], INT64)
        )
    if not batched:
        out = ctx.op("Squeeze", out, ctx.const([0], INT64))
    return ctx.cast(out, dtype)
