"""Random programs (:mod:`.random_programs`) exported with ``to_onnx``, run by onnxruntime and compared with eager
PyTorch: each run gives an :class:`Outcome`.

>>> from experimental.torch_interpreter.testing.random_programs import RandomChooser, generate
>>> run_program(generate(RandomChooser(3))).kind in OUTCOMES
True
"""

from __future__ import annotations

import copy
import dataclasses
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from ..convert import to_onnx
from ..errors import (
    ConversionError,
    ExportCaptureError,
    RuntimeFeedError,
    TorchInterpreterError,
    UnsupportedOpError,
)
from ..runtime import InferenceSession
from .random_programs import FLOATS, Program, least_precise

#: what running a program can give
#: ``unsupported``: a project error for an op or option the converters do not handle (``UnsupportedOpError``,
#: or a converter's ``NotImplementedError``/``ValueError``); ``export_error``: ``torch.export`` refused the program
#: (``ExportCaptureError``); ``project_error``: any other project error (a converter that crashed or gave a
#: wrong type: a bug); ``mismatch`` and ``raw_exception``: bugs; ``eager_error``: the program does not run.
#: ``export_unsound``: the grown inputs break a guard of the ExportedProgram (``ep.module()`` refuses them;
#: the ONNX model carries no such check), or the ExportedProgram itself disagrees with eager there and
#: onnxruntime agrees with it (torch.export did not guard an assumption on the sizes).
OUTCOMES = ("match", "precision", "guarded", "unsupported", "export_error", "export_unsound", "project_error", "mismatch",
            "raw_exception", "eager_error")
#: the outcomes that are bugs
BUGS = ("project_error", "mismatch", "raw_exception")

# -- comparison


#: (rtol, atol relative to the largest magnitude of the expected values) per dtype
TOLERANCES = {
    torch.float64: (1e-6, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (5e-3, 2e-3),
    torch.bfloat16: (3e-2, 1.5e-2),
}


def compare(expected: torch.Tensor, got: np.ndarray, low: torch.dtype | None = None) -> str | None:
    """None when onnxruntime's ``got`` equals eager's ``expected`` (dtype, shape, values within the tolerance
    of ``expected``'s dtype, or of ``low`` when the value was computed from a less precise type, NaN where
    NaN), else what differs (never the values of the whole tensor).

    >>> compare(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0], dtype=np.float32)) is None
    True
    >>> compare(torch.tensor([1, 2]), np.array([1, 3]))
    'values differ at 1 of 2 elements, e.g. index (1,): expected 2, got 3'
    """
    want = str(expected.dtype).replace("torch.", "")
    have = "bfloat16" if got.dtype.name == "bfloat16" else str(torch.from_numpy(np.zeros(0, dtype=got.dtype)).dtype)
    have = have.replace("torch.", "")
    if want != have:
        return f"dtype {have}, expected {want}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    e = expected.detach().float().double().numpy() if expected.is_floating_point() else expected.numpy()
    g = got.astype(np.float64) if expected.is_floating_point() else got
    if not expected.is_floating_point():
        bad = g != e
    else:
        rtol, atol = TOLERANCES[least_precise([expected.dtype, low])]
        finite = np.isfinite(e)
        scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
        with np.errstate(invalid="ignore"):
            close = np.abs(g - e) <= atol * scale + rtol * np.abs(e)
        same_special = (np.isnan(e) & np.isnan(g)) | (~finite & (g == e))
        bad = ~(np.where(finite, close, same_special))
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"values differ at {int(bad.sum())} of {bad.size} elements, e.g. index {where}: "
        f"expected {e[where].item()!r}, got {g[where].item()!r}"
    )


@dataclasses.dataclass
class Outcome:
    """What running a program gave: ``kind`` (one of :data:`OUTCOMES`) and a one-line ``detail``."""

    kind: str
    detail: str = ""
    error_type: str = ""


