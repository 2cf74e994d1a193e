"""Moving and repeating elements (ops/reorder.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

X = torch.randn(2, 3, 4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.flip(x, [0, -1]),
        lambda x: torch.fliplr(x),
        lambda x: torch.rot90(x, 1, [1, 2]),
        lambda x: torch.roll(x, 2, 2),
        lambda x: torch.roll(x, -1),
        lambda x: x.repeat(2, 1, 3),
        lambda x: torch.repeat_interleave(x, 2, dim=1),
        lambda x: torch.nn.functional.pixel_shuffle(x.reshape(1, 4, 2, 3), 2),
        lambda x: torch.nn.functional.pixel_unshuffle(x.reshape(1, 2, 2, 6), 2),
    ],
)
def test_reorder(fn):
    check_model(Fn(fn), (X,))


def test_roll_dynamic():
    check_model(
        Fn(lambda x: torch.roll(x, 1, 1)),
        (torch.randn(2, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 8),), None)],
    )
