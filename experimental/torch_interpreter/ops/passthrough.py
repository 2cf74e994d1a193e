"""Nodes that carry no computation before decomposition: asserts, aliases, copies, casts (dropout: random.py)."""

from __future__ import annotations

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register


@register(
    "aten::_assert_tensor_metadata.default",
    "aten::_assert_scalar.default",
    "aten::_assert_async.msg",
    "aten::sym_constrain_range_for_size.default",
    "aten::sym_constrain_range.default",
    "aten::_functional_assert_async.msg",
)
def aten__assert_scalar(ctx: NodeContext, *args, **kwargs) -> None:
    """Checks torch.export keeps in the graph; ONNX has nothing to check at runtime."""
    return None


@register(
    "aten::alias.default",
    "aten::detach.default",
    "aten::detach_.default",
    "aten::lift_fresh_copy.default",
    "aten::clone.default",
    "aten::contiguous.default",
    "aten::alias_copy.default",
    "aten::positive.default",
    "aten::resolve_conj.default",
    "aten::resolve_neg.default",
    "aten::conj.default",
    "aten::conj_physical.default",
    "aten::real.default",
)
def aten_alias(ctx: NodeContext, self: ir.Value, *args, **kwargs) -> ir.Value:
    """alias(Tensor(a) self) -> Tensor(a): the value itself, no ONNX node (conj and real of real tensors too)."""
    return self


@register(
    "aten::to.dtype", "aten::to.device", "aten::to.dtype_layout", "aten::_to_copy.default", "aten::type_as.default",
    "prims::convert_element_type.default",
)
def aten_to(ctx: NodeContext, self: ir.Value, *args, **kwargs) -> ir.Value:
    """to(Tensor self, ..., ScalarType dtype, ...) -> Tensor: a Cast when the dtype changes, nothing else; a
    Python number (a scalar ``torch.vmap`` lowered into a tensor) is a constant of the output type."""
    return ctx.operand(self, ctx.out_dtype)


@register("aten::to.other")
def aten_to_other(ctx: NodeContext, self: ir.Value, other: ir.Value, *args, **kwargs) -> ir.Value:
    return ctx.cast(self, ctx.out_dtype)
