"""Resampling (ops/sampling.py): interpolate and grid_sample."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import Fn, check_model


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate(mode):
    kw = {} if mode == "nearest" else {"align_corners": False}
    check_model(Fn(lambda x: F.interpolate(x, size=(6, 7), mode=mode, **kw)), (torch.randn(1, 2, 3, 4),), atol=1e-4)
    check_model(Fn(lambda x: F.interpolate(x, scale_factor=2.0, mode=mode, **kw)), (torch.randn(1, 2, 3, 4),), atol=1e-4)


def test_grid_sample():
    x, grid = torch.randn(1, 2, 4, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    check_model(Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)), (x, grid), atol=1e-4)
