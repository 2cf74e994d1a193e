"""Gradients that only unused outputs lead to: ``None``, as eager PyTorch leaves them.

AOTAutograd hands every differentiable output of a compiled region a gradient: one the loss never used gets zeros, so
a parameter that only such an output depends on (a pooler whose result the model drops) receives a gradient of zeros
where eager PyTorch leaves ``None``, and AdamW's weight decay then moves it where eager's skips it (inductor does the
same: pytorch/pytorch#131794). The backend undoes that:

* :func:`track_outputs` wraps the region AOTAutograd compiled: each forward call's :class:`OutputUse` learns which of its
  outputs reached the user (by identity) and, through a hook on each, which of them received a gradient;
* :class:`GradientPruner` knows, for a backward graph, which tangents each gradient it returns depends on; a gradient
  that depends only on tangents of outputs the user got but never used (their tangent all zeros, as AOTAutograd
  materialized it) is returned as ``None``.

Where the forward outputs and the tangents cannot be matched one to one (an output regenerated as a view, a mutated
input), nothing is changed.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch.utils.weak import WeakIdKeyDictionary

_local = threading.local()
#: every tensor a forward graph returned -> the record of that call (found again from the saved tensors)
_records: WeakIdKeyDictionary = WeakIdKeyDictionary()


class OutputUse:
    """One call of a forward graph: its outputs (identity, shape and whether floating), those handed to the user and
    those whose gradient was computed."""

    __slots__ = ("floating", "given", "ids", "shapes", "used")

    def __init__(self, outputs: Sequence[Any]):
        self.ids = [id(o) if isinstance(o, torch.Tensor) else None for o in outputs]
        self.shapes = [tuple(o.shape) if isinstance(o, torch.Tensor) else None for o in outputs]
        self.floating = [isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()) for o in outputs]
        self.given: set[int] = set()
        self.used: set[int] = set()

    def mark_used(self, index: int, grad: torch.Tensor | None) -> None:
        # autograd calls the hooks of every output of a node it runs, with None for those nothing reached
        if grad is not None:
            self.used.add(index)


def record_forward(outputs: Sequence[Any]) -> None:
    """Called by a forward graph's run with what it returns: remembered for the region's call under way."""
    stack = getattr(_local, "stack", None)
    if not stack:  # (inside AOTAutograd's forward, gradients are off: whether they are on is asked outside)
        return
    record = OutputUse(outputs)
    for out in outputs:
        if isinstance(out, torch.Tensor):
            _records[out] = record
    stack[-1] = record


def track_outputs(region: Callable[..., Any]) -> Callable[..., Any]:
    """``region`` (AOTAutograd's compiled callable) whose outputs the user gets are watched for a gradient."""

    @functools.wraps(region)
    def run(*args: Any) -> Any:
        if not torch.is_grad_enabled():
            return region(*args)
        stack = _local.__dict__.setdefault("stack", [])
        stack.append(None)
        try:
            outs = region(*args)
        finally:
            record = stack.pop()
        if record is not None and isinstance(outs, (list, tuple)):
            where: dict[int, int] = {}
            for k, i in enumerate(record.ids):  # the first place of a tensor also saved for the backward
                if i is not None:
                    where.setdefault(i, k)
            for out in outs:
                k = where.get(id(out))
                if k is not None and isinstance(out, torch.Tensor) and out.requires_grad:
                    record.given.add(k)
                    out.register_hook(functools.partial(record.mark_used, k))
        return outs

    return run


class GradientPruner:
    """For one backward graph: the tangents each output depends on (positions among the tangents)."""

    def __init__(self, gm: torch.fx.GraphModule):
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        is_tangent = [n.name.startswith("tangents") for n in placeholders]
        self.saved = is_tangent.index(True) if True in is_tangent else len(placeholders)
        self.tangents = len(placeholders) - self.saved
        # the tangents must be the trailing inputs: else the graph is left as it is
        self.enabled = self.tangents > 0 and all(is_tangent[self.saved:])
        deps: dict[torch.fx.Node, frozenset[int]] = {}
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                position = placeholders.index(node) - self.saved
                deps[node] = frozenset([position]) if position >= 0 else frozenset()
            elif node.op != "output":
                found: set[int] = set()
                for arg in node.all_input_nodes:
                    found |= deps[arg]
                deps[node] = frozenset(found)
        output = next(n for n in gm.graph.nodes if n.op == "output")
        flat = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
        self.outputs = [deps.get(a, frozenset()) if isinstance(a, torch.fx.Node) else frozenset() for a in flat]
        self.enabled = self.enabled and any(self.outputs)

    def _unused_tangents(self, args: Sequence[Any]) -> set[int]:
        record = next((_records.get(a) for a in args[: self.saved] if isinstance(a, torch.Tensor)), None)
        if record is None or not record.given:
            return set()
        plain = len(record.ids) - self.saved  # the forward outputs before the saved values: those with tangents
        carried = [k for k in range(max(plain, 0)) if record.floating[k]]
        if len(carried) != self.tangents:
            return set()
        unused = set()
        for t, k in enumerate(carried):
            tangent = args[self.saved + t]
            if (
                k in record.given
                and k not in record.used
                and isinstance(tangent, torch.Tensor)
                and tuple(tangent.shape) == record.shapes[k]
                and not bool(tangent.any())
            ):
                unused.add(t)
        return unused

    def prune(self, args: Sequence[Any], result: list[Any]) -> list[Any]:
        """``result`` of the backward graph called with ``args``, the gradients that depend only on unused outputs
        replaced by None."""
        if not self.enabled:
            return result
        unused = self._unused_tangents(args)
        if not unused or len(result) != len(self.outputs):
            return result
        return [None if deps and deps <= unused else r for r, deps in zip(result, self.outputs)]
