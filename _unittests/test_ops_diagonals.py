"""Diagonals and triangles (ops/diagonals.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

X = torch.randn(3, 4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.diagonal(x, 1),
        lambda x: torch.diagonal(x, -1),
        lambda x: torch.diag(x[0]),
        lambda x: torch.diagflat(x[:2]),
        lambda x: torch.diag_embed(x, offset=1),
        lambda x: torch.block_diag(x, x[:2, :1]),
        lambda x: torch.triu(x, 1),
        lambda x: torch.tril(x.int(), -1),
        lambda x: torch.diagonal_scatter(x, torch.ones(3), 0),
    ],
)
def test_diagonals(fn):
    check_model(Fn(fn), (X,))
