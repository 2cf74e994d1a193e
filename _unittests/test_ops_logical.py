"""Bitwise and logical ops (ops/logical.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

I = torch.tensor([0, 3, -5, 12])
J = torch.tensor([1, 6, 2, -12])
B = torch.tensor([True, False, True, False])


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.bitwise_and, (I, J)),
        (torch.bitwise_or, (I.int(), J.int())),
        (torch.bitwise_xor, (B, ~B)),
        (torch.bitwise_not, (I,)),
        (torch.logical_and, (I, B)),
        (torch.logical_or, (I.float(), J)),
        (torch.logical_xor, (B, J)),
        (torch.logical_not, (I,)),
    ],
)
def test_logical(fn, args):
    check_model(Fn(fn), args)
