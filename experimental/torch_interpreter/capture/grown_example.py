"""An example grown along its small dynamic axes (or cut to size 1), and whether a captured program holds on it.

A capture from an example of size 1 on an axis declared dynamic (a batch of 1) may give a graph that holds at that
size only: under ``backed_size_oblivious`` torch.export keeps the axis dynamic, but a broadcast the example made
(``[1, n] + [s, n]``) can still fix it, and the graph then fails or lies at batch 2 while its input declares
``batch``. :func:`grown` makes the example of size 2 on those axes (values repeated: token ids stay token ids),
:func:`differs_at` runs the program and the model there and says how they differ.
"""

from __future__ import annotations

import copy
from typing import Any

import sympy
import torch
from torch.export.graph_signature import InputKind
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_leaves, tree_unflatten
from torch.utils._sympy.numbers import int_oo

from .dynamic_shapes import DimSpec

#: (atol, rtol) of a program against its model on the same inputs (the same kernels, other fusions at most)
_TOLERANCES = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def grown(spec: DimSpec, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """``(args, kwargs)`` with every axis declared dynamic whose example size is 1 made 2 (the slice repeated);
    None when there is no such axis. Pytree nodes the inputs hold (caches) must be registered.

    >>> from .dynamic_shapes import normalize
    >>> x = torch.tensor([[1, 2, 3]])
    >>> spec = normalize(None, (x,), {}, ({0: "batch", 1: "seq"},))
    >>> grown(spec, (x,), {})[0][0].tolist()
    [[1, 2, 3], [1, 2, 3]]
    """
    leaves, treespec = tree_flatten_with_path((args, kwargs))
    changed, out = False, []
    for path, leaf in leaves:
        axes = spec.axes.get(keystr(path), (None, {}))[1]
        if isinstance(leaf, torch.Tensor):
            for axis in axes:
                if leaf.shape[axis] == 1:
                    leaf, changed = torch.cat([leaf, leaf], dim=axis), True
        out.append(leaf)
    if not changed:
        return None
    new_args, new_kwargs = tree_unflatten(out, treespec)
    return tuple(new_args), dict(new_kwargs)


def _run(fn: Any, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    args, kwargs = copy.deepcopy((args, kwargs))  # a cache is updated in place by the forward
    with torch.no_grad():
        return [t for t in tree_leaves(fn(*args, **kwargs)) if isinstance(t, torch.Tensor)]


def differs_at(
    ep: torch.export.ExportedProgram, model: torch.nn.Module, args: tuple, kwargs: dict, check_guards: bool = True
) -> str | None:
    """How ``ep`` (its own guards checked or not) differs from ``model`` on ``(args, kwargs)``: it fails, or an
    output differs; None when they agree, or when the model itself cannot run them (nothing to compare with).

    >>> model = torch.nn.Linear(3, 2)
    >>> ep = torch.export.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> differs_at(ep, model, (torch.randn(2, 3),), {}) is None
    True
    """
    try:
        expected = _run(model, args, kwargs)
    except Exception:  # noqa: BLE001  (the model refuses these sizes itself: nothing to compare with)
        return None
    try:
        got = _run(ep.module(check_guards=check_guards), args, kwargs)
    except Exception as e:  # noqa: BLE001  (torch's guards, a shape error inside the graph...)
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    if len(got) != len(expected):
        return None
    return _difference(got, expected)


def _difference(got: list[torch.Tensor], expected: list[torch.Tensor]) -> str | None:
    """How ``got`` differs from ``expected`` (the same number of tensors, within the type's tolerance), or None."""
    if len(got) != len(expected):
        return f"{len(got)} outputs where the model gives {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype:
            return f"output {i} is {g.dtype}{list(g.shape)} where the model gives {e.dtype}{list(e.shape)}"
        if e.is_floating_point():
            atol, rtol = _TOLERANCES.get(e.dtype, (1e-4, 1e-4))
            if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
                return f"output {i} differs by {(g.double() - e.double()).abs().max().item():.3g}"
        elif not torch.equal(g, e):
            return f"output {i} differs"
    return None


def at_size_one(
    ep: torch.export.ExportedProgram, args: tuple, kwargs: dict, symbols: set[str]
) -> tuple[tuple, dict] | None:
    """``(args, kwargs)`` with every axis whose size in ``ep`` is one of ``symbols`` (torch's, ``s0``) cut to its
    first slice; None when the inputs do not line up with the program's. Pytree nodes the inputs hold (caches) must
    be registered.

    >>> x = torch.randn(3, 4)
    >>> ep = torch.export.export(torch.nn.ReLU(), (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> symbol = str(next(n for n in ep.graph.nodes if n.op == "placeholder").meta["val"].shape[0])
    >>> at_size_one(ep, (x,), {}, {symbol})[0][0].shape
    torch.Size([1, 4])
    """
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    users = [n for n, s in zip(placeholders, ep.graph_signature.input_specs) if s.kind == InputKind.USER_INPUT]
    vals = [n.meta.get("val") for n in users if isinstance(n.meta.get("val"), torch.Tensor)]
    leaves, treespec = tree_flatten((args, kwargs))
    if sum(isinstance(leaf, torch.Tensor) for leaf in leaves) != len(vals):
        return None
    found = iter(vals)
    out = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            val = next(found)
            for axis, size in enumerate(val.shape):
                if isinstance(size, torch.SymInt) and str(size.node.expr) in symbols and leaf.shape[axis] > 1:
                    leaf = leaf.narrow(axis, 0, 1)
        out.append(leaf)
    new_args, new_kwargs = tree_unflatten(out, treespec)
    return tuple(new_args), dict(new_kwargs)


def holding_at_one(ep: torch.export.ExportedProgram, model: torch.nn.Module, args: tuple, kwargs: dict) -> set[str]:
    """The symbols of the dynamic axes torch gave its default lower bound of 2 (it specializes 0 and 1) whose
    program, run without its guards at size 1 on them, gives the model's outputs: size 1 is the graph's as much as
    2 is (a decode step of one token), though torch.export's range says 2. Only ranges with an upper bound are
    tried (the others are not checked at run time): one run for all of them, then one each if that run differs.

    >>> class FirstRows(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x[:8] * 2
    >>> ep = torch.export.export(FirstRows(), (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> len(holding_at_one(ep, FirstRows(), (torch.randn(4, 3),), {}))
    1
    """
    candidates = {
        str(symbol)
        for symbol, bounds in ep.range_constraints.items()
        if getattr(symbol, "is_Symbol", False) and _is_two(bounds.lower) and bounds.upper not in (int_oo, sympy.oo)
    }
    if not candidates or _holds_at_one(ep, model, args, kwargs, candidates):
        return candidates
    if len(candidates) == 1:
        return set()
    return {c for c in sorted(candidates) if _holds_at_one(ep, model, args, kwargs, {c})}


def _is_two(lower) -> bool:
    # a lower bound may be -int_oo (an unbacked integer carried by a loop): int() of it raises in sympy
    return getattr(lower, "is_Integer", False) and int(lower) == 2


def _holds_at_one(ep: torch.export.ExportedProgram, model: torch.nn.Module, args: tuple, kwargs: dict,
                  symbols: set[str]) -> bool:
    small = at_size_one(ep, args, kwargs, symbols)
    if small is None:
        return False
    try:
        expected = _run(model, *small)
        got = _run(ep.module(check_guards=False), *small)
    except Exception:  # noqa: BLE001  (the model or the graph refuses size 1: the range stays)
        return False
    return _difference(got, expected) is None
