"""Special functions ONNX does not have: lgamma, digamma, polygamma, mvlgamma, erfinv, ndtri, log_ndtr, erfcx,
spherical_bessel_j0.

They are computed in double precision from classic approximations (Lanczos for lgamma, the asymptotic
series for digamma and polygamma after shifting the argument, Giles' polynomial refined by Newton steps for
erfinv), with PyTorch's values at poles, infinities and NaN.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import Scalar, binary_formula, float_formula, kernel_op


@register("aten::erfc.default")
def aten_erfc(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """erfc(Tensor self) -> Tensor"""
    return float_formula(
        ctx, self, lambda x: ctx.op("Sub", ctx.const(1, x.dtype), kernel_op(ctx, "Erf", x, dtype=x.dtype))
    )


@register("aten::special_ndtr.default")
def aten_special_ndtr(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_ndtr(Tensor self) -> Tensor: the normal CDF, ``(1 + erf(x / sqrt(2))) / 2``."""

    def formula(x: ir.Value) -> ir.Value:
        erf = kernel_op(ctx, "Erf", ctx.op("Mul", x, ctx.const(math.sqrt(0.5), x.dtype)), dtype=x.dtype)
        return ctx.op("Mul", ctx.op("Add", erf, ctx.const(1, x.dtype)), ctx.const(0.5, x.dtype))

    return float_formula(ctx, self, formula)


