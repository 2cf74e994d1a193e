"""Backward converters of the linear algebra ops (ops/linalg_backward.py): ``_cdist_backward`` exported alone and
compared with eager PyTorch calling the same op, and through the training backend with ``torch.autograd.grad`` of
``cdist`` (every p kernel: 0, below 1, 1, below 2, 2, above 2, inf; zero distances and zero differences; batch
dimensions broadcast; PyTorch's CPU has no float16 kernel to compare with)."""

from __future__ import annotations

import math

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model
from experimental.torch_interpreter.training import OrtBackend

A = torch.ops.aten
PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]


def _points(dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 4, 3, generator=gen), torch.randn(2, 5, 3, generator=gen)
    b[0, 1] = a[0, 2]  # a zero distance
    a[1, 0, 1] = b[1, 3, 1]  # a zero difference
    return a.to(dtype), b.to(dtype)


@pytest.mark.parametrize("p", PS)
def test_cdist_backward_alone(p):
    x1, x2 = _points()
    dist = torch.cdist(x1, x2, p=p)
    grad = torch.randn(dist.shape, generator=torch.Generator().manual_seed(1))
    check_model(Fn(lambda g, a, b, d: A._cdist_backward.default(g, a, b, p, d)), (grad, x1, x2, dist), atol=1e-4)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("shapes", [((2, 4, 3), (2, 5, 3)), ((1, 4, 3), (3, 5, 3))], ids=["batch", "broadcast"])
def test_cdist_trains_in_onnxruntime(p, shapes):
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(*shapes[0], generator=gen), torch.randn(*shapes[1], generator=gen)
    b[0, 1] = a[0, 2]
    grads = []
    for backend in (None, OrtBackend(providers="cpu", fallback="raise")):
        torch._dynamo.reset()
        x1, x2 = a.clone().requires_grad_(), b.clone().requires_grad_()
        fn = (lambda x, y: torch.cdist(x, y, p=p))
        out = (torch.compile(fn, backend=backend) if backend is not None else fn)(x1, x2)
        weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape) / out.numel()
        grads.append(torch.autograd.grad((out * weights).sum(), (x1, x2)))
        if backend is not None:
            assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"], backend.graphs
    for got, expected in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)

