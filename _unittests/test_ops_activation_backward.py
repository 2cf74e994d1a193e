"""Backward converters of activations and losses (ops/activation_backward.py, ops/loss_backward.py).

Each aten backward op is exported alone and compared with eager PyTorch calling the same op (float32 with a
dynamic batch, float16, bfloat16, edge values on the kernels' boundaries) and with ``torch.autograd.grad`` of the
forward op it differentiates.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.testing.aot import aot_graphs
from experimental.torch_interpreter.testing.check import Fn, check_model

A = torch.ops.aten
torch.manual_seed(0)


def _with_edges(x: torch.Tensor) -> torch.Tensor:
    """``x`` whose first row holds the boundaries of the kernels (0, 0.5, -1, 2, -3, 3)."""
    x = x.clone()
    x[0, :6] = torch.tensor([0.0, 0.5, -1.0, 2.0, -3.0, 3.0])
    return x


X = _with_edges(torch.rand(4, 7) * 8 - 4)
G = torch.randn(4, 7)
X2, G2 = torch.rand(6, 7) * 8 - 4, torch.randn(6, 7)  # another batch for the dynamic checks
DYN2 = ({0: "batch"}, {0: "batch"})

# name -> (backward op as a function of (grad, x), forward op as a function of x)
ACTIVATIONS = {
    "threshold_relu": (lambda g, x: A.threshold_backward.default(g, x, 0), torch.relu),
    "threshold": (lambda g, x: A.threshold_backward.default(g, x, 0.5), lambda x: F.threshold(x, 0.5, 20.0)),
    "gelu": (lambda g, x: A.gelu_backward.default(g, x), F.gelu),
    "gelu_tanh": (
        lambda g, x: A.gelu_backward.default(g, x, approximate="tanh"),
        lambda x: F.gelu(x, approximate="tanh"),
    ),
    "silu": (lambda g, x: A.silu_backward.default(g, x), F.silu),
    "mish": (lambda g, x: A.mish_backward.default(g, x), F.mish),
    "tanh": (lambda g, x: A.tanh_backward.default(g, torch.tanh(x)), torch.tanh),
    "sigmoid": (lambda g, x: A.sigmoid_backward.default(g, torch.sigmoid(x)), torch.sigmoid),
    "hardtanh": (lambda g, x: A.hardtanh_backward.default(g, x, -1.0, 2.0), lambda x: F.hardtanh(x, -1.0, 2.0)),
    "relu6": (lambda g, x: A.hardtanh_backward.default(g, x, 0.0, 6.0), F.relu6),
    "leaky_relu": (
        lambda g, x: A.leaky_relu_backward.default(g, x, 0.2, False),
        lambda x: F.leaky_relu(x, 0.2),
    ),
    "elu": (lambda g, x: A.elu_backward.default(g, 1.5, 1.0, 1.0, False, x), lambda x: F.elu(x, 1.5)),
    "elu_scaled": (
        lambda g, x: A.elu_backward.default(g, 1.5, 2.0, 0.5, False, x),
        lambda x: A.elu.default(x, 1.5, 2.0, 0.5),
    ),
    "elu_is_result": (
        lambda g, x: A.elu_backward.default(g, 1.5, 2.0, 0.5, True, A.elu.default(x, 1.5, 2.0, 0.5)),
        lambda x: A.elu.default(x, 1.5, 2.0, 0.5),
    ),
    "selu": (  # selu's backward: elu_backward with selu's constants
        lambda g, x: A.elu_backward.default(g, 1.6732632423543772, 1.0507009873554805, 1.0, False, x),
        F.selu,
    ),
    "softplus": (lambda g, x: A.softplus_backward.default(g, x, 1.0, 20.0), F.softplus),
    "softplus_beta": (
        lambda g, x: A.softplus_backward.default(g, x, 2.0, 3.0),
        lambda x: F.softplus(x, 2.0, 3.0),
    ),
    "hardsigmoid": (lambda g, x: A.hardsigmoid_backward.default(g, x), F.hardsigmoid),
    "hardswish": (lambda g, x: A.hardswish_backward.default(g, x), F.hardswish),
    "log_softmax": (
        lambda g, x: A._log_softmax_backward_data.default(g, torch.log_softmax(x, 1), 1, torch.float32),
        lambda x: torch.log_softmax(x, 1),
    ),
    "log_softmax_dim0": (
        lambda g, x: A._log_softmax_backward_data.default(g, torch.log_softmax(x, 0), -2, torch.float32),
        lambda x: torch.log_softmax(x, 0),
    ),
    "softmax": (  # already in activation.py: the backward pair of log_softmax
        lambda g, x: A._softmax_backward_data.default(g, torch.softmax(x, -1), -1, torch.float32),
        lambda x: torch.softmax(x, -1),
    ),
}


def _run(onx, *args: torch.Tensor) -> list[np.ndarray]:
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(onx.graph.input, args)})


def _autograd(forward, x: torch.Tensor, g: torch.Tensor, *rest: torch.Tensor) -> np.ndarray:
    """``d forward(x, *rest) / dx`` applied to ``g``, by eager autograd."""
    x = x.detach().clone().requires_grad_()
    (grad,) = torch.autograd.grad(forward(x, *rest), x, g)
    return grad.detach().numpy()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_backward(name):
    backward, forward = ACTIVATIONS[name]
    onx = check_model(Fn(backward), (G, X), dynamic_shapes=DYN2, more_inputs=[((G2, X2), None)])
    for g, x in [(G, X), (G2, X2)]:
        np.testing.assert_allclose(_run(onx, g, x)[0], _autograd(forward, x, g), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_activation_backward_dtypes(dtype):
    """Every activation backward at once, in float16 and bfloat16 (computed in float32) and float64."""
    names = sorted(n for n in ACTIVATIONS if not n.startswith(("log_softmax", "softmax")))

    def fn(g, x):
        return tuple(ACTIVATIONS[n][0](g, x) for n in names)

    tol = 1e-6 if dtype == torch.float64 else 1e-2
    check_model(Fn(fn), (G.to(dtype), X.to(dtype)), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_log_softmax_backward_dtypes(dtype):
    x = X.to(dtype)
    out = torch.log_softmax(x, 1)
    check_model(
        Fn(lambda g, y: A._log_softmax_backward_data.default(g, y, 1, dtype)), (G.to(dtype), out), atol=1e-2, rtol=1e-2
    )


def test_threshold_backward_keeps_nan_and_rounds_in_float():
    # NaN is not <= threshold: the gradient goes through; float16 0.3 (0.30005) is compared with 0.3 in float32
    x = torch.tensor([float("nan"), 0.3, 0.2999, 0.31, -1.0])
    g = torch.arange(1.0, 6.0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        check_model(Fn(lambda g, x: A.threshold_backward.default(g, x, 0.3)), (g.to(dtype), x.to(dtype)))


def test_log_softmax_backward_scalar():
    x, g = torch.tensor(2.5), torch.tensor(0.75)
    check_model(Fn(lambda g, y: A._log_softmax_backward_data.default(g, y, 0, torch.float32)), (g, x.log_softmax(0)))


def test_large_inputs_do_not_overflow():
    """Beyond softplus' threshold the gradient is ``grad``; silu, mish and gelu saturate without NaN."""
    x = torch.tensor([[-100.0, -30.0, -10.0, 10.0, 30.0, 100.0]])
    g = torch.ones_like(x)
    for name in ("softplus", "softplus_beta", "silu", "mish", "gelu", "gelu_tanh", "elu", "sigmoid", "tanh"):
        onx = check_model(Fn(ACTIVATIONS[name][0]), (g, x))
        np.testing.assert_allclose(_run(onx, g, x)[0], _autograd(ACTIVATIONS[name][1], x, g), atol=1e-6)


