"""Random sampling (ops/random.py): the values are random, so the tests check shapes, dtypes, ranges and
the law of the samples (mean and standard deviation over many draws, loose tolerances), never exact values.
Shapes and dtypes are compared with eager PyTorch's on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.errors import UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_model

N = 20000  # draws for a law: the standard error of a mean of unit variance is 0.007


def _sample(fn, *args, dynamic_shapes=None, more_inputs=()):
    """Exports ``fn``, runs it with onnxruntime on ``args`` (then on each of ``more_inputs``), checks the
    shapes and dtypes of the outputs against eager PyTorch, returns the onnxruntime outputs of ``args``."""
    onx = to_onnx(Fn(fn), args, dynamic_shapes=dynamic_shapes)
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    first = None
    for inputs in [args, *more_inputs]:
        got = sess.run(None, {i.name: a for i, a in zip(onx.graph.input, inputs)})
        expected = fn(*inputs)
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape), f"shape {g.shape} != {tuple(e.shape)}"
            assert g.dtype.name == str(e.dtype).removeprefix("torch."), f"dtype {g.dtype} != {e.dtype}"
        first = got if first is None else first
    return first


# -- uniform and normal ---------------------------------------------------------------------------------------
def test_rand_and_randn_laws():
    x = torch.zeros(200, 100)
    u, n = _sample(lambda x: (torch.rand_like(x), torch.randn_like(x)), x)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02 and abs(u.std() - 12**-0.5) < 0.01
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.bfloat16])
def test_like_keeps_dtype(dtype):
    u, n = _sample(lambda x: (torch.rand_like(x), torch.randn_like(x)), torch.zeros(N, dtype=dtype))
    u, n = u.astype(np.float64), n.astype(np.float64)
    assert 0 <= u.min() and u.max() <= 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05


def test_factories_with_a_size():
    def fn(x):
        return torch.rand(3, N // 3), torch.randn(N, dtype=torch.float64), torch.randn(2, 5, dtype=torch.float16)

    u, n, h = _sample(fn, torch.zeros(1))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    assert h.std() > 0  # not a constant


def test_factories_with_a_dynamic_size():
    def fn(x):
        return torch.rand(x.shape[0], 1000), torch.randn_like(x), torch.randint(0, 4, (x.shape[0] * 2,))

    x = torch.zeros(3, 4)
    u, n, i = _sample(fn, x, dynamic_shapes=({0: "batch"},), more_inputs=[(torch.zeros(7, 4),)])
    assert 0 <= u.min() and u.max() < 1 and n.std() > 0 and set(np.unique(i)) <= {0, 1, 2, 3}


def test_normal_overloads():
    mean, std = torch.full((N,), 3.0), torch.full((N,), 0.5)

    def fn(mean, std):
        return (
            torch.normal(mean, std),
            torch.normal(mean, 2.0),
            torch.normal(-1.0, std),
            torch.normal(2.0, 3.0, size=(N,)),
        )

    for sample, (m, s) in zip(_sample(fn, mean, std), [(3, 0.5), (3, 2), (-1, 0.5), (2, 3)]):
        assert abs(sample.mean() - m) < 0.05 * max(s, 1) and abs(sample.std() - s) < 0.05 * s


@pytest.mark.xfail(strict=True, raises=UnsupportedOpError, reason="aten::normal_.default has no converter")
def test_normal_inplace():
    (y,) = _sample(lambda x: x.clone().normal_(5.0, 0.1), torch.zeros(N))
    assert abs(y.mean() - 5) < 0.01 and abs(y.std() - 0.1) < 0.005


def test_normal_broadcast_means():
    """One mean and one standard deviation per column: each column follows its own law."""
    mean, std = torch.tensor([-10.0, 0.0, 10.0]), torch.tensor([0.1, 1.0, 3.0])
    (y,) = _sample(lambda m, s: torch.normal(m.expand(N // 3, 3), s.expand(N // 3, 3)), mean, std)
    np.testing.assert_allclose(y.mean(0), mean.numpy(), atol=0.2)
    np.testing.assert_allclose(y.std(0), std.numpy(), rtol=0.1)


# -- integers -------------------------------------------------------------------------------------------------
def test_randint_range_and_dtype():
    (r,) = _sample(lambda x: torch.randint_like(x, 3, 7, dtype=torch.int64), torch.zeros(1000))
    assert r.dtype == np.int64 and set(np.unique(r)) == {3, 4, 5, 6}


@pytest.mark.parametrize(
    "fn, values",
    [
        (lambda x: torch.randint(5, (N,)), range(5)),
        (lambda x: torch.randint(-3, 2, (N,), dtype=torch.int32), range(-3, 2)),
        (lambda x: torch.randint_like(x, 4), range(4)),  # int32 as the input
        (lambda x: torch.randint_like(x, 1, 3, dtype=torch.float32), range(1, 3)),
    ],
)
def test_randint_uniform_counts(fn, values):
    (r,) = _sample(fn, torch.zeros(N, dtype=torch.int32))
    found, counts = np.unique(r, return_counts=True)
    assert found.tolist() == list(values)
    np.testing.assert_allclose(counts / r.size, 1 / len(values), atol=0.02)


def test_randperm_is_a_permutation():
    (p,) = _sample(lambda x: torch.randperm(50) + x, torch.zeros(1, dtype=torch.int64))
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))


# -- distributions filling a tensor ---------------------------------------------------------------------------
def test_uniform_exponential_geometric():
    def fn(x):
        return x.clone().uniform_(-2.0, 5.0), x.clone().exponential_(2.0), x.clone().geometric_(0.3)

    u, e, g = _sample(fn, torch.zeros(N))
    assert -2 <= u.min() and u.max() < 5 and abs(u.mean() - 1.5) < 0.05
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02 and abs(e.std() - 0.5) < 0.03
    assert g.min() >= 1 and np.all(g == np.round(g)) and abs(g.mean() - 1 / 0.3) < 0.1


def test_log_normal_and_cauchy():
    def fn(x):
        return x.clone().log_normal_(0.5, 0.25), x.clone().cauchy_(1.0, 2.0)

    ln, c = _sample(fn, torch.zeros(N))
    assert ln.min() > 0 and abs(np.log(ln).mean() - 0.5) < 0.02 and abs(np.log(ln).std() - 0.25) < 0.02
    # Cauchy has no mean: its quartiles are median -+ sigma
    np.testing.assert_allclose(np.percentile(c, [25, 50, 75]), [-1.0, 1.0, 3.0], atol=0.15)


# -- bernoulli, dropout, multinomial --------------------------------------------------------------------------
def test_bernoulli_probability():
    (b,) = _sample(lambda p: torch.bernoulli(p), torch.full((N,), 0.3))
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02


def test_bernoulli_overloads_and_extremes():
    def fn(x):
        p = torch.cat([torch.zeros(10), torch.ones(10), torch.full((N,), 0.8)])
        return torch.bernoulli(x, 0.2), x.bernoulli(p=0.9), torch.bernoulli(p)

    b2, b9, bp = _sample(fn, torch.zeros(N))
    assert abs(b2.mean() - 0.2) < 0.02 and abs(b9.mean() - 0.9) < 0.02
    assert bp[:10].sum() == 0 and bp[10:20].min() == 1 and abs(bp[20:].mean() - 0.8) < 0.02


def test_dropout_in_training_mode_scales_kept_values():
    (y,) = _sample(lambda x: torch.nn.functional.dropout(x, 0.25, training=True), torch.ones(N))
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert abs((y == 0).mean() - 0.25) < 0.02


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dropout_with_p_one_is_input_times_zero(dtype):
    """p >= 1 drops everything as PyTorch does (``input * 0``: NaN and infinities give NaN), bfloat16 included."""
    x = torch.tensor([1.5, -2.0, float("inf"), float("nan"), -0.0], dtype=dtype)
    check_model(Fn(lambda t: torch.nn.functional.dropout(t, 1.0, training=True)), (x,))


def test_dropout2d_drops_whole_channels():
    (y,) = _sample(lambda x: F.dropout2d(x, 0.5, training=True), torch.ones(50, 40, 2, 3))
    channels = y.reshape(50 * 40, -1)
    assert np.all((channels == 0).all(1) | (channels == 2.0).all(1))  # a channel is dropped or scaled
    assert abs((channels[:, 0] == 0).mean() - 0.5) < 0.05


def test_alpha_dropout_keeps_mean_and_variance():
    (y,) = _sample(lambda x: F.alpha_dropout(x, 0.5, training=True), torch.randn(N))
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    alpha = -1.7580993408473766  # SELU's -scale * alpha: a dropped value, before the affine correction
    a = (0.5 * (1 + 0.5 * alpha**2)) ** -0.5
    dropped = a * alpha - a * alpha * 0.5
    assert abs(np.isclose(y, dropped, atol=1e-4).mean() - 0.5) < 0.03


def test_multinomial_with_replacement():
    (s,) = _sample(
        lambda p: torch.multinomial(p, N, replacement=True), torch.tensor([[0.0, 1.0, 3.0], [2.0, 2.0, 0.0]])
    )
    assert s.dtype == np.int64
    np.testing.assert_allclose(np.bincount(s[0], minlength=3) / N, [0, 0.25, 0.75], atol=0.02)
    np.testing.assert_allclose(np.bincount(s[1], minlength=3) / N, [0.5, 0.5, 0], atol=0.02)


def test_multinomial_without_replacement():
    weights = torch.tensor([0.0, 1.0, 5.0, 0.0, 2.0]).repeat(2000, 1)
    (s,) = _sample(lambda p: torch.multinomial(p, 3), weights)
    assert all(sorted(row) == [1, 2, 4] for row in s.tolist())  # three distinct indices, none of weight 0
    first = np.bincount(s[:, 0], minlength=5) / len(s)
    np.testing.assert_allclose(first, [0, 1 / 8, 5 / 8, 0, 2 / 8], atol=0.03)  # the first draw follows p
    (one,) = _sample(lambda p: torch.multinomial(p, 2), torch.tensor([1.0, 0.0, 1.0]))  # 1-D weights
    assert sorted(one.tolist()) == [0, 2]


def test_two_runs_draw_different_numbers():
    onx = to_onnx(Fn(lambda x: torch.rand_like(x)), (torch.zeros(100),))
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    feeds = {onx.graph.input[0].name: torch.zeros(100)}
    assert not np.array_equal(sess.run(None, feeds)[0], sess.run(None, feeds)[0])


def test_eval_dropout_is_identity():
    x = torch.randn(2, 3, 4, 5)
    fn = lambda x: tuple(f(x, 0.5, training=False) for f in (F.dropout, F.dropout2d, F.alpha_dropout))  # noqa: E731
    for y in _sample(fn, x):
        np.testing.assert_array_equal(y, x.numpy())
