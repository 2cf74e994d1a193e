"""Compares one PyTorch result with one onnxruntime result: shapes, dtypes, values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..runtime import to_numpy


@dataclass
class Comparison:
    """The outcome of comparing an expected (PyTorch) and an actual (ONNX) array."""

    ok: bool
    max_abs: float
    max_rel: float
    reason: str = ""  # why it is not ok: "shape", "dtype", "values"


def compare_arrays(expected: torch.Tensor, got: np.ndarray, atol: float, rtol: float) -> Comparison:
    """Compares ``got`` with ``expected``: ``|got - expected| <= atol + rtol * |expected|`` for floats,
    equality for integers and booleans; NaN in both places is equal, so is the same infinity.

    >>> import numpy as np, torch
    >>> compare_arrays(torch.tensor([1.0, float("nan")]), np.array([1.00001, np.nan], dtype=np.float32), 1e-4, 1e-3)
    Comparison(ok=True, max_abs=1.0013580322265625e-05, max_rel=1.0013580322265625e-05, reason='')
    >>> compare_arrays(torch.tensor([True, False]), np.array([True, True]), 1e-4, 1e-3).ok
    False
    """
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
