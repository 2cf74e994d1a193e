"""Fourier transforms and shifts (ops/fft.py). ONNX tensors are real: the inverse real transforms take real
inputs (a complex input has no ONNX type) and stft returns the real view ``[..., 2]``.

Training through them: AOTAutograd lowers ``torch.fft`` to ``_fft_r2c``, ``_fft_c2c`` and ``_fft_c2r`` (forward and
backward graphs, with complex ``sgn``, ``new_zeros``, ``copy`` and ``slice_scatter`` of the spectra): the primitives
exported alone against eager calling the same op, and models trained through the backend with ``fallback="raise"``
(every graph in onnxruntime, complex tensors saved for the backward crossing as real pairs)."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.errors import UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_model
from experimental.torch_interpreter.training import OrtBackend

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


# -- training: the primitives and their gradients ---------------------------------------------------------------
A = torch.ops.aten
def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("onesided", [True, False])
def test_fft_r2c_alone(normalization, onesided):
    fn = Fn(lambda x: torch.view_as_real(A._fft_r2c.default(x, [1, 2], normalization, onesided)))
    check_model(fn, (_x(2, 3, 6),), **TOL)


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("forward", [True, False])
def test_fft_c2c_alone(normalization, forward):
    fn = Fn(lambda x: torch.view_as_real(A._fft_c2c.default(torch.view_as_complex(x), [0, 1], normalization, forward)))
    check_model(fn, (_x(3, 5, 2),), **TOL)


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("last", [8, 9])
def test_fft_c2r_alone(normalization, last):
    fn = Fn(lambda x: A._fft_c2r.default(torch.view_as_complex(x), [0, 1], normalization, last))
    check_model(fn, (_x(3, 5, 2),), **TOL)


def test_complex_sgn_alone():
    pairs = torch.tensor([[3.0, 4.0], [0.0, 0.0], [float("inf"), 0.0], [float("nan"), 1.0], [-2.0, 0.5]])
    check_model(Fn(lambda x: torch.view_as_real(torch.sgn(torch.view_as_complex(x)))), (pairs,), **TOL)


LOSSES = {
    "rfft": lambda x: (torch.fft.rfft(x).abs() ** 2).sum(-1).mean(),
    "rfft_ortho": lambda x: torch.fft.rfft(x, norm="ortho").abs().sum(),
    "irfft_of_rfft": lambda x: torch.fft.irfft(torch.fft.rfft(x, norm="forward") * 2.0, n=x.shape[-1]).pow(2).mean(),
    "fft": lambda x: torch.fft.fft(x).abs().sum(),
    "ifft_real_part": lambda x: torch.view_as_real(torch.fft.ifft(torch.fft.fft(x) * 1.5)).select(-1, 0).pow(2).sum(),
    "rfft2": lambda x: torch.fft.rfft2(x).abs().mean(),
    "fftn_ortho": lambda x: torch.fft.fftn(x, norm="ortho").abs().pow(2).sum(),
    "irfft_odd": lambda x: torch.fft.irfft(torch.fft.rfft(x), n=7).pow(2).sum(),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_fft_trains_in_onnxruntime(name):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return LOSSES[name](self.linear(x))

    torch.manual_seed(0)
    model, x = Model(), _x(2, 3, 8, seed=1)
    expected = torch.autograd.grad(model(x), list(model.parameters()))
    torch._dynamo.reset()
    backend = OrtBackend(providers="cpu", fallback="raise")
    got = torch.autograd.grad(torch.compile(model, backend=backend)(x), list(model.parameters()))
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"], backend.graphs
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
