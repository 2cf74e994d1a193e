"""Sorting, ranking, searching and counting (ops/sort.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

X = torch.tensor([[3.0, -1.0, 2.0, 2.0, 0.5], [0.0, 4.0, -2.0, 1.0, 1.0]])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.sort(x, dim=1, stable=True),
        lambda x: torch.sort(x, dim=0, descending=True, stable=True),
        lambda x: torch.argsort(x, dim=1, stable=True),
        lambda x: torch.topk(x, 2, dim=1)[0],  # ties: torch does not fix which index comes first
        lambda x: torch.topk(x, 2, dim=1, largest=False),
        lambda x: torch.kthvalue(x, 2, dim=1)[0],
        lambda x: torch.median(x, dim=1)[0],
        lambda x: torch.quantile(x, 0.3, dim=1, keepdim=True),
        lambda x: torch.msort(x),
    ],
)
def test_sort_family(fn):
    check_model(Fn(fn), (X,))


def test_search_and_count():
    boundaries = torch.tensor([-1.0, 0.0, 1.0, 2.5])
    check_model(Fn(lambda b, v: torch.searchsorted(b, v)), (boundaries, X))
    check_model(Fn(lambda v, b: torch.bucketize(v, b, right=True)), (X, boundaries))
    check_model(Fn(lambda v, b: torch.isin(v, b)), (X, boundaries))
    check_model(Fn(lambda v: torch.histc(v, bins=4, min=-2, max=4)), (X,))


def test_topk_dynamic_rows():
    check_model(
        Fn(lambda x: torch.topk(x, 3, dim=1)),
        (torch.randn(2, 6),),
        dynamic_shapes=({0: "rows"},),
        more_inputs=[((torch.randn(5, 6),), None)],
    )
