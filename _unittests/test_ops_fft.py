"""Fourier transforms and shifts (ops/fft.py). ONNX tensors are real: the inverse real transforms take real
inputs (a complex input has no ONNX type) and stft returns the real view ``[..., 2]``."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

from experimental.torch_interpreter.errors import UnsupportedOpError

torch.manual_seed(0)
r = torch.randn
TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n", [None, 8, 7, 4, 1])  # default, padded, odd, truncated, one point
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_irfft_of_real_input(n, norm):
    check_model(Fn(lambda x: torch.fft.irfft(x, n=n, norm=norm)), (r(2, 5),), **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.fft.irfft(x, dim=0), r(5, 3)),
        (lambda x: torch.fft.irfft(x, n=2), r(2, 1)),  # a single input point
        (lambda x: torch.fft.irfft2(x), r(2, 3, 4)),
        (lambda x: torch.fft.irfft2(x, s=(4, 5), norm="ortho"), r(3, 4)),
        (lambda x: torch.fft.irfft2(x, dim=(0, 2)), r(3, 2, 4)),
        (lambda x: torch.fft.irfftn(x), r(2, 3, 4)),
        (lambda x: torch.fft.irfftn(x, s=(3, 6), norm="forward"), r(2, 3, 4)),
        (lambda x: torch.fft.hfft(x), r(3, 4)),
        (lambda x: torch.fft.hfft(x, n=7, norm="ortho"), r(2, 5)),
        (lambda x: torch.fft.hfft(x, dim=0, norm="forward"), r(4, 3)),
        (lambda x: torch.fft.hfft2(x), r(3, 4)),
        (lambda x: torch.fft.hfftn(x, s=(2, 4)), r(2, 3, 3)),
    ],
)
def test_inverse_and_hermitian(fn, x):
    check_model(Fn(fn), (x,), **TOL)


def test_irfft_float64():
    check_model(Fn(lambda x: torch.fft.irfft2(x, norm="ortho")), (r(3, 5).double(),), atol=1e-10, rtol=1e-10)


X = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)  # even and odd sizes


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.fft.fftshift(x), X),
        (lambda x: torch.fft.fftshift(x, dim=(0, -1)), X),
        (lambda x: torch.fft.fftshift(x, dim=-2), X),
        (lambda x: torch.fft.ifftshift(x), X),
        (lambda x: torch.fft.ifftshift(x, dim=1), X[0]),
        (lambda x: torch.fft.ifftshift(torch.fft.fftshift(x)), X),
        (lambda x: (torch.fft.fftshift(x), torch.fft.ifftshift(x, dim=1)), X.long()),
        (lambda x: torch.fft.fftshift(x), torch.tensor([True, False, False])),
    ],
)
def test_shifts(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize(
    "kwargs, x",
    [
        ({}, r(2, 32)),  # center=True: reflect padding
        ({"hop_length": 3, "win_length": 6, "window": torch.hann_window(6), "center": False}, r(32)),
        ({"hop_length": 4, "normalized": True, "onesided": False, "pad_mode": "constant"}, r(1, 20)),
        ({"win_length": 5, "center": False}, r(1, 20)),  # no window: a centered box of 5 samples
    ],
    ids=["default", "window", "normalized_twosided", "win_length"],
)
@pytest.mark.filterwarnings("ignore:stft with return_complex=False is deprecated")
def test_stft(kwargs, x):
    check_model(Fn(lambda x: torch.stft(x, 8, return_complex=False, **kwargs)), (x,), **TOL)


@pytest.mark.parametrize(
    "fn",
    [lambda x: x * torch.fft.fftfreq(5, d=0.5)[:, None], lambda x: x * torch.fft.rfftfreq(8)[:, None]],
    ids=["fftfreq", "rfftfreq"],
)
@pytest.mark.xfail(strict=True, raises=UnsupportedOpError, reason="fft_fftfreq / fft_rfftfreq have no converter")
def test_frequencies(fn):
    check_model(Fn(fn), (r(5, 3),))
