"""The arguments of ``torch.onnx.export`` that :func:`~experimental.torch_interpreter.to_onnx` understands:
``opset_version`` (``target_opset``), ``input_names`` and ``output_names`` (the graph's inputs and outputs renamed,
the dynamic axes keep their names), ``dynamic_axes`` (translated into ``dynamic_shapes``, with a warning saying
so), ``f`` (``filename``), and the keywords whose value matches what ``to_onnx`` does (:func:`torch_onnx_options`),
for people who bring them from the official exporter."""

from __future__ import annotations

import difflib
import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

from .errors import ArgumentError, DynamicShapeError, InputMismatchError, TorchInterpreterWarning


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


#: torch.onnx.export's keywords to_onnx has no parameter for: the value meaning what to_onnx does, and what to do
#: for another one
_SAME_AS_TO_ONNX = {
    "export_params": (True, "to_onnx always stores the weights in the model (external_data=True puts them in a "
                            "'.data' file next to it)"),
    "do_constant_folding": (True, "to_onnx folds constants with optimize=True (the default); optimize=False keeps "
                                  "the graph as translated"),
    "keep_initializers_as_inputs": (False, "to_onnx keeps the weights as initializers; onnxruntime replaces one at "
                                           "run time with SessionOptions.add_initializer"),
    "dynamo": (True, "to_onnx always captures with torch.export, the path of torch.onnx.export(..., dynamo=True); "
                     "dynamo=False is torch.onnx.export's TorchScript exporter"),
}


def _training(model: Any, value: Any) -> None:
    mode = getattr(value, "name", str(value)).upper()
    training = bool(getattr(model, "training", False))
    if mode == "PRESERVE" or (mode == "EVAL" and not training) or (mode == "TRAINING" and training):
        return
    call = "model.eval()" if mode == "EVAL" else "model.train()"
    raise ArgumentError(
        f"training=torch.onnx.TrainingMode.{mode} while the model is in {'training' if training else 'eval'} mode: to_onnx exports the "
        f"model in the mode it is in, call {call} before to_onnx"
    )


def torch_onnx_options(model: Any, filename: Any, options: dict[str, Any], parameters: Sequence[str] = ()) -> Any:
    """Reads the keywords of ``torch.onnx.export`` given to ``to_onnx`` beyond its own ``parameters``: ``f`` is
    the ``filename`` (returned), a keyword whose value means what to_onnx does anyway is accepted, any other value
    or keyword raises :class:`ArgumentError` saying what to do (the closest parameter names for a typo).

    >>> torch_onnx_options(None, None, {"f": "model.onnx", "do_constant_folding": True, "dynamo": True})
    'model.onnx'
    >>> torch_onnx_options(None, None, {"export_params": False})
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.ArgumentError: export_params=False (a keyword of torch.onnx.export): to_onnx always stores the weights in the model (external_data=True puts them in a '.data' file next to it)
    """
    for key, value in options.items():
        if key == "f":
            if filename is not None:
                raise ArgumentError("f= and filename= are both given: f is torch.onnx.export's name for filename")
            filename = value
        elif key == "training":
            _training(model, value)
        elif key in _SAME_AS_TO_ONNX:
            same, advice = _SAME_AS_TO_ONNX[key]
            if value != same:
                raise ArgumentError(f"{key}={value!r} (a keyword of torch.onnx.export): {advice}")
        else:
            close = difflib.get_close_matches(key, [*parameters, "f", "training", *_SAME_AS_TO_ONNX], n=3)
            raise ArgumentError(
                f"unexpected keyword {key}={value!r}"
                + (f"; did you mean {', '.join(close)}?" if close else "")
                + " (to_onnx takes torch.onnx.export's input_names, output_names, opset_version, dynamic_axes, f, "
                "and export_params, do_constant_folding, keep_initializers_as_inputs, dynamo, training where their "
                "value matches what it does)"
            )
    return filename
