"""Runs an ``ExportedProgram``, or any ``GraphModule`` on flat inputs, node by node in PyTorch and keeps every FX
node's result."""

from __future__ import annotations

import copy
import logging
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind
from torch.utils import _pytree

logger = logging.getLogger(__name__)


def flat_inputs(ep: torch.export.ExportedProgram, args: Any, kwargs: dict[str, Any] | None) -> list[Any]:
    """The inputs of ``ep.graph_module`` in placeholder order: weights, buffers and constants first
    (as ``ep.graph_signature.input_specs`` lists them), then the user inputs flattened with pytree.

    >>> import torch
    >>> ep = torch.export.export(torch.nn.Linear(2, 3), (torch.randn(1, 2),))
    >>> [tuple(t.shape) for t in flat_inputs(ep, (torch.randn(1, 2),), None)]
    [(3, 2), (3,), (1, 2)]
    """
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    return list(ep._graph_module_flat_inputs(args, kwargs or {}))


def user_inputs(ep: torch.export.ExportedProgram, flat: list[Any]) -> list[Any]:
    """The user inputs among ``flat`` (see :func:`flat_inputs`), in placeholder order."""
    return [v for v, spec in zip(flat, ep.graph_signature.input_specs) if spec.kind == InputKind.USER_INPUT]


class _Recorder(torch.fx.Interpreter):
    """A ``torch.fx.Interpreter`` keeping a copy of every ``call_function`` result (in-place ops
    later in the graph cannot change what was recorded)."""

    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.results: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "call_function":
            self.results[n.name] = _pytree.tree_map(
                lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, result
            )
        return result


def run_graph_module(
    gm: torch.fx.GraphModule, inputs: Any, clone: bool = True
) -> tuple[dict[str, Any], list[Any]]:
    """Runs ``gm`` on ``inputs`` (one per placeholder, in order; with ``clone``, the tensors are cloned first: the
    graph may modify its inputs in place) without gradients; returns the result of every top-level
    ``call_function`` node by FX name, and the flat outputs of the graph.

    >>> import torch
    >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    >>> results, outputs = run_graph_module(gm, [torch.tensor([-1.0, 2.0])])
    >>> sorted(results), outputs
    (['add', 'relu'], [tensor([1., 3.])])
    """
    flat = [t.detach().clone() if clone and isinstance(t, torch.Tensor) else t for t in inputs]
    recorder = _Recorder(gm)
    with torch.no_grad():
        outputs = recorder.run(*flat, enable_io_processing=False)
    flat_out = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return recorder.results, flat_out


def run_exported_program(
    ep: torch.export.ExportedProgram, args: Any, kwargs: dict[str, Any] | None
) -> tuple[dict[str, Any], list[Any]]:
    """Runs ``ep.graph_module`` on the inputs; returns the result of every top-level ``call_function``
    node by FX name, and the flat outputs of the graph.

    >>> import torch
    >>> ep = torch.export.export(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), (torch.randn(1, 2),))
    >>> results, outputs = run_exported_program(ep, (torch.randn(1, 2),), None)
    >>> sorted(results), len(outputs)
    (['linear', 'relu'], 1)
    """
    args, kwargs = copy.deepcopy((args, kwargs))  # the graph may modify its inputs in place
    return run_graph_module(ep.graph_module, flat_inputs(ep, args, kwargs), clone=False)
