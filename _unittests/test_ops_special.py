"""Special functions (ops/special.py), against torch.special on their usual domains."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

POSITIVE = torch.tensor([0.1, 0.5, 1.0, 2.5, 7.0])
UNIT = torch.tensor([-0.9, -0.3, 0.0, 0.4, 0.95])


@pytest.mark.parametrize(
    "fn, x",
    [
        (torch.lgamma, POSITIVE),
        (torch.digamma, POSITIVE),
        (lambda x: torch.polygamma(1, x), POSITIVE),
        (torch.erfinv, UNIT),
        (torch.erfc, UNIT * 3),
        (torch.special.ndtr, UNIT * 3),
        (torch.special.ndtri, (UNIT + 1) / 2.1),
        (torch.special.log_ndtr, UNIT * 3),
        (torch.special.erfcx, POSITIVE),
        (torch.special.entr, torch.tensor([0.0, 0.2, 1.0, 3.0])),
        (torch.sinc, torch.tensor([0.0, 0.5, -1.5, 2.0])),
        (lambda x: torch.logit(x, eps=1e-3), (UNIT + 1) / 2),
        (torch.special.spherical_bessel_j0, torch.tensor([0.0, 0.5, 3.0, -7.0])),
    ],
)
def test_special_unary(fn, x):
    check_model(Fn(fn), (x,), atol=1e-4, rtol=1e-3)


def test_xlogy_with_zero():
    x = torch.tensor([0.0, 1.0, 2.0, 0.0])
    y = torch.tensor([0.0, 3.0, 0.5, float("nan")])
    check_model(Fn(torch.xlogy), (x, y))
