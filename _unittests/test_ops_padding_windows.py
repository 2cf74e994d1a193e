"""Padding and sliding windows (ops/padding_windows.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import Fn, check_model


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes(mode):
    check_model(Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode)), (torch.randn(1, 2, 4, 5),))


def test_windows():
    x = torch.arange(10, dtype=torch.float32)
    check_model(Fn(lambda x: x.unfold(0, 3, 2)), (x,))
    img = torch.randn(1, 2, 5, 6)
    check_model(Fn(lambda x: F.unfold(x, 2, stride=2, padding=1)), (img,))
    cols = F.unfold(img, 2)
    check_model(Fn(lambda c: F.fold(c, (5, 6), 2)), (cols,))
