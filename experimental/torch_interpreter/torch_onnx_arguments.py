"""The arguments of ``torch.onnx.export`` that :func:`~experimental.torch_interpreter.to_onnx` understands:
``opset_version`` (``target_opset``), ``input_names`` and ``output_names`` (the graph's inputs and outputs renamed,
the dynamic axes keep their names), ``dynamic_axes`` (translated into ``dynamic_shapes``, with a warning saying
so), for people who bring them from the official exporter."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

from .errors import DynamicShapeError, InputMismatchError, TorchInterpreterWarning


def resolve_opset(target_opset: int, opset_version: int | None, default: int) -> int:
    """``target_opset``, or ``opset_version`` (``torch.onnx.export``'s name) when given.

    >>> resolve_opset(18, 20, 18)
    20
    """
    if opset_version is None:
        return target_opset
    if target_opset not in (default, opset_version):
        raise InputMismatchError(
            f"opset_version={opset_version} and target_opset={target_opset} disagree: give one of them "
            "(opset_version is torch.onnx.export's name for target_opset)"
        )
    return opset_version


def _positional_names(forward: Any, count: int) -> list[str]:
    params = [
        p.name for p in inspect.signature(forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return params[:count] + [f"args_{i}" for i in range(len(params), count)]


def _axes(name: str, axes: Any) -> dict[int, str]:
    if isinstance(axes, Mapping):
        return {int(a): str(n) for a, n in axes.items()}
    if isinstance(axes, Sequence) and not isinstance(axes, str):
        return {int(a): f"{name}_dim_{int(a)}" for a in axes}
    raise DynamicShapeError(
        f"dynamic_axes[{name!r}] = {axes!r}: expected {{axis: name}} or a list of axes, as torch.onnx.export takes it"
    )


def dynamic_axes_as_shapes(
    forward: Any,
    args: tuple,
    kwargs: dict,
    dynamic_axes: Mapping[str, Any],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
) -> dict[str, dict[int, str]]:
    """``dynamic_shapes`` (keyed by ``forward``'s parameter names) for torch.onnx.export's ``dynamic_axes``, keyed
    by input name (``input_names``, else the parameter names); entries naming an output are dropped (the output's
    axes follow from the inputs'); a list of axes gets names ``<input>_dim_<axis>``. Warns with what it built.

    >>> import torch
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     dynamic_axes_as_shapes(torch.nn.Linear(2, 2).forward, (torch.zeros(1, 2),), {},
    ...                            {"x": {0: "batch"}, "y": [0]}, ["x"], ["y"])
    {'input': {0: 'batch'}}
    """
    params = _positional_names(forward, len(args))
    user = list(input_names or [])
    shown = user + params[len(user):] + list(kwargs)
    keys = params + list(kwargs)
    spec: dict[str, dict[int, str]] = {}
    for name, axes in dynamic_axes.items():
        if name in shown:
            key = keys[shown.index(name)]
            spec[key] = _axes(name, axes)
        elif name not in (output_names or []):
            raise DynamicShapeError(
                f"dynamic_axes names {name!r}, which is neither an input ({shown}) nor an output "
                f"({list(output_names or [])}); name the inputs with input_names or use forward's parameter names"
            )
    warnings.warn(
        f"dynamic_axes (torch.onnx.export's spelling) translated into dynamic_shapes={spec!r}; an output's axes "
        "follow from the inputs'. Pass dynamic_shapes to to_onnx to say it directly.",
        TorchInterpreterWarning,
        stacklevel=3,
    )
    return spec


def _rename(values: Sequence[ir.Value], names: Sequence[str] | None, what: str, taken: set[str]) -> None:
    if names is None:
        return
    names = list(names)
    if len(names) > len(values):
        raise InputMismatchError(
            f"{what}_names has {len(names)} names but the graph has {len(values)} {what}s "
            f"({[v.name for v in values]})"
        )
    for value, name in zip(values, names):
        if name != value.name and name in taken:
            raise InputMismatchError(f"{what}_names: {name!r} is already the name of another value of the graph")
        taken.discard(value.name)
        value.name = name
        taken.add(name)


def rename(model: ir.Model, input_names: Sequence[str] | None, output_names: Sequence[str] | None) -> None:
    """Renames the first inputs and outputs of ``model`` (torch.onnx.export's ``input_names``/``output_names``);
    the dimensions keep their names.

    >>> import torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> m = to_onnx(torch.nn.Linear(2, 2), (torch.zeros(1, 2),), as_ir=True)
    >>> rename(m, ["x"], ["y"]); [v.name for v in m.graph.inputs], [v.name for v in m.graph.outputs]
    (['x'], ['y'])
    """
    if input_names is None and output_names is None:
        return
    taken = {v.name for v in model.graph.inputs} | set(model.graph.initializers)
    taken |= {o.name for node in model.graph for o in node.outputs}
    _rename(list(model.graph.inputs), input_names, "input", taken)
    _rename(list(model.graph.outputs), output_names, "output", taken)
