"""The OpInfo sweep: PyTorch's OpInfo samples wrapped in modules, converted, run and compared with eager.

Shared by ``test_opinfo.py`` and ``benchmarks/opinfo_coverage.py``. For one sample, :func:`check_sample`
exports the module once with ``torch.export.export`` and converts that ExportedProgram, so a sample
torch.export rejects is classified ``export`` (not a converter failure) before any converter runs.

Example::

    >>> import torch
    >>> [(key, dtype, outcomes["ours"].category) for key, dtype, i, outcomes in sweep(["abs"], limit=1)]
    [('abs', torch.float32, 'pass')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import onnxruntime
import torch
from onnx.reference import ReferenceEvaluator
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..convert import to_onnx
from ..errors import UnsupportedOpError
from ..runtime import InferenceSession, to_numpy

logger = logging.getLogger(__name__)

#: dtypes of the full sweep, where OpInfo supports them on the CPU
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool)

#: (atol, rtol) per dtype of the outputs; integers and booleans compare exactly
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 2e-2),
}

#: dtypes whose graphs go to onnx's reference evaluator when onnxruntime has no kernel for them
REFERENCE_FALLBACK = (torch.float16, torch.bfloat16, torch.int32, torch.bool)

#: outcome categories; only the last four are failures of the converter under test
PASS = "pass"
NOT_COMPARED = "not compared"  # the sample cannot be compared (eager fails, no tensor output)
EXPORT = "export"  # torch.export.export fails on the sample: not the converter's failure
NO_CONVERTER = "no converter"
CONVERSION = "conversion"
ONNX_INVALID = "invalid onnx"
RUNTIME = "runtime"
MISMATCH = "mismatch"
FAILURES = (NO_CONVERTER, CONVERSION, ONNX_INVALID, RUNTIME, MISMATCH)


@dataclasses.dataclass
class Outcome:
    """What happened to one sample: a category, a short message, the missing converters if any."""

    category: str
    message: str = ""
    missing: tuple[str, ...] = ()
    reference: bool = False  # checked by onnx.reference instead of onnxruntime

    @property
    def failed(self) -> bool:
        return self.category in FAILURES

    def short(self) -> str:
        if self.category == NO_CONVERTER:
            return "no converter for " + ", ".join(self.missing)
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.category}: {first[:160]}" if first else self.category


# -- the database ------------------------------------------------------------------------------------


@functools.cache
def op_db() -> list:
    """The OpInfo entries with float32 CPU support (the import takes a few seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return [op for op in db if torch.float32 in op.supported_dtypes("cpu")]


def op_key(op) -> str:
    """``nn.functional.conv2d``, ``max.reduction_with_dim``: the OpInfo name and its variant."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


@functools.cache
def ops_by_key() -> dict[str, Any]:
    """Every OpInfo of the database by its key (``name`` or ``name.variant``)."""
    return {op_key(op): op for op in op_db()}


def supported_dtypes(op) -> list[torch.dtype]:
    """The dtypes of :data:`DTYPES` OpInfo says ``op`` supports on the CPU."""
    dtypes = op.supported_dtypes("cpu")
    return [d for d in DTYPES if d in dtypes]


def samples(op, dtype: torch.dtype, limit: int | None = None) -> list:
    """The first ``limit`` sample inputs of ``op`` for ``dtype`` (all with ``None``); seeded."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # consumed to the end: a generator left open is closed later, maybe inside an export it then breaks
        out = list(op.sample_inputs("cpu", dtype))
    return out if limit is None else out[:limit]


# -- one sample as a module ------------------------------------------------------------------------------


class SampleModule(torch.nn.Module):
    """Calls ``fn(input, *args, **kwargs)``: tensors are the module's inputs, the rest is baked in.

    ``forward`` returns the flat tuple of the result's leaves (tensors and Python scalars).
    """

    def __init__(self, fn: Callable, sample):
        super().__init__()
        self.fn = fn
        leaves, self.spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self.is_tensor = [isinstance(x, torch.Tensor) for x in leaves]
        self.constants = [None if t else x for x, t in zip(leaves, self.is_tensor)]
        self.inputs = tuple(x for x, t in zip(leaves, self.is_tensor) if t)

    def forward(self, *tensors):
        it = iter(tensors)
        leaves = [next(it) if t else c for t, c in zip(self.is_tensor, self.constants)]
        input, args, kwargs = tree_unflatten(leaves, self.spec)
        out = self.fn(input, *args, **kwargs)
        return tuple(tree_flatten(out)[0])


def clone_inputs(inputs: tuple) -> tuple:
    """A copy of each input (ops may write into theirs)."""
    return tuple(x.clone() for x in inputs)


# -- exporters -----------------------------------------------------------------------------------------


def convert_ours(ep: torch.export.ExportedProgram) -> onnx.ModelProto:
    """The exported program translated by ``to_onnx``."""
    return to_onnx(ep)


def convert_official(ep: torch.export.ExportedProgram) -> onnx.ModelProto:
    """``torch.onnx.export(..., dynamo=True)`` on the same ExportedProgram (it decomposes it itself)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(ep, (), dynamo=True, verbose=False, report=False, verify=False)
    return program.model_proto


EXPORTERS = {"ours": convert_ours, "official": convert_official}

_MISSING_OFFICIAL = re.compile(r"No ONNX function found for <OpOverload\(op='(\w+)\.(\w+)', overload='(\w+)'\)>")


def _classify_conversion(e: Exception, exporter: str) -> Outcome:
    if isinstance(e, UnsupportedOpError):
        return Outcome(NO_CONVERTER, str(e), missing=tuple(sorted(e.missing)))
    message = f"{type(e).__name__}: {e}"
    if exporter == "official":
        # onnxscript names the ops it lacks in its report
        missing = sorted({f"{ns}::{name}.{overload}" for ns, name, overload in _MISSING_OFFICIAL.findall(message)})
        if missing:
            return Outcome(NO_CONVERTER, message, missing=tuple(missing))
    return Outcome(CONVERSION, message)


# -- comparison ----------------------------------------------------------------------------------------


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.resolve_conj().resolve_neg().numpy()
    if getattr(value, "dtype", None) is not None and value.dtype.name == "bfloat16":
        return np.asarray(value).astype(np.float32)
    return np.asarray(value)


def _dtype_name(value: Any) -> str:
    """``float16``, ``bfloat16``...: the element type of a torch tensor or a numpy array (ml_dtypes)."""
    if isinstance(value, torch.Tensor):
        return str(value.dtype).replace("torch.", "")
    return np.asarray(value).dtype.name


def compare(expected: list, got: list, compare_values: bool = True) -> str | None:
    """None when ``got`` (onnx outputs) equals ``expected`` (eager), else what differs.

    Floats compare with the tolerance of their dtype, NaN at the same positions; integers and booleans
    exactly. ``compare_values=False`` checks shapes and dtypes only (random or uninitialized outputs).
    """
    if len(got) != len(expected):
        return f"{len(got)} outputs, eager has {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        tdtype = e.dtype if isinstance(e, torch.Tensor) else None
        e_np, g_np = _as_numpy(e), _as_numpy(g)
        if e_np.shape != g_np.shape:
            return f"output {i}: shape {g_np.shape}, eager {e_np.shape}"
        if tdtype is not None and _dtype_name(e) != _dtype_name(g):
            return f"output {i}: dtype {_dtype_name(g)}, eager {_dtype_name(e)}"
        if not compare_values:
            continue
        if e_np.dtype.kind in "fc":
            atol, rtol = TOLERANCES.get(tdtype, TOLERANCES[torch.float32])
            g_np = g_np.astype(e_np.dtype)
            nan_e, nan_g = np.isnan(e_np), np.isnan(g_np)
            if not np.array_equal(nan_e, nan_g):
                return f"output {i}: NaN at other positions ({int(nan_g.sum())} NaN, eager {int(nan_e.sum())})"
            if not np.allclose(g_np, e_np, atol=atol, rtol=rtol, equal_nan=True):
                with np.errstate(invalid="ignore"):
                    diff = np.nanmax(np.abs(g_np.astype(np.float64) - e_np.astype(np.float64)))
                return f"output {i}: max abs diff {diff:.3g} (atol={atol}, rtol={rtol})"
        elif not np.array_equal(g_np, e_np):
            return f"output {i}: {int((g_np != e_np).sum())} of {e_np.size} values differ"
    return None


def _run_onnx(onx: onnx.ModelProto, feeds: list, dtype: torch.dtype) -> tuple[list, str]:
    """Runs with onnxruntime (CPU); for ``REFERENCE_FALLBACK`` dtypes a missing kernel falls back to the
    reference evaluator. Returns the outputs and, when the reference evaluator ran them, onnxruntime's
    error (the kernel it lacks), else an empty string."""
    names = [i.name for i in onx.graph.input]
    if len(names) != len(feeds):
        raise ValueError(f"the ONNX model has {len(names)} inputs, the sample {len(feeds)} tensors")
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 4  # the failure is in the exception
        sess = InferenceSession(onx, providers=["CPUExecutionProvider"], sess_options=options)
        return sess.run(None, dict(zip(names, feeds))), ""
    except Exception as e:
        if dtype not in REFERENCE_FALLBACK or "NOT_IMPLEMENTED" not in str(e):
            raise
        no_kernel = str(e).strip().splitlines()[0]
    try:
        return ReferenceEvaluator(onx).run(None, {n: to_numpy(t) for n, t in zip(names, feeds)}), no_kernel
    except Exception as e:
        raise _NoKernel(f"{no_kernel}; onnx.reference fails too: {type(e).__name__}: {e}") from e


class _NoKernel(Exception):
    """onnxruntime has no kernel and the reference evaluator cannot run the graph either."""


def check_sample(
    op,
    sample,
    dtype: torch.dtype,
    exporters: tuple[str, ...] = ("ours",),
    compare_values: bool = True,
) -> dict[str, Outcome]:
    """Exports ``op`` on ``sample``, converts with each of ``exporters``, compares with eager.

    Returns one :class:`Outcome` per exporter (the same ``export`` or ``not compared`` outcome for all
    when the sample cannot be exported or run eagerly).
    """
    model = SampleModule(op.op, sample).eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = model(*clone_inputs(model.inputs))
    except Exception as e:
        return dict.fromkeys(exporters, Outcome(NOT_COMPARED, f"eager fails: {type(e).__name__}: {e}"))
    if not expected or not all(isinstance(e, (torch.Tensor, bool, int, float)) for e in expected):
        kinds = sorted({type(e).__name__ for e in expected})
        return dict.fromkeys(exporters, Outcome(NOT_COMPARED, f"outputs {kinds}"))
    if any(isinstance(e, torch.Tensor) and e.is_complex() for e in expected):
        return dict.fromkeys(exporters, Outcome(NOT_COMPARED, "complex output"))
    try:
        torch._dynamo.reset()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):  # graphs printed on failures
            warnings.simplefilter("ignore")
            ep = torch.export.export(model, clone_inputs(model.inputs), strict=False)
    except Exception as e:
        return dict.fromkeys(exporters, Outcome(EXPORT, f"{type(e).__name__}: {str(e).strip()}"))
    return {name: _check_exporter(name, ep, model, expected, dtype, compare_values) for name in exporters}


def _check_exporter(name: str, ep, model, expected, dtype, compare_values) -> Outcome:
    try:
        onx = EXPORTERS[name](ep)
    except Exception as e:
        return _classify_conversion(e, name)
    try:
        onnx.checker.check_model(onx, full_check=name == "ours")
    except Exception as e:
        return Outcome(ONNX_INVALID, f"{type(e).__name__}: {e}")
    try:
        got, no_kernel = _run_onnx(onx, list(clone_inputs(model.inputs)), dtype)
    except _NoKernel as e:  # the graph passed onnx.checker, nothing can run it
        return Outcome(NOT_COMPARED, f"not run: {e}")
    except Exception as e:
        return Outcome(RUNTIME, f"{type(e).__name__}: {e}")
    reference = bool(no_kernel)
    diff = compare(list(expected), got, compare_values)
    if diff is not None and dtype in HALF_TYPES and closer_to_double(model, expected, got):
        note = "; ".join(filter(None, (diff, "closer to float64 than eager", no_kernel)))
        return Outcome(PASS, note, reference=reference)
    if diff is not None:
        return Outcome(MISMATCH, diff, reference=reference)
    return Outcome(PASS, no_kernel, reference=reference)


#: dtypes whose eager CPU kernels may compute (accumulate) in the dtype itself
HALF_TYPES = (torch.float16, torch.bfloat16)


def closer_to_double(model: SampleModule, expected: list, got: list) -> bool:
    """True when every float16/bfloat16 output of ``got`` is as close to the float64 result as eager's.

    Some of PyTorch's CPU kernels accumulate in float16 or bfloat16 (``conv_transpose3d``, ``grid_sampler``,
    ``addbmm``...) where the ONNX graph computes in float32: both round, neither is wrong. The module is run
    again on its floating inputs cast to float64; an output passes when, elementwise,
    ``|onnx - exact| <= |eager - exact| + tol(|exact|)`` with the dtype's tolerance, integers exactly.
    """
    inputs = tuple(x.double() if x.dtype in HALF_TYPES else x.clone() for x in model.inputs)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exact = model(*inputs)
    except Exception:
        return False
    if len(exact) != len(expected):
        return False
    for e, g, x in zip(expected, got, exact):
        if isinstance(e, torch.Tensor) and _dtype_name(e) != _dtype_name(g):
            return False
        e_np, g_np, x_np = _as_numpy(e), _as_numpy(g), _as_numpy(x)
        if e_np.shape != g_np.shape or e_np.shape != x_np.shape:
            return False
        if not isinstance(e, torch.Tensor) or e.dtype not in HALF_TYPES:
            if not np.array_equal(e_np, g_np, equal_nan=e_np.dtype.kind == "f"):
                return False
            continue
        atol, rtol = TOLERANCES[e.dtype]
        e64, g64, x64 = (a.astype(np.float64) for a in (e_np, g_np, x_np))
        if not np.array_equal(np.isnan(e64), np.isnan(g64)):
            return False
        with np.errstate(invalid="ignore"):
            ok = np.abs(g64 - x64) <= np.abs(e64 - x64) + atol + rtol * np.abs(x64)
        if not np.all(ok | np.isnan(e64) | (e64 == g64)):
            return False
    return True


def sweep(
    keys: list[str],
    dtypes: tuple[torch.dtype, ...] = (torch.float32,),
    limit: int | None = None,
    exporters: tuple[str, ...] = ("ours",),
    not_compared_values: frozenset = frozenset(),
) -> Iterator[tuple[str, torch.dtype, int, dict[str, Outcome]]]:
    """Yields ``(op key, dtype, sample index, {exporter: Outcome})`` for every selected sample."""
    by_key = ops_by_key()
    for key in keys:
        op = by_key[key]
        for dtype in dtypes:
            if dtype not in supported_dtypes(op):
                continue
            try:
                chosen = samples(op, dtype, limit)
            except Exception as e:
                yield key, dtype, -1, dict.fromkeys(exporters, Outcome(NOT_COMPARED, f"sample_inputs fails: {e}"))
                continue
            for i, sample in enumerate(chosen):
                yield key, dtype, i, check_sample(op, sample, dtype, exporters, key not in not_compared_values)


def summarize(outcomes: list[Outcome]) -> Outcome:
    """One outcome for a set of samples: the first failure, else pass if one sample passed, else the
    most common reason nothing was compared (``export``)."""
    for o in outcomes:
        if o.failed:
            return o
    passed = [o for o in outcomes if o.category == PASS]
    if passed:
        return Outcome(PASS, reference=all(o.reference for o in passed))
    for category in (EXPORT, NOT_COMPARED):
        for o in outcomes:
            if o.category == category:
                return o
    return Outcome(NOT_COMPARED, "no sample")