def _eager(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model(*copy.deepcopy(inputs))
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _compare_run(
    sess: InferenceSession, names: list[str], inputs: tuple, expected: list[torch.Tensor], lows: Sequence[Any] = ()
) -> str | None:
    feeds = {n.name: inputs[names.index(n.name)] for n in sess.get_inputs()}
    got = sess.run(None, feeds)
    if len(got) != len(expected):
        return f"{len(got)} ONNX outputs, {len(expected)} eager outputs"
    lows = list(lows) if len(lows) == len(expected) else [None] * len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        diff = compare(e, g, lows[i])
        if diff:
            return f"output {i}: {diff}"
    return None


def _grow_deltas(prog: Program, onx: Any) -> dict[int, int]:
    """Symbols to grow on the second run: those every input axis of the ONNX model kept symbolic."""
    static: set[int] = set()
    for dims, inp in zip(prog.input_symbols, onx.graph.input):
        for s, d in zip(dims, inp.type.tensor_type.shape.dim):
            if s is not None and not d.dim_param:
                static.add(s)
    return {i: 1 + (i % 2) for i in range(len(prog.symbols)) if i not in static}


def run_program(prog: Program) -> Outcome:
    """Exports ``prog`` and compares onnxruntime with eager PyTorch (on the grown inputs too when dynamic)."""
    try:
        model = prog.module()
        expected = _eager(model, prog.inputs)
    except Exception as e:  # noqa: BLE001  (not the converter's business)
        return Outcome("eager_error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    names = [f"x{i}" for i in range(len(prog.inputs))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # narrowed dynamic axes: the grown run checks them (export_unsound)
            onx = to_onnx(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    except TorchInterpreterError as e:
        return Outcome(_project_kind(e), str(e).splitlines()[0] if str(e) else "", type(e).__name__)
    except Exception as e:  # noqa: BLE001  (a raw exception is a bug: recorded as such)
        return Outcome("raw_exception", f"to_onnx: {type(e).__name__}: {_last_frame(e)}", type(e).__name__)
    try:
        sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
        diff = _compare_run(sess, names, prog.inputs, expected, prog.out_low)
    except Exception as e:  # noqa: BLE001
        return Outcome("raw_exception", f"onnxruntime: {type(e).__name__}: {_last_frame(e)}", type(e).__name__)
    if diff:
        return _mismatch_or_precision(model, prog.inputs, sess, names, expected, diff, prog.out_low, prog.out_strict)
    if prog.dynamic_shapes is None or prog.grown is None:
        return Outcome("match")
    deltas = _grow_deltas(prog, onx)
    if not deltas:
        return Outcome("match", "no axis stayed dynamic")
    grown = prog.grown(deltas)
    try:
        expected = _eager(model, grown)
    except Exception:  # noqa: BLE001  (the program does not apply to the grown sizes)
        return Outcome("match", "eager fails on the grown inputs")
    try:
        diff = _compare_run(sess, names, grown, expected, prog.out_low)
    except Exception as e:  # noqa: BLE001
        detail = f"onnxruntime (grown inputs {[tuple(t.shape) for t in grown]}): {type(e).__name__}: {_last_frame(e)}"
        if isinstance(e, RuntimeFeedError):  # a size condition of the model refused them (runtime_guards.py)
            return Outcome("guarded" if _guard_is_right(model, prog, grown, expected) else "project_error", detail)
        if _export_refuses(model, prog, grown):
            return Outcome("export_unsound", detail, type(e).__name__)
        return Outcome("raw_exception", detail, type(e).__name__)
    if diff:
        if _export_agrees(model, prog, grown, sess, names):
            return Outcome("export_unsound", f"grown inputs {[tuple(t.shape) for t in grown]}: {diff}")
        return _mismatch_or_precision(
            model, grown, sess, names, expected, f"grown inputs {[tuple(t.shape) for t in grown]}: {diff}",
            prog.out_low, prog.out_strict,
        )
    return Outcome("match")


_MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23, torch.float64: 52, None: 52}


def _float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in FLOATS:
        return value.double()
    return value


def _mismatch_or_precision(
    model: torch.nn.Module,
    inputs: tuple,
    sess: InferenceSession,
    names: list[str],
    expected: list[torch.Tensor],
    diff: str,
    lows: Sequence[Any] = (),
    strict: Sequence[bool] = (),
) -> Outcome:
    """``precision`` when onnxruntime's worst error against the same program run in float64 is no larger
    than eager's (within half a unit in the last place of the result's type) on every output where the
    two differ, else ``mismatch``.

    onnxruntime's CPU has no float16/bfloat16 kernel for most ops: it computes them in float32 and removes
    the ``Cast`` pairs between consecutive such ops (its RemoveDuplicateCastTransformer holds float16 and
    float32 in one type group), so a chain keeps float32 where PyTorch rounds after each op. The graph
    rounds where PyTorch does; the runtime drops the roundings. Programs whose explicit casts make float64
    meaningless stay ``mismatch`` (the check only ever reclassifies in onnxruntime's favour), and so do the
    ``strict`` outputs that differ (results of a jump on half-precision values, where float64 sides with float32).
    """
    try:
        reference = _eager(copy.deepcopy(model).double(), tuple(_float64(t) for t in inputs))
        feeds = {n.name: inputs[names.index(n.name)] for n in sess.get_inputs()}
        got = sess.run(None, feeds)
    except Exception:  # noqa: BLE001  (no float64 run: the difference stays a mismatch)
        return Outcome("mismatch", diff)
    lows = list(lows) if len(lows) == len(expected) else [None] * len(expected)
    if len(reference) != len(expected):
        return Outcome("mismatch", diff)
    if any(s and compare(e, g, low) is not None for s, e, g, low in zip(strict, expected, got, lows)):
        return Outcome("mismatch", diff)
    if not closer_than_eager(expected, got, reference, lows):
        return Outcome("mismatch", diff)
    return Outcome("precision", f"closer than eager to float64: {diff}")


def closer_than_eager(
    expected: Sequence[torch.Tensor], got: Sequence[np.ndarray], reference: Sequence[torch.Tensor],
    lows: Sequence[Any],
    factor: float = 1.0,
) -> bool:
    """True when, on every float output where ``got`` and eager's ``expected`` differ, ``got``'s worst error
    against the float64 ``reference`` is no larger than ``factor`` times eager's (within half a unit in the last
    place of the least precise type), and where ``got`` or ``reference`` is not finite, ``got`` is ``reference``
    (the same infinity, or NaN); other outputs must be equal."""
    for e, g, r, low in zip(expected, got, reference, lows):
        if not e.is_floating_point() or r.shape != e.shape:
            if compare(e, g) is not None:
                return False
            continue
        e64, g64, r64 = e.detach().double().numpy(), g.astype(np.float64), r.detach().double().numpy()
        with np.errstate(invalid="ignore"):
            differ = ~np.isclose(e64, g64, rtol=1e-3, atol=1e-4, equal_nan=True)
            finite = np.isfinite(r64) & np.isfinite(g64)
            # eager overflowed (an intermediate float16 value) where float64 and onnxruntime stay finite: its error
            # there is infinite
            eager_error = np.where(np.isfinite(e64), np.abs(e64 - r64), np.inf)
            # half a unit in the last place of the least precise type: the rounding of the result itself
            bits = _MANTISSA_BITS[least_precise([e.dtype, low])]
            half_ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(r64), 2.0**-14))) - bits - 1)
            # a non-finite value on either side: onnxruntime must give float64's (eager's float32 GELU of +inf is NaN
            # where float64's is +inf: onnxruntime's +inf is no farther than eager from float64)
            as_reference = (g64 == r64) | (np.isnan(g64) & np.isnan(r64))
            if (differ & ~finite & ~as_reference).any():
                return False
            if (differ & finite).any() and float((np.abs(g64 - r64) - half_ulp)[finite].max()) > factor * float(
                eager_error[finite].max()
            ):
                return False
    return True


