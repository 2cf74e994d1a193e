"""Patches for strict (dynamo) capture: functions dynamo refuses to trace."""

from __future__ import annotations

import typing
from typing import Any

import torch

from ..torch_versions import has_mark_static_address
from .base import Patch, Undo, build_trace_rules, is_patched, replace_attribute


def _check_type(obj: Any, target: Any) -> bool:
    """``isinstance`` that understands ``List[int]``, ``Dict[str, Tensor]``, ``Optional[T]``, ``Tuple[...]``."""
    origin = typing.get_origin(target)
    if origin is None:
        return target is Any or isinstance(obj, target)
    args = typing.get_args(target)
    if origin is typing.Union:
        return any(_check_type(obj, a) for a in args)
    if origin in (list, tuple, dict) and not isinstance(obj, origin):
        return False
    if origin is list:
        return all(_check_type(o, args[0]) for o in obj) if args else True
    if origin is dict:
        return all(_check_type(k, args[0]) and _check_type(v, args[1]) for k, v in obj.items()) if args else True
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_check_type(o, args[0]) for o in obj)
        return len(obj) == len(args) and all(_check_type(o, a) for o, a in zip(obj, args))
    return isinstance(obj, origin)


def _apply_jit_isinstance() -> Undo:
    build_trace_rules()
    def isinstance_(obj: Any, target_type: Any) -> bool:
        return _check_type(obj, target_type)

    return replace_attribute(torch.jit, "isinstance", isinstance_)


def _apply_mark_static_address() -> Undo:
    build_trace_rules()
    def mark_static_address(t: Any, guard: bool = True) -> None:
        """No-op while exporting: static addresses only matter to CUDA graphs of torch.compile."""

    return replace_attribute(torch._dynamo, "mark_static_address", mark_static_address)


PATCHES = [
    Patch(
        name="torch.jit.isinstance",
        group="torch",
        replaces="torch.jit.isinstance by a plain Python type check (typing generics included)",
        fixes="strict export: `Unsupported: Attempted to call function marked as skipped ... isinstance`",
        versions="torch >= 2.0 (dynamo skips torch.jit.isinstance; still the case in 2.13)",
        needed=lambda: not is_patched(torch.jit, "isinstance"),
        apply=_apply_jit_isinstance,
    ),
    Patch(
        name="torch._dynamo.mark_static_address",
        group="torch",
        replaces="torch._dynamo.mark_static_address by a no-op",
        fixes="strict export: `AssertionError: Attempt to trace forbidden callable <function mark_static_address>`",
        versions="torch >= 2.1 (forbidden in dynamo traces; still the case in 2.13)",
        needed=lambda: has_mark_static_address() and not is_patched(torch._dynamo, "mark_static_address"),
        apply=_apply_mark_static_address,
    ),
]
