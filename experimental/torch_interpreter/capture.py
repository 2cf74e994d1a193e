"""Capture: ``torch.export.export`` with its failures turned into errors that say what to try."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sysconfig
import time
import traceback
from collections.abc import Iterator
from typing import Any

import torch

from .capture_kernels import shape_only_rnn_kernels
from .errors import DynamicShapeError, ExportCaptureError

logger = logging.getLogger(__name__)

# (text found in torch's message, advice)
_HINTS = [
    (
        "_set_grad_enabled",
        "the model changes the autograd state while exporting (e.g. it is called under torch.no_grad()); "
        "export outside no_grad() or patch the model with bypass_export_some_errors()",
    ),
    (
        "data-dependent",
        "the output shape depends on tensor values; add torch._check(...) on the value in the model, "
        "or avoid Python control flow on tensor values (use torch.cond); an `if` on a tensor value whose "
        "branches return can be rewritten into torch.cond by "
        "bypass_export_some_errors(rewrite_control_flow=[YourModule])",
    ),
    (
        "BuiltinVariable(NotImplementedError)",
        "strict mode met a Python construct it cannot trace; try strict=False",
    ),
    (
        "Observed exception",
        "the model raised an exception while being traced (see the source line in torch's message); "
        "with strict=False the Python exception itself is shown",
    ),
    ("torch._dynamo.exc.Unsupported", "strict mode (dynamo) cannot trace this code; try strict=False"),
    (
        "0/1 specialized",
        "an example input has size 0 or 1 on an axis declared dynamic, and torch.export specializes such "
        "sizes: give examples of size >= 2 on dynamic axes (e.g. a past length of 2 or more), or export under "
        "bypass_export_some_errors(backed_size_oblivious=True)",
    ),
    ("Unsupported input type", "an input type is not a registered pytree node; register it or flatten the inputs"),
    (
        "transformers.cache_utils",
        "a transformers cache is not a pytree node: let to_onnx register it (capture_strategies=True, the default, "
        "or a tuple naming 'transformers_caches'), or export under bypass_export_some_errors(patch_transformers=True)",
    ),
    (
        "must be bool, not SymBool",
        "the model branches on a dynamic size compared with 1 (e.g. transformers' sdpa `is_causal = q_length > 1`) "
        "while an example has size 1 on that axis: give examples of size >= 2 on dynamic axes (a sequence of 2 "
        "or more), or declare that axis static",
    ),
    (
        "Output-to-output aliasing",
        "a body of a control-flow operator (scan, cond, while_loop, map) returns the same tensor twice, "
        "e.g. a scan combine_fn `return [next_carry, next_carry]` (the carry also as scanned output); "
        "these operators forbid aliased outputs: return a copy, `return [next_carry, next_carry.clone()]`",
    ),
    (
        "Input-to-output aliasing",
        "a body of a control-flow operator (scan, cond, while_loop, map) returns one of its inputs unchanged; "
        "these operators forbid aliased outputs: return a copy, e.g. `x.clone()` instead of `x`",
    ),
    (
        "list index out of range",
        "torch.export raises this bare IndexError (in produce_guards) when the model changes the rank of an "
        "input in place, e.g. `x.unsqueeze_(0)`, `x.squeeze_()`, `x.t_()` on a forward argument: use the "
        "out-of-place form, `x = x.unsqueeze(0)`",
    ),
]
_DYNAMIC_MARKERS = (
    "Constraints violated",
    "dynamic_shapes",
    "specialized",
    "user-specified ranges",
    "dynamic shape",
    "Dim(",
)


def export(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict[str, Any] | None,
    dynamic_shapes: Any,
    strict: bool,
    declared: str = "",
) -> torch.export.ExportedProgram:
    """Runs ``torch.export.export`` and raises :class:`ExportCaptureError` or :class:`DynamicShapeError`.

    ``declared`` lists the axes the user declared dynamic, for the messages.
    """
    begin = time.perf_counter()
    # torch 2.13 keeps dynamo caches for the bodies of scan/cond/while_loop between exports: a second
    # export of such a model can then get wrong guards (dynamic dims fixed to constants). Start clean.
    torch._dynamo.reset()
    try:
        # RNN ops would unroll their time loop to compute shapes, freezing the sequence length
        with shape_only_rnn_kernels():
            ep = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as e:
        message = str(e)
        qualified = f"{type(e).__module__}.{type(e).__name__}"
        hints = [advice for marker, advice in _HINTS if marker in message or marker in qualified]
        mode = "strict" if strict else "non-strict"
        text = f"torch.export.export ({mode}) failed: {type(e).__name__}: {message.strip()}"
        text += where_it_failed(e)
        if hints:
            text += "\nWhat to try: " + "; ".join(hints)
        if dynamic_shapes is not None and any(m in message for m in _DYNAMIC_MARKERS):
            raise DynamicShapeError(
                text
                + (f"\nAxes declared dynamic: {declared}." if declared else "")
                + "\nThe dynamic_shapes spec does not fit what the model does with these dimensions; "
                "follow torch's suggested fixes above, or use torch.export.Dim.DYNAMIC for an unnamed axis."
            ) from e
        raise ExportCaptureError(text) from e
    logger.info("torch.export.export (strict=%s) took %.3fs", strict, time.perf_counter() - begin)
    return ep


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OWN_DIR = os.path.dirname(__file__) + os.sep
_STDLIB_DIR = sysconfig.get_paths()["stdlib"] + os.sep
#: torch files an operator call goes through: an exception raised past them is the operator's own check
_OP_DISPATCH = (
    "_ops.py",
    "functional.py",
    "_tensor.py",
    "fake_tensor.py",
    "_meta_registrations.py",
    "_refs",
    "_prims",
    "_decomp",
    "overrides.py",
)


def _frames(e: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``e``'s traceback, and of the exceptions it was raised from, outermost first."""
    frames: list[traceback.FrameSummary] = []
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        frames += traceback.extract_tb(e.__traceback__)
        e = e.__cause__ or e.__context__
    return frames