def test_log_sigmoid_backward():
    x = _with_edges(torch.rand(4, 7) * 8 - 4)
    _, buffer = A.log_sigmoid_forward.default(x)
    model = Fn(lambda g, x, b: A.log_sigmoid_backward.default(g, x, b))
    onx = check_model(model, (G, x, buffer), dynamic_shapes=({0: "batch"},) * 3)
    np.testing.assert_allclose(_run(onx, G, x, buffer)[0], _autograd(F.logsigmoid, x, G), atol=1e-6, rtol=1e-5)
    for dtype in (torch.float16, torch.bfloat16):
        check_model(model, (G.to(dtype), x.to(dtype), buffer.to(dtype)), atol=1e-2, rtol=1e-2)


def test_log_sigmoid_backward_empty_buffer():
    # CUDA's log_sigmoid_forward leaves the buffer empty: exp(-|x|) is recomputed
    x = _with_edges(torch.rand(4, 7) * 8 - 4)
    model = Fn(lambda g, x, b: A.log_sigmoid_backward.default(g, x, b))
    onx = to_onnx(model, (G, x, torch.empty(0)))
    np.testing.assert_allclose(_run(onx, G, x, torch.empty(0))[0], _autograd(F.logsigmoid, x, G), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dim", [1, -1, 0])
def test_glu_backward(dim):
    x = torch.randn(4, 6, 8)
    g = torch.randn(*[s // 2 if i == dim % 3 else s for i, s in enumerate(x.shape)])
    model = Fn(lambda g, x: A.glu_backward.default(g, x, dim))
    onx = check_model(model, (g, x))
    np.testing.assert_allclose(_run(onx, g, x)[0], _autograd(lambda x: F.glu(x, dim), x, g), atol=1e-6, rtol=1e-5)
    for dtype in (torch.float16, torch.bfloat16):
        check_model(model, (g.to(dtype), x.to(dtype)), atol=1e-2, rtol=1e-2)


def test_glu_backward_dynamic():
    """The halved axis dynamic: the Split sizes come from the shape."""
    batch, half = torch.export.Dim("batch"), torch.export.Dim("half")
    x, g = torch.randn(3, 8), torch.randn(3, 4)
    x2, g2 = torch.randn(5, 12), torch.randn(5, 6)
    model = Fn(lambda g, x: A.glu_backward.default(g, x, 1))
    check_model(
        model,
        (g, x),
        dynamic_shapes=({0: batch, 1: half}, {0: batch, 1: 2 * half}),
        more_inputs=[((g2, x2), None)],
    )


# -- losses ----------------------------------------------------------------------------------------------
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
LOGP = torch.randn(5, 4).log_softmax(1)
LABELS = torch.tensor([0, 3, -100, 1, 3])  # -100: ignored
WEIGHT = torch.rand(4) + 0.5


def _loss_grad(reduction: str, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """The gradient of a loss: of the loss's shape with no reduction, 0-D otherwise."""
    return torch.randn(shape) if reduction == "none" else torch.tensor(0.7)


def _nll_case(logp, target, weight, reduction, ignore_index, backward_op):
    """(module, args) calling ``backward_op`` as autograd does, and the autograd gradient of nll_loss."""
    red = REDUCTIONS[reduction]
    forward_op = A.nll_loss2d_forward.default if logp.dim() == 4 else A.nll_loss_forward.default
    total_weight = forward_op(logp, target, weight, red, ignore_index)[1]
    g = _loss_grad(reduction, target.shape)
    args = (g, logp, target, total_weight) + (() if weight is None else (weight,))

    def fn(g, x, t, tw, *w):
        return backward_op(g, x, t, w[0] if w else None, red, ignore_index, tw)

    def forward(x, t, *w):
        return F.nll_loss(x, t, w[0] if w else None, ignore_index=ignore_index, reduction=reduction)

    expected = _autograd(forward, logp, g, target, *(() if weight is None else (weight,)))
    return Fn(fn), args, expected


@pytest.mark.parametrize("weighted", [False, True], ids=["no_weight", "weight"])
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss_backward(reduction, weighted):
    weight = WEIGHT if weighted else None
    model, args, expected = _nll_case(LOGP, LABELS, weight, reduction, -100, A.nll_loss_backward.default)
    # another batch size: the batch is dynamic
    labels2 = torch.tensor([2, -100, 0, 1, 1, 3, -100])
    logp2 = torch.randn(7, 4).log_softmax(1)
    tw2 = A.nll_loss_forward.default(logp2, labels2, weight, REDUCTIONS[reduction], -100)[1]
    more = (_loss_grad(reduction, (7,)), logp2, labels2, tw2) + ((WEIGHT,) if weighted else ())
    dyn = ({0: "batch"} if reduction == "none" else None, {0: "batch"}, {0: "batch"}, None) + ((None,) * weighted)
    onx = check_model(model, args, dynamic_shapes=dyn, more_inputs=[(more, None)])
    np.testing.assert_allclose(_run(onx, *args)[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss_backward_ignore_index_in_range(reduction):
    # ignore_index 3 is a class: its targets get no gradient, the other classes do
    labels = torch.tensor([0, 3, 2, 1, 3])
    model, args, expected = _nll_case(LOGP, labels, WEIGHT, reduction, 3, A.nll_loss_backward.default)
    onx = check_model(model, args)
    np.testing.assert_allclose(_run(onx, *args)[0], expected, atol=1e-6, rtol=1e-5)


def test_nll_loss_backward_all_ignored():
    # total_weight is 0: mean divides by 0 but every gradient is 0 (no NaN)
    labels = torch.full((5,), -100)
    model, args, expected = _nll_case(LOGP, labels, None, "mean", -100, A.nll_loss_backward.default)
    onx = check_model(model, args)
    got = _run(onx, *args)[0]
    assert not np.isnan(got).any() and (got == 0).all()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss_backward_one_sample(reduction):
    # 1-D input [C] and 0-D target
    model, args, expected = _nll_case(LOGP[1], LABELS[1], WEIGHT, reduction, -100, A.nll_loss_backward.default)
    onx = check_model(model, args)
    np.testing.assert_allclose(_run(onx, *args)[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("weighted", [False, True], ids=["no_weight", "weight"])
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss2d_backward(reduction, weighted):
    logp = torch.randn(2, 4, 3, 5).log_softmax(1)
    target = torch.randint(0, 4, (2, 3, 5))
    target[0, 1, :2] = -100
    weight = WEIGHT if weighted else None
    model, args, expected = _nll_case(logp, target, weight, reduction, -100, A.nll_loss2d_backward.default)
    onx = check_model(model, args)
    np.testing.assert_allclose(_run(onx, *args)[0], expected, atol=1e-6, rtol=1e-5)


def test_nll_loss_backward_dynamic_classes():
    """The number of classes dynamic too: the one-hot comes from a Range."""
    model, args, _ = _nll_case(LOGP, LABELS, WEIGHT, "mean", -100, A.nll_loss_backward.default)
    logp2 = torch.randn(3, 6).log_softmax(1)
    labels2, w2 = torch.tensor([5, -100, 0]), torch.rand(6)
    tw2 = A.nll_loss_forward.default(logp2, labels2, w2, 1, -100)[1]
    check_model(
        model,
        args,
        dynamic_shapes=(None, {0: "batch", 1: "classes"}, {0: "batch"}, None, {0: "classes"}),
        more_inputs=[((torch.tensor(1.5), logp2, labels2, tw2, w2), None)],
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_nll_loss_backward_dtypes(reduction, dtype):
    model, args, _ = _nll_case(LOGP, LABELS, WEIGHT, reduction, -100, A.nll_loss_backward.default)
    args = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
    check_model(model, args, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_cross_entropy_backward_chain(reduction):
    """nll_loss_backward then _log_softmax_backward_data, as AOTAutograd differentiates cross_entropy."""
    x = torch.randn(5, 4)
    red = REDUCTIONS[reduction]
    logp = x.log_softmax(1)
    tw = A.nll_loss_forward.default(logp, LABELS, WEIGHT, red, -100)[1]
    g = _loss_grad(reduction, (5,))

    def fn(g, x, t, tw, w):
        y = torch.log_softmax(x, 1)
        gy = A.nll_loss_backward.default(g, y, t, w, red, -100, tw)
        return A._log_softmax_backward_data.default(gy, y, 1, torch.float32)

    args = (g, x, LABELS, tw, WEIGHT)
    onx = check_model(Fn(fn), args)
    expected = _autograd(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction), x, g, LABELS, WEIGHT)
    np.testing.assert_allclose(_run(onx, *args)[0], expected, atol=1e-6, rtol=1e-5)


P = torch.rand(4, 5) * 0.98 + 0.01  # probabilities
T = torch.rand(4, 5)


# name -> (backward op of (grad, x, target, reduction), forward loss of (x, target, reduction), x, target)
POINTWISE = {
    "mse": (lambda g, x, t, r: A.mse_loss_backward.default(g, x, t, r), F.mse_loss, X, G),
    "smooth_l1": (
        lambda g, x, t, r: A.smooth_l1_loss_backward.default(g, x, t, r, 1.0),
        F.smooth_l1_loss,
        X,
        torch.zeros_like(X),  # x - t hits +-beta and 0
    ),
    "smooth_l1_beta": (
        lambda g, x, t, r: A.smooth_l1_loss_backward.default(g, x, t, r, 0.5),
        lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
        X,
        X + torch.tensor([0.5, -0.5, 0.25, 0.0, 1.0, -2.0, 0.1]),
    ),
    "huber": (
        lambda g, x, t, r: A.huber_loss_backward.default(g, x, t, r, 1.5),
        lambda x, t, reduction: F.huber_loss(x, t, reduction=reduction, delta=1.5),
        X,
        X + torch.tensor([1.5, -1.5, 0.25, 0.0, 3.0, -2.0, 0.1]),
    ),
    "bce": (
        lambda g, x, t, r: A.binary_cross_entropy_backward.default(g, x, t, None, r),
        F.binary_cross_entropy,
        P,
        T,
    ),
}


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_loss_backward(name, reduction):
    backward, forward, x, t = POINTWISE[name]
    red = REDUCTIONS[reduction]
    g = _loss_grad(reduction, x.shape)
    model = Fn(lambda g, x, t: backward(g, x, t, red))
    x2, t2 = x[:3] * 0.9, t[:3]
    dyn = ({0: "batch"} if reduction == "none" else None, {0: "batch"}, {0: "batch"})
    more = [((_loss_grad(reduction, x2.shape), x2, t2), None)]
    onx = check_model(model, (g, x, t), dynamic_shapes=dyn, more_inputs=more)
    expected = _autograd(lambda x, t: forward(x, t, reduction=reduction), x, g, t)
    np.testing.assert_allclose(_run(onx, g, x, t)[0], expected, atol=1e-6, rtol=1e-5)


def test_smooth_l1_loss_backward_beta_zero():
    # beta 0 is l1: sign(x - t), and x == t gives -grad as PyTorch's kernel (x - t <= -0)
    x, t = torch.tensor([1.0, -1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 0.0, 2.0])
    for r in REDUCTIONS.values():
        g = torch.arange(1.0, 5.0) if r == 0 else torch.tensor(0.5)
        check_model(Fn(lambda g, x, t: A.smooth_l1_loss_backward.default(g, x, t, r, 0.0)), (g, x, t))


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
def test_binary_cross_entropy_backward_weight(reduction):
    red = REDUCTIONS[reduction]
    g, w = _loss_grad(reduction, P.shape), torch.rand(5)
    onx = check_model(Fn(lambda g, x, t, w: A.binary_cross_entropy_backward.default(g, x, t, w, red)), (g, P, T, w))
    expected = _autograd(lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction=reduction), P, g, T, w)
    np.testing.assert_allclose(_run(onx, g, P, T, w)[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_binary_cross_entropy_backward_extremes(dtype):
    # the kernel's epsilon 1e-12 is 0 in float16: x = 0 or 1 gives NaN there, a large finite value otherwise
    x = torch.tensor([0.0, 1.0, 0.5, 0.0, 1e-3])
    t = torch.tensor([0.0, 1.0, 1.0, 1.0, 0.0])
    g = torch.tensor(1.0)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    model = Fn(lambda g, x, t: A.binary_cross_entropy_backward.default(g, x, t, None, 2))
    check_model(model, (g.to(dtype), x.to(dtype), t.to(dtype)), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_loss_backward_dtypes(name, dtype):
    backward, _, x, t = POINTWISE[name]

    def fn(g0, g1, x, t):
        return backward(g0, x, t, 0), backward(g1, x, t, 1), backward(g1, x, t, 2)

    args = (torch.randn(x.shape), torch.tensor(0.7), x, t)
    check_model(Fn(fn), tuple(a.to(dtype) for a in args), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_rounds_as_the_kernels(dtype):
    """Bit-exact: sigmoid_backward rounds each step in float16, mse, huber and binary_cross_entropy in both
    types, nll_loss rounds ``-grad / total_weight`` before the weight."""
    gen = torch.Generator().manual_seed(5)
    x, t = torch.rand(8, 16, generator=gen) * 4 - 2, torch.rand(8, 16, generator=gen) * 4 - 2
    p, q = torch.rand(8, 16, generator=gen) * 0.98 + 0.01, torch.rand(8, 16, generator=gen)
    g, w = torch.randn(8, 16, generator=gen), torch.rand(16, generator=gen) * 3
    labels = torch.randint(0, 16, (8,), generator=gen)
    logp = x.log_softmax(1)
    tw = A.nll_loss_forward.default(logp.to(dtype), labels, w.to(dtype), 1, -100)[1]

    def fn(g, x, t, p, q, w, logp, tw, g0, labels):
        return (
            A.sigmoid_backward.default(g, p),  # p: a sigmoid's output
            A.mse_loss_backward.default(g, x, t, 0),
            A.mse_loss_backward.default(g0, x, t, 1),
            A.huber_loss_backward.default(g, x, t, 0, 1.3),
            A.huber_loss_backward.default(g0, x, t, 1, 1.3),
            A.binary_cross_entropy_backward.default(g, p, q, w, 0),
            A.binary_cross_entropy_backward.default(g0, p, q, w, 1),
            A.nll_loss_backward.default(g0, logp, labels, w, 1, -100, tw),
        )

    args = (g, x, t, p, q, w, logp, tw, torch.tensor(0.7), labels)
    check_model(Fn(fn), tuple(a.to(dtype) if a.is_floating_point() else a for a in args), atol=0, rtol=0)


# -- log_sigmoid_forward (ops/activation.py), the forward op AOTAutograd's graphs hold for F.logsigmoid --------
#: large magnitudes on both sides (no overflow, tiny tails), the kernel's boundaries, +-inf and NaN
LOGSIG_EDGES = torch.tensor(
    [-100.0, -30.0, -3.0, -0.5, 0.0, 0.5, 3.0, 23.0, 30.0, 100.0, float("inf"), float("-inf"), float("nan"), -1.0]
)


def _log_sigmoid_step(g, x):
    """Forward then backward, as a training step's graphs chain them (the buffer saved for the backward)."""
    out, buffer = A.log_sigmoid_forward.default(x)
    return out, buffer, A.log_sigmoid_backward.default(g, x, buffer)


def test_log_sigmoid_forward():
    x = torch.cat([LOGSIG_EDGES, torch.rand(14) * 8 - 4]).reshape(2, 14)
    model = Fn(lambda x: A.log_sigmoid_forward.default(x))
    more = [((torch.randn(5, 14) * 10,), None)]
    onx = check_model(model, (x,), dynamic_shapes=({0: "batch"},), more_inputs=more, atol=1e-6, rtol=1e-6)
    out, buffer = _run(onx, x)
    expected = F.logsigmoid(x)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(buffer, torch.exp(-x.abs()).numpy(), rtol=1e-6)  # the CPU kernel's buffer, exp(-|x|)
    assert out[0, 0] == -100 and np.isneginf(out[0, 11]) and out[0, 10] == 0 and np.isnan(out[0, 12])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_log_sigmoid_forward_dtypes(dtype):
    """Computed in float32 for float16 and bfloat16, the output and the buffer rounded once to the dtype, as the
    CPU kernel: the buffer within one unit in the last place of the dtype."""
    x = torch.cat([LOGSIG_EDGES, torch.rand(14) * 8 - 4]).reshape(2, 14).to(dtype)
    tol = 1e-6 if dtype == torch.float64 else 1e-2
    onx = check_model(Fn(lambda x: A.log_sigmoid_forward.default(x)), (x,), atol=tol, rtol=tol)
    got = _run(onx, x)[1]
    expected = A.log_sigmoid_forward.default(x)[1]
    assert got.dtype.itemsize == expected.element_size()
    np.testing.assert_allclose(got.astype(np.float64), expected.double().numpy(), atol=0, rtol=torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_log_sigmoid_forward_backward_matches_autograd(dtype):
    x = torch.cat([LOGSIG_EDGES[:10], torch.rand(18) * 8 - 4]).reshape(4, 7)
    g = torch.randn(4, 7)
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    args = (g.to(dtype), x.to(dtype))
    more = [((G2.to(dtype), X2.to(dtype)), None)]
    onx = check_model(Fn(_log_sigmoid_step), args, dynamic_shapes=DYN2, more_inputs=more, atol=tol, rtol=tol)
    out, _, grad = (r.astype(np.float32) if r.dtype.name == "bfloat16" else r for r in _run(onx, *args))
    xd = x.to(dtype).double()
    np.testing.assert_allclose(out.astype(np.float64), F.logsigmoid(xd).numpy(), atol=tol, rtol=tol)
    expected = _autograd(F.logsigmoid, xd, g.to(dtype).double())
    np.testing.assert_allclose(grad.astype(np.float64), expected, atol=tol, rtol=tol)


def test_log_sigmoid_forward_cuda_buffer_is_empty():
    """A graph traced for CUDA holds an empty buffer (the CUDA kernel saves none; PyTorch's decomposition too):
    the forward gives it empty and the backward recomputes exp(-|x|)."""
    x = _with_edges(torch.rand(4, 7) * 8 - 4)
    ep = torch.export.export(Fn(_log_sigmoid_step), (G, x))
    (node,) = [n for n in ep.graph.nodes if n.target is A.log_sigmoid_forward.default]
    empty = node.meta["val"][1].new_empty((0,))  # what a CUDA trace records
    node.meta["val"] = (node.meta["val"][0], empty)
    for user in node.users:
        if user.args[1] == 1:
            user.meta["val"] = empty
    onx = to_onnx(ep)
    out, buffer, grad = _run(onx, G, x)
    assert buffer.shape == (0,) and buffer.dtype == np.float32
    np.testing.assert_allclose(out, F.logsigmoid(x).numpy(), atol=1e-6)
    np.testing.assert_allclose(grad, _autograd(F.logsigmoid, x, G), atol=1e-6, rtol=1e-5)


def test_log_sigmoid_aot_autograd_graphs():
    """The graphs torch.compile hands a backend for F.logsigmoid hold log_sigmoid_forward (its buffer saved for
    the backward) and log_sigmoid_backward: both convert, and chained they give autograd's gradient."""
    graphs = aot_graphs(F.logsigmoid, X.clone().requires_grad_(), grad=G)
    forward, fw_inputs = graphs["forward"]
    backward, bw_inputs = graphs["backward"]
    assert any(n.target is A.log_sigmoid_forward.default for n in forward.graph.nodes)
    assert any(n.target is A.log_sigmoid_backward.default for n in backward.graph.nodes)
    fw_onx = check_model(forward, fw_inputs, atol=1e-6, rtol=1e-6)
    saved = _run(fw_onx, *fw_inputs)[1:]  # what the forward graph saves for the backward (x, buffer)
    bw_onx = check_model(backward, bw_inputs, atol=1e-6, rtol=1e-6)
    feeds = [torch.from_numpy(s) for s in saved] + [G]
    assert [tuple(t.shape) for t in feeds] == [tuple(t.shape) for t in bw_inputs]
    np.testing.assert_allclose(_run(bw_onx, *feeds)[0], _autograd(F.logsigmoid, X, G), atol=1e-6, rtol=1e-5)
