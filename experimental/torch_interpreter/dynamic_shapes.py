"""Dynamic shapes: the user's spec made acceptable to torch.export, and ONNX names for symbolic dims.

Users may name a dynamic axis with a string (``{0: "batch"}``). Every string becomes one shared
``torch.export.Dim`` of that name, so one name used by two inputs is one dimension, checked by torch.
After export, each symbol (``s43``) is mapped back to the user's name for the ONNX graph.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch.utils._pytree import keystr, tree_flatten_with_path, tree_unflatten

from .errors import DynamicShapeError, InputMismatchError


@dataclass
class DimSpec:
    """The normalized spec: what torch.export receives, and the names to give back."""

    torch_spec: Any
    #: keystr path of the tensor in ``(args, kwargs)`` -> {axis: user name or None}
    axes: dict[str, dict[int, str | None]] = field(default_factory=dict)


def bind_inputs(forward: Any, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    """Binds the inputs to ``forward``'s signature, raising :class:`InputMismatchError` when they do not fit."""
    try:
        sig = inspect.signature(forward)
    except (TypeError, ValueError):  # builtins without a signature
        return None
    try:
        return sig.bind(*args, **kwargs)
    except TypeError as e:
        raise InputMismatchError(
            f"the inputs do not match {type(getattr(forward, '__self__', forward)).__name__}.forward{sig}: {e}. "
            "Pass positional inputs in `args` (a tuple) and keyword inputs in `kwargs` (a dict)."
        ) from None


def _dim_of(spec: Any, shared: dict[str, torch.export.Dim], where: str) -> tuple[Any, str | None]:
    if isinstance(spec, str):
        if not spec.isidentifier():
            raise DynamicShapeError(
                f"dynamic dimension name {spec!r} at {where} is not a Python identifier; use e.g. 'batch' or 'seq_len'"
            )
        if spec not in shared:
            shared[spec] = torch.export.Dim(spec)
        return shared[spec], spec
    if isinstance(spec, torch.export.Dim):
        return spec, spec.__name__
    return spec, None


def _walk(value: Any, spec: Any, path: str, shared: dict, axes: dict) -> Any:
    if spec is None:
        return None
    if isinstance(value, torch.Tensor):
        if isinstance(spec, (list, tuple)):
            spec = {i: s for i, s in enumerate(spec) if s is not None}
        if not isinstance(spec, Mapping):
            raise DynamicShapeError(
                f"the dynamic shape of input {path} must be a dict {{axis: name}} or a list with one entry "
                f"per axis, not {type(spec).__name__}"
            )
        out, names = {}, {}
        for axis, dim in spec.items():
            if not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                raise DynamicShapeError(
                    f"input {path} has shape {tuple(value.shape)} (rank {value.dim()}) but the dynamic shape "
                    f"spec names axis {axis!r}"
                )
            axis = axis % value.dim()
            out[axis], names[axis] = _dim_of(dim, shared, f"{path} axis {axis}")
        axes[path] = names
        return out
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        if len(value) != len(spec):
            raise DynamicShapeError(f"input {path} has {len(value)} elements but its dynamic shape spec has {len(spec)}")
        return type(spec)(_walk(v, s, f"{path}[{i}]", shared, axes) for i, (v, s) in enumerate(zip(value, spec)))
    if isinstance(value, Mapping) and isinstance(spec, Mapping):
        unknown = set(spec) - set(value)
        if unknown:
            raise DynamicShapeError(f"dynamic shape spec of {path} names unknown keys {sorted(unknown)}")
        return {k: _walk(value[k], s, f"{path}[{k!r}]", shared, axes) for k, s in spec.items()}
    # other containers (e.g. a cache object): torch.export checks them itself
    return spec


