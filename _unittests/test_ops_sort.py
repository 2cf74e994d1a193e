"""Sorting, ranking, searching and counting (ops/sort.py)."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_model

NAN = float("nan")
X = torch.tensor([[3.0, -1.0, 2.0, 2.0, 0.5], [0.0, 4.0, -2.0, 1.0, 1.0]])  # ties
XN = torch.tensor([[3.0, NAN, 2.0, -1.0, 0.5], [0.0, 4.0, NAN, NAN, 1.0]])  # NaN sorts last (first descending)
XI = torch.tensor([[3, -1, 2, 2, 5], [0, 4, -2, 1, 1]])
BOUNDARIES = torch.tensor([-1.0, 0.0, 1.0, 2.5])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.sort(x, dim=1, stable=True),
        lambda x: torch.sort(x, dim=0, descending=True, stable=True),
        lambda x: torch.argsort(x, dim=1, stable=True),
        lambda x: torch.argsort(x, dim=-1, descending=True, stable=True),
        lambda x: torch.topk(x, 2, dim=1)[0],  # ties: torch does not fix which index comes first
        lambda x: torch.topk(x, 2, dim=1, largest=False),
        lambda x: torch.topk(x, 5, dim=-1)[0],  # k = the size
        lambda x: torch.kthvalue(x, 2, dim=1)[0],
        lambda x: torch.median(x, dim=1)[0],
        lambda x: torch.quantile(x, 0.3, dim=1, keepdim=True),
        lambda x: torch.msort(x),
    ],
)
def test_sort_family(fn):
    check_model(Fn(fn), (X,))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.sort(x, stable=True),
        lambda x: torch.sort(x, descending=True, stable=True),
        lambda x: torch.argsort(x, dim=0, stable=True),
        lambda x: torch.topk(x, 1)[0],  # NaN is the largest
        lambda x: torch.topk(x, 2, largest=False),
        lambda x: torch.kthvalue(x, 4, 1)[0],
        lambda x: torch.median(x),
        lambda x: torch.median(x[:, :3], 1),  # one NaN a row: its index
        lambda x: torch.nanmedian(x),
        lambda x: torch.nanmedian(x, 1)[0],
        lambda x: torch.quantile(x, 0.4, dim=1),
        lambda x: torch.nanquantile(x, 0.4, dim=1),
        lambda x: torch.nanquantile(x, torch.tensor([0.25, 0.75])),
    ],
)
def test_nan(fn):
    check_model(Fn(fn), (XN,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.sort(x, dim=-1, stable=True), XI),
        (lambda x: torch.sort(x, dim=0, descending=True, stable=True), XI.int()),
        (lambda x: torch.sort(x, stable=True), XI > 1),
        (lambda x: torch.topk(x, 1, dim=0), torch.tensor([[3, -1, 2], [0, 4, -2]])),
        (lambda x: torch.median(x, 0, keepdim=True), torch.tensor([[3, 1, 2], [0, 4, 1], [5, 5, 5]])),
        (lambda x: torch.sort(x, stable=True), X.half()),
        (lambda x: torch.msort(x), XI),
    ],
    ids=["int64", "int32_descending", "bool", "topk_int", "median_int", "float16", "msort_int"],
)
def test_dtypes(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.sort(x, dim=0, stable=True), X[:1]),
        (lambda x: torch.sort(x, dim=1, stable=True), torch.zeros(2, 0)),
        (lambda x: torch.sort(x, stable=True), torch.tensor(2.0)),
        (lambda x: torch.topk(x, 0), X),
        (
            lambda x: torch.kthvalue(x, 3, dim=-1, keepdim=True),
            torch.tensor([[3.0, -1.0, 2.0, 5, 0.5], [0, 4, -2, 1, 7]]),
        ),
        (lambda x: torch.kthvalue(x, 1, 0), torch.tensor([[1.0, 5.0], [-2.0, 3.0], [0.5, 4.0]])),
        (lambda x: torch.median(x), torch.tensor([4.0, 1, 3, 2])),  # even count: the lower of the two
    ],
    ids=["size1", "empty", "0d", "topk_0", "kthvalue_keepdim", "kthvalue_dim0", "median_even"],
)
def test_edge_shapes(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolation(interpolation):
    q = torch.tensor([0.1, 0.5, 0.85])
    check_model(Fn(lambda x: torch.quantile(x, q, dim=1, interpolation=interpolation)), (X,))
    check_model(Fn(lambda x, q: torch.quantile(x, q, dim=0, keepdim=True, interpolation=interpolation)), (X, q[:2]))


def test_quantile_of_all():
    check_model(Fn(lambda x: torch.quantile(x, 0.4)), (X,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.unique(x), XI),
        (lambda x: torch.unique(x, return_inverse=True, return_counts=True), XI),
        (lambda x: torch.unique(x, sorted=True), X),
        (lambda x: torch.unique(x, dim=0), torch.tensor([[1, 2], [0, 1], [1, 2]])),
        (
            lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
            torch.tensor([1, 1, 2, 2, 3, 1]),
        ),
        (lambda x: torch.unique_consecutive(x, dim=0), torch.tensor([[1, 2], [1, 2], [0, 1], [1, 2]])),
    ],
    ids=["unique", "inverse_counts", "float", "dim", "consecutive", "consecutive_dim"],
)
def test_unique(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda b, v: torch.searchsorted(b, v), (BOUNDARIES, X)),
        (lambda b, v: torch.searchsorted(b, v, right=True), (BOUNDARIES, X)),
        (lambda b, v: torch.searchsorted(b, v, side="right", out_int32=True), (BOUNDARIES, X)),
        (
            lambda b, v: torch.searchsorted(b, v),
            (torch.tensor([[0.0, 1, 2], [-1, 3, 5]]), torch.tensor([[0.5, 2, 3], [-2, 4, 6]])),
        ),
        (
            lambda b, v, s: torch.searchsorted(b, v, sorter=s),
            (torch.tensor([2.0, -1, 1, 0]), X, torch.tensor([1, 3, 2, 0])),
        ),
        (lambda b: torch.searchsorted(b, 0.5), (BOUNDARIES,)),
        (lambda b, v: torch.searchsorted(b, v), (torch.tensor([1, 3, 5, 7]), torch.tensor([0, 3, 4, 8]))),
        (lambda b, v: torch.bucketize(v, b, right=True), (BOUNDARIES, X)),
        (lambda b, v: torch.bucketize(v, b, out_int32=True), (BOUNDARIES, X)),
        (lambda b: torch.bucketize(0.5, b), (BOUNDARIES,)),
        pytest.param(
            lambda b, v: torch.searchsorted(b, v),
            (BOUNDARIES, torch.tensor([NAN, 0.5, float("inf")])),
            id="searchsorted_nan_value",
        ),
        pytest.param(
            lambda b, v: torch.bucketize(v, b),
            (BOUNDARIES, torch.tensor([NAN, 0.5])),
            id="bucketize_nan_value",
        ),
        pytest.param(
            lambda b, v: torch.searchsorted(b, v),
            (torch.tensor([-1.0, 0.0, NAN]), torch.tensor([0.5, -2.0])),
            id="searchsorted_nan_boundary",
        ),
    ],
)
def test_search(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda v, b: torch.isin(v, b), (X, BOUNDARIES)),
        (lambda v, b: torch.isin(v, b, invert=True), (X, BOUNDARIES)),
        (lambda b: torch.isin(2.0, b), (X,)),
        (lambda v: torch.isin(v, 2.0), (X,)),
        (lambda v, b: torch.isin(v, b), (XI, torch.tensor([2, 5, 9]))),
        (lambda v, b: torch.isin(v, b), (XN, torch.tensor([NAN, 2.0]))),  # NaN is in nothing
    ],
)
def test_isin(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda v: torch.histc(v, bins=4, min=-2, max=4), (X,)),
        (lambda v: torch.histc(v, bins=3), (X,)),  # min = max = 0: the range of the data
        (lambda v: torch.histc(v, bins=5, min=0, max=2), (X,)),  # values out of the range are ignored
        (lambda v: torch.histc(v, bins=4, min=0, max=4), (torch.tensor([0.0, 1, 2, 3, 4, 4, 2.5]),)),  # edges
        (lambda v: torch.histogram(v, bins=4), (X,)),
        (lambda v, w: torch.histogram(v, bins=3, range=(-1.0, 2.0), weight=w, density=True), (X, torch.rand(2, 5))),
        (lambda v, b: torch.histogram(v, bins=b), (X, torch.tensor([-2.0, 0, 1, 4]))),
    ],
)
def test_histograms(fn, args):
    check_model(Fn(fn), args)


def test_topk_dynamic_rows():
    check_model(
        Fn(lambda x: torch.topk(x, 3, dim=1)),
        (torch.randn(2, 6),),
        dynamic_shapes=({0: "rows"},),
        more_inputs=[((torch.randn(5, 6),), None)],
    )


def test_sort_dynamic_axis():
    check_model(
        Fn(lambda x: (torch.sort(x, dim=1, stable=True), torch.argsort(x, dim=1, stable=True), torch.median(x, 0))),
        (torch.randn(3, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(3, 8),), None)],
    )


def test_median_over_a_dynamic_axis_is_reported():
    with pytest.raises(ConversionError, match="median over a dynamic dimension"):
        to_onnx(Fn(lambda x: torch.median(x, 1)), (torch.randn(2, 5),), dynamic_shapes=({1: "n"},))
