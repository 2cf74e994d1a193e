"""The contexts of ``torch.autograd.Function`` calls run for training: a PythonOp node with ``training_mode=1``
runs ``apply`` with autograd recording and keeps what its ``backward`` needs (the ``ctx`` with its saved tensors and
attributes, the differentiable inputs and outputs) under a *handle*, an int64 tensor of shape ``[1]`` that is the
node's output 0; the matching ``PythonOpGrad`` node receives the handle as its input 0 and calls ``backward`` once,
which frees the context.

A handle is a random 62-bit number, not a count: a model cannot name a context it was not given, and a
``PythonOpGrad`` node can use only a context made by a forward of the same ``autograd.Function`` (its
``func_name``), with one incoming gradient per output of that forward.

A context whose handle is dropped before any backward (a forward run for evaluation, an exception between the two)
is freed with the handle tensor. Both the eager implementation of the training custom ops (``python_op/training``)
and the runtime (``runtime/python_calls``) go through here, so a graph runs the same way in eager mode and in
onnxruntime.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import RuntimeFeedError

_LOCK = threading.Lock()
_LIVE: dict[int, Record] = {}


@dataclass
class Record:
    """What one forward call left for its backward."""

    name: str
    inputs: list[torch.Tensor | None]  # the tensor arguments, None for those that need no gradient
    outputs: list[torch.Tensor]


def live() -> int:
    """How many contexts wait for their backward in this process.

    >>> live() >= 0
    True
    """
    return len(_LIVE)


def _free(handle: int) -> None:
    with _LOCK:
        _LIVE.pop(handle, None)


def run_forward(
    name: str,
    apply: Callable[..., Any],
    arguments: Callable[[Sequence[torch.Tensor]], list[Any]],
    tensors: Sequence[torch.Tensor],
    requires_grads: Sequence[int],
    outputs: Callable[[Any], list[torch.Tensor]],
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Runs ``apply(*arguments(leaves))`` with autograd recording, where ``leaves`` are ``tensors`` detached
    (those whose ``requires_grads`` entry is 1 require a gradient); returns the handle of the kept context and
    the outputs (detached, ``outputs(result)`` lists them).

    >>> class Square(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * g
    >>> handle, (y,) = run_forward("Square", Square.apply, list, [torch.tensor([3.0])], [1], lambda r: [r])
    >>> y, run_backward(handle, [torch.tensor([1.0])], "Square")
    (tensor([9.]), [tensor([6.])])
    """
    leaves = [t.detach().requires_grad_(bool(r) and t.is_floating_point()) for t, r in zip(tensors, requires_grads)]
    with torch.enable_grad():
        result = apply(*arguments(leaves))
    outs = outputs(result)
    record = Record(name, [t if t.requires_grad else None for t in leaves], list(outs))
    with _LOCK:
        while (handle := secrets.randbits(62) + 1) in _LIVE:
            pass
        _LIVE[handle] = record
    tensor = torch.tensor([handle], dtype=torch.int64, device=outs[0].device if outs else "cpu")
    weakref.finalize(tensor, _free, handle)
    return tensor, unaliased([o.detach() for o in outs], tensors)


def unaliased(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``outputs``, those sharing memory with one of ``inputs`` (an input returned as is, a view of one) cloned: a
    custom op may not return them, and a graph value must not change with another.

    >>> x = torch.ones(2)
    >>> y, z = unaliased([x[:1], torch.zeros(1)], [x])
    >>> y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    True
    """
    storages = {t.untyped_storage().data_ptr() for t in inputs}
    return [o.clone() if o.untyped_storage().data_ptr() in storages else o for o in outputs]


def run_backward(
    handle: torch.Tensor | int, grads: Sequence[torch.Tensor | None], name: str, where: str = "PythonOpGrad"
) -> list[torch.Tensor | None]:
    """Calls the ``backward`` of the context ``handle`` once with ``grads`` (one per output, None for an output
    without gradient) and frees it; returns one gradient per tensor argument of the forward (zeros for one the
    outputs do not depend on, None for an argument that is not a tensor). The context must have been made by a
    forward of the Function ``name`` with as many outputs as ``grads``; ``where`` names the caller in errors.

    >>> run_backward(10**12, [], "m.F")
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: PythonOpGrad: no forward context of m.F has the handle 1000000000000 in this process (each forward's context serves one backward)
    """
    if isinstance(handle, torch.Tensor) and (handle.dtype != torch.int64 or handle.numel() != 1):
        raise RuntimeFeedError(f"{where}: the context is an int64 tensor of one element, not {handle.dtype} {tuple(handle.shape)}")
    key = int(handle.reshape(-1)[0]) if isinstance(handle, torch.Tensor) else int(handle)
    with _LOCK:
        record = _LIVE.get(key)
        if record is not None and record.name == name and len(grads) == len(record.outputs):
            del _LIVE[key]
        else:
            record = None
    if record is None:
        raise RuntimeFeedError(
            f"{where}: no forward context of {name} has the handle {key} in this process (each forward's context "
            "serves one backward)"
        )
    pairs = [(o, g) for o, g in zip(record.outputs, grads) if o.requires_grad and g is not None]
    wanted = [t for t in record.inputs if t is not None]
    if not pairs or not wanted:
        computed = iter([None] * len(wanted))
    else:
        with torch.enable_grad():
            computed = iter(
                torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True)
            )
    # an input the outputs do not depend on (the Function's backward returned None for it) gets zeros, as autograd
    # gives it: the backward graph reads a tensor there
    return [_or_zeros(next(computed), t) if t is not None else None for t in record.inputs]


def _or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if grad is None else grad