def normalize(bound: inspect.BoundArguments | None, args: tuple, kwargs: dict, dynamic_shapes: Any) -> DimSpec:
    """Replaces string names by shared ``torch.export.Dim`` and checks the spec against the inputs."""
    if dynamic_shapes is None:
        return DimSpec(None)
    shared: dict[str, torch.export.Dim] = {}
    axes: dict[str, dict[int, str | None]] = {}
    # paths of each top-level input inside (args, kwargs), as torch.export flattens them
    positions = {}
    for i in range(len(args)):
        positions[i] = f"[0][{i}]"
    names = list(bound.arguments) if bound is not None else []
    by_name = {}
    for i, name in enumerate(names[: len(args)]):
        by_name[name] = (args[i], f"[0][{i}]")
    for key, val in kwargs.items():
        by_name[key] = (val, f"[1][{key!r}]")
    if isinstance(dynamic_shapes, Mapping):
        unknown = set(dynamic_shapes) - set(by_name)
        if unknown:
            raise DynamicShapeError(
                f"dynamic_shapes names {sorted(unknown)} but the inputs are {sorted(by_name)}"
            )
        spec = {k: _walk(by_name[k][0], s, by_name[k][1], shared, axes) for k, s in dynamic_shapes.items()}
    elif isinstance(dynamic_shapes, (list, tuple)):
        ordered = list(by_name.values()) if by_name else [(a, positions[i]) for i, a in enumerate(args)]
        if len(dynamic_shapes) != len(ordered):
            raise DynamicShapeError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries but the model receives {len(ordered)} inputs; "
                "give one entry per input (None for a static one) or a dict keyed by argument name"
            )
        spec = type(dynamic_shapes)(
            _walk(v, s, p, shared, axes) for (v, p), s in zip(ordered, dynamic_shapes)
        )
    else:
        raise DynamicShapeError(
            f"dynamic_shapes must be a tuple (one entry per input) or a dict keyed by argument name, "
            f"not {type(dynamic_shapes).__name__}"
        )
    return DimSpec(spec, axes)


def symbol_names(ep: torch.export.ExportedProgram, spec: DimSpec) -> dict[str, str]:
    """Maps each symbol of the user inputs (``s43``) to the user's name (``batch``).

    Raises :class:`DynamicShapeError` when an axis the user declared dynamic was made static.
    """
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user_nodes = [
        n
        for n, s in zip(placeholders, ep.graph_signature.input_specs)
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    in_spec = ep.call_spec.in_spec
    if in_spec is None or not spec.axes:
        return {}
    paths = [keystr(p) for p, _ in tree_flatten_with_path(tree_unflatten(list(range(in_spec.num_leaves)), in_spec))[0]]
    nodes_by_path = dict(zip(paths, user_nodes))
    names: dict[str, str] = {}
    for path, axes in spec.axes.items():
        node = nodes_by_path.get(path)
        val = node.meta.get("val") if node is not None else None
        if not isinstance(val, torch.Tensor):
            continue
        for axis, name in axes.items():
            dim = val.shape[axis]
            if not isinstance(dim, torch.SymInt):
                raise DynamicShapeError(
                    f"axis {axis} of input {node.name!r} was declared dynamic"
                    f"{f' ({name!r})' if name else ''} but torch.export made it static ({dim}). "
                    "The model's code fixes this size; change the model or declare the axis static."
                )
            expr = dim.node.expr
            if name and isinstance(expr, sympy.Symbol):
                names.setdefault(str(expr), name)
    return names


def onnx_dim(dim: Any, names: Mapping[str, str]) -> int | str:
    """An ONNX dimension: an int, or a symbolic name with user names substituted.

    >>> onnx_dim(3, {})
    3
    """
    if isinstance(dim, int):
        return dim
    if isinstance(dim, torch.SymInt):
        expr = dim.node.expr
        if expr.is_number:
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            return names.get(str(expr), str(expr))
        return str(expr.xreplace({s: sympy.Symbol(names.get(str(s), str(s))) for s in expr.free_symbols}))
    return str(dim)
