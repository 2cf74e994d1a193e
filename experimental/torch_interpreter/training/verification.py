"""``BackendOptions(verify=True)``: the first run of each translated graph is compared with the same graph run
eagerly by PyTorch on the same inputs, output by output."""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.fx

from ..errors import VerificationError
from .compiled_graph import OrtGraph

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
                f"atol={atol}); find the converter with find_discrepancies on the ONNX model saved by "
                "BackendOptions(dump_folder=...)"
            )


def verified(graph: OrtGraph, gm: torch.fx.GraphModule, rtol: float, atol: float) -> Any:
    """``graph`` whose first run is compared with ``gm`` run eagerly (not for a graph holding PythonOp training
    nodes, whose eager run would call the user's forward or backward a second time)."""
    if _stateful(gm):
        logger.info("aten2onnx: %s not verified: its PythonOp nodes would run twice", graph.name)
        return graph
    state = {"done": False}

    def run(args: list[Any]) -> list[Any]:
        if state["done"]:
            return graph(args)
        inputs = list(args)
        with torch.no_grad():
            expected = gm(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
        got = graph(args)
        compare(graph, got, list(expected), rtol, atol)
        state["done"] = True
        logger.info("aten2onnx: %s matches PyTorch on its first inputs", graph.name)
        return got

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
