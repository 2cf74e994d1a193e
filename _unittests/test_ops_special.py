"""Special functions (ops/special.py), against torch.special on their usual domains, their edges (poles,
infinities, NaN) and large arguments."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.errors import UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_model

S = torch.special
NAN, INF = float("nan"), float("inf")
POSITIVE = torch.tensor([0.1, 0.5, 1.0, 2.5, 7.0, 30.0])
NEGATIVE = torch.tensor([-0.5, -1.5, -2.7, -0.1, 0.0, -3.0])  # poles at 0 and negative integers
LARGE = torch.tensor([50.0, 1e3, 1e5])
UNIT = torch.tensor([-0.9, -0.3, 0.0, 0.4, 0.95])
WIDE = torch.tensor([-20.0, -5.0, -1.0, 0.0, 0.5, 3.0, 10.0])
BESSEL = torch.tensor([-12.0, -3.0, -0.5, 0.0, 0.5, 3.0, 12.0])
TOL = dict(atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize(
    "fn, x",
    [
        (torch.lgamma, POSITIVE),
        (torch.lgamma, NEGATIVE),
        (torch.lgamma, LARGE),
        (torch.lgamma, torch.tensor([INF, -INF, NAN])),
        (torch.digamma, POSITIVE),
        (torch.digamma, NEGATIVE),
        (torch.digamma, LARGE),
        (lambda x: torch.polygamma(0, x), POSITIVE),
        (lambda x: torch.polygamma(1, x), POSITIVE),
        (lambda x: torch.polygamma(2, x), POSITIVE),
        (lambda x: torch.polygamma(3, x), POSITIVE),
        (lambda x: torch.polygamma(1, x), torch.tensor([-0.5, -1.5, -2.3])),
        (lambda x: torch.mvlgamma(x, 3), torch.tensor([1.5, 2.0, 5.0])),
        (lambda x: S.multigammaln(x, 2), torch.tensor([1.0, 2.0, 5.0])),
        (lambda x: (S.gammaln(x), S.psi(x), S.digamma(x), S.polygamma(1, x)), POSITIVE),
    ],
)
def test_gamma_family(fn, x):
    check_model(Fn(fn), (x,), **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [
        (torch.erfinv, UNIT),
        (torch.erfinv, torch.tensor([-1.0, 1.0, 0.999, -0.9999, 1.5, 0.0])),  # +-inf at +-1, NaN outside
        (S.erfinv, UNIT),
        (torch.erfc, UNIT * 3),
        (S.ndtr, WIDE),
        (S.ndtri, (UNIT + 1) / 2.1),
        (S.ndtri, torch.tensor([0.0, 1.0, 1e-6, 0.5, 0.999])),
        (S.log_ndtr, WIDE),  # large negative: no log(0)
        (S.erfcx, POSITIVE),
        (S.erfcx, WIDE),
    ],
)
def test_error_functions(fn, x):
    check_model(Fn(fn), (x,), **TOL)


def test_erfc_tail():
    # the tail is tiny: compared with an absolute tolerance below its values
    check_model(Fn(torch.erfc), (torch.tensor([-10.0, -3.0, 0.0, 3.0, 5.0, 9.0]),), atol=1e-6, rtol=1e-3)


@pytest.mark.parametrize(
    "fn",
    [
        S.i0,
        S.i0e,
        S.i1,
        S.i1e,
        S.bessel_j0,
        S.bessel_j1,
        S.modified_bessel_i0,
        S.modified_bessel_i1,
        S.spherical_bessel_j0,
        torch.i0,
    ],
)
def test_bessel(fn):
    check_model(Fn(fn), (BESSEL,), **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [
        (S.entr, torch.tensor([-1.0, 0.0, 0.2, 1.0, 3.0, INF, NAN])),  # -inf below 0
        (torch.sinc, torch.tensor([0.0, 0.5, -1.5, 2.0, 1e-8, -0.0])),
        (torch.sinc, torch.tensor([0, 1, 2])),  # integers give floats
        (lambda x: torch.logit(x, eps=1e-3), (UNIT + 1) / 2),
        (lambda x: torch.logit(x, 0.2), torch.tensor([0.0, 0.1, 0.9, 1.0])),
        (torch.logit, torch.tensor([0.0, 0.3, 1.0, 0.5, 1.2])),  # -inf, inf, NaN
        pytest.param(
            S.logit,
            torch.tensor([0.1, 0.9]),
            marks=pytest.mark.xfail(
                strict=True, raises=UnsupportedOpError, reason="aten::special_logit has no converter"
            ),
            id="special_logit",
        ),
        pytest.param(
            S.expit,
            torch.tensor([-1.0, 2.0]),
            marks=pytest.mark.xfail(
                strict=True, raises=UnsupportedOpError, reason="aten::special_expit has no converter"
            ),
            id="special_expit",
        ),
    ],
)
def test_other_unary(fn, x):
    check_model(Fn(fn), (x,), **TOL)


@pytest.mark.parametrize(
    "fn, args",
    [
        (
            torch.xlogy,
            (torch.tensor([0.0, 1.0, 2.0, 0.0]), torch.tensor([0.0, 3.0, 0.5, NAN])),
        ),  # 0 * log(0) = 0, NaN stays
        (lambda y: torch.xlogy(0.0, y), (torch.tensor([0.0, 3.0, NAN]),)),
        (lambda x: torch.xlogy(x, 2.0), (torch.tensor([0.0, 3.0, NAN]),)),
        (torch.xlogy, (torch.tensor([0, 1, 2]), torch.tensor([0, 3, 5]))),  # integers give floats
        (S.xlog1py, (torch.tensor([0.0, 1.0, 2.0, 0.0]), torch.tensor([-1.0, 3.0, -0.5, NAN]))),
        (lambda y: S.xlog1py(2.0, y), (torch.tensor([0.0, 3.0]),)),
        (S.zeta, (torch.tensor([2.0, 3.0, 1.5, 4.0]), torch.tensor([1.0, 2.0, 0.5, 3.0]))),
        (S.zeta, (torch.tensor([1.0, 0.5]), torch.tensor([1.0, 2.0]))),  # inf at x = 1, NaN below
        (S.zeta, (torch.tensor([2.0, 2.0, 3.0]), torch.tensor([-1.0, -1.5, -2.5]))),  # q <= 0
        (lambda q: S.zeta(2.0, q), (torch.tensor([1.0, 2.0]),)),
        (lambda x: S.zeta(x, 1.0), (torch.tensor([2.0, 3.0]),)),
    ],
)
def test_binary(fn, args):
    check_model(Fn(fn), args, **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [(torch.lgamma, POSITIVE), (torch.digamma, POSITIVE), (torch.erfinv, UNIT), (S.i1e, BESSEL), (S.log_ndtr, WIDE)],
)
def test_float64_precision(fn, x):
    check_model(Fn(fn), (x.double(),), atol=1e-8, rtol=1e-7)


@pytest.mark.parametrize("fn, x", [(torch.lgamma, POSITIVE), (torch.erfinv, UNIT), (torch.digamma, POSITIVE)])
def test_float16(fn, x):
    check_model(Fn(fn), (x.half(),), atol=1e-2, rtol=1e-2)


def test_integer_inputs():
    check_model(
        Fn(lambda x: (torch.lgamma(x), torch.erfinv(x), torch.digamma(x + 1))), (torch.tensor([1, 2, 5, 0, -1]),), **TOL
    )


def test_dynamic():
    check_model(
        Fn(lambda x: (torch.lgamma(x), S.erfcx(x), S.i0e(x))),
        (POSITIVE[:3],),
        dynamic_shapes=({0: "n"},),
        more_inputs=[((POSITIVE,), None)],
        **TOL,
    )
