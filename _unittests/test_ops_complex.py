"""Complex arithmetic on real pairs (ops/complex.py) where PyTorch's answer has NaN and infinite parts: a real
operand is promoted to a complex one (imaginary part 0, even beside an infinite real part), the other operand of
an addition is multiplied by the complex ``alpha`` (``inf + 0i`` added gives a NaN imaginary part), a product
uses the whole complex formula (``(inf + 2i) * 3`` is ``inf + nan i``). Compared with eager PyTorch, NaN positions
included."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model

INF, NAN = float("inf"), float("nan")
PAIRS = torch.tensor([[1.0, 2.0], [INF, 2.0], [1.0, -INF], [0.0, 2.0], [-3.0, 0.5], [NAN, 1.0]])
REALS = torch.tensor([3.0, 3.0, 2.0, INF, -INF, 1.0])


def _c(p):
    return torch.view_as_complex(p)


@pytest.mark.parametrize(
    "name, fn",
    [
        ("pair+pair", lambda p, x: _c(p) + _c(p.flip(0))),
        ("pair-pair", lambda p, x: _c(p) - _c(p.flip(0))),
        ("pair*pair", lambda p, x: _c(p) * _c(p.flip(0))),
        ("pair+real", lambda p, x: _c(p) + x),
        ("real+pair", lambda p, x: x + _c(p)),
        ("pair-real", lambda p, x: _c(p) - x),
        ("real-pair", lambda p, x: x - _c(p)),
        ("pair*real", lambda p, x: _c(p) * x),
        ("real*pair", lambda p, x: x * _c(p)),
        ("pair*scalar", lambda p, x: _c(p) * 3.0),
        ("pair+scalar", lambda p, x: _c(p) + 2.0),
        ("real_to_complex", lambda p, x: x.to(torch.complex64) + _c(p) * 0),
    ],
)
def test_complex_arithmetic_at_infinities(name, fn):
    check_model(Fn(lambda p, x: torch.view_as_real(fn(p, x))), (PAIRS, REALS), atol=1e-6, rtol=1e-6)
