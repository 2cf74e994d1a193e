"""In-place ops (``add_``, ``index_put_``, ``copy_``, ``masked_fill_``...) and the functional forms of pure writes.

Every ``aten::<op>_.<overload>`` whose functional twin ``aten::<op>.<overload'>`` (same arguments) has a
converter gets one here, by :func:`register_inplace`: the functional converter computes the new value of
``self``; the interpreter writes it into ``self`` and every view of it (``aliasing.py``), since the schema
returns ``self`` (``Tensor(a!)``). In-place view ops (``unsqueeze_``, ``t_``) change metadata only: their
converters are the views' (views.py), aliasing.py tracks them as views.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from ..translation.context import NodeContext
from ..translation.registry import Converter, Registry, default_registry, register
from ._common import concat_shape, dims_of, expand_to, same_shape


def _like(ctx: NodeContext, value: ir.Value, like: ir.Value) -> ir.Value:
    """``value`` cast to the type of ``like`` and broadcast to its shape (the node's output shape)."""
    value = ctx.cast(value, like.dtype)
    if value.shape is not None and list(value.shape) == list(like.shape):
        return value
    out = [d if isinstance(d, int) else None for d in like.shape]
    return ctx.cast(expand_to(ctx, value, concat_shape(ctx, dims_of(ctx, like)), out), like.dtype)


@register("aten::copy.default")
def aten_copy(ctx: NodeContext, self: ir.Value, src: ir.Value, non_blocking: bool = False) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: ``src`` cast and broadcast to ``self``."""
    if not isinstance(src, ir.Value):  # x.copy_(-1): torch takes a Python number as a 0-D tensor
        return _like(ctx, ctx.operand(src, self.dtype), self)
    if src.shape is not None and same_shape(ctx, ctx.arg_val(1), ctx.val):
        return ctx.cast(src, self.dtype)
    return _like(ctx, src, self)


@register("aten::fill.Scalar", "aten::fill.Tensor")
def aten_fill(ctx: NodeContext, self: ir.Value, value: Any) -> ir.Value:
    """fill.Scalar(Tensor self, Scalar value) -> Tensor (``fill.Tensor``: a 0-D tensor value)"""
    return _like(ctx, ctx.operand(value, self.dtype), self)


@register("aten::zero.default")
def aten_zero(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """zero(Tensor self) -> Tensor"""
    return _like(ctx, ctx.const(0, self.dtype), self)


# -- in-place twins of the functional converters --------------------------------------------------------------
def _inplace_name(name: str) -> str:
    """``add`` -> ``add_``, ``__and__`` -> ``__iand__``."""
    return f"__i{name[2:]}" if name.startswith("__") and name.endswith("__") else f"{name}_"


def _signature(op: torch._ops.OpOverload) -> list[tuple[str, str, bool]]:
    return [(a.name, str(a.type), a.kwarg_only) for a in op._schema.arguments]


def _wrap(functional: Converter, op: torch._ops.OpOverload) -> Converter:
    def converter(ctx: NodeContext, self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
        return ctx.cast(functional(ctx, self, *args, **kwargs), self.dtype)

    name = op._schema.name.split("::")[-1]
    converter.__name__ = converter.__qualname__ = f"aten_{name}_{op._overloadname}".replace(".", "_")
    converter.__doc__ = (
        f"{str(op._schema).split('::', 1)[-1]}: the value of ``{functional.__name__}``, written into self."
    )
    return converter


def register_inplace(registry: Registry = default_registry) -> list[str]:
    """Registers the in-place twin of each functional aten converter of ``registry`` that has none.

    Returns the keys added.
    """
    added = []
    for key in registry.supported():
        namespace, _, qualified = key.partition("::")
        name, _, overload = qualified.partition(".")
        if namespace != "aten":
            continue
        functional = getattr(getattr(torch.ops.aten, name), overload)
        if any(r.alias_info is not None for r in functional._schema.returns):
            continue  # a view: its in-place form changes metadata
        try:
            packet = getattr(torch.ops.aten, _inplace_name(name))
        except (AttributeError, RuntimeError):
            continue
        signature = _signature(functional)
        for inplace_overload in packet.overloads():
            op = getattr(packet, inplace_overload)
            inplace_key = f"aten::{_inplace_name(name)}.{inplace_overload}"
            if registry.get(inplace_key) is None and _signature(op) == signature and op._schema.is_mutable:
                registry.register(inplace_key)(_wrap(registry.get(key), op))
                added.append(inplace_key)
    return added

