"""Failures found by the OpInfo sweep over float16, bfloat16 and integer types: each test is the smallest
program that showed one, compared with eager PyTorch.

Most were ONNX models onnxruntime refused to load (no kernel of ``Where``, ``Mul`` or ``IsNaN`` for
bfloat16, no ``ReduceL2`` over axis 0 of a 0-D tensor). The average pool now sums float16 windows in
float32 as PyTorch does; its test checks the numbers near float16's limits (onnxruntime's CPU Conv already
accumulated in float32, so it matched before too).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter.testing.check import Fn, check_model, rand

HALF = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", [*HALF, torch.int64, torch.int32])
def test_threshold(dtype):
    x = rand(4, 5, dtype=dtype, normal=dtype.is_floating_point)
    check_model(Fn(lambda x: F.threshold(x, 0, 7)), (x,))


@pytest.mark.parametrize("dtype", HALF)
def test_hardshrink_and_heaviside(dtype):
    x = torch.tensor([[-2.0, -0.5, 0.0, 0.25, 0.5, 3.0]], dtype=dtype)
    check_model(Fn(lambda x: F.hardshrink(x, 0.5)), (x,))
    check_model(Fn(lambda x, v: torch.heaviside(x, v)), (x, torch.full_like(x, 0.5)))


@pytest.mark.parametrize("dtype", HALF)
def test_group_norm_affine(dtype):
    x = torch.randn(2, 4, 3, dtype=dtype)
    w, b = torch.randn(4, dtype=dtype), torch.randn(4, dtype=dtype)
    check_model(Fn(lambda x, w, b: F.group_norm(x, 2, w, b)), (x, w, b), atol=2e-2, rtol=2e-2)


def test_avg_pool_float16_accumulates_in_float32():
    """Windows of 25 values near 1000: a float16 sum past 16384 rounds to multiples of 16 at each addition,
    eager's mean is within half a float16 step (0.25 here) of the exact one."""
    x = (1000 + torch.randn(1, 2, 8, 8) * 3).to(torch.float16)
    check_model(Fn(lambda x: F.avg_pool2d(x, 5, 1, count_include_pad=False, padding=2)), (x,), atol=0.3, rtol=0)


@pytest.mark.parametrize("dim", [0, -1, None])
def test_vector_norm_of_a_scalar(dim):
    """A 0-D tensor with ``dim=0``: ONNX refuses axis 0 on a 0-D input, the norm reduces nothing."""
    check_model(Fn(lambda x: torch.linalg.vector_norm(x, 2, dim=dim)), (torch.tensor(-3.0),))


@pytest.mark.parametrize("dtype", HALF)
def test_nanmedian(dtype):
    x = torch.tensor([[1.0, float("nan"), 3.0, -2.0], [5.0, 4.0, 0.5, 2.0]], dtype=dtype)
    check_model(Fn(lambda x: torch.nanmedian(x, 1)), (x,))
    check_model(Fn(lambda x: torch.median(x, 1)), (x,))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int64])
@pytest.mark.parametrize("start, end, steps", [(4.3, 1.2, 4), (4.3, -3.0, 1), (0.0, 4.0, 5)])
def test_logspace_with_tensor_bounds(dtype, start, end, steps):
    """PyTorch rounds the bounds to the dtype and computes the rest in double (bfloat16: 20480, not 19968,
    for 10 ** 4.3 among 4 steps); one step is 10 ** start itself, not rounded."""
    tol = {"rtol": 1e-3} if dtype == torch.float16 else {}  # one float16 step off near 1849.5
    check_model(Fn(lambda a, b: torch.logspace(a, b, steps, dtype=dtype)), (torch.tensor(start), torch.tensor(end)),
                **tol)
