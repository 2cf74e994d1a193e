"""Training through the Fourier transforms: AOTAutograd lowers ``torch.fft`` to ``_fft_r2c``, ``_fft_c2c`` and
``_fft_c2r`` (forward and backward graphs, with complex ``sgn``, ``new_zeros``, ``copy`` and ``slice_scatter`` of
the spectra): the primitives exported alone against eager calling the same op, and models trained through the
backend with ``fallback="raise"`` (every graph in onnxruntime, complex tensors saved for the backward crossing as
real pairs), gradients compared with eager's."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model
from experimental.torch_interpreter.training import OrtBackend

A = torch.ops.aten
TOL = dict(atol=1e-4, rtol=1e-4)


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
