"""Arguments of spatial ops (convolution, pooling, sampling): per-axis ints and the optional batch axis."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir

from ...translation.context import NodeContext
from .types import INT64

Ints = Sequence[int]


def spatial_ints(value: Any, n: int, name: str, default: Ints | None = None) -> list[int]:
    """A static int or list of ints expanded to ``n`` values (``[2] -> [2, 2]``)."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0 and default is not None):
        return list(default)
    if isinstance(value, (list, tuple)):
        values = list(value)
    else:
        values = [value]
    if not all(isinstance(v, int) for v in values):
        raise NotImplementedError(f"{name}={value!r}: only static values are supported")
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise ValueError(f"{name}={value!r} does not have {n} values")
    return values


def spatial_rank(ctx: NodeContext) -> int:
    """1, 2 or 3 from the name of the aten op (``max_pool2d...``, ``avg_pool3d_backward``)."""
    name = ctx.op_name
    for n in (1, 2, 3):
        if f"{n}d" in name:
            return n
    raise ValueError(f"cannot tell the spatial rank of {name}")


def spatial_dims(x: ir.Value, n: int) -> list[int | None]:
    """The last ``n`` (spatial) dimensions of ``x``, None where dynamic (all None when ``x`` has no shape)."""
    if x.shape is None:
        return [None] * n
    return [d if isinstance(d, int) else None for d in list(x.shape)[-n:]]


def with_batch(ctx: NodeContext, x: ir.Value, n: int, fn: Callable[[ir.Value], Any]) -> Any:
    """``fn(x)`` on ``x`` of rank ``n + 2``, adding and removing a batch dimension for a rank ``n + 1`` input."""
    if ctx.rank(x) == n + 2:
        return fn(x)
    if ctx.rank(x) != n + 1:
        raise ValueError(f"expected an input of rank {n + 1} or {n + 2}, got rank {ctx.rank(x)}")
    zero = ctx.const([0], INT64)
    batched = ctx.op("Unsqueeze", x, zero)
    batched.shape = ir.Shape([1, *x.shape])
    out = fn(batched)
    if isinstance(out, tuple):
        return tuple(None if o is None else ctx.op("Squeeze", o, zero) for o in out)
    return ctx.op("Squeeze", out, zero)
