"""Joining and splitting along an axis (ops/concat_split.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

X, Y = torch.randn(2, 3), torch.randn(2, 3)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: torch.hstack([x, y]),
        lambda x, y: torch.vstack([x, y]),
        lambda x, y: torch.dstack([x, y]),
        lambda x, y: torch.column_stack([x[0], y[0]]),
        lambda x, y: torch.stack([x, y], -1),
        lambda x, y: torch.tensor_split(torch.cat([x, y], 1), 4, dim=1),
        lambda x, y: torch.tensor_split(x, [1, 2], dim=1),
        lambda x, y: torch.split(torch.cat([x, y]), [1, 3]),
        lambda x, y: torch.unbind(x, 1),
        lambda x, y: torch.meshgrid(x[0], y[1], indexing="ij"),
        lambda x, y: torch.cartesian_prod(x[0], y[0]),
    ],
)
def test_join_and_split(fn):
    check_model(Fn(fn), (X, Y))
