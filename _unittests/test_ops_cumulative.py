"""Scans along an axis and discrete calculus (ops/cumulative.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize(
    "fn",
    [torch.cumsum, torch.cumprod, torch.logcumsumexp, lambda x, d: torch.cummax(x, d)[0],
     lambda x, d: torch.cummin(x, d)[1]],
)
def test_scans(fn, dim):
    x = torch.randn(3, 4)
    check_model(Fn(lambda x: fn(x, dim)), (x,), atol=1e-5)


def test_cumsum_of_integers_and_dynamic_axis():
    check_model(Fn(lambda x: torch.cumsum(x, 0)), (torch.randint(-5, 5, (6,)),))
    check_model(
        Fn(lambda x: torch.cumsum(x, 1)),
        (torch.randn(2, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 9),), None)],
        atol=1e-5,
    )


def test_calculus():
    y = torch.randn(3, 6)
    check_model(Fn(lambda y: torch.diff(y, dim=1)), (y,))
    check_model(Fn(lambda y: torch.trapezoid(y, dx=0.5)), (y,), atol=1e-5)
    check_model(Fn(lambda y: torch.cumulative_trapezoid(y)), (y,), atol=1e-5)
    check_model(Fn(lambda y: torch.gradient(y, dim=1)[0]), (y,), atol=1e-5)