@register("aten::sinc.default")
def aten_sinc(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """sinc(Tensor self) -> Tensor: ``sin(pi x) / (pi x)``, 1 at 0."""

    def formula(x: ir.Value) -> ir.Value:
        pix = ctx.op("Mul", x, ctx.const(math.pi, x.dtype))
        ratio = ctx.op("Div", kernel_op(ctx, "Sin", pix, dtype=x.dtype), pix)
        return ctx.op("Where", ctx.op("Equal", x, ctx.const(0, x.dtype)), ctx.const(1, x.dtype), ratio)

    return float_formula(ctx, self, formula)


@register("aten::logit.default")
def aten_logit(ctx: NodeContext, self: ir.Value, eps: float | None = None) -> ir.Value:
    """logit(Tensor self, float? eps=None) -> Tensor: ``log(x / (1 - x))``, x clamped to [eps, 1 - eps]."""

    def formula(x: ir.Value) -> ir.Value:
        if eps is not None:
            x = ctx.op("Clip", x, ctx.const(eps, x.dtype), ctx.const(1 - eps, x.dtype))
        return ctx.op("Log", ctx.op("Div", x, ctx.op("Sub", ctx.const(1, x.dtype), x)))

    return float_formula(ctx, self, formula)


def _xlog(ctx: NodeContext, self: Scalar, other: Scalar, log: Any) -> ir.Value:
    """``self * log(other)``, 0 where ``self == 0`` unless ``other`` is NaN."""

    def formula(x: ir.Value, y: ir.Value) -> ir.Value:
        zero = ctx.const(0, x.dtype)
        product = ctx.op("Mul", x, log(y))
        at_zero = ctx.op("And", ctx.op("Equal", x, zero), ctx.op("Not", ctx.op("IsNaN", y)))
        return ctx.op("Where", at_zero, zero, product)

    return binary_formula(ctx, self, other, formula)


@register("aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other", "aten::special_xlogy.default")
def aten_xlogy(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """xlogy.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _xlog(ctx, self, other, lambda y: ctx.op("Log", y))


@register(
    "aten::special_xlog1py.default", "aten::special_xlog1py.self_scalar", "aten::special_xlog1py.other_scalar"
)
def aten_special_xlog1py(ctx: NodeContext, self: Scalar, other: Scalar) -> ir.Value:
    """special_xlog1py(Tensor self, Tensor other) -> Tensor: ``self * log1p(other)``."""
    return _xlog(ctx, self, other, lambda y: ctx.op("Log", ctx.op("Add", y, ctx.const(1, y.dtype))))


@register("aten::special_entr.default")
def aten_special_entr(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_entr(Tensor self) -> Tensor: ``-x log(x)`` for x > 0, 0 at 0, -inf below."""

    def formula(x: ir.Value) -> ir.Value:
        zero = ctx.const(0, x.dtype)
        value = ctx.op("Neg", ctx.op("Mul", x, ctx.op("Log", x)))
        value = ctx.op("Where", ctx.op("Equal", x, zero), zero, value)
        return ctx.op("Where", ctx.op("Less", x, zero), ctx.const(float("-inf"), x.dtype), value)

    return float_formula(ctx, self, formula)


DOUBLE = ir.DataType.DOUBLE


_LANCZOS_G = 7.0


_LANCZOS = [
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
]


class _F:
    """Formula builder in double precision."""

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def c(self, value: float) -> ir.Value:
        return self.ctx.const(float(value), DOUBLE)

    def __getattr__(self, op_type: str) -> Any:
        def make(*inputs: Any, **attrs: Any) -> ir.Value:
            args = [x if isinstance(x, ir.Value) else self.c(x) for x in inputs]
            return self.ctx.op(op_type, *args, **attrs)

        return make


def _unary(ctx: NodeContext, self: ir.Value, formula: Any) -> ir.Value:
    """``formula(f, x)`` on ``self`` in double precision, cast to the output dtype."""
    return ctx.cast(formula(_F(ctx), ctx.cast(self, DOUBLE)), ctx.out_dtype)


def _lgamma_positive(f: _F, x: ir.Value) -> ir.Value:
    """lgamma by Lanczos' approximation, for ``x >= 0.5``."""
    z = f.Sub(x, 1.0)
    a = f.c(_LANCZOS[0])
    for i, p in enumerate(_LANCZOS[1:], start=1):
        a = f.Add(a, f.Div(p, f.Add(z, float(i))))
    t = f.Add(z, _LANCZOS_G + 0.5)
    return f.Add(f.Add(f.c(0.5 * math.log(2 * math.pi)), f.Mul(f.Add(z, 0.5), f.Log(t))), f.Sub(f.Log(a), t))


def _lgamma(f: _F, x: ir.Value) -> ir.Value:
    """lgamma everywhere: the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` below 0.5, +inf at the
    poles (non-positive integers) and at +-inf, NaN for NaN."""
    small = f.Less(x, 0.5)
    safe = f.Where(small, f.Sub(1.0, x), x)  # >= 0.5 everywhere
    positive = _lgamma_positive(f, f.Min(safe, 1e300))
    reflected = f.Sub(f.Log(f.Div(math.pi, f.Abs(f.Sin(f.Mul(x, math.pi))))), positive)
    out = f.Where(small, reflected, positive)
    pole = f.And(f.LessOrEqual(x, 0.0), f.Equal(f.Floor(x), x))
    infinite = f.IsInf(x)
    out = f.Where(f.Or(pole, infinite), f.c(math.inf), out)
    return f.Where(f.IsNaN(x), x, out)


@register("aten::lgamma.default", "aten::special_gammaln.default")
def aten_lgamma(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """lgamma(Tensor self) -> Tensor: the logarithm of the absolute value of the gamma function."""
    return _unary(ctx, self, _lgamma)


def _digamma(f: _F, x: ir.Value) -> ir.Value:
    """digamma: ``psi(x) = psi(x + 6) - sum 1/(x + k)`` then the asymptotic series, the reflection
    ``psi(1 - x) - pi / tan(pi x)`` for negative x; -inf at 0, NaN at negative integers."""
    negative = f.Less(x, 0.0)
    y = f.Where(negative, f.Sub(1.0, x), x)
    shift = f.c(0.0)
    for k in range(6):
        shift = f.Add(shift, f.Div(1.0, f.Add(y, float(k))))
    z = f.Add(y, 6.0)
    inv2 = f.Div(1.0, f.Mul(z, z))
    series = f.c(-1.0 / 132.0)  # 1/(12z^2) - 1/(120z^4) + 1/(252z^6) - 1/(240z^8) + 1/(132z^10)
    for coef in (1.0 / 240.0, -1.0 / 252.0, 1.0 / 120.0, -1.0 / 12.0):
        series = f.Add(f.Mul(series, inv2), coef)
    series = f.Mul(series, inv2)
    psi = f.Sub(f.Add(f.Sub(f.Log(z), f.Div(0.5, z)), series), shift)
    angle = f.Mul(x, math.pi)
    reflected = f.Sub(psi, f.Div(f.Mul(f.Cos(angle), math.pi), f.Sin(angle)))  # pi / tan(pi x)
    out = f.Where(negative, reflected, psi)
    out = f.Where(f.Equal(x, 0.0), f.c(-math.inf), out)
    negative_integer = f.And(negative, f.Equal(f.Floor(x), x))
    out = f.Where(negative_integer, f.c(math.nan), out)
    out = f.Where(f.IsInf(x, detect_negative=0), f.c(math.inf), out)
    return f.Where(f.IsNaN(x), x, out)


@register("aten::digamma.default", "aten::special_digamma.default", "aten::special_psi.default")
def aten_digamma(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """digamma(Tensor self) -> Tensor"""
    return _unary(ctx, self, _digamma)


def _polygamma(f: _F, n: int, x: ir.Value) -> ir.Value:
    """``psi^(n)(x)`` for ``n >= 1``: ``(-1)^(n+1) n! sum_k 1/(x + k)^(n+1)`` for the first 20 terms, then the
    asymptotic expansion of the rest (accurate for ``x > -10``)."""
    sign = -1.0 if n % 2 == 0 else 1.0
    steps = 20
    head = f.c(0.0)
    for k in range(steps):
        head = f.Add(head, f.Pow(f.Add(x, float(k)), -(n + 1.0)))
    head = f.Mul(head, math.factorial(n))
    z = f.Add(x, float(steps))
    # (n-1)!/z^n + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! z^(2k+n))
    tail = f.Add(f.Div(math.factorial(n - 1), f.Pow(z, float(n))), f.Div(math.factorial(n) / 2.0, f.Pow(z, n + 1.0)))
    for k, b in enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6), start=1):
        coef = b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
        tail = f.Add(tail, f.Div(coef, f.Pow(z, float(2 * k + n))))
    out = f.Mul(f.Add(head, tail), sign)
    pole = f.And(f.LessOrEqual(x, 0.0), f.Equal(f.Floor(x), x))
    return f.Where(pole, f.c(math.inf if n % 2 else -math.inf), out)  # (-1)^(n+1) n! zeta(n+1, x)


@register("aten::polygamma.default", "aten::special_polygamma.default")
def aten_polygamma(ctx: NodeContext, n: int, self: ir.Value) -> ir.Value:
    """polygamma(int n, Tensor self) -> Tensor: digamma for ``n = 0``; accurate for ``x > -10``."""
    if n == 0:
        return _unary(ctx, self, _digamma)

    def formula(f: _F, x: ir.Value) -> ir.Value:
        return f.Where(f.IsNaN(x), x, _polygamma(f, n, x))

    return _unary(ctx, self, formula)


@register("aten::mvlgamma.default", "aten::special_multigammaln.default")
def aten_mvlgamma(ctx: NodeContext, self: ir.Value, p: int) -> ir.Value:
    """mvlgamma(Tensor self, int p) -> Tensor: ``p(p-1)/4 log(pi) + sum_i lgamma(x - i/2)``."""

    def formula(f: _F, x: ir.Value) -> ir.Value:
        out = f.c(p * (p - 1) / 4.0 * math.log(math.pi))
        for i in range(p):
            out = f.Add(out, _lgamma(f, f.Sub(x, i / 2.0)))
        return out

    return _unary(ctx, self, formula)


# -- error function family ----------------------------------------------------------------------------
_GILES_LOW = [
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
]


_GILES_HIGH = [
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
]


def _horner(f: _F, w: ir.Value, coefficients: list[float]) -> ir.Value:
    p = f.c(coefficients[0])
    for coef in coefficients[1:]:
        p = f.Add(f.Mul(p, w), coef)
    return p


def _erfinv(f: _F, y: ir.Value) -> ir.Value:
    """Giles' single-precision approximation (relative error below 4e-7); +-inf at +-1, NaN outside [-1, 1]."""
    inside = f.Less(f.Abs(y), 1.0)
    ys = f.Where(inside, y, f.c(0.0))
    w = f.Neg(f.Log(f.Mul(f.Sub(1.0, ys), f.Add(1.0, ys))))
    low = _horner(f, f.Sub(w, 2.5), _GILES_LOW)
    high = _horner(f, f.Sub(f.Sqrt(w), 3.0), _GILES_HIGH)
    x = f.Mul(f.Where(f.Less(w, 5.0), low, high), ys)
    out = f.Where(inside, x, f.c(math.nan))
    out = f.Where(f.Equal(y, 1.0), f.c(math.inf), out)
    return f.Where(f.Equal(y, -1.0), f.c(-math.inf), out)


@register("aten::erfinv.default", "aten::special_erfinv.default")
def aten_erfinv(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """erfinv(Tensor self) -> Tensor"""
    return _unary(ctx, self, _erfinv)


@register("aten::special_ndtri.default")
def aten_special_ndtri(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_ndtri(Tensor self) -> Tensor: the inverse of the normal CDF, ``sqrt(2) erfinv(2p - 1)``."""
    return _unary(ctx, self, lambda f, p: f.Mul(math.sqrt(2.0), _erfinv(f, f.Sub(f.Mul(p, 2.0), 1.0))))


#: Numerical Recipes' erfc: ``erfc(x) = t exp(-x^2 + P(t))``, ``t = 1 / (1 + x/2)``, relative error < 1.2e-7
_ERFC = [
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
]


def _log_erfc_plus_square(f: _F, x: ir.Value) -> ir.Value:
    """``log(erfc(x)) + x^2`` for ``x >= 0``, without underflow."""
    t = f.Div(1.0, f.Add(f.Mul(x, 0.5), 1.0))
    return f.Add(f.Log(t), _horner(f, t, _ERFC))


@register("aten::special_erfcx.default")
def aten_special_erfcx(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_erfcx(Tensor self) -> Tensor: ``exp(x^2) erfc(x)``, ``2 exp(x^2) - erfcx(-x)`` below 0."""

    def formula(f: _F, x: ir.Value) -> ir.Value:
        positive = f.Exp(_log_erfc_plus_square(f, f.Abs(x)))
        negative = f.Sub(f.Mul(f.Exp(f.Mul(x, x)), 2.0), positive)
        out = f.Where(f.Less(x, 0.0), negative, positive)
        return f.Where(f.IsInf(x, detect_negative=0), f.c(0.0), out)

    return _unary(ctx, self, formula)


@register("aten::special_log_ndtr.default")
def aten_special_log_ndtr(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_log_ndtr(Tensor self) -> Tensor: ``log(erfc(-x / sqrt 2) / 2)``, computed in log space in the
    lower tail."""

    def formula(f: _F, x: ir.Value) -> ir.Value:
        t = f.Div(f.Abs(x), math.sqrt(2.0))
        log_erfc = f.Sub(_log_erfc_plus_square(f, t), f.Mul(t, t))  # log(erfc(|x| / sqrt 2))
        lower = f.Add(log_erfc, math.log(0.5))
        upper = f.Log(f.Sub(1.0, f.Mul(f.Exp(log_erfc), 0.5)))
        out = f.Where(f.Less(x, 0.0), lower, upper)
        out = f.Where(f.IsInf(x, detect_negative=0), f.c(0.0), out)
        return f.Where(f.IsInf(x, detect_positive=0), f.c(-math.inf), out)

    return _unary(ctx, self, formula)


@register("aten::special_spherical_bessel_j0.default")
def aten_special_spherical_bessel_j0(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """special_spherical_bessel_j0(Tensor x) -> Tensor: ``sin(x) / x``, 1 at 0."""

    def formula(f: _F, x: ir.Value) -> ir.Value:
        return f.Where(f.Equal(x, 0.0), f.c(1.0), f.Div(f.Sin(x), x))

    return _unary(ctx, self, formula)


# -- Bessel functions of the first kind -----------------------------------------------------------------
def _bessel_series(f: _F, x: ir.Value, nu: int, modified: bool, terms: int = 60) -> ir.Value:
    """``sum_k (+-1)^k (x/2)^(2k+nu) / (k! (k+nu)!)``: I_nu (modified) or J_nu."""
    quarter = f.Mul(f.Mul(x, x), 0.25)
    term = f.Mul(x, 0.5) if nu == 1 else f.c(1.0)
    total = term
    for k in range(terms):
        factor = f.Div(quarter, float((k + 1) * (k + 1 + nu)))
        term = f.Mul(term, factor if modified else f.Neg(factor))
        total = f.Add(total, term)
    return total


def _asymptotic_coefficients(nu: int, count: int) -> list[float]:
    """``a_k(nu) = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k)``."""
    out, a = [1.0], 1.0
    for k in range(1, count):
        a *= (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8.0)
        out.append(a)
    return out


def _modified_bessel(f: _F, x: ir.Value, nu: int, scaled: bool) -> ir.Value:
    """I_nu(x) (``scaled``: ``exp(-|x|) I_nu(x)``): the series up to |x| = 30, the asymptotic expansion above."""
    ax = f.Abs(x)
    large = f.Greater(ax, 30.0)
    small_x = f.Where(large, f.c(0.0), x)
    series = _bessel_series(f, small_x, nu, True)
    if scaled:
        series = f.Mul(series, f.Exp(f.Neg(f.Abs(small_x))))
    big = f.Max(ax, 30.0)
    inv = f.Div(1.0, big)
    tail = _horner(f, inv, [c * (-1) ** k for k, c in enumerate(_asymptotic_coefficients(nu, 12))][::-1])
    tail = f.Div(tail, f.Sqrt(f.Mul(big, 2 * math.pi)))
    if not scaled:
        tail = f.Mul(tail, f.Exp(big))
    if nu == 1:
        tail = f.Mul(tail, f.Sign(x))
    out = f.Where(large, tail, series)
    return f.Where(f.IsNaN(x), x, out)


def _bessel_j(f: _F, x: ir.Value, nu: int) -> ir.Value:
    """J_nu(x): the series up to |x| = 25, Hankel's asymptotic expansion above."""
    ax = f.Abs(x)
    large = f.Greater(ax, 25.0)
    series = _bessel_series(f, f.Where(large, f.c(0.0), x), nu, False)
    big = f.Max(ax, 25.0)
    a = _asymptotic_coefficients(nu, 20)
    inv = f.Div(1.0, big)
    p = _horner(f, f.Mul(inv, inv), [a[k] * (-1) ** (k // 2) for k in range(0, 20, 2)][::-1])
    q = f.Mul(_horner(f, f.Mul(inv, inv), [a[k] * (-1) ** (k // 2) for k in range(1, 20, 2)][::-1]), inv)
    chi = f.Sub(big, (nu / 2 + 0.25) * math.pi)
    tail = f.Mul(f.Sqrt(f.Div(2.0 / math.pi, big)), f.Sub(f.Mul(p, f.Cos(chi)), f.Mul(q, f.Sin(chi))))
    if nu == 1:
        tail = f.Mul(tail, f.Sign(x))
    out = f.Where(large, tail, series)
    return f.Where(f.IsNaN(x), x, out)


def _bessel_converter(name: str, formula: Any):
    def converter(ctx: NodeContext, self: ir.Value) -> ir.Value:
        return _unary(ctx, self, formula)

    converter.__name__ = converter.__qualname__ = f"aten_{name}"
    converter.__doc__ = f"{name}(Tensor self) -> Tensor: series and asymptotic expansion in double precision."
    return converter


for _names, _formula in (
    (("i0", "special_i0", "special_modified_bessel_i0"), lambda f, x: _modified_bessel(f, x, 0, False)),
    (("special_i0e",), lambda f, x: _modified_bessel(f, x, 0, True)),
    (("special_i1", "special_modified_bessel_i1"), lambda f, x: _modified_bessel(f, x, 1, False)),
    (("special_i1e",), lambda f, x: _modified_bessel(f, x, 1, True)),
    (("special_bessel_j0",), lambda f, x: _bessel_j(f, x, 0)),
    (("special_bessel_j1",), lambda f, x: _bessel_j(f, x, 1)),
):
    register(*(f"aten::{n}.default" for n in _names))(_bessel_converter(_names[0], _formula))


@register("aten::special_zeta.default", "aten::special_zeta.self_scalar", "aten::special_zeta.other_scalar")
def aten_special_zeta(ctx: NodeContext, self: Any, other: Any) -> ir.Value:
    """special_zeta(Tensor self, Tensor other) -> Tensor: Hurwitz's ``zeta(x, q) = sum_k (q + k)^-x``, ten terms
    then the Euler-Maclaurin tail; inf at ``x = 1``, NaN for ``x < 1``, as PyTorch (Cephes)."""
    f = _F(ctx)
    x, q = ctx.operand(self, DOUBLE), ctx.operand(other, DOUBLE)
    steps = 10
    total = f.c(0.0)
    for k in range(steps):
        total = f.Add(total, f.Pow(f.Add(q, float(k)), f.Neg(x)))
    a = f.Add(q, float(steps))
    total = f.Add(total, f.Div(f.Pow(a, f.Sub(1.0, x)), f.Sub(x, 1.0)))
    total = f.Add(total, f.Mul(f.Pow(a, f.Neg(x)), 0.5))
    rising = x  # x (x+1) ... (x + 2j - 2)
    for j, b in enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6), start=1):
        term = f.Mul(f.Mul(rising, b / math.factorial(2 * j)), f.Pow(a, f.Sub(f.Neg(x), float(2 * j - 1))))
        total = f.Add(total, term)
        rising = f.Mul(f.Mul(rising, f.Add(x, float(2 * j - 1))), f.Add(x, float(2 * j)))
    pole = f.And(f.LessOrEqual(q, 0.0), f.Equal(f.Floor(q), q))
    out = f.Where(pole, f.c(math.inf), total)
    negative = f.And(f.Less(q, 0.0), f.Not(f.Equal(f.Floor(x), x)))  # (q + k)^-x of a negative base
    out = f.Where(f.And(negative, f.Not(pole)), f.c(math.nan), out)
    out = f.Where(f.Equal(x, 1.0), f.c(math.inf), out)
    out = f.Where(f.Less(x, 1.0), f.c(math.nan), out)
    return ctx.cast(out, ctx.out_dtype)
