"""``BackendOptions(verify=True)``: the first run of each translated graph is compared with the same graph run
eagerly by PyTorch on the same inputs, output by output. When an output differs, the graph is translated again
without optimization and compared with PyTorch node by node
(:func:`~experimental.torch_interpreter.investigate.engine.compare_graph_module`): the error names the first FX
node that differs, its source line and its converter."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch
import torch.fx

from ..errors import VerificationError
from ..investigate.alignment import index_path, pick
from ..investigate.discrepancy_report import DiscrepancyReport
from ..investigate.engine import compare_graph_module
from ..metadata import FX_OUTPUT
from ..translation.interpreter import node_key
from ..translation.registry import Converter, Registry, default_registry
from .compiled_graph import OrtGraph
from .graph_translation import translate_graph

logger = logging.getLogger(__name__)

#: ops whose eager run has effects the onnxruntime run already had (a context consumed by its backward)
_STATEFUL = ("aten2onnx.python_op_train", "aten2onnx.python_op_grad")


def _stateful(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and str(n.target).startswith(_STATEFUL) for n in gm.graph.nodes)


def compare(graph: OrtGraph, got: list[Any], expected: list[Any], rtol: float, atol: float) -> None:
    """Raises :class:`~experimental.torch_interpreter.VerificationError` naming the first output of ``graph``
    that differs from ``expected`` (the eager run)."""
    for i, (g, e) in enumerate(zip(got, expected)):
        if not isinstance(e, torch.Tensor) or not isinstance(g, torch.Tensor):
            if g != e and not (isinstance(e, torch.Tensor) or isinstance(g, torch.Tensor)):
                raise VerificationError(f"{graph.name}: output {i} is {g!r}, PyTorch gives {e!r}")
            continue
        slot = graph.translated.outputs[i]
        producer = graph.translated.producers[slot.index] if slot.kind == "onnx" else f"input {slot.index}"
        if g.shape != e.shape or g.dtype != e.dtype:
            raise VerificationError(
                f"{graph.name}: output {i} (FX node {producer!r}) is {g.dtype}{list(g.shape)}, "
                f"PyTorch gives {e.dtype}{list(e.shape)}"
            )
        if e.is_floating_point():
            ok = torch.allclose(g.float(), e.float(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = torch.equal(g, e)
        if not ok:
            diff = (g.double() - e.double()).abs().max().item()
            raise VerificationError(
                f"{graph.name}: output {i} (FX node {producer!r}) differs from PyTorch by {diff:.3g} (rtol={rtol}, "
                f"atol={atol})"
            )


class _Recording(Registry):
    """``registry`` whose converters also keep the value they return for each FX node (its first call: alias
    tracking calls the converter of a view again later), so that a node whose converter made no ONNX node, only
    handed back a value another node made, is compared too."""

    def __init__(self, registry: Registry):
        super().__init__()
        self.registry = registry
        self.returned: dict[torch.fx.Node, Any] = {}
        self._wrapped: dict[Converter, Converter] = {}

    def get(self, target: Any) -> Converter | None:
        converter = self.registry.get(target)
        if converter is None:
            return None
        if converter not in self._wrapped:

            @functools.wraps(converter)
            def recorded(ctx: Any, *args: Any, **kwargs: Any) -> Any:
                result = converter(ctx, *args, **kwargs)
                self.returned.setdefault(ctx.node, result)
                return result

            self._wrapped[converter] = recorded
        return self._wrapped[converter]

    def supported(self) -> list[str]:
        return self.registry.supported()

    def fallback(self, name: str) -> Converter | None:
        return self.registry.fallback(name)

    def values(self, gm: torch.fx.GraphModule, model: ir.Model) -> dict[str, ir.Value]:
        """The value of ``model`` each top-level node's converter returned, by FX output tag (``max:1``)."""
        graph = model.graph
        by_name = {v.name: v for v in [*graph.inputs, *graph.initializers.values()]}
        by_name.update({v.name: v for node in graph for v in node.outputs})
        found: dict[str, ir.Value] = {}
        for node in gm.graph.nodes:
            if node not in self.returned:
                continue
            for path in index_path(node.meta.get("val")):
                try:
                    value = pick(self.returned[node], path)
                except (IndexError, KeyError, TypeError):
                    continue
                if isinstance(value, ir.Value) and value.name in by_name:
                    found[":".join([node.name, *map(str, path)])] = by_name[value.name]
        return found


def _opset(graph: OrtGraph) -> int:
    return next(o.version for o in graph.model.opset_import if o.domain in ("", "ai.onnx"))


