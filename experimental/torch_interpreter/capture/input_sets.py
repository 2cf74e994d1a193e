"""Dynamic shapes inferred from several real input sets: the axes whose size differs between the sets are dynamic.

``to_onnx(model, inputs=[(args1, kwargs1), (args2, kwargs2)])``: :func:`read_input_sets` reads the sets,
:func:`infer_dynamic_shapes` compares them leaf by leaf (tensors' sizes, ints; containers and caches of the same
structure) and writes the spec as a user would, keyed by argument name; the export uses the set whose dynamic sizes
are the largest (torch.export specializes sizes 0 and 1). Each axis gets a name of its own (``batch`` for an axis 0,
the usual names of a transformers model's inputs, else ``<input>_<axis>``): after the capture, :func:`final_names`
gives one name to the axes the model makes one dimension, and tells apart those it keeps apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..errors import DynamicShapeError, InputMismatchError
from .dynamic_shapes import bind_inputs, input_entries


class AxisName(str):
    """The name of one inferred axis (a ``str``, as a user's name is), knowing the axis it names and its size in
    each set."""

    label: str
    axis: int | None  # None: an int input
    sizes: tuple[int, ...]

    def __new__(cls, name: str, label: str, axis: int | None, sizes: tuple[int, ...] = ()) -> AxisName:
        obj = super().__new__(cls, name)
        obj.label, obj.axis, obj.sizes = label, axis, sizes
        return obj


@dataclass(frozen=True)
class InferredShapes:
    """What :func:`infer_dynamic_shapes` found: the spec (dict keyed by argument name, :class:`AxisName` leaves)
    and the index of the set to export with."""

    spec: dict[str, Any]
    chosen: int


def read_input_sets(inputs: Any) -> list[tuple[tuple, dict]]:
    """``[(args, kwargs), ...]`` from what ``to_onnx(inputs=...)`` takes: a list of ``(args, kwargs)`` pairs, of
    dicts (keyword inputs) or of tuples (positional inputs); a tensor stands for ``(tensor,)``.

    >>> x, y = torch.zeros(2, 3), torch.zeros(5, 3)
    >>> [(len(a), sorted(k)) for a, k in read_input_sets([(x,), {"x": y}, ((x,), {"mask": y})])]
    [(1, []), (0, ['x']), (1, ['mask'])]
    """
    if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
        raise InputMismatchError(
            "inputs= takes a list of two input sets or more ([(args1, kwargs1), (args2, kwargs2)]): the axes whose "
            "size differs between them become dynamic; for one set, give args and kwargs"
        )
    sets = []
    for i, item in enumerate(inputs):
        if isinstance(item, torch.Tensor):
            item = (item,)
        if isinstance(item, Mapping):
            sets.append(((), dict(item)))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], (tuple, list)) and (
            isinstance(item[1], Mapping)
        ):
            sets.append((tuple(item[0]), dict(item[1])))
        elif isinstance(item, (tuple, list)):
            sets.append((tuple(item), {}))
        else:
            raise InputMismatchError(
                f"input set {i + 1} is a {type(item).__name__}: give each set as (args, kwargs), a tuple of "
                "positional inputs or a dict of keyword inputs"
            )
    return sets


def _identifier(label: str) -> str:
    return re.sub(r"\W+", "_", label).strip("_") or "dim"


def _hint(hint: Any, key: Any) -> Any:
    if isinstance(hint, Mapping):
        return hint.get(key)
    if isinstance(hint, (list, tuple)) and isinstance(key, int) and key < len(hint):
        return hint[key]
    return None


def _differ(label: str, what: str, values: Sequence[Any]) -> DynamicShapeError:
    shown = ", ".join(f"set {i + 1}: {v}" for i, v in enumerate(values))
    return DynamicShapeError(f"the input sets differ in {label}'s {what} ({shown}): {_ONLY_SIZES}")


def _walk(values: list[Any], hint: Any, label: str) -> Any:
    """The spec of one input, its values in every set side by side; ``hint`` holds the usual names of some axes."""
    first = values[0]
    if isinstance(first, torch.Tensor):
        return _tensor(values, hint, label)
    kinds = {type(v) for v in values}
    if len(kinds) > 1:
        raise _differ(label, "type", [type(v).__name__ for v in values])
    if isinstance(first, int) and not isinstance(first, bool):
        return AxisName(_identifier(label), label, None, tuple(values)) if len(set(values)) > 1 else None
    if first is None or isinstance(first, (bool, float, str, torch.dtype, torch.device)):
        if any(v != first for v in values):
            raise _differ(label, "value", values)
        return None
    if isinstance(first, (list, tuple)):
        if len({len(v) for v in values}) > 1:
            raise _differ(label, "length", [len(v) for v in values])
        return _children([list(v) for v in values], hint, label)
    if isinstance(first, Mapping):
        if any(list(v) != list(first) for v in values):
            raise _differ(label, "keys", [sorted(v) for v in values])
        specs = {k: _walk([v[k] for v in values], _hint(hint, k), f"{label}[{k!r}]") for k in first}
        return specs if any(s is not None for s in specs.values()) else None
    node = pytree.SUPPORTED_NODES.get(type(first))
    if node is not None:  # a registered container (a transformers cache): its flattened children
        flat = [node.flatten_fn(v)[0] for v in values]
        if len({len(f) for f in flat}) > 1:
            raise _differ(label, "number of tensors", [len(f) for f in flat])
        return _children(flat, hint, label)
    return None  # another object: torch.export decides what it means


def _children(flat: list[list[Any]], hint: Any, label: str) -> list[Any] | None:
    specs = [_walk([f[i] for f in flat], _hint(hint, i), f"{label}[{i}]") for i in range(len(flat[0]))]
    return specs if any(s is not None for s in specs) else None


def _tensor(values: list[Any], hint: Any, label: str) -> dict[int, AxisName] | None:
    if not all(isinstance(v, torch.Tensor) for v in values):
        raise _differ(label, "type", [type(v).__name__ for v in values])
    if len({v.dim() for v in values}) > 1:
        raise _differ(label, "rank", [v.dim() for v in values])
    if len({v.dtype for v in values}) > 1:
        raise _differ(label, "type", [v.dtype for v in values])
    axes = {}
    for axis in range(values[0].dim()):
        sizes = tuple(int(v.shape[axis]) for v in values)
        if len(set(sizes)) > 1:
            usual = _hint(hint, axis)
            name = usual if isinstance(usual, str) else "batch" if axis == 0 else f"{_identifier(label)}_{axis}"
            axes[axis] = AxisName(name, label, axis, sizes)
    return axes or None


_ONLY_SIZES = (
    "only the sizes of tensors and the values of int inputs may differ between input sets (a float, a bool or a "
    "string is a constant of the exported graph; a tensor's type and rank are fixed)"
)


def infer_dynamic_shapes(
    forward: Callable[..., Any], sets: list[tuple[tuple, dict]], hint: Mapping[str, Any] | None = None
) -> InferredShapes:
    """The dynamic shapes the sets show, keyed by ``forward``'s argument names, and the set to export with;
    ``hint`` gives the usual names of some axes, in the same form (a transformers model's ``batch``, ``seq``...).

    >>> linear = torch.nn.Linear(3, 2)
    >>> inferred = infer_dynamic_shapes(linear.forward, [((torch.zeros(2, 3),), {}), ((torch.zeros(5, 3),), {})])
    >>> inferred.spec, inferred.chosen
    ({'input': {0: 'batch'}}, 1)
    """
    entries = [input_entries(bind_inputs(forward, args, kwargs), args, kwargs) for args, kwargs in sets]
    names = [[name for name, _, _ in e] for e in entries]
    for i, given in enumerate(names[1:], 2):
        if given != names[0]:
            raise InputMismatchError(
                f"input set {i} gives the inputs {given} but set 1 gives {names[0]}: every set gives the same "
                "inputs (an optional one left out in a set is left out in all)"
            )
    spec = {}
    for j, name in enumerate(names[0]):
        value_spec = _walk([e[j][1] for e in entries], (hint or {}).get(name), name)
        if value_spec is not None:
            spec[name] = value_spec
    return InferredShapes(spec, _largest(spec, len(sets)))


def _axis_names(spec: Any) -> list[AxisName]:
    """The :class:`AxisName` leaves of ``spec``."""
    if isinstance(spec, AxisName):
        return [spec]
    if isinstance(spec, Mapping):
        return [a for s in spec.values() for a in _axis_names(s)]
    if isinstance(spec, (list, tuple)):
        return [a for s in spec for a in _axis_names(s)]
    return []


def _largest(spec: dict[str, Any], count: int) -> int:
    """The set whose smallest dynamic size is the largest (the first of those): torch.export specializes 0 and 1."""
    names = _axis_names(spec)
    scores = [min((a.sizes[i] for a in names), default=0) for i in range(count)]
    return scores.index(max(scores))


def final_names(axes: list[tuple[AxisName, str | None]]) -> dict[int, str]:
    """``{id(axis name): final name}``: one name for the axes of one symbol (``axes`` lists each inferred axis with
    the symbol torch gave it, None when it has none) and for the axes suggested the same name with the same sizes in
    every set (what a user writing the spec would do: torch does not always relate a mask's batch to the ids'); two
    groups never share a name (``batch_2``).

    >>> a, b = AxisName("batch", "x", 0, (2, 3)), AxisName("batch", "y", 0, (2, 3))
    >>> c = AxisName("batch", "z", 0, (4, 5))
    >>> [final_names([(a, "s0"), (b, "s1"), (c, "s2")])[id(n)] for n in (a, b, c)]
    ['batch', 'batch', 'batch_2']
    """
    parent = list(range(len(axes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[Any, int] = {}
    for i, (name, symbol) in enumerate(axes):
        for key in ((str(name), name.sizes), ("symbol", symbol) if symbol is not None else None):
            if key is not None:
                j = first.setdefault(key, i)
                parent[root(i)] = root(j)
    group_name: dict[int, str] = {}
    taken: set[str] = set()
    final: dict[int, str] = {}
    for i, (name, _) in enumerate(axes):
        r = root(i)
        if r not in group_name:
            chosen, n = str(axes[r][0]), 2
            while chosen in taken:
                chosen, n = f"{axes[r][0]}_{n}", n + 1
            taken.add(chosen)
            group_name[r] = chosen
        final[id(name)] = group_name[r]
    return final


def renamed(spec: Any, final: Mapping[int, str]) -> Any:
    """``spec`` with each :class:`AxisName` replaced by its final name (plain strings: the spec shown to the user).

    >>> renamed({"x": {0: AxisName("batch", "x", 0)}}, {})
    {'x': {0: 'batch'}}
    """
    if isinstance(spec, AxisName):
        return final.get(id(spec), str(spec))
    if isinstance(spec, Mapping):
        return {k: renamed(v, final) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(renamed(v, final) for v in spec)
    return spec


__all__ = ["AxisName", "InferredShapes", "final_names", "infer_dynamic_shapes", "read_input_sets", "renamed"]