def _guard_is_right(model: torch.nn.Module, prog: Program, grown: tuple, expected: list[torch.Tensor]) -> bool:
    """True when the ExportedProgram fails on ``grown`` or gives other results than eager: the size
    condition that refused them kept the ONNX model from returning wrong numbers."""
    if _export_refuses(model, prog, grown):
        return True
    ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    got = _eager(ep.module(), grown)
    return len(got) != len(expected) or any(
        g.shape != e.shape or not torch.equal(g.float().nan_to_num(), e.float().nan_to_num())
        for g, e in zip(got, expected)
    )


def _export_refuses(model: torch.nn.Module, prog: Program, grown: tuple) -> bool:
    """True when the ExportedProgram fails on ``grown`` too (a number of outputs fixed at export)."""
    try:
        ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
        _eager(ep.module(), grown)
    except Exception:  # noqa: BLE001
        return True
    return False


def _export_agrees(
    model: torch.nn.Module, prog: Program, grown: tuple, sess: InferenceSession, names: list[str]
) -> bool:
    """True when the ExportedProgram itself gives onnxruntime's results on ``grown``: torch.export assumed
    something of the sizes it did not guard (``split`` into a number of chunks fixed at export), the ONNX
    model follows the exported graph faithfully."""
    try:
        ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    except Exception:  # noqa: BLE001
        return False
    try:
        expected = _eager(ep.module(), grown)
    except Exception:  # noqa: BLE001  (a guard of the exported program fails: the inputs are outside its domain)
        return True
    return _compare_run(sess, names, grown, expected, prog.out_low) is None


def _project_kind(e: TorchInterpreterError) -> str:
    if isinstance(e, UnsupportedOpError):
        return "unsupported"
    if isinstance(e, ExportCaptureError):
        return "export_error"
    if isinstance(e, ConversionError) and isinstance(e.__cause__, (NotImplementedError, ValueError)):
        return "unsupported"
    return "project_error"


def _last_frame(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" ({frames[-1].filename.split('/')[-1]}:{frames[-1].lineno})" if frames else ""
    return (str(e).splitlines()[0] if str(e) else "") [:300] + where
