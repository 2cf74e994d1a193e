"""Fourier transforms and shifts (ops/fft.py). ONNX tensors are real: the inverse real transforms take real
inputs (a complex input has no ONNX type) and stft returns the real view ``[..., 2]``."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.errors import UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_model

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
def test_frequencies(fn):
    check_model(Fn(fn), (r(5, 3),), atol=0, rtol=0)  # the same float32 products as PyTorch


# -- one-sided transforms of real inputs, complex inputs of the inverse ones (complex tensors as real pairs) ----
def _real(z):
    return torch.view_as_real(z)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: _real(torch.fft.rfft(x)), r(3, 8)),
        (lambda x: _real(torch.fft.rfft(x, n=7, norm="ortho")), r(3, 8)),  # odd, truncated
        (lambda x: _real(torch.fft.rfft(x, n=10, dim=0)), r(6, 2)),  # padded, leading axis
        (lambda x: _real(torch.fft.rfft2(x, norm="forward")), r(2, 4, 5)),
        (lambda x: _real(torch.fft.rfftn(x)), r(2, 3, 4)),
        (lambda x: _real(torch.fft.ihfft(x).resolve_conj()), r(3, 7)),
        (lambda x: _real(torch.fft.ihfft2(x, norm="ortho").resolve_conj()), r(4, 6)),
        (lambda x: torch.fft.rfft(x).abs(), r(3, 8)),  # the example: a spectrum's magnitude
        (lambda x: torch.fft.irfft(torch.fft.rfft(x)), r(3, 8)),  # a round trip: irfft of a complex input
        (lambda x: torch.fft.irfft(torch.fft.rfft(x) * 2, n=9, norm="ortho"), r(2, 9)),
        (lambda x: torch.fft.irfft2(torch.fft.rfft2(x)), r(2, 4, 6)),
        (lambda x: torch.fft.irfftn(torch.fft.fftn(x), s=(4, 5)), r(3, 4, 5)),
        (lambda x: torch.fft.hfft(torch.fft.fft(x)), r(2, 5)),  # hfft reads the conjugate
        (lambda x: torch.fft.hfft2(torch.fft.fft2(x), norm="forward"), r(3, 4)),
        (lambda x: _real(torch.fft.fft(x).conj().resolve_conj() * 2), r(3, 4)),  # a conjugate view
    ],
)
def test_one_sided_and_complex_inputs(fn, x):
    check_model(Fn(fn), (x,), **TOL)


def test_rfft_float64_and_dynamic_length():
    check_model(Fn(lambda x: _real(torch.fft.rfft(x.double()))), (r(2, 6),), atol=1e-10, rtol=1e-10)
    check_model(Fn(lambda x: _real(torch.fft.rfft(x))), (r(2, 6),), dynamic_shapes=({0: "b", 1: "n"},),
                more_inputs=[((r(3, 9),), None), ((r(1, 10),), None)], **TOL)


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_abs_is_hypot(dtype):
    """|a + bi| without overflow (parts near the largest float), with inf beside a NaN (PyTorch: inf)."""
    big = torch.finfo(dtype).max / 4
    re = torch.tensor([3.0, big, -big, 0.0, INF, NAN, 1e-30, NAN], dtype=dtype)
    im = torch.tensor([4.0, big, 1.0, 0.0, NAN, -INF, 1e-30, 2.0], dtype=dtype)
    check_model(Fn(lambda a, b: torch.complex(a, b).abs()), (re, im), atol=0, rtol=1e-6)


def test_torch_complex_broadcasts():
    check_model(Fn(lambda a, b: _real(torch.complex(a, b) * torch.complex(b, a))), (r(3, 1), r(4)), **TOL)


def test_vmap_of_one_dimensional_inputs():
    check_model(Fn(lambda x, y: torch.vmap(lambda a, b: a * b + 1)(x, y)), (r(5), r(5)))


def test_complex_op_without_converter_gets_the_pair_advice():
    with pytest.raises(UnsupportedOpError) as info:
        check_model(Fn(lambda x: torch.exp(torch.fft.fft(x)).real), (r(4, 8),))
    message = str(info.value)
    assert "complex::exp.default reads or produces complex tensors, which the graph carries as real pairs" in message
    assert "custom_ops='python_op'" not in message
