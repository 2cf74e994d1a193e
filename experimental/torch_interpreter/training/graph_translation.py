"""One of AOTAutograd's graphs (forward or backward) translated into an ONNX model by the project's converters.

The graph is translated as AOTAutograd gives it: its placeholders become the model's inputs (tensors, a complex one
as its real pair ``[..., 2]``, and int64 scalars for the dynamic sizes), its outputs the model's outputs, except what
needs no onnxruntime run: ``None``, Python numbers, and an input returned as it is (handed back without a copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir
import torch
import torch.fx

from ..errors import ConversionError, UnsupportedOpError
from ..optimize import optimize_model
from ..provenance import target_key
from ..translation.complex_pairs import is_complex
from ..translation.context import flatten
from ..translation.interpreter import Interpreter, missing_converters, raise_if_missing
from ..translation.registry import Registry
from .view_outputs import ViewOutputs


#: the wrapper AOTAutograd puts around a call of an op with side effects (its second argument is the op)
WITH_EFFECTS = "higher_order::with_effects"


def _raise_if_missing(gm: torch.fx.GraphModule, registry: Registry) -> None:
    """:func:`~experimental.torch_interpreter.translation.interpreter.raise_if_missing`, where a call of an op with side
    effects is named by that op, not by the ``with_effects`` wrapper (no converter registered for either would run
    it)."""
    missing = missing_converters(gm, registry)
    effects = missing.pop(WITH_EFFECTS, None)
    if not effects:
        raise_if_missing(missing)
        return
    nodes = (n for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes)
    wrapped = {n.name: target_key(n.args[1]) for n in nodes if target_key(n.target) == WITH_EFFECTS}
    message = (
        f"{len(effects)} call(s) of an op with side effects, which torch wraps in {WITH_EFFECTS} and a translated "
        "graph does not run (registering a converter does not change that): "
        + ", ".join(f"{wrapped.get(name, '?')} ({name!r} at {line})" for name, line in effects)
        + "; call it outside the compiled code (in a function decorated with torch.compiler.disable) or remove it"
    )
    try:
        raise_if_missing(missing)
    except UnsupportedOpError as e:
        message = f"{e}\n{message}"
    raise UnsupportedOpError(message, {**missing, WITH_EFFECTS: effects})


@dataclass
class Slot:
    """Where one output of the FX graph comes from: ``"onnx"`` (output ``index`` of the model), ``"input"``
    (input ``index`` of the graph, returned as it is), ``"view"`` (result ``index`` of the views of inputs replayed
    by PyTorch, :mod:`.view_outputs`), ``"value"`` (the Python value ``value``)."""

    kind: str
    index: int = -1
    value: Any = None
    #: a dynamic size the model returns as an int64 scalar: given back as a Python int
    as_int: bool = False
    #: a complex tensor the model returns as its real pair ``[..., 2]``: given back as a complex tensor
    as_complex: bool = False


@dataclass
class TranslatedGraph:
    """The ONNX model of a graph and how to call it."""

    model: onnx.ModelProto
    #: for each model input, the index of the graph input it reads
    inputs: list[int]
    outputs: list[Slot] = field(default_factory=list)
    #: the FX node behind each model output (for the messages of verification)
    producers: list[str] = field(default_factory=list)
    #: the outputs that are views of inputs, replayed by PyTorch
    views: ViewOutputs = field(default_factory=lambda: ViewOutputs(None, {}))


def translate_graph(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    registry: Registry,
    opset: int,
    provider: str,
    optimize: bool | str,
) -> TranslatedGraph:
    """Translates ``gm`` (placeholders typed by ``meta['val']``, or by ``example_inputs``) for ``provider``
    (``"cpu"`` or ``"cuda"``) and optimizes it at ``optimize``; raises
    :class:`~experimental.torch_interpreter.UnsupportedOpError` listing the ops without a converter."""
    _raise_if_missing(gm, registry)
    interpreter = Interpreter.for_model(registry, opset, (provider,))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ConversionError(f"the graph has {len(placeholders)} inputs, {len(example_inputs)} were given")
    env: dict[torch.fx.Node, Any] = {}
    inputs: list[int] = []
    for i, (node, example) in enumerate(zip(placeholders, example_inputs)):
        val = node.meta.get("val", example)
        # a tensor or a dynamic size is an input of the model; an int, a float, None a constant of this graph
        value = interpreter.input(node.name, val) if isinstance(val, (torch.Tensor, torch.SymInt)) else val
        env[node] = value
        if isinstance(value, ir.Value):
            inputs.append(i)
    graph_inputs = {id(env[p]): i for i, p in enumerate(placeholders) if isinstance(env[p], ir.Value)}
    values = interpreter.run(gm, env)
    output_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    fx_outputs = list(flatten(output_node.args[0]))

    slots: list[Slot] = []
    producers: list[str] = []
    seen: dict[int, int] = {}
    views = ViewOutputs.of(gm)
    for position, (value, fx) in enumerate(zip(values, fx_outputs)):
        val = fx.meta.get("val") if isinstance(fx, torch.fx.Node) else fx
        as_int = isinstance(val, torch.SymInt)
        if position in views.positions:
            slots.append(Slot("view", views.positions[position]))
        elif not isinstance(value, ir.Value):
            slots.append(Slot("value", value=value))
        elif id(value) in graph_inputs and not as_int:
            slots.append(Slot("input", graph_inputs[id(value)]))
        elif id(value) in seen:
            slots.append(Slot("onnx", seen[id(value)], as_int=as_int, as_complex=is_complex(val)))
        else:
            seen[id(value)] = len(producers)
            interpreter.output(value, f"output_{len(producers)}")
            slots.append(Slot("onnx", len(producers), as_int=as_int, as_complex=is_complex(val)))
            producers.append(fx.name if isinstance(fx, torch.fx.Node) else str(fx))
    model = interpreter.to_model()
    optimize_model(model, optimize)
    return TranslatedGraph(ir.to_proto(model), inputs, slots, producers, views)
