"""Scans along an axis and discrete calculus (ops/cumulative.py)."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model, rand


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize(
    "fn",
    [
        torch.cumsum,
        torch.cumprod,
        torch.logcumsumexp,
        lambda x, d: torch.cummax(x, d),
        lambda x, d: torch.cummin(x, d),
    ],
    ids=["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"],
)
def test_scans(fn, dim):
    check_model(Fn(lambda x: fn(x, dim)), (torch.randn(3, 4),))


@pytest.mark.parametrize(
    "fn, x",
    [
        (
            lambda x: torch.cummax(x, 1),
            torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 2.0, 1.0, 2.0, 0.0]]),
        ),  # ties: last index
        (lambda x: torch.cummin(x, 1), torch.tensor([[1.0, 0.0, 0.0, 2.0, 0.0], [2.0, 2.0, 1.0, 1.0, 3.0]])),
        (lambda x: torch.cummax(x, 1), torch.tensor([[1.0, NAN, 3.0, 2.0], [NAN, 0.0, NAN, 5.0]])),  # NaN propagates
        (lambda x: torch.cummin(x, 0), torch.tensor([[1.0, NAN], [NAN, 0.0], [0.0, -1.0]])),
        (lambda x: torch.cumsum(x, 1), torch.tensor([[1.0, NAN, 2.0], [INF, -INF, 1.0]])),
        (lambda x: torch.cumprod(x, 1), torch.tensor([[2.0, 0.0, 3.0], [-1.0, 2.0, 0.5]])),  # a zero
        (lambda x: torch.logcumsumexp(x, 1), torch.tensor([[-INF, 0.0, -INF], [1000.0, 1000.0, -1000.0]])),
    ],
    ids=[
        "cummax_ties",
        "cummin_ties",
        "cummax_nan",
        "cummin_nan",
        "cumsum_inf_nan",
        "cumprod_zero",
        "logcumsumexp_extremes",
    ],
)
def test_scan_values(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.cumsum(x, 0), rand(6, dtype=torch.int64, low=-5, high=5)),
        (lambda x: torch.cumsum(x, 1), rand(2, 3, dtype=torch.int32)),  # int32 sums in int64
        (lambda x: torch.cumsum(x, 1), rand(2, 3, dtype=torch.bool)),  # bool counts in int64
        (lambda x: torch.cumsum(x, 1, dtype=torch.float64), rand(2, 3)),
        (lambda x: torch.cumprod(x, 0), rand(4, 2, dtype=torch.int64)),
        (lambda x: torch.cummax(x, 0), rand(5, 2, dtype=torch.int64, low=-2, high=2)),
        (lambda x: torch.cummin(x, 1), rand(2, 5, dtype=torch.bool)),
    ],
    ids=["cumsum_int64", "cumsum_int32", "cumsum_bool", "cumsum_dtype", "cumprod_int64", "cummax_int64", "cummin_bool"],
)
def test_scan_dtypes(fn, x):
    check_model(Fn(fn), (x,))


def test_scan_float16():
    x = torch.rand(3, 5).half()
    check_model(
        Fn(lambda x: (torch.cumsum(x, 1), torch.cumprod(x, 1), torch.logcumsumexp(x, 0))), (x,), atol=1e-2, rtol=1e-2
    )


@pytest.mark.parametrize(
    "x",
    [torch.randn(1, 4), torch.randn(0, 4), torch.tensor(2.5)],
    ids=["size1", "empty", "0d"],
)
def test_scan_edge_shapes(x):
    fn = lambda x: (torch.cumsum(x, 0), torch.cumprod(x, 0), torch.logcumsumexp(x, 0), torch.cummax(x, 0))  # noqa: E731
    check_model(Fn(fn), (x,))


def test_cumsum_of_integers_and_dynamic_axis():
    check_model(Fn(lambda x: torch.cumsum(x, 0)), (torch.randint(-5, 5, (6,)),))
    check_model(
        Fn(lambda x: (torch.cumsum(x, 1), torch.cumprod(x, -1), torch.logcumsumexp(x, -1), torch.cummax(x, 0))),
        (torch.randn(2, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 9),), None)],
    )


def test_cummax_over_a_dynamic_axis():
    check_model(
        Fn(lambda x: torch.cummax(x, 1)),
        (torch.randn(2, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 9),), None)],
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda y: torch.diff(y, dim=1),
        lambda y: torch.diff(y, dim=0),
        lambda y: torch.diff(y, n=2),
        lambda y: torch.diff(y, n=7),  # more than the size: empty
        lambda y: torch.diff(y, prepend=y[:, :2], append=y[:, -1:] * 2),
        lambda y: torch.diff(y > 0),  # bool: logical xor
        lambda y: torch.diff(y.long(), dim=-1),
    ],
    ids=["dim1", "dim0", "n2", "n_too_large", "prepend_append", "bool", "int64"],
)
def test_diff(fn):
    check_model(Fn(fn), (torch.randn(3, 6),))


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda y: torch.trapezoid(y, dx=0.5), (torch.randn(3, 6),)),
        (lambda y: torch.trapezoid(y, dim=0), (torch.randn(3, 6),)),
        (lambda y, x: torch.trapezoid(y, x), (torch.randn(3, 6), torch.rand(6).cumsum(0))),
        (lambda y, x: torch.trapz(y, x, dim=0), (torch.randn(4, 2), torch.rand(4, 2).cumsum(0))),
        (lambda y: torch.trapz(y, dx=2.0), (torch.randn(3, 6),)),
        (lambda y: torch.cumulative_trapezoid(y), (torch.randn(3, 6),)),
        (lambda y: torch.cumulative_trapezoid(y, dx=0.1, dim=0), (torch.randn(3, 6),)),
        (lambda y, x: torch.cumulative_trapezoid(y, x), (torch.randn(3, 6), torch.rand(6).cumsum(0))),
        (lambda y: torch.trapezoid(y), (torch.randn(3, 1),)),  # one point: 0
        (lambda y: torch.trapezoid(y), (torch.randint(-3, 3, (2, 4)),)),  # integers give floats
    ],
    ids=["dx", "dim0", "x", "trapz_x", "trapz_dx", "cumulative", "cumulative_dx", "cumulative_x", "one_point", "int64"],
)
def test_integrals(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize(
    "fn",
    [
        lambda y: torch.gradient(y, dim=1),
        lambda y: torch.gradient(y),  # every axis
        lambda y: torch.gradient(y, spacing=0.5, dim=0),
        lambda y: torch.gradient(y, spacing=[2.0, 0.5]),
        lambda y: torch.gradient(y, spacing=(torch.tensor([0.0, 1.0, 3.0, 3.5]),), dim=0),  # coordinates
        lambda y: torch.gradient(y, dim=1, edge_order=2),
        lambda y: torch.gradient(y, spacing=(torch.tensor([0.0, 0.5, 2.0, 2.5, 4.0, 7.0]),), dim=-1, edge_order=2),
        lambda y: torch.gradient(y.long(), dim=1),
    ],
    ids=["dim", "all", "scalar", "scalars", "coordinates", "edge_order2", "coordinates_edge_order2", "int64"],
)
def test_gradient(fn):
    check_model(Fn(fn), (torch.randn(4, 6),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, v: torch.matmul(torch.cummax(x, 0).values, v),
        lambda x, v: torch.matmul(torch.cummin(x, 0).values, v),
    ],
    ids=["cummax", "cummin"],
)
def test_cumulative_extremum_then_matrix_vector(fn):
    """cummax along axis 0 ends in a Transpose; onnxruntime fused it into the MatMul by a 1-D vector
    (FusedMatMul transA=1) and got every element wrong (fuzz seed 9966): the vector is a [k, 1] column."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    v = torch.randn(5)
    check_dynamic(Fn(lambda x: fn(x, v)), torch.randn(7, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_cumprod_zero_infinity_nan_and_signed_zeros(dtype):
    """A training fuzz program (``remainder(x, x)`` then ``cumprod``) gave 0 where PyTorch gives NaN: a NaN after a
    zero, ``0 * inf``, a NaN before a zero; the zeros carry the sign of the product (``-1 * 0 = -0``)."""
    import numpy as np

    from experimental.torch_interpreter import InferenceSession, to_onnx

    nan, inf = float("nan"), float("inf")
    x = torch.tensor(
        [[0.0, nan, 2.0, 1.0], [nan, 0.0, 1.0, 2.0], [1.0, 0.0, inf, 1.0], [-inf, 2.0, 0.0, 3.0],
         [-1.0, 0.0, 2.0, -1.0], [0.5, -0.0, -0.0, 0.0], [-2.0, inf, -1.0, 0.5], [3.0, -0.5, 2.0, -4.0]],
        dtype=dtype,
    )
    onx = to_onnx(Fn(lambda x: torch.cumprod(x, 1)), (x,))
    (got,) = InferenceSession(onx, providers=["CPUExecutionProvider"]).run_torch(None, {onx.graph.input[0].name: x})
    expected = torch.cumprod(x, 1)
    torch.testing.assert_close(got, expected, equal_nan=True)
    g, e = got.double().numpy(), expected.double().numpy()
    numbers = ~np.isnan(e)  # the sign of a NaN means nothing
    assert np.array_equal(np.signbit(g[numbers]), np.signbit(e[numbers]))
