"""Outputs of an AOTAutograd graph that are views of its inputs, replayed in PyTorch on the real inputs.

onnxruntime returns new contiguous buffers. AOTAutograd rebuilds an output that aliases an input from the compiled
graph's output: ``input.as_strided(out.size(), out.stride(), out.storage_offset())``; with a copy (offset 0,
contiguous strides) instead of the view (``x[..., 2:]``: offset 2), it reads other elements of the input: wrong
numbers. Such outputs are not computed by onnxruntime: the chain of view ops (``slice``, ``view``, ``transpose``,
``select``...) and the size arithmetic it reads are cut out of the FX graph and run by PyTorch on the call's inputs
(views cost no copy), so the output has eager's strides and storage offset.

>>> import torch
>>> from torch.fx import symbolic_trace
>>> gm = symbolic_trace(lambda x: (torch.ops.aten.slice.Tensor(x, 1, 1, 3), x * 2))
>>> replay = ViewOutputs.of(gm)
>>> replay.positions
{0: 0}
>>> x = torch.arange(8.0).reshape(2, 4)
>>> replay([x])[0].storage_offset()
1
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from ..translation.context import flatten


def _is_view(node: torch.fx.Node) -> bool:
    """An op whose results all alias its first argument without writing it (its schema says ``Tensor(a)``)."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None or not schema.returns or not schema.arguments:
        return False
    if schema.arguments[0].alias_info is None:
        return False
    return all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _base_placeholder(node: Any) -> torch.fx.Node | None:
    """The graph input ``node`` is a view of (through view ops and ``getitem`` of their lists), else None."""
    while isinstance(node, torch.fx.Node):  # an FX graph has no cycle: the walk ends
        if node.op == "placeholder":
            return node
        if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            node = node.args[0]
            continue
        if not _is_view(node):
            return None
        node = node.args[0]
    return None


def _light(node: torch.fx.Node) -> bool:
    """A node the replay may run: a view op, a ``getitem`` or size arithmetic (no tensor computed)."""
    if node.op in ("placeholder", "output"):
        return True
    if _is_view(node) or node.target is operator.getitem:
        return True
    val = node.meta.get("val")
    return not isinstance(val, torch.Tensor)


class ViewOutputs:
    """The outputs of ``gm`` that are views of its inputs, computed by a pruned copy of ``gm``.

    :attr:`positions` maps an output position of ``gm`` to its index among the replayed results.
    """

    def __init__(self, module: torch.fx.GraphModule | None, positions: dict[int, int]):
        self.module = module
        self.positions = positions

    @classmethod
    def of(cls, gm: torch.fx.GraphModule) -> ViewOutputs:
        output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        outs = list(flatten(output.args[0]))
        chosen = [i for i, o in enumerate(outs)
                  if isinstance(o, torch.fx.Node) and o.op != "placeholder" and _base_placeholder(o) is not None]
        if not chosen:
            return cls(None, {})
        graph = torch.fx.Graph()
        copies: dict[torch.fx.Node, torch.fx.Node] = {}
        graph.graph_copy(gm.graph, copies)
        graph.output(tuple(copies[outs[i]] for i in chosen))
        graph.eliminate_dead_code()
        if not all(_light(n) for n in graph.nodes):  # the views read a computed tensor: onnxruntime computes them
            return cls(None, {})
        module = torch.fx.GraphModule(gm, graph)
        return cls(module, {position: k for k, position in enumerate(chosen)})

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        """The replayed views on the graph's inputs ``args``."""
        if self.module is None:
            return []
        return list(self.module(*args))
