"""The one ``torch.export.export`` call, its failures turned into errors that say what to try."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sysconfig
import time
import traceback
from collections.abc import Iterator
from typing import Any

import torch

from ..errors import DynamicShapeError, ExportCaptureError
from ..logs import PACKAGE_LOGGER
from .failures import advice, concerns_dynamic_shapes
from .kernels import shape_only_rnn_kernels
from .module_state import kept_attributes

logger = logging.getLogger(__name__)


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

    >>> ep = export(torch.nn.ReLU(), (torch.zeros(2),), {}, None, strict=False)
    >>> [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    ['aten.relu.default']
    """
    begin = time.perf_counter()
    # torch 2.13 keeps dynamo caches for the bodies of scan/cond/while_loop between exports: a second
    # export of such a model can then get wrong guards (dynamic dims fixed to constants). Start clean.
    torch._dynamo.reset()
    try:
        # RNN ops would unroll their time loop to compute shapes, freezing the sequence length; attributes a
        # forward caches (fake tensors, symbolic sizes) are put back as they were
        with shape_only_rnn_kernels(), torch_output() as printed, kept_attributes(model) as changed:
            ep = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    except Exception as e:
        message = str(e).strip()
        frame = model_frame(e)
        hints = advice(e, (frame.line or "") if frame is not None else "")
        mode = "strict" if strict else "non-strict"
        first, _, rest = message.partition("\n")
        # the short story first (torch's first line, the model's line, what to try), torch's whole text last
        text = f"torch.export.export ({mode}) failed: {type(e).__name__}: {first}"
        text += where_it_failed(e)
        if hints:
            text += "\nWhat to try: " + "; ".join(hints)
        if rest.strip():
            text += "\ntorch's message, continued:\n" + rest.strip()
        if dynamic_shapes is not None and concerns_dynamic_shapes(e):
            raise DynamicShapeError(
                text
                + (f"\nAxes declared dynamic: {declared}." if declared else "")
                + "\nThe dynamic_shapes spec does not fit what the model does with these dimensions"
                + ("; torch's suggested fixes are listed above." if "Suggested fixes:" in message else ".")
            ) from e
        error = ExportCaptureError(text)
        error.torch_output = printed.getvalue()
        raise error from e
    if changed:
        logger.debug("attributes set by forward during the capture, put back: %s", changed)
    if printed.getvalue():
        logger.debug("torch's output during the capture:\n%s", printed.getvalue())
    logger.debug("torch.export.export (strict=%s) took %.3fs", strict, time.perf_counter() - begin)
    return ep


class _Collect(logging.Filter):
    """Keeps the records of torch's own handlers in ``out`` instead of letting them print."""

    def __init__(self, out: io.StringIO):
        super().__init__()
        self.out = out

    def filter(self, record: logging.LogRecord) -> bool:
        self.out.write(f"[{record.name}] {record.getMessage()}\n")
        return False


@contextlib.contextmanager
def torch_output() -> Iterator[io.StringIO]:
    """What torch prints while exporting (the partial graph of a failure, printed to stderr at each try; its
    warnings to its own handlers), kept in the returned buffer instead of the user's terminal: a failed capture
    keeps it on the error (``torch_output``, written in the export report), a capture that works logs it at DEBUG
    level. Printed as usual at ``verbose=2``.

    >>> import sys
    >>> with torch_output() as printed:
    ...     print("partial graph", file=sys.stderr)
    >>> printed.getvalue()
    'partial graph\\n'
    """
    out = io.StringIO()
    if logging.getLogger(PACKAGE_LOGGER).isEnabledFor(logging.DEBUG):
        yield out
        return
    collect = _Collect(out)
    handlers = [
        h
        for name, lg in [("torch", logging.getLogger("torch")), *logging.Logger.manager.loggerDict.items()]
        if name.startswith("torch") and isinstance(lg, logging.Logger)
        for h in lg.handlers
        if not type(h).__module__.startswith(PACKAGE_LOGGER)  # the package's own listeners (specializations.py)
    ]
    handlers = list({id(h): h for h in handlers}.values())
    for h in handlers:
        h.addFilter(collect)
    try:
        with contextlib.redirect_stderr(out):
            yield out
    finally:
        for h in handlers:
            h.removeFilter(collect)


#: torch's installation folder: its frames are not the model's
TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
#: the package's own frames (capture, patches, the PythonOp hook...) are not the model's code
_OWN_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep
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
    return filename.startswith((TORCH_DIR, _OWN_DIR, _STDLIB_DIR)) or filename.startswith("<")


def model_frame(e: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the model's code in the traceback of ``e`` (torch's, the standard library's and this
    package's frames skipped), None when there is none."""
    user = [f for f in _frames(e) if not _is_library(f.filename)]
    return user[-1] if user else None


def model_frame_in_stack(stack: list[traceback.FrameSummary]) -> traceback.FrameSummary | None:
    """The innermost frame of the model's code in ``stack`` (outermost first), below this module's call of
    ``torch.export.export``: the lines calling ``to_onnx`` are not the model's. None in strict mode, where dynamo
    reads the model's code instead of running it.

    >>> model_frame_in_stack(traceback.extract_stack()) is None
    True
    """
    below = [i for i, f in enumerate(stack) if f.filename == __file__]
    user = [f for f in stack[below[-1] + 1 :] if not _is_library(f.filename)] if below else []
    return user[-1] if user else None


def where_it_failed(e: BaseException) -> str:
    """A line ``Model code: file:line in function: source`` for the innermost frame of the model's code in
    the traceback of ``e`` (torch's, the standard library's and this package's frames skipped), and a note
    when the exception itself was raised inside torch (an internal error rather than the model's).

    >>> try:
    ...     raise ValueError("raised by no model")
    ... except ValueError as e:
    ...     where_it_failed(e)
    ''
    """
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
        and innermost.filename.startswith(TORCH_DIR)
        and not through_op
        and type(e).__module__ == "builtins"
        and isinstance(e, (IndexError, KeyError, AttributeError, AssertionError, TypeError, ValueError))
    )
    if internal:
        text += (
            f"\nThe {type(e).__name__} was raised inside torch's own code "
            f"({os.path.relpath(innermost.filename, TORCH_DIR)}:{innermost.lineno} in {innermost.name}), not by "
            "an operator's check: torch.export (or the torch function called there) could not handle the model "
            "code above. Try the other mode (strict=True/False), bypass_export_some_errors(), or rewrite that line."
        )
    return text