def _is_library(filename: str) -> bool:
    return filename.startswith((_TORCH_DIR, _OWN_DIR, _STDLIB_DIR)) or filename.startswith("<")


def where_it_failed(e: BaseException) -> str:
    """A line ``Model code: file:line in function: source`` for the innermost frame of the model's code in
    the traceback of ``e`` (torch's, the standard library's and this package's frames skipped), and a note
    when the exception itself was raised inside torch (an internal error rather than the model's)."""
    frames = _frames(e)
    user = [f for f in frames if not _is_library(f.filename)]
    text = ""
    if user:
        f = user[-1]
        text = f"\nModel code: {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
    innermost = frames[-1] if frames else None
    after_user = frames[frames.index(user[-1]) + 1 :] if user else frames
    # an op's own check (a wrong index on a fake tensor) goes through the op dispatch: the model's error
    through_op = any(
        any(m in f.filename for m in _OP_DISPATCH) or f.name in ("__torch_function__", "__torch_dispatch__")
        for f in after_user
    )
    internal = (
        innermost is not None
        and innermost.filename.startswith(_TORCH_DIR)
        and not through_op
        and type(e).__module__ == "builtins"
        and isinstance(e, (IndexError, KeyError, AttributeError, AssertionError, TypeError, ValueError))
    )
    if internal:
        text += (
            f"\nThe {type(e).__name__} was raised inside torch's own code "
            f"({os.path.relpath(innermost.filename, _TORCH_DIR)}:{innermost.lineno} in {innermost.name}), not by "
            "an operator's check: torch.export (or the torch function called there) could not handle the model "
            "code above. Try the other mode (strict=True/False), bypass_export_some_errors(), or rewrite that line."
        )
    return text


@contextlib.contextmanager
def keywords_as_parameters(model: torch.nn.Module, kwargs: dict[str, Any] | None) -> Iterator[None]:
    """While capturing, ``model.forward`` has a signature naming every keyword it is called with.

    A ``forward(self, x, **kwargs)`` called with keywords its signature does not name (transformers 5
    passes ``past_key_values`` through ``**kwargs``) cannot take dynamic shapes for them: torch.export
    wants the spec of a ``**kwargs`` as one dict and then fails inside. The instance gets a ``forward``
    whose signature lists those keywords as keyword-only parameters (the call goes to the original
    ``forward`` unchanged), removed on exit; parameter names are not affected.
    """
    signature = inspect.signature(model.forward)
    params = list(signature.parameters.values())
    extra = [k for k in (kwargs or {}) if k not in signature.parameters]
    if not extra or not any(p.kind == p.VAR_KEYWORD for p in params):
        yield
        return
    original = model.forward
    named = [p for p in params if p.kind != p.VAR_KEYWORD]
    named += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in extra]

    def forward(*args: Any, **kw: Any) -> Any:
        return original(*args, **kw)

    forward.__signature__ = signature.replace(parameters=named)  # type: ignore[attr-defined]
    had = "forward" in model.__dict__
    saved = model.__dict__.get("forward")
    model.forward = forward
    try:
        yield
    finally:
        if had:
            model.forward = saved
        else:
            del model.forward
