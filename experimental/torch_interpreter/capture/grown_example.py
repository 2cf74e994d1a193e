"""An example grown along its small dynamic axes, and whether a captured program holds on it.

A capture from an example of size 1 on an axis declared dynamic (a batch of 1) may give a graph that holds at that
size only: under ``backed_size_oblivious`` torch.export keeps the axis dynamic, but a broadcast the example made
(``[1, n] + [s, n]``) can still fix it, and the graph then fails or lies at batch 2 while its input declares
``batch``. :func:`grown` makes the example of size 2 on those axes (values repeated: token ids stay token ids),
:func:`differs_at` runs the program and the model there and says how they differ.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.utils._pytree import keystr, tree_flatten_with_path, tree_leaves, tree_unflatten

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
