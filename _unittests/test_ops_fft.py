"""Fourier transforms and shifts (ops/fft.py)."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model


@pytest.mark.parametrize("n", [None, 8])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_irfft_of_real_input(n, norm):
    check_model(Fn(lambda x: torch.fft.irfft(x, n=n, norm=norm)), (torch.randn(2, 5),), atol=1e-4)


def test_hfft_and_shifts():
    check_model(Fn(lambda x: torch.fft.hfft(x)), (torch.randn(3, 4),), atol=1e-4)
    x = torch.arange(2 * 5, dtype=torch.float32).reshape(2, 5)
    check_model(Fn(lambda x: torch.fft.fftshift(x)), (x,))
    check_model(Fn(lambda x: torch.fft.ifftshift(x, dim=1)), (x,))
