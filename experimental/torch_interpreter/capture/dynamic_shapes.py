"""Dynamic shapes: the user's spec made acceptable to torch.export, and the symbols named after the user's axes.

Users may name a dynamic axis with a string (``{0: "batch"}``). A string becomes ``Dim.DYNAMIC``:
torch.export raises if the model makes the axis static, but lets it relate to other sizes freely
(``total = past + seq``), which a named ``torch.export.Dim`` would reject. After export, each symbol
(``s43``) is mapped back to the user's name, so one name used by two inputs is one ONNX dimension.
A ``torch.export.Dim`` given by the user is passed as is, and checked by torch as usual.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch.utils._pytree import keystr, tree_flatten_with_path

from ..errors import DynamicShapeError, DynamicShapeWarning, InputMismatchError
from ..logs import warn_at_user


@dataclass(frozen=True)
class DimSpec:
    """The normalized spec: what torch.export receives, and the names to give back.

    Built once by :func:`normalize`; a capture strategy needing another spec makes a new one.
    """

    torch_spec: Any
    #: keystr path of the tensor in ``(args, kwargs)`` -> (label for messages, {axis: user name or None})
    axes: dict[str, tuple[str, dict[int, str | None]]] = field(default_factory=dict)
    #: the inputs a dict spec leaves out: static
    left_out: tuple[str, ...] = ()

    def describe(self) -> str:
        """``x axis 0 ('batch'), mask axis 1 ('seq')``: the axes declared dynamic, for messages.

        >>> x = torch.zeros(2, 3)
        >>> normalize(None, (x,), {}, ({0: "batch"},)).describe()
        "args_0 axis 0 ('batch')"
        """
        return ", ".join(
            f"{label} axis {axis}" + (f" ({name!r})" if name else "")
            for label, names in self.axes.values()
            for axis, name in names.items()
        )


def bind_inputs(forward: Any, args: tuple, kwargs: dict) -> inspect.BoundArguments | None:
    """Binds the inputs to ``forward``'s signature, raising :class:`InputMismatchError` when they do not fit.

    >>> bind_inputs(torch.nn.Linear(2, 2).forward, (torch.zeros(1, 2),), {}).arguments["input"].shape
    torch.Size([1, 2])
    """
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


def _dim_of(spec: Any, where: str) -> tuple[Any, str | None]:
    if isinstance(spec, str):
        if not spec.isidentifier():
            raise DynamicShapeError(
                f"dynamic dimension name {spec!r} at {where} is not a Python identifier; use e.g. 'batch' or 'seq_len'"
            )
        return torch.export.Dim.DYNAMIC, spec
    if isinstance(spec, torch.export.Dim):
        return spec, spec.__name__
    return spec, None


def _is_axes(spec: Mapping) -> bool:
    return bool(spec) and all(isinstance(k, int) for k in spec)


def _walk(value: Any, spec: Any, path: str, label: str, axes: dict) -> Any:
    """Checks ``spec`` against ``value``; ``path`` locates it in ``(args, kwargs)``, ``label`` for messages."""
    if spec is None:
        return None
    if isinstance(value, torch.Tensor):
        spec_shown, listed = spec, isinstance(spec, (list, tuple))
        if listed:
            spec = {i: s for i, s in enumerate(spec) if s is not None}
        if not isinstance(spec, Mapping):
            raise DynamicShapeError(
                f"the dynamic shape of input {label} must be a dict {{axis: name}} or a list with one entry "
                f"per axis, not {type(spec).__name__}"
            )
        out, names = {}, {}
        for axis, dim in spec.items():
            if not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                raise DynamicShapeError(
                    f"input {label} has shape {tuple(value.shape)} (rank {value.dim()}) but the dynamic shape "
                    f"spec names axis {axis!r}"
                )
            axis = axis % value.dim()
            if isinstance(dim, int) and not isinstance(dim, bool) and dim != value.shape[axis]:
                raise DynamicShapeError(
                    f"the dynamic shape of input {label} is {spec_shown!r}: a list gives one entry per axis (a name, "
                    f"a torch.export.Dim, a size or None), so {dim} would fix axis {axis} to size {dim} while the "
                    f"input has {value.shape[axis]}; to make an axis dynamic, name it: {{{dim}: 'batch'}} "
                    "(torch.onnx.export's list of dynamic axes is dynamic_axes=, keyed by input name)"
                    if listed else
                    f"the dynamic shape of input {label} fixes axis {axis} to size {dim} while the input has "
                    f"{value.shape[axis]}; to make the axis dynamic, name it: {{{axis}: 'batch'}}"
                )
            out[axis], name = _dim_of(dim, f"{label} axis {axis}")
            if dim is not torch.export.Dim.AUTO:  # Dim.AUTO lets torch.export choose; static is an answer
                names[axis] = name
        axes[path] = (label, names)
        return out
    if value is None:  # an optional input left out: nothing to declare
        return None
    if isinstance(value, (list, tuple)) and isinstance(spec, Mapping) and _is_axes(spec):
        if value and all(isinstance(v, torch.Tensor) for v in value):
            # one spec for every tensor of a list (of any length): element i's axes are named `name_i`
            spec = [{a: f"{d}_{i}" if isinstance(d, str) else d for a, d in spec.items()} for i in range(len(value))]
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        if len(value) != len(spec):
            raise DynamicShapeError(
                f"input {label} has {len(value)} elements but its dynamic shape spec has {len(spec)}; give one "
                "entry per element (None for a static one), or one dict {axis: name} for every element"
            )
        walked = [_walk(v, s, f"{path}[{i}]", f"{label}[{i}]", axes) for i, (v, s) in enumerate(zip(value, spec))]
        # torch.export wants the container type of the input (a list spec for a list input)
        return list(walked) if isinstance(value, list) else type(spec)(walked)
    if isinstance(value, Mapping) and isinstance(spec, Mapping):
        unknown = set(spec) - set(value)
        if unknown:
            raise DynamicShapeError(f"dynamic shape spec of {label} names unknown keys {sorted(unknown)}")
        return {k: _walk(value[k], s, f"{path}[{k!r}]", f"{label}[{k!r}]", axes) for k, s in spec.items()}
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is not None and isinstance(spec, (list, tuple)):  # a registered container (e.g. a cache)
        if node.flatten_with_keys_fn is not None:
            keyed, _ = node.flatten_with_keys_fn(value)
        else:
            children, _ = node.flatten_fn(value)
            keyed = [(pytree.SequenceKey(i), c) for i, c in enumerate(children)]
        if len(keyed) != len(spec):
            raise DynamicShapeError(
                f"input {label} ({type(value).__name__}) flattens into {len(keyed)} tensors but its dynamic "
                f"shape spec has {len(spec)} entries"
            )
        return type(spec)(
            _walk(child, s, path + keystr((key,)), label + keystr((key,)), axes)
            for (key, child), s in zip(keyed, spec)
        )
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(spec, (str, torch.export.Dim)):
        # a Python int declared dynamic: a 0-D int64 input (torch.export takes only Dim.DYNAMIC/AUTO for ints)
        return _dim_of(spec, label)[0] if isinstance(spec, str) else spec
    # other objects: torch.export checks them itself
    return spec


def input_entries(bound: inspect.BoundArguments | None, args: tuple, kwargs: dict) -> list[tuple[str, Any, Any]]:
    """``(parameter name, value, path)`` per bound argument; for ``*args`` the value is a tuple and
    the path a list of paths (one per element)."""
    if bound is None:
        return [(f"args_{i}", a, f"[0][{i}]") for i, a in enumerate(args)] + [
            (k, v, f"[1][{k!r}]") for k, v in kwargs.items()
        ]
    entries, position = [], 0
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            entries.append((name, value, [f"[0][{position + j}]" for j in range(len(value))]))
            position += len(value)
        elif kind == inspect.Parameter.VAR_KEYWORD:
            entries.append((name, value, {k: f"[1][{k!r}]" for k in value}))
        elif kind != inspect.Parameter.KEYWORD_ONLY and position < len(args):
            entries.append((name, value, f"[0][{position}]"))
            position += 1
        else:
            entries.append((name, value, f"[1][{name!r}]"))
    return entries


def _walk_entry(name: str, value: Any, path: Any, spec: Any, axes: dict) -> Any:
    if isinstance(path, list):  # *args: one spec per element
        if spec is None:
            return None
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise DynamicShapeError(f"the dynamic shapes of *{name} must be a tuple of {len(value)} entries")
        return tuple(_walk(v, s, p, f"{name}[{i}]", axes) for i, (v, p, s) in enumerate(zip(value, path, spec)))
    if isinstance(path, dict):  # **kwargs
        if spec is None:
            return None
        return {k: _walk(value[k], s, path[k], k, axes) for k, s in spec.items()}
    return _walk(value, spec, path, name, axes)


def normalize(bound: inspect.BoundArguments | None, args: tuple, kwargs: dict, dynamic_shapes: Any) -> DimSpec:
    """Replaces string names by ``Dim.DYNAMIC`` and checks the spec against the inputs.

    ``dynamic_shapes`` is a dict keyed by argument name, or a tuple with one entry per argument; for
    a ``forward(*args)`` the tuple may also have one entry per positional input.

    >>> linear = torch.nn.Linear(2, 2)
    >>> x = torch.zeros(3, 2)
    >>> spec = normalize(bind_inputs(linear.forward, (x,), {}), (x,), {}, {"input": {0: "batch"}})
    >>> spec.torch_spec == {"input": {0: torch.export.Dim.DYNAMIC}}, spec.axes
    (True, {'[0][0]': ('input', {0: 'batch'})})
    """
    if dynamic_shapes is None:
        return DimSpec(None)
    axes: dict[str, tuple[str, dict[int, str | None]]] = {}
    entries = input_entries(bound, args, kwargs)
    if isinstance(dynamic_shapes, Mapping):
        names = [e[0] for e in entries]
        unknown = set(dynamic_shapes) - set(names)
        if unknown:
            hint = ""
            if all(isinstance(k, int) for k in dynamic_shapes) and len(names) >= 1:
                shown = dict(dynamic_shapes)
                hint = (f": {shown!r} reads as the axes of one input; wrap it in a tuple, one entry per positional "
                        f"input (dynamic_shapes=({shown!r},)), or name the input "
                        f"(dynamic_shapes={{{names[0]!r}: {shown!r}}})")
            raise DynamicShapeError(f"dynamic_shapes names {sorted(unknown)} but the inputs are {names}{hint}")
        # an input left out is static, as in torch.onnx.export's dynamic_axes (torch.export wants every name)
        spec = {
            name: _walk_entry(name, value, path, dynamic_shapes[name], axes) if name in dynamic_shapes else None
            for name, value, path in entries
        }
        return DimSpec(spec, axes, tuple(name for name, _, _ in entries if name not in dynamic_shapes))
    if not isinstance(dynamic_shapes, (list, tuple)):
        raise DynamicShapeError(
            f"dynamic_shapes must be a tuple (one entry per input) or a dict keyed by argument name, "
            f"not {type(dynamic_shapes).__name__}"
        )
    var = [i for i, e in enumerate(entries) if isinstance(e[2], list)]
    n_flat = sum(len(e[1]) if isinstance(e[2], list) else 1 for e in entries)
    native = len(dynamic_shapes) == len(entries) and all(
        isinstance(dynamic_shapes[i], (list, tuple)) and len(dynamic_shapes[i]) == len(entries[i][1])
        or dynamic_shapes[i] is None
        for i in var
    )
    if var and len(dynamic_shapes) == n_flat and not native:
        # one entry per positional input: group the *args part as torch.export expects
        i, grouped = var[0], list(dynamic_shapes)
        width = len(entries[i][1])
        grouped[i : i + width] = [tuple(grouped[i : i + width])]
        dynamic_shapes = type(dynamic_shapes)(grouped)
    if len(dynamic_shapes) != len(entries):
        raise DynamicShapeError(
            f"dynamic_shapes has {len(dynamic_shapes)} entries but the model receives {len(entries)} inputs; "
            "give one entry per input (None for a static one) or a dict keyed by argument name"
        )
    spec = type(dynamic_shapes)(
        _walk_entry(name, value, path, s, axes) for (name, value, path), s in zip(entries, dynamic_shapes)
    )
    return DimSpec(spec, axes)


def symbol_names(ep: torch.export.ExportedProgram, spec: DimSpec, args: tuple, kwargs: dict) -> dict[str, str]:
    """Maps each symbol of the user inputs (``s43``) to the user's name (``batch``).

    Raises :class:`DynamicShapeError` when an axis the user declared dynamic was made static.

    >>> x = torch.zeros(3, 2)
    >>> spec = normalize(None, (x,), {}, ({0: "batch"},))
    >>> ep = torch.export.export(torch.nn.ReLU(), (x,), dynamic_shapes=spec.torch_spec)
    >>> list(symbol_names(ep, spec, (x,), {}).values())
    ['batch']
    """
    names: dict[str, str] = {}
    first: dict[str, str] = {}  # symbol -> the first axis named, for the message
    merged: list[str] = []
    for label, axis, name, symbol in axis_symbols(ep, spec, args, kwargs):
        if name and symbol is not None:
            if names.setdefault(symbol, name) != name:
                merged.append(f"{label} axis {axis} ({name!r}) is {first[symbol]}")
            first.setdefault(symbol, f"{label} axis {axis} ({names[symbol]!r})")
    if merged:
        warn_at_user(
            f"the model makes axes named differently equal: {'; '.join(merged)}; the ONNX model gives each such "
            "dimension its first name (give them one name to silence this)", DynamicShapeWarning)
    return names


def axis_symbols(
    ep: torch.export.ExportedProgram, spec: DimSpec, args: tuple, kwargs: dict
) -> list[tuple[str, int, str | None, str | None]]:
    """``(label, axis, name, symbol)`` for each tensor axis declared dynamic: the symbol torch.export gave it
    (``s43``; None when the size is an expression of others).

    Raises :class:`DynamicShapeError` when an axis the user declared dynamic was made static.

    >>> x = torch.zeros(3, 2)
    >>> spec = normalize(None, (x,), {}, ({0: "batch"},))
    >>> ep = torch.export.export(torch.nn.ReLU(), (x,), dynamic_shapes=spec.torch_spec)
    >>> [(label, axis, name) for label, axis, name, _ in axis_symbols(ep, spec, (x,), {})]
    [('args_0', 0, 'batch')]
    """
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    user_nodes = [
        n
        for n, s in zip(placeholders, ep.graph_signature.input_specs)
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    in_spec = ep.call_spec.in_spec
    if in_spec is None or not spec.axes:
        return []
    # flatten the real inputs (custom containers flatten with their own keys) in torch.export's order
    kw_keys = in_spec.children()[1].context if in_spec.num_children == 2 else None
    ordered = {k: kwargs[k] for k in kw_keys} if kw_keys is not None else kwargs
    paths = [keystr(p) for p, _ in tree_flatten_with_path((args, ordered))[0]]
    nodes_by_path = dict(zip(paths, user_nodes))
    found = []
    for path, (label, axes) in spec.axes.items():
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
            found.append((label, axis, name, str(expr) if isinstance(expr, sympy.Symbol) else None))
    return found
