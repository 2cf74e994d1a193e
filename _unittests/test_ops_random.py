"""Random sampling (ops/random.py): the values are random, so the tests check shapes, dtypes, ranges and
the law of the samples (mean and standard deviation over many draws), never exact values."""

from __future__ import annotations

import numpy as np
import torch
from helpers import Fn

from experimental.torch_interpreter import InferenceSession, to_onnx


def _run(fn, *args):
    onx = to_onnx(Fn(fn), args)
    return InferenceSession(onx, providers=["CPUExecutionProvider"]).run(None, {i.name: a for i, a in zip(onx.graph.input, args)})


def test_rand_and_randn_laws():
    x = torch.zeros(200, 100)
    u, n = _run(lambda x: (torch.rand_like(x), torch.randn_like(x)), x)
    assert u.shape == n.shape == (200, 100) and u.dtype == n.dtype == np.float32
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


def test_randint_range_and_dtype():
    (r,) = _run(lambda x: torch.randint_like(x, 3, 7, dtype=torch.int64), torch.zeros(1000))
    assert r.dtype == np.int64 and set(np.unique(r)) == {3, 4, 5, 6}


def test_bernoulli_probability():
    (b,) = _run(lambda p: torch.bernoulli(p), torch.full((20000,), 0.3))
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02


def test_dropout_in_training_mode_scales_kept_values():
    (y,) = _run(lambda x: torch.nn.functional.dropout(x, 0.25, training=True), torch.ones(20000))
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert abs((y == 0).mean() - 0.25) < 0.02
