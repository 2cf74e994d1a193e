"""Patches for control-flow operators: bodies returning an input unchanged (aliasing).

``torch.cond``, ``while_loop`` and ``scan`` refuse a body whose output is one of its inputs (or a view of
it), or the same tensor twice: ``Encountered aliasing during higher order op tracing``. A branch
``lambda x: x`` is common. The patched operators call the user's bodies and ``clone()`` each output
that aliases an input or an earlier output: the values are the same, the copy only breaks the aliasing
(one ``Identity`` in ONNX). The patch replaces ``torch.cond`` and the functions of
``torch._higher_order_ops`` as attributes; a body called through a name imported before the patch
(``from torch._higher_order_ops import while_loop`` at module level) is not affected.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch._higher_order_ops as hop
from torch.utils._pytree import tree_leaves, tree_map

from .base import Patch, Undo, build_trace_rules, is_patched, replace_attribute


def _aliases(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    # dynamo (which traces the bodies) cannot call _is_alias_of: there, only identity is detected
    return not torch.compiler.is_compiling() and torch._C._is_alias_of(a, b)


def unalias(outputs: Any, inputs: Any) -> Any:
    """``outputs`` with every tensor aliasing one of ``inputs`` or an earlier output cloned.

    >>> x = torch.ones(2)
    >>> y, z = unalias((x, x[:1]), (x,))
    >>> y is x, torch._C._is_alias_of(z, x), y.tolist()
    (False, False, [1.0, 1.0])
    """
    sources = [t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    seen: list[torch.Tensor] = []

    def fix(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if any(_aliases(value, s) for s in sources) or any(_aliases(value, s) for s in seen):
                value = value.clone()
            seen.append(value)
        return value

    return tree_map(fix, outputs)


def _unaliased(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def body(*args: Any) -> Any:
        return unalias(fn(*args), args)

    return body


def _apply_cond() -> Undo:
    build_trace_rules()
    original = torch.cond

    def cond(pred: Any, true_fn: Callable, false_fn: Callable, operands: Any = ()) -> Any:
        return original(pred, _unaliased(true_fn), _unaliased(false_fn), operands)

    undo = [replace_attribute(torch, "cond", cond)]
    if getattr(hop, "cond", None) is original:
        undo.append(replace_attribute(hop, "cond", cond))
    return lambda: [u() for u in reversed(undo)] and None


def _apply_while_loop() -> Undo:
    build_trace_rules()
    original = hop.while_loop

    def while_loop(cond_fn: Callable, body_fn: Callable, carried_inputs: Any) -> Any:
        return original(cond_fn, _unaliased(body_fn), carried_inputs)

    return replace_attribute(hop, "while_loop", while_loop)


def _apply_scan() -> Undo:
    build_trace_rules()
    original = hop.scan

    def scan(combine_fn: Callable, init: Any, xs: Any, **kwargs: Any) -> Any:
        return original(_unaliased(combine_fn), init, xs, **kwargs)

    return replace_attribute(hop, "scan", scan)


PATCHES = [
    Patch(
        name="torch.cond without aliasing",
        group="torch",
        replaces="torch.cond by a wrapper cloning branch outputs that alias an input or another output",
        fixes="`UncapturedHigherOrderOpError: Encountered aliasing during higher order op tracing` "
        "(a branch `lambda x: x`)",
        versions="torch >= 2.5 (cond forbids aliased outputs; still the case in 2.13)",
        needed=lambda: not is_patched(torch, "cond"),
        apply=_apply_cond,
    ),
    Patch(
        name="while_loop without aliasing",
        group="torch",
        replaces="torch._higher_order_ops.while_loop by a wrapper cloning body outputs that alias its inputs",
        fixes="`Encountered aliasing during higher order op tracing` (a body returning a carried tensor unchanged)",
        versions="torch >= 2.5 (still the case in 2.13)",
        needed=lambda: not is_patched(hop, "while_loop"),
        apply=_apply_while_loop,
    ),
    Patch(
        name="scan without aliasing",
        group="torch",
        replaces="torch._higher_order_ops.scan by a wrapper cloning combine_fn outputs that alias its inputs "
        "or each other",
        fixes="`Output-to-output aliasing` / `Input-to-output aliasing` in scan (`return [carry, carry]`)",
        versions="torch >= 2.6 (still the case in 2.13)",
        needed=lambda: not is_patched(hop, "scan"),
        apply=_apply_scan,
    ),
]
