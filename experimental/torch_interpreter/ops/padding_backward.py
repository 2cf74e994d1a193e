"""Backward of the reflection and replication paddings (1-D, 2-D and 3-D): each padded position's gradient goes
back to the input position it copied, one padded axis at a time.

Along an axis padded by ``(left, right)``, the gradient of the input is the middle of ``grad_output`` plus its
left and right parts moved back where they came from: mirrored next to the border (reflection) or summed into
the border element (replication). The parts are added left, middle, right, the order of PyTorch's loop over the
output positions. Padding amounts must be static and non-negative; sizes may be dynamic.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, dim_of, int_op, opmath_dtype, pad_axis, slice_axis

_END = 2**62


def _axis_backward(ctx: NodeContext, g: ir.Value, axis: int, rank: int, size: int | ir.Value,
                   left: int, right: int, reflect: bool) -> ir.Value:
    """The gradient of one padded axis (of ``size`` elements before padding) from ``g`` along it."""
    grad = slice_axis(ctx, g, axis, left, -right if right else _END)
    if left:
        if reflect:  # output j < left copied input left - j: mirrored, it lands on 1 .. left
            part = slice_axis(ctx, g, axis, left - 1, -_END, -1)
            grad = ctx.op("Add", pad_axis(ctx, part, rank, axis, 1, int_op(ctx, "Sub", size, left + 1)), grad)
        else:  # every left position copied input 0
            part = ctx.op("ReduceSum", slice_axis(ctx, g, axis, 0, left), ctx.const([axis], INT64), keepdims=1)
            grad = ctx.op("Add", pad_axis(ctx, part, rank, axis, 0, int_op(ctx, "Sub", size, 1)), grad)
    if right:
        if reflect:  # output size + left + t copied input size - 2 - t: mirrored, it lands on size-1-right .. size-2
            part = slice_axis(ctx, g, axis, -1, -right - 1, -1)
            grad = ctx.op("Add", grad, pad_axis(ctx, part, rank, axis, int_op(ctx, "Sub", size, right + 1), 1))
        else:
            part = ctx.op("ReduceSum", slice_axis(ctx, g, axis, -right, _END), ctx.const([axis], INT64), keepdims=1)
            grad = ctx.op("Add", grad, pad_axis(ctx, part, rank, axis, int_op(ctx, "Sub", size, 1), 0))
    return grad


def _pad_backward(ctx: NodeContext, grad_output: ir.Value, self: ir.Value, padding: Sequence[int],
                  reflect: bool) -> ir.Value:
    if not all(isinstance(p, int) and p >= 0 for p in padding):
        raise NotImplementedError(f"{ctx.op_name} with padding {list(padding)}: only static non-negative amounts")
    rank = ctx.rank(grad_output)
    dtype = ctx.out_dtype
    g = ctx.cast(grad_output, opmath_dtype(dtype))
    for i in range(len(padding) // 2):  # padding lists the last axis first
        left, right = padding[2 * i], padding[2 * i + 1]
        if left or right:
            axis = rank - 1 - i
            size = dim_of(ctx, self, axis, ctx.arg_val(1).shape[axis])
            g = _axis_backward(ctx, g, axis, rank, size, left, right, reflect)
    return ctx.cast(g, dtype)


@register(*(f"aten::reflection_pad{n}d_backward.default" for n in (1, 2, 3)))
def aten_reflection_pad_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, padding: Sequence[int]
) -> ir.Value:
    """reflection_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor"""
    return _pad_backward(ctx, grad_output, self, padding, reflect=True)


@register(*(f"aten::replication_pad{n}d_backward.default" for n in (1, 2, 3)))
def aten_replication_pad_backward(
    ctx: NodeContext, grad_output: ir.Value, self: ir.Value, padding: Sequence[int]
) -> ir.Value:
    """replication_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor"""
    return _pad_backward(ctx, grad_output, self, padding, reflect=False)
