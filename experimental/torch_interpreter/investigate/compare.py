"""Compares one PyTorch result with one onnxruntime result: shapes, dtypes, values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from ..runtime import to_numpy

#: default (atol, rtol) of a comparison by the type of PyTorch's value: a float16 or bfloat16 result is rounded to
#: its type after each op where onnxruntime's CPU keeps float32 between ops, so a node agrees with PyTorch to a few
#: units in the last place of its type, not to float32's tolerance; float64 and types not listed take float32's
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
    torch.float8_e4m3fn: (0.25, 0.25),
    torch.float8_e4m3fnuz: (0.25, 0.25),
    torch.float8_e5m2: (0.5, 0.5),
    torch.float8_e5m2fnuz: (0.5, 0.5),
}


def tolerance(dtype: torch.dtype, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    """``(atol, rtol)`` for a value of ``dtype``: the user's where given, else :data:`TOLERANCES`'s.

    >>> tolerance(torch.float16), tolerance(torch.float16, atol=1e-3), tolerance(torch.float64)
    ((0.01, 0.01), (0.001, 0.01), (0.0001, 0.001))
    """
    default_atol, default_rtol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    return (default_atol if atol is None else atol), (default_rtol if rtol is None else rtol)


def least_precise(dtypes: Iterable[torch.dtype]) -> torch.dtype:
    """The floating type among ``dtypes`` with the largest tolerance (float32 when there is none): a float32 value
    computed from bfloat16 values carries bfloat16's rounding and is compared within bfloat16's tolerance.

    >>> least_precise([torch.float32, torch.bfloat16, torch.int64]), least_precise([torch.float16, torch.float64])
    (torch.bfloat16, torch.float16)
    """
    found = [d for d in dtypes if d in TOLERANCES]
    return max(found, key=lambda d: TOLERANCES[d], default=torch.float32)


def describe_tolerance(atol: float | None, rtol: float | None) -> str:
    """``atol=..., rtol=...`` as given, the types' defaults for those not given.

    >>> describe_tolerance(None, None)
    'atol and rtol of each type (float32 1e-4 and 1e-3, float16 1e-2, bfloat16 5e-2)'
    >>> describe_tolerance(1e-3, None)
    'atol=0.001, rtol of each type'
    """
    if atol is None and rtol is None:
        return "atol and rtol of each type (float32 1e-4 and 1e-3, float16 1e-2, bfloat16 5e-2)"
    return ", ".join(f"{name}={value:g}" if value is not None else f"{name} of each type"
                     for name, value in (("atol", atol), ("rtol", rtol)))


@dataclass
class Comparison:
    """The outcome of comparing an expected (PyTorch) and an actual (ONNX) array."""

    ok: bool
    max_abs: float
    max_rel: float
    reason: str = ""  # why it is not ok: "shape", "dtype", "values"


def compare_arrays(
    expected: torch.Tensor, got: np.ndarray, atol: float | None = None, rtol: float | None = None
) -> Comparison:
    """Compares ``got`` with ``expected``: ``|got - expected| <= atol + rtol * |expected|`` for floats (``None``:
    the tolerance of ``expected``'s type, :func:`tolerance`), equality for integers and booleans; NaN in both places
    is equal, so is the same infinity.

    >>> import numpy as np, torch
    >>> compare_arrays(torch.tensor([1.0, float("nan")]), np.array([1.00001, np.nan], dtype=np.float32), 1e-4, 1e-3)
    Comparison(ok=True, max_abs=1.0013580322265625e-05, max_rel=1.0013580322265625e-05, reason='')
    >>> compare_arrays(torch.tensor([True, False]), np.array([True, True]), 1e-4, 1e-3).ok
    False
    """
    if isinstance(expected, torch.Tensor):
        atol, rtol = tolerance(expected.dtype, atol, rtol)
    else:
        atol, rtol = tolerance(torch.float32, atol, rtol)
    if isinstance(expected, torch.Tensor) and expected.is_complex():
        expected = torch.view_as_real(expected.resolve_conj())  # ONNX holds complex values as (real, imag) pairs
    exp = to_numpy(expected) if isinstance(expected, torch.Tensor) else np.asarray(expected)
    got = np.asarray(got)
    if tuple(exp.shape) != tuple(got.shape):
        return Comparison(False, float("inf"), float("inf"), "shape")
    a = exp.astype(np.float64)
    b = got.astype(np.float64)
    exact = exp.dtype.kind in "biu" or got.dtype.kind in "biu"
    both_nan = np.isnan(a) & np.isnan(b)
    same = (a == b) | both_nan  # also the same infinity
    diff = np.where(same, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = np.where(np.isfinite(a), np.abs(a), 0.0)
    rel = np.where(same, 0.0, diff / np.maximum(scale, 1e-12))
    max_rel = float(rel.max()) if rel.size else 0.0
    ok = bool(same.all()) if exact else bool((same | (diff <= atol + rtol * scale)).all())
    if exp.dtype != got.dtype:
        return Comparison(False, max_abs, max_rel, "dtype")
    return Comparison(ok, max_abs, max_rel, "" if ok else "values")
