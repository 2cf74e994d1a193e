"""The random programs of :mod:`.random_programs` trained through the ``torch.compile`` backend: the outputs, a loss
and the gradient of every floating input compared with eager PyTorch.

Each floating input becomes a leaf that requires grad; the program receives a copy of it (programs may write into
their inputs). The loss is the sum of every floating output, in float32, weighted by fixed random numbers. The
compiled model runs with ``OrtBackend()`` (eager fallback allowed, as a user gets it): a graph sent to eager is
the outcome ``fallback`` (the reason recorded), a difference where onnxruntime is closer than eager to the same
program run in float64 is ``precision`` (in a float16/bfloat16 program: no more than twice as far as eager, whose
roundings differ), a difference at an op that chose among tied values ``ties``, any other difference ``mismatch``.
A program with dynamic axes is compiled with ``dynamic=True`` (symbolic sizes in the graphs). ``compile_error``:
``torch.compile`` fails with its own ``"eager"`` backend too (dynamo's bug, not the project's).

>>> from experimental.torch_interpreter.testing.random_programs import RandomChooser, generate
>>> run_training_program(generate(RandomChooser(3))).kind in TRAINING_OUTCOMES
True
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from ..errors import EagerFallbackWarning
from ..runtime.ort_values import to_numpy
from ..training import OrtBackend
from .program_runs import Outcome, closer_than_eager, compare
from .random_programs import FLOATS, Program, least_precise

TRAINING_OUTCOMES = (
    "match", "precision", "ties", "fallback", "no_gradient", "eager_error", "compile_error", "mismatch",
    "raw_exception",
)
#: outcomes that are bugs of the project
TRAINING_BUGS = ("mismatch", "raw_exception")


def _outputs(out: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _weights(outputs: list[torch.Tensor]) -> list[torch.Tensor | None]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(o.shape, generator=gen) if o.is_floating_point() and o.requires_grad else None
            for o in outputs]


def _step(model: torch.nn.Module, inputs: tuple, weights: list | None = None) -> tuple[list, Any, list, list]:
    """Outputs, loss, gradients of the floating inputs (None where one gets none) and the loss weights
    (``weights``, or drawn for the outputs that require grad)."""
    leaves = [t.detach().clone().requires_grad_() if t.dtype in (*FLOATS, torch.float64) else t for t in inputs]
    outs = _outputs(model(*[t.clone() for t in leaves]))
    weights = _weights(outs) if weights is None else weights
    terms = [(o.float() * w).sum() for o, w in zip(outs, weights) if w is not None and o.requires_grad]
    if not terms:
        return outs, None, [], weights
    loss = torch.stack(terms).sum()
    wanted = [t for t in leaves if t.requires_grad]
    grads = torch.autograd.grad(loss, wanted, allow_unused=True)
    return [o.detach() for o in outs], loss.detach(), list(grads), weights


def run_training_program(prog: Program, make_backend: Callable[[], Any] = OrtBackend) -> Outcome:
    """One training step of ``prog`` through ``torch.compile(backend=make_backend())`` against eager."""
    torch._dynamo.reset()
    model = prog.module()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected_outs, expected_loss, expected_grads, weights = _step(copy.deepcopy(model), prog.inputs)
    except Exception as e:  # noqa: BLE001  (not the backend's business)
        return Outcome("eager_error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if expected_loss is None:
        return Outcome("no_gradient", "no floating output depends on a floating input")
    dynamic = prog.dynamic_shapes is not None  # symbolic sizes in the graphs, as after a recompilation
    compiled = torch.compile(copy.deepcopy(model), backend=make_backend(), dynamic=dynamic)
    fallbacks: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got_outs, got_loss, got_grads, _ = _step(compiled, prog.inputs, weights)
        fallbacks = [" ".join(str(w.message).splitlines()[:2]) for w in caught
                     if issubclass(w.category, EagerFallbackWarning)]
    except Exception as e:  # noqa: BLE001  (eager runs it: the backend must too)
        detail = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        if _compile_fails(model, prog.inputs, weights, dynamic):
            return Outcome("compile_error", f"torch.compile fails with its own eager backend too: {detail}")
        return Outcome("raw_exception", detail, type(e).__name__)
    diff = _difference(expected_outs, expected_loss, expected_grads, got_outs, got_loss, got_grads, prog)
    if diff is None:
        return Outcome("fallback", fallbacks[0][:300]) if fallbacks else Outcome("match")
    if _closer_to_float64(model, prog, weights, got_outs, got_loss, got_grads, expected_outs, expected_loss,
                          expected_grads):
        return Outcome("precision", f"closer than eager to float64: {diff}")
    tied = _tied_selection(model, prog.inputs)
    if tied:
        return Outcome("ties", f"{tied}: {diff}")
    return Outcome("mismatch", diff + (f" (graphs sent to eager: {fallbacks[0][:200]})" if fallbacks else ""))


def _compile_fails(model: torch.nn.Module, inputs: tuple, weights: list, dynamic: bool) -> bool:
    """Does ``torch.compile`` fail without the project, with its ``"eager"`` backend (dynamo's own bug)?"""
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _step(torch.compile(copy.deepcopy(model), backend="eager", dynamic=dynamic), inputs, weights)
    except Exception:  # noqa: BLE001
        return True
    return False


def _pairs(outs: list, loss: Any, grads: list) -> list[tuple[str, Any]]:
    return ([(f"output {i}", o) for i, o in enumerate(outs)] + [("loss", loss)]
            + [(f"gradient of input {i}", g) for i, g in enumerate(grads)])


def _least_precise(prog: Program) -> torch.dtype | None:
    """The least precise floating type of the program (inputs and computed values): a gradient goes through
    every op, its error is of that type."""
    return least_precise([*(t.dtype for t in prog.inputs if t.is_floating_point()), *prog.out_low])


def _difference(e_outs, e_loss, e_grads, g_outs, g_loss, g_grads, prog: Program) -> str | None:
    expected, got = _pairs(e_outs, e_loss, e_grads), _pairs(g_outs, g_loss, g_grads)
    if len(expected) != len(got):
        return f"{len(got)} results, eager gives {len(expected)}"
    low = _least_precise(prog)
    for (name, e), (_, g) in zip(expected, got):
        if (e is None) != (g is None):
            return f"{name}: {'None' if g is None else 'a tensor'}, eager gives {'None' if e is None else 'a tensor'}"
        if e is None:
            continue
        diff = compare(e, to_numpy(g), low)
        if diff:
            return f"{name}: {diff}"
    return None


def _closer_to_float64(model, prog, weights, g_outs, g_loss, g_grads, e_outs, e_loss, e_grads) -> bool:
    """The same step in float64: is the backend no further from it than eager is, on every result?"""
    try:
        double = tuple(t.double() if t.dtype in FLOATS else t for t in prog.inputs)
        r_outs, r_loss, r_grads, _ = _step(copy.deepcopy(model).double(), double, [
            None if w is None else w.double() for w in weights])
    except Exception:  # noqa: BLE001  (no float64 run: the difference stays a mismatch)
        return False
    expected = [t for _, t in _pairs(e_outs, e_loss, e_grads)]
    got = [t for _, t in _pairs(g_outs, g_loss, g_grads)]
    reference = [t for _, t in _pairs(r_outs, r_loss, r_grads)]
    if len(reference) != len(expected) or any((r is None) != (e is None) for r, e in zip(reference, expected)):
        return False
    keep = [i for i, e in enumerate(expected) if e is not None]
    low = _least_precise(prog)
    # a float16/bfloat16 gradient goes through every op of the backward, each rounded where PyTorch rounds it
    # or computed in float32: its error is of the size of eager's, not below it
    factor = 2.0 if low in (torch.float16, torch.bfloat16) else 1.0
    return closer_than_eager([expected[i] for i in keep], [to_numpy(got[i]) for i in keep],
                             [reference[i] for i in keep], [low] * len(keep), factor)


#: ops whose choice among equal values PyTorch leaves unspecified (its CPU topk does not keep the first ones):
#: the gradient goes to one of the tied elements, which one is the kernel's business; the position of ``dim``
SELECTIONS = {"topk": 2, "kthvalue": 2, "median": 1, "nanmedian": 1, "mode": 1}


class _TieFinder(torch.overrides.TorchFunctionMode):
    """Records the selection ops of :data:`SELECTIONS` applied to values with ties along their axis."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in SELECTIONS and args and isinstance(args[0], torch.Tensor) and args[0].numel() > 1:
            x = args[0]
            dim = kwargs.get("dim", args[SELECTIONS[name]] if len(args) > SELECTIONS[name] else None)
            if name == "topk" and dim is None:
                dim = -1
            rows = x.detach().reshape(-1) if dim is None or x.dim() == 0 else x.detach().movedim(dim, -1)
            ordered = rows.sort(-1).values
            if (ordered[..., 1:] == ordered[..., :-1]).any():
                self.found.append(name)
        return func(*args, **kwargs)


def _tied_selection(model: torch.nn.Module, inputs: tuple) -> str | None:
    """The first op of :data:`SELECTIONS` that chose among equal values in eager, if any."""
    finder = _TieFinder()
    try:
        with warnings.catch_warnings(), finder, torch.no_grad():
            warnings.simplefilter("ignore")
            model(*copy.deepcopy(inputs))
    except Exception:  # noqa: BLE001
        return None
    return f"{finder.found[0]} of tied values (PyTorch leaves the choice unspecified)" if finder.found else None
