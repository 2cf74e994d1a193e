"""Gradients of the poolings and of the reflection/replication paddings (ops/pooling_backward.py,
ops/padding_backward.py): each backward op against eager PyTorch calling the same aten op, and against
``torch.autograd.grad`` of the forward function with the same incoming gradient; static and dynamic sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession
from experimental.torch_interpreter.testing.check import Fn, check_model

A = torch.ops.aten


def _check(backward, args, forward, x, atol=1e-5, **kwargs):
    """``backward(*args)`` against eager PyTorch, then against ``torch.autograd.grad(forward(x), x, args[0])``."""
    onx = check_model(Fn(backward), args, atol=atol, rtol=atol, **kwargs)
    leaf = x.detach().requires_grad_()
    (expected,) = torch.autograd.grad(forward(leaf), leaf, args[0])
    np.testing.assert_allclose(_run(onx, args), expected.numpy(), atol=atol, rtol=atol)
    return onx


def _run(onx, args):
    """The first output of ``onx`` on ``args``."""
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a.numpy() for i, a in zip(onx.graph.input, args)})[0]


# -- average pools -------------------------------------------------------------------------------------------

AVG_CASES = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (1, 1), (1, 1), False, True, None),
    ((3, 2), (2, 1), (1, 0), False, False, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),  # the last window passes the padding
    ((3, 3), (2, 2), (1, 1), True, False, None),
    ((2, 3), (3, 2), (0, 1), True, True, None),  # stride > kernel: input positions no window reaches
    ((2, 2), (3, 3), (0, 0), False, True, None),
    ((3, 3), (2, 2), (1, 1), False, True, 5),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
def test_avg_pool2d_backward(case):
    k, s, p, ceil, include, divisor = case
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 8)
    y = F.avg_pool2d(x, k, s, p, ceil, include, divisor)
    g = torch.randn(y.shape)
    _check(
        lambda g, x: A.avg_pool2d_backward.default(g, x, k, s, p, ceil, include, divisor),
        (g, x),
        lambda x: F.avg_pool2d(x, k, s, p, ceil, include, divisor),
        x,
    )


def test_avg_pool3d_and_1d_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 2, 5, 6, 7)
    g = torch.randn(F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False).shape)
    _check(
        lambda g, x: A.avg_pool3d_backward.default(g, x, [3, 3, 3], [2, 2, 2], [1, 1, 1], True, False, None),
        (g, x),
        lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        x,
    )
    # avg_pool1d differentiates through avg_pool2d_backward on an unsqueezed input
    x1 = torch.randn(3, 4, 9)
    g1 = torch.randn(F.avg_pool1d(x1, 3, 2, 1).shape)
    leaf = x1.detach().requires_grad_()
    (expected,) = torch.autograd.grad(F.avg_pool1d(leaf, 3, 2, 1), leaf, g1)
    fn = Fn(lambda g, x: A.avg_pool2d_backward.default(g.unsqueeze(2), x.unsqueeze(2), [1, 3], [1, 2], [0, 1],
                                                       False, True, None).squeeze(2))
    onx = check_model(fn, (g1, x1))
    np.testing.assert_allclose(_run(onx, (g1, x1)), expected.numpy(), atol=1e-6)


def test_avg_pool2d_backward_dynamic_and_unbatched():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 8)
    g = torch.randn(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False).shape)

    def backward(g, x):
        return A.avg_pool2d_backward.default(g, x, [3, 3], [2, 2], [1, 1], True, False, None)

    x2 = torch.randn(3, 3, 11, 6)
    g2 = torch.randn(F.avg_pool2d(x2, 3, 2, 1, ceil_mode=True, count_include_pad=False).shape)
    d = torch.export.Dim.DYNAMIC
    check_model(
        Fn(backward), (g, x), dynamic_shapes=({0: d, 2: d, 3: d}, {0: d, 2: d, 3: d}),
        more_inputs=[((g2, x2), None)],
    )
    xu = torch.randn(3, 6, 6)
    gu = torch.randn(F.avg_pool2d(xu, 2).shape)
    _check(lambda g, x: A.avg_pool2d_backward.default(g, x, [2, 2], [2, 2], [0, 0], False, True, None), (gu, xu),
           lambda x: F.avg_pool2d(x, 2), xu)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_avg_pool2d_backward_types(dtype):
    torch.manual_seed(0)
    x = torch.randn(1, 2, 6, 6).to(dtype)
    g = torch.randn(1, 2, 3, 3).to(dtype)
    atol = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float64: 1e-6}[dtype]
    check_model(Fn(lambda g, x: A.avg_pool2d_backward.default(g, x, [3, 3], [2, 2], [1, 1], False, True, None)),
                (g, x), atol=atol, rtol=atol)


# -- adaptive pools ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size,out", [((8, 6), (4, 3)), ((7, 5), (3, 4)), ((6, 6), (1, 1)), ((5, 9), (5, 2))])
def test_adaptive_avg_pool2d_backward(size, out):
    torch.manual_seed(0)
    x = torch.randn(2, 3, *size)
    g = torch.randn(2, 3, *out)
    _check(lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x), (g, x),
           lambda x: F.adaptive_avg_pool2d(x, out), x)


def test_adaptive_avg_pool_backward_3d_dynamic_and_infinite():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6, 7)  # unbatched 3-D
    g = torch.randn(2, 3, 2, 4)
    _check(lambda g, x: A._adaptive_avg_pool3d_backward.default(g, x), (g, x),
           lambda x: F.adaptive_avg_pool3d(x, (3, 2, 4)), x)
    # a spatial size known at run time only
    x = torch.randn(2, 3, 7, 5)
    g = torch.randn(2, 3, 3, 2)
    x2 = torch.randn(2, 3, 10, 5)
    check_model(Fn(lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x)), (g, x),
                dynamic_shapes=(None, {2: torch.export.Dim("h", min=3)}), more_inputs=[((g, x2), None)])
    # an infinite gradient stays in its window (a product by an averaging matrix would spread NaN)
    g = torch.randn(1, 1, 2, 2)
    g[0, 0, 0, 0] = float("inf")
    check_model(Fn(lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x)), (g, torch.randn(1, 1, 5, 5)))


def test_adaptive_max_pool2d_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 5)
    _, indices = F.adaptive_max_pool2d(x, (3, 2), return_indices=True)
    g = torch.randn(2, 3, 3, 2)
    check_model(Fn(lambda g, x, i: A.adaptive_max_pool2d_backward.default(g, x, i)), (g, x, indices))
    leaf = x.detach().requires_grad_()
    (expected,) = torch.autograd.grad(F.adaptive_max_pool2d(leaf, (3, 2)), leaf, g)
    np.testing.assert_array_equal(A.adaptive_max_pool2d_backward.default(g, x, indices).numpy(), expected.numpy())


def test_max_pool2d_with_indices_backward_dynamic():
    torch.manual_seed(0)
    x, x2 = torch.randn(2, 3, 7, 6), torch.randn(3, 3, 9, 5)
    (_, i), (_, i2) = (F.max_pool2d(t, 3, 2, 1, return_indices=True) for t in (x, x2))
    g, g2 = torch.randn(i.shape), torch.randn(i2.shape)

    def backward(g, x, i):
        return A.max_pool2d_with_indices_backward.default(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i)

    d = torch.export.Dim.DYNAMIC
    dims = {0: d, 2: d, 3: d}
    check_model(Fn(backward), (g, x, i), dynamic_shapes=(dims, dims, dims), more_inputs=[((g2, x2, i2), None)])


# -- paddings ------------------------------------------------------------------------------------------------

PAD_CASES = [
    (F.pad, (2, 3), (2, 3, 7)),
    (F.pad, (0, 2), (2, 3, 7)),
    (F.pad, (1, 2, 3, 1), (2, 2, 5, 6)),
    (F.pad, (1, 1, 0, 2, 2, 1), (1, 2, 4, 5, 3)),
    (F.pad, (3, 0, 1, 1), (2, 6, 5)),  # unbatched 2-D
]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("case", PAD_CASES, ids=[str(len(c[1]) // 2) + "d" + str(i) for i, c in enumerate(PAD_CASES)])
def test_pad_backward(mode, case):
    _, pad, shape = case
    n = len(pad) // 2
    op = getattr(A, f"{'reflection' if mode == 'reflect' else 'replication'}_pad{n}d_backward").default
    torch.manual_seed(0)
    x = torch.randn(shape)
    g = torch.randn(F.pad(x, pad, mode=mode).shape)
    _check(lambda g, x: op(g, x, list(pad)), (g, x), lambda x: F.pad(x, pad, mode=mode), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_backward_dynamic(mode):
    op = A.reflection_pad2d_backward.default if mode == "reflect" else A.replication_pad2d_backward.default
    torch.manual_seed(0)
    pad = [2, 1, 1, 3]
    x, x2 = torch.randn(2, 3, 5, 6), torch.randn(3, 3, 7, 4)
    g, g2 = (torch.randn(F.pad(t, pad, mode=mode).shape) for t in (x, x2))
    h, w, gh, gw = (torch.export.Dim(n, min=4) for n in ("h", "w", "gh", "gw"))
    check_model(Fn(lambda g, x: op(g, x, pad)), (g, x),
                dynamic_shapes=({0: "batch", 2: gh, 3: gw}, {0: "batch", 2: h, 3: w}),
                more_inputs=[((g2, x2), None)])


def test_pad_backward_half():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8).half()
    g = torch.randn(2, 3, 12).half()
    check_model(Fn(lambda g, x: A.reflection_pad1d_backward.default(g, x, [2, 2])), (g, x), atol=2e-3, rtol=2e-3)
