"""Checks around capture that turn silent or late failures into a clear message at the call.

- a model left in training mode: :class:`TrainingModeWarning` naming the modules whose ``forward``
  depends on ``self.training`` (dropout draws random masks, batch norm uses the batch statistics).
  A warning rather than an error: exporting a training graph is legitimate, forgetting ``eval()`` is
  the common mistake, and the warning names what to change;
- a model returning no tensor: :class:`InvalidModelError` instead of a graph without outputs;
- Python scalars baked into the graph: :class:`ConstantInputWarning` with their names and values (recorded in
  the model's metadata; the runtime refuses a feed for them).
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from ..errors import ConstantInputWarning, InvalidModelError, TrainingModeWarning
from ..logs import warn_at_user

logger = logging.getLogger(__name__)

#: modules known to behave differently in training mode (checked by class, before the source heuristic)
_TRAINING_CLASSES: tuple[type, ...] = (
    torch.nn.modules.dropout._DropoutNd,
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.modules.instancenorm._InstanceNorm,
    torch.nn.RReLU,
)


@functools.lru_cache(maxsize=256)
def _forward_reads_training(cls: type) -> bool:
    """Whether ``cls.forward`` (own code, not torch's) reads ``self.training``."""
    forward = cls.__dict__.get("forward")
    if forward is None or cls.__module__.startswith("torch."):
        return False
    try:
        source = inspect.getsource(forward)
    except (OSError, TypeError):
        return False
    return "self.training" in source


def training_modules(model: torch.nn.Module) -> list[str]:
    """Qualified names (and classes) of the submodules in training mode whose behaviour differs in eval mode.

    >>> m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1))
    >>> training_modules(m)
    ['1 (Dropout)']
    >>> training_modules(m.eval())
    []
    """
    found = []
    for name, module in model.named_modules():
        if not module.training:
            continue
        if isinstance(module, torch.nn.modules.instancenorm._InstanceNorm) and not module.track_running_stats:
            continue  # instance norm without running stats computes the same thing in both modes
        if isinstance(module, _TRAINING_CLASSES) or _forward_reads_training(type(module)):
            found.append(f"{name or '<model>'} ({type(module).__name__})")
    return found


def warn_training_mode(model: torch.nn.Module) -> None:
    """Emits :class:`TrainingModeWarning` when ``model`` is in training mode with mode-dependent modules.

    >>> warn_training_mode(torch.nn.Linear(2, 2))  # in training mode, but nothing depends on it: no warning
    """
    if not model.training:
        return
    names = training_modules(model)
    if not names:
        return
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    warn_at_user(
        f"the model is in training mode and these modules behave differently in eval mode: {shown}. "
        "The ONNX graph reproduces training behaviour (random dropout masks, batch statistics); call "
        "model.eval() before to_onnx for an inference graph.",
        TrainingModeWarning,
    )


def check_outputs(ep: torch.export.ExportedProgram) -> None:
    """Raises :class:`InvalidModelError` when the captured model returns no tensor.

    >>> check_outputs(torch.export.export(torch.nn.ReLU(), (torch.zeros(2),)))  # a tensor: nothing to say
    """
    output = next(n for n in ep.graph.nodes if n.op == "output")
    values = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    user = [
        v for v, spec in zip(values, ep.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT
    ]
    if any(isinstance(v, torch.fx.Node) and isinstance(v.meta.get("val"), (torch.Tensor, torch.SymInt)) for v in user):
        return
    shown = [v.meta.get("val") if isinstance(v, torch.fx.Node) else v for v in user]
    raise InvalidModelError(
        f"the model returns no tensor (its outputs are {shown!r}): an ONNX graph needs at least one output. "
        "Return the tensors to export from forward (a model returning None only has side effects)."
    )


def constant_inputs(ep: torch.export.ExportedProgram) -> dict[str, Any]:
    """The user inputs torch.export baked into the graph as constants (Python scalars, strings, None
    excluded), by input name.

    >>> class Scale(torch.nn.Module):
    ...     def forward(self, x, alpha: float):
    ...         return x * alpha
    >>> constant_inputs(torch.export.export(Scale(), (torch.ones(2), 0.5)))
    {'alpha': 0.5}
    """
    found = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind != InputKind.USER_INPUT:
            continue
        value = getattr(spec.arg, "value", None)
        if isinstance(value, (bool, int, float, complex)):
            found[spec.arg.name] = value
    return found


def warn_constant_inputs(constants: dict[str, Any]) -> None:
    """Emits :class:`ConstantInputWarning` naming the scalars that became constants.

    >>> warn_constant_inputs({})  # none: no warning
    """
    if not constants:
        return
    shown = ", ".join(f"{name}={value!r}" for name, value in constants.items())
    warn_at_user(
        f"Python scalar inputs were baked into the graph as constants: {shown}. The ONNX model has no input "
        "for them and computes with these values whatever is given at run time. Pass a tensor instead, or, "
        "for an int, declare it dynamic (dynamic_shapes={name: 'n'}) to get a 0-D int64 input.",
        ConstantInputWarning,
    )
