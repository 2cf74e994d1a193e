"""Shape arithmetic shared by the converter families: static and dynamic dimensions, shape vectors, axes."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ...translation.context import NodeContext
from ...translation.dims import static_dim
from .kernels import widen
from .types import INT64, INT64_MAX


def normalize_dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def uses_output(ctx: NodeContext, index: int) -> bool:
    """Whether the graph reads output ``index`` of a multi-output node (``getitem(node, index)`` with users)."""
    for user in ctx.node.users:
        if user.target is not operator.getitem or (user.args[1] == index and user.users):
            return True
    return False


def numel(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """The number of elements of ``x``, a 0-D INT64 value: ``Size``, or ``ReduceProd(Shape)`` for bfloat16
    (onnxruntime has no bfloat16 ``Size`` kernel)."""
    if x.dtype == ir.DataType.BFLOAT16:
        return ctx.op("ReduceProd", ctx.op("Shape", x), keepdims=0)
    return ctx.op("Size", x)


# -- shape helpers, also used by indexing.py and creation.py ---------------------------------------------
def static_shape(val: torch.Tensor) -> list[int] | None:
    """The shape of a FakeTensor as ints, or None when one dimension is dynamic."""
    dims = [static_dim(d) for d in val.shape]
    return None if any(d is None for d in dims) else dims


class Vec:
    """A 1-D INT64 value standing for several dimensions in a list given to :func:`concat_shape`."""

    def __init__(self, value: ir.Value):
        self.value = value


def dims_of(ctx: NodeContext, x: ir.Value, start: int = 0, end: int | None = None) -> list[int | Vec]:
    """The dimensions ``start:end`` of ``x`` (a value from an FX node): ints where static, runs of
    dynamic dimensions as a :class:`Vec` sliced from ``Shape(x)``."""
    shape = list(x.shape)
    end = len(shape) if end is None else end
    out: list[int | Vec] = []
    i = start
    while i < end:
        if isinstance(shape[i], int):
            out.append(shape[i])
            i += 1
            continue
        j = i
        while j < end and not isinstance(shape[j], int):
            j += 1
        out.append(Vec(ctx.op("Shape", x, start=i, end=j)))
        i = j
    return out


def dim_of(ctx: NodeContext, x: ir.Value, axis: int, size: Any = None) -> int | ir.Value:
    """Size of axis ``axis`` of ``x``: an int, or a 0-D INT64 value when dynamic. ``size`` (a size from
    ``meta['val']``) says whether it is static when ``x`` is a value whose shape was not inferred."""
    d = x.shape[axis] if size is None else static_dim(size)
    if isinstance(d, int):
        return d
    if axis < 0:
        axis += len(x.shape)
    return ctx.op("Squeeze", ctx.op("Shape", x, start=axis, end=axis + 1), ctx.const([0], INT64))


def concat_shape(ctx: NodeContext, pieces: Sequence[int | ir.Value | Vec]) -> ir.Value:
    """A 1-D INT64 tensor from ints, 0-D INT64 values (one dimension each) and :class:`Vec`."""
    parts: list[ir.Value] = []
    ints: list[int] = []
    for p in pieces:
        if isinstance(p, int):
            ints.append(int(p))
            continue
        if ints:
            parts.append(ctx.const(ints, INT64))
            ints = []
        if isinstance(p, Vec):
            parts.append(p.value)
        else:
            parts.append(ctx.op("Reshape", ctx.cast(p, INT64), ctx.const([1], INT64)))
    if ints or not parts:
        parts.append(ctx.const(ints, INT64))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)


_PY_INT_OPS = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "Div": operator.floordiv,
    "Mod": operator.mod,
}


def int_op(ctx: NodeContext, op_type: str, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    """Integer arithmetic (Add, Sub, Mul, Div of non-negative values, Mod) on ints or 0-D INT64 values."""
    if isinstance(a, int) and isinstance(b, int):
        return _PY_INT_OPS[op_type](a, b)
    return ctx.op(op_type, ctx.operand(a, INT64), ctx.operand(b, INT64))


def int_range(ctx: NodeContext, n: int | ir.Value) -> ir.Value:
    """``0, 1, ..., n - 1`` as a 1-D INT64 tensor: a constant, ``Range`` when ``n`` is a 0-D INT64 value."""
    if isinstance(n, int):
        return ctx.const(np.arange(n, dtype=np.int64))
    return ctx.op("Range", ctx.const(0, INT64), n, ctx.const(1, INT64))


def repeat_heads(ctx: NodeContext, x: ir.Value, xv: Any, qv: Any, q: ir.Value) -> ir.Value:
    """``x.repeat_interleave(Hq // Hx, dim=-3)``: the key or value ``x`` (FakeTensor ``xv``, ``Hx`` heads) of a
    grouped-query attention brought to the ``Hq`` heads of the query ``q`` (FakeTensor ``qv``), by Unsqueeze,
    Expand, Reshape; ``x`` itself when the numbers of heads are the same."""
    r = xv.dim()
    hq, hx = qv.shape[-3], xv.shape[-3]
    if statically_known_true(hq == hx):
        return x
    hq_ = dim_of(ctx, q, qv.dim() - 3, hq)
    hx_ = dim_of(ctx, x, r - 3, hx)
    if isinstance(hq_, int) and isinstance(hx_, int):
        groups: int | ir.Value = hq_ // hx_
    else:
        groups = ctx.op("Div", ctx.operand(hq_, INT64), ctx.operand(hx_, INT64))
    x = ctx.op("Unsqueeze", x, ctx.const([r - 2], INT64))
    x = ctx.op("Expand", x, ctx.int64s([1] * (r - 2) + [groups, 1, 1]))
    last = dim_of(ctx, x, r, xv.shape[-1])
    return ctx.op("Reshape", x, ctx.int64s([0] * (r - 3) + [hq_, -1, last]))


def same_shape(ctx: NodeContext, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two FakeTensors have the same shape, symbolic dimensions included."""
    return ctx.onnx_shape(a) == ctx.onnx_shape(b)


# -- slicing ----------------------------------------------------------------------------------------------
def slice_axis(
    ctx: NodeContext, x: ir.Value, axis: int, start: Any, end: Any, step: Any = 1
) -> ir.Value:
    inputs = [x, ctx.int64s([start]), ctx.int64s([end]), ctx.const([axis], INT64)]
    if not (isinstance(step, int) and step == 1):
        inputs.append(ctx.int64s([step]))
    return ctx.op("Slice", *inputs)


def static_ints(ctx: NodeContext, sizes: Sequence[Any], what: str) -> list[int]:
    out = [static_dim(s) for s in sizes]
    if any(s is None for s in out):
        raise NotImplementedError(f"{what} needs static sizes, got {list(sizes)}")
    return out


def list_vals(ctx: NodeContext, index: int) -> list[Any]:
    """``meta['val']`` of each tensor of the list argument ``index``."""
    return [n.meta["val"] for n in ctx.node.args[index]]


def expand_to(
    ctx: NodeContext, x: ir.Value, shape: ir.Value, out: Sequence[int | None] | None = None
) -> ir.Value:
    """``Expand(x, shape)``; ``out``: the static dimensions of the result (None where dynamic), by default
    those of a constant ``shape``.

    onnxruntime's optimizer drops an Expand of 1 to 0 (issue 17) and returns ``x`` unchanged: the axes of
    ``x`` that ``out`` makes empty are sliced to 0 first.
    """
    if out is None and shape.const_value is not None:
        out = [int(d) for d in shape.const_value.numpy().reshape(-1)]
    if out is not None and x.shape is not None and len(out) >= len(x.shape):
        lead = len(out) - len(x.shape)
        empty = [i - lead for i, o in enumerate(out) if o == 0 and i >= lead and x.shape[i - lead] != 0]
        if empty:
            zeros = ctx.const([0] * len(empty), INT64)
            x = ctx.op("Slice", x, zeros, zeros, ctx.const(empty, INT64))
    return ctx.cast(ctx.op("Expand", widen(ctx, x, "Expand"), shape), x.dtype)


def unsqueeze_axes(ctx: NodeContext, x: ir.Value, axes: Sequence[int]) -> ir.Value:
    return ctx.op("Unsqueeze", x, ctx.const(list(axes), INT64)) if axes else x


# -- stacks -------------------------------------------------------------------------------------------------
_ATLEAST_AXES = {
    1: {0: [0]},
    2: {0: [0, 1], 1: [0]},
    3: {0: [0, 1, 2], 1: [0, 2], 2: [2]},
}


def atleast(ctx: NodeContext, x: ir.Value, n: int) -> ir.Value:
    return unsqueeze_axes(ctx, x, _ATLEAST_AXES[n].get(ctx.rank(x), []))


def roll_axis(ctx: NodeContext, x: ir.Value, shift: int | ir.Value, axis: int, size: int | ir.Value) -> ir.Value:
    """``x`` rolled by ``shift`` along ``axis`` of size ``size`` (ints or 0-D INT64 values): two slices concatenated."""
    if isinstance(size, int) and isinstance(shift, int):
        if size == 0 or shift % size == 0:
            return x
        cut = size - shift % size
    else:
        cut = int_op(ctx, "Sub", size, int_op(ctx, "Mod", shift, size))
    return ctx.op("Concat", slice_axis(ctx, x, axis, cut, INT64_MAX), slice_axis(ctx, x, axis, 0, cut), axis=axis)