def locate(
    graph: OrtGraph,
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    registry: Registry,
    rtol: float,
    atol: float,
) -> tuple[DiscrepancyReport, ir.Model]:
    """``gm`` translated again by ``registry`` without optimization (for the CPU) and compared with PyTorch node
    by node on ``inputs`` (see :func:`~experimental.torch_interpreter.investigate.engine.compare_graph_module`);
    returns the report and the model compared."""
    recording = _Recording(registry)
    translated = translate_graph(gm, inputs, recording, _opset(graph), "cpu", False)
    model = ir.from_proto(translated.model)
    report = compare_graph_module(
        gm,
        model,
        inputs,
        input_indices=translated.inputs,
        output_nodes=translated.producers,
        values=recording.values(gm, model),
        atol=atol,
        rtol=rtol,
    )
    return report, model


def _made_elsewhere(model: ir.Model, names: Sequence[str], fx_node: str) -> list[str]:
    """What each value of ``names`` the converter of ``fx_node`` did not make is: a graph input, or another FX
    node's value (a converter handing back a value it did not compute)."""
    graph = model.graph
    inputs = {v.name for v in graph.inputs}
    tags = {v.name: v.metadata_props.get(FX_OUTPUT, "") for node in graph for v in node.outputs}
    found = []
    for name in names:
        owner = tags.get(name, "").split(":")[0]
        if name in inputs:
            found.append(f"{name!r} is an input of the graph")
        elif owner and owner != fx_node:
            found.append(f"{name!r} is the value of FX node {owner!r}")
    return found


def _random(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _explain(
    gm: torch.fx.GraphModule, registry: Registry, report: DiscrepancyReport, model: ir.Model, error: Exception
) -> str:
    """``error``'s message followed by the first FX node that differs in ``report`` and its converter, or by
    what the comparison says when every node agrees."""
    compared = (
        f"unoptimized translation, {report.compared}/{report.total} FX nodes producing tensors compared, "
        f"atol={report.atol:g}, rtol={report.rtol:g}"
    )
    first = report.first
    if first is None:
        suspects = ["the optimization of the model (BackendOptions(optimize=...))"]
        if report.skipped:
            suspects.append("a node not compared (" + ", ".join(name for name, _ in report.skipped[:10]) + ")")
        randoms = [n.name for n in gm.graph.nodes if _random(n)]
        if randoms:
            suspects.append(f"a random op ({', '.join(randoms[:10])})")
        return f"{error}\nNode by node ({compared}), no FX node differs from PyTorch: suspect " + " or ".join(suspects)
    node = next(n for n in gm.graph.nodes if n.name == first.fx_node)
    key = node_key(node)
    converter = registry.get(key)
    name = f"{converter.__module__}.{converter.__qualname__}" if converter is not None else "no converter"
    random = " It is a random op: PyTorch and onnxruntime draw different numbers." if _random(node) else ""
    via = f" (found through FX node {first.via})" if first.via else ""
    elsewhere = "" if first.via else "; ".join(_made_elsewhere(model, first.onnx_values, first.fx_node))
    elsewhere = f" ({elsewhere}: the converter handed it back as it is)" if elsewhere else ""
    return (
        f"{error}\nNode by node ({compared}), the first FX node that differs from PyTorch is\n"
        f"{first.describe()}\n"
        f"  ONNX value(s) compared: {', '.join(first.onnx_values)}{via}{elsewhere}\n"
        f"Its converter is {name} (registry key {key!r}).{random}"
    )


def verified(
    graph: OrtGraph, gm: torch.fx.GraphModule, rtol: float, atol: float, registry: Registry | None = None
) -> Any:
    """``graph`` whose first run is compared with ``gm`` run eagerly (not for a graph holding PythonOp training
    nodes, whose eager run would call the user's forward or backward a second time). When an output differs,
    :func:`locate` finds the first FX node that differs with the converters of ``registry`` (default: the
    project's), those ``graph`` was translated with; the :class:`VerificationError` names the node, its source
    line and its converter, its ``report`` is the node-by-node
    :class:`~experimental.torch_interpreter.DiscrepancyReport`."""
    if _stateful(gm):
        logger.info("aten2onnx: %s not verified: its PythonOp nodes would run twice", graph.name)
        return graph
    registry = default_registry if registry is None else registry
    state = {"done": False}

    def run(args: list[Any]) -> list[Any]:
        if state["done"]:
            return graph(args)
        inputs = list(args)
        with torch.no_grad():
            expected = gm(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
        got = graph(args)
        try:
            compare(graph, got, list(expected), rtol, atol)
        except VerificationError as error:
            try:
                report, model = locate(graph, gm, inputs, registry, rtol, atol)
            except Exception as e:  # the comparison only explains the error: it must not hide it
                logger.warning("aten2onnx: %s: the node-by-node comparison failed", graph.name, exc_info=True)
                raise VerificationError(
                    f"{error}\nThe node-by-node comparison failed ({type(e).__name__}: {e}): run find_discrepancies "
                    "on the model saved by BackendOptions(dump_folder=...)"
                ) from e
            raise VerificationError(_explain(gm, registry, report, model, error), report) from error
        state["done"] = True
        logger.info("aten2onnx: %s matches PyTorch on its first inputs", graph.name)
        return got

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
