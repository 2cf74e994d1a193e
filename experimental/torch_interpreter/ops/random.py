"""Random sampling: rand/randn/randint and their _like forms, normal, bernoulli, multinomial, and the
distributions PyTorch fills tensors with (uniform, cauchy, exponential, geometric, log_normal).

ONNX RandomUniform(Like)/RandomNormal(Like) draw the numbers: the values follow the same distribution as
PyTorch's, not the same sequence (``torch.manual_seed`` does not carry over). Other distributions are
transforms of a uniform draw; sampling without replacement is the Gumbel-top-k trick.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES, onnx_dtype
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, FLOAT, INT64, concat_shape, filled, kernel_op, opmath_dtype, static_shape

#: the float types onnxruntime draws in
_DRAW = frozenset({ir.DataType.FLOAT16, FLOAT, ir.DataType.DOUBLE})


def _draw_dtype(dtype: ir.DataType) -> ir.DataType:
    dtype = opmath_dtype(dtype) if dtype in FLOAT_TYPES else FLOAT
    return dtype if dtype in _DRAW else FLOAT


def _shape_of_output(ctx: NodeContext, size: Sequence[Any] | None = None) -> ir.Value:
    shape = static_shape(ctx.val)
    if shape is not None:
        return ctx.const(shape, INT64)
    return concat_shape(ctx, list(size))


def _uniform(ctx: NodeContext, like: ir.Value, dtype: ir.DataType, low: float = 0.0, high: float = 1.0) -> ir.Value:
    """Uniform numbers in ``[low, high)`` with the shape of ``like``."""
    like = ctx.cast(like, FLOAT) if like.dtype not in _DRAW else like  # T1 of the *Like ops has no bfloat16...
    out = ctx.op("RandomUniformLike", like, dtype=dtype, low=float(low), high=float(high))
    out.dtype = dtype
    return out


def _normal(ctx: NodeContext, like: ir.Value, dtype: ir.DataType, mean: float = 0.0, std: float = 1.0) -> ir.Value:
    like = ctx.cast(like, FLOAT) if like.dtype not in _DRAW else like
    out = ctx.op("RandomNormalLike", like, dtype=dtype, mean=float(mean), scale=float(std))
    out.dtype = dtype
    return out


def _zeros(ctx: NodeContext, shape: ir.Value, dtype: ir.DataType) -> ir.Value:
    return filled(ctx, shape, dtype)


def _template(ctx: NodeContext, size: Sequence[Any] | None = None) -> tuple[ir.Value, ir.DataType]:
    """A tensor of zeros of the output shape, in the type the draw is made in."""
    c = _draw_dtype(ctx.out_dtype)
    return _zeros(ctx, _shape_of_output(ctx, size), c), c


# -- factories ------------------------------------------------------------------------------------------------
@register("aten::rand.default", "aten::rand.generator")
def aten_rand(ctx: NodeContext, size: Sequence[Any], **options: Any) -> ir.Value:
    """rand(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    zeros, c = _template(ctx, size)
    return ctx.cast(_uniform(ctx, zeros, c), ctx.out_dtype)


@register("aten::randn.default", "aten::randn.generator")
def aten_randn(ctx: NodeContext, size: Sequence[Any], **options: Any) -> ir.Value:
    """randn(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    zeros, c = _template(ctx, size)
    return ctx.cast(_normal(ctx, zeros, c), ctx.out_dtype)


def _randint(ctx: NodeContext, like: ir.Value, low: Any, high: Any) -> ir.Value:
    """``floor(low + (high - low) * U)``, integers in ``[low, high)``, computed in double."""
    d = ir.DataType.DOUBLE
    u = _uniform(ctx, like, d)
    lo, hi = ctx.operand(low, d), ctx.operand(high, d)
    return ctx.cast(ctx.op("Floor", ctx.op("Add", lo, ctx.op("Mul", u, ctx.op("Sub", hi, lo)))), ctx.out_dtype)


@register("aten::randint.default", "aten::randint.generator")
def aten_randint(ctx: NodeContext, high: Any, size: Sequence[Any], **options: Any) -> ir.Value:
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...) -> Tensor"""
    return _randint(ctx, _zeros(ctx, _shape_of_output(ctx, size), ir.DataType.DOUBLE), 0, high)


@register("aten::randint.low", "aten::randint.low_generator")
def aten_randint_low(ctx: NodeContext, low: Any, high: Any, size: Sequence[Any], **options: Any) -> ir.Value:
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=long, ...) -> Tensor"""
    return _randint(ctx, _zeros(ctx, _shape_of_output(ctx, size), ir.DataType.DOUBLE), low, high)


@register("aten::rand_like.default", "aten::rand_like.generator")
def aten_rand_like(ctx: NodeContext, self: ir.Value, **options: Any) -> ir.Value:
    """rand_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(_uniform(ctx, self, c), ctx.out_dtype)


@register("aten::randn_like.default", "aten::randn_like.generator")
def aten_randn_like(ctx: NodeContext, self: ir.Value, **options: Any) -> ir.Value:
    """randn_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(_normal(ctx, self, c), ctx.out_dtype)


@register(
    "aten::randint_like.default",
    "aten::randint_like.generator",
    "aten::randint_like.Tensor",
    "aten::randint_like.Tensor_generator",
)
def aten_randint_like(ctx: NodeContext, self: ir.Value, high: Any, **options: Any) -> ir.Value:
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _randint(ctx, self, 0, high)


@register("aten::randint_like.low_dtype", "aten::randint_like.low_generator_dtype")
def aten_randint_like_low(ctx: NodeContext, self: ir.Value, low: Any, high: Any, **options: Any) -> ir.Value:
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _randint(ctx, self, low, high)


@register("aten::randperm.default", "aten::randperm.generator")
def aten_randperm(ctx: NodeContext, n: Any, **options: Any) -> ir.Value:
    """randperm(SymInt n, *, ScalarType? dtype=long, ...) -> Tensor: the order that sorts uniform draws."""
    zeros = _zeros(ctx, ctx.int64s([n]), FLOAT)
    _, order = ctx.op("TopK", _uniform(ctx, zeros, FLOAT), ctx.int64s([n]), axis=0, num_outputs=2)
    return ctx.cast(order, ctx.out_dtype)


# -- normal ---------------------------------------------------------------------------------------------------
def _normal_of(ctx: NodeContext, mean: Any, std: Any) -> ir.Value:
    """``mean + std * N(0, 1)`` broadcast to the output shape."""
    dtype = ctx.out_dtype
    zeros, c = _template(ctx)
    noise = _normal(ctx, zeros, c)
    return ctx.cast(ctx.op("Add", ctx.operand(mean, c), ctx.op("Mul", ctx.operand(std, c), noise)), dtype)


@register("aten::normal.Tensor_Tensor", "aten::normal.Tensor_float", "aten::normal.float_Tensor")
def aten_normal(ctx: NodeContext, mean: Any, std: Any = 1.0, *, generator: Any = None) -> ir.Value:
    """normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor"""
    return _normal_of(ctx, mean, std)


@register("aten::normal.float_float")
def aten_normal_float_float(ctx: NodeContext, mean: float, std: float, size: Sequence[Any], **options: Any) -> ir.Value:
    """normal.float_float(float mean, float std, SymInt[] size, *, Generator? generator=None, ...) -> Tensor"""
    zeros, c = _template(ctx, size)
    return ctx.cast(_normal(ctx, zeros, c, mean, std), ctx.out_dtype)


@register("aten::normal_functional.default")
def aten_normal_functional(
    ctx: NodeContext, self: ir.Value, mean: float = 0.0, std: float = 1.0, *, generator: Any = None
) -> ir.Value:
    """normal_functional(Tensor self, float mean=0., float std=1., *, Generator? generator=None) -> Tensor"""
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(_normal(ctx, self, c, mean, std), ctx.out_dtype)


# -- distributions filling a tensor ---------------------------------------------------------------------------
def _transform(ctx: NodeContext, self: ir.Value, formula: Any) -> ir.Value:
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(formula(_uniform(ctx, self, c), c), ctx.out_dtype)


@register("aten::uniform.default")
def aten_uniform(
    ctx: NodeContext, self: ir.Value, from_: float = 0.0, to: float = 1.0, *, generator: Any = None, **kwargs: Any
) -> ir.Value:
    """uniform(Tensor self, float from=0., float to=1., *, Generator? generator=None) -> Tensor"""
    from_ = kwargs.get("from", from_)
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(_uniform(ctx, self, c, from_, to), ctx.out_dtype)


@register("aten::cauchy.default")
def aten_cauchy(
    ctx: NodeContext, self: ir.Value, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None
) -> ir.Value:
    """cauchy(Tensor self, float median=0., float sigma=1., *, Generator? generator=None) -> Tensor:
    ``median + sigma * tan(pi (U - 1/2))``."""

    def formula(u: ir.Value, c: ir.DataType) -> ir.Value:
        angle = ctx.op("Mul", ctx.op("Sub", u, ctx.const(0.5, c)), ctx.const(math.pi, c))
        return ctx.op("Add", ctx.const(median, c), ctx.op("Mul", ctx.const(sigma, c), ctx.op("Tan", angle)))

    return _transform(ctx, self, formula)


@register("aten::exponential.default")
def aten_exponential(ctx: NodeContext, self: ir.Value, lambd: float = 1.0, *, generator: Any = None) -> ir.Value:
    """exponential(Tensor self, float lambd=1., *, Generator? generator=None) -> Tensor: ``-log(1 - U) / lambd``."""

    def formula(u: ir.Value, c: ir.DataType) -> ir.Value:
        return ctx.op("Div", ctx.op("Neg", ctx.op("Log", ctx.op("Sub", ctx.const(1.0, c), u))), ctx.const(lambd, c))

    return _transform(ctx, self, formula)


@register("aten::geometric.default")
def aten_geometric(ctx: NodeContext, self: ir.Value, p: float, *, generator: Any = None) -> ir.Value:
    """geometric(Tensor self, float p, *, Generator? generator=None) -> Tensor: ``ceil(log(1 - U) / log(1 - p))``."""

    def formula(u: ir.Value, c: ir.DataType) -> ir.Value:
        ratio = ctx.op("Div", ctx.op("Log", ctx.op("Sub", ctx.const(1.0, c), u)), ctx.const(math.log1p(-p), c))
        return ctx.op("Max", ctx.op("Ceil", ratio), ctx.const(1.0, c))

    return _transform(ctx, self, formula)


@register("aten::log_normal.default")
def aten_log_normal(
    ctx: NodeContext, self: ir.Value, mean: float = 1.0, std: float = 2.0, *, generator: Any = None
) -> ir.Value:
    """log_normal(Tensor self, float mean=1., float std=2., *, Generator? generator=None) -> Tensor"""
    c = _draw_dtype(ctx.out_dtype)
    return ctx.cast(ctx.op("Exp", _normal(ctx, self, c, mean, std)), ctx.out_dtype)


# -- bernoulli, multinomial ----------------------------------------------------------------------------------
@register("aten::bernoulli.default", "aten::bernoulli.p", "aten::bernoulli.Tensor")
def aten_bernoulli(ctx: NodeContext, self: ir.Value, p: Any = None, *, generator: Any = None) -> ir.Value:
    """bernoulli(Tensor self, *, Generator? generator=None) -> Tensor: 1 where ``U < p`` (``p``: ``self``
    without the argument)."""
    c = _draw_dtype(ctx.out_dtype)
    prob = ctx.operand(self if p is None else p, c)
    return ctx.cast(ctx.op("Less", _uniform(ctx, self, c), prob), ctx.out_dtype)


@register("aten::multinomial.default")
def aten_multinomial(
    ctx: NodeContext, self: ir.Value, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> ir.Value:
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor

    ONNX Multinomial with replacement; without, the ``num_samples`` largest ``log(p) + Gumbel`` draws.
    """
    rank = ctx.rank(self)
    x = ctx.cast(self, FLOAT)
    if rank == 1:
        x = ctx.op("Unsqueeze", x, ctx.const([0], INT64))
    logp = ctx.op("Log", x)
    if replacement:
        out = ctx.op("Multinomial", logp, sample_size=int(num_samples), dtype=INT64)
        out.dtype = INT64
    else:
        u = _uniform(ctx, logp, FLOAT, 1e-20, 1.0)
        gumbel = ctx.op("Neg", ctx.op("Log", ctx.op("Neg", ctx.op("Log", u))))
        _, out = ctx.op("TopK", ctx.op("Add", logp, gumbel), ctx.int64s([num_samples]), axis=-1, num_outputs=2)
    if rank == 1:
        out = ctx.op("Squeeze", out, ctx.const([0], INT64))
    return ctx.cast(out, ctx.out_dtype)


# -- dropout --------------------------------------------------------------------------------------------------
#: SELU's scale * alpha, the value alpha_dropout gives a dropped element before its affine correction
_SELU_ALPHA = 1.7580993408473766


def _dropout(ctx: NodeContext, x: ir.Value, p: float, train: bool, feature: bool, alpha: bool) -> ir.Value:
    """PyTorch's ``_dropout_impl``: a Bernoulli(1 - p) mask (one per channel for the feature forms, of shape
    ``(N, C, 1, ...)``), kept values scaled by ``1 / (1 - p)``; the alpha forms map kept values to
    ``a * x + alpha * a * p`` and dropped ones to ``alpha * a * (p - 1)`` (mean and variance kept)."""
    if not train or p == 0:
        return x
    dtype = x.dtype
    if p >= 1:  # input * 0, as PyTorch: NaN and inf give NaN (bfloat16 has no Mul kernel: kernel_op)
        return kernel_op(ctx, "Mul", x, 0.0, dtype=dtype)
    c = _draw_dtype(dtype)
    like = x
    rank = ctx.rank(x)
    if feature and rank > 2:  # one draw per (sample, channel)
        axes = list(range(2, rank))
        zeros = ctx.const([0] * len(axes), INT64)
        like = ctx.op("Slice", x, zeros, ctx.const([1] * len(axes), INT64), ctx.const(axes, INT64))
    keep = ctx.op("Less", _uniform(ctx, like, c), ctx.const(1.0 - p, c))
    if not alpha:
        noise = ctx.op("Where", keep, ctx.const(1.0 / (1.0 - p), c), ctx.const(0.0, c))
        return ctx.cast(ctx.op("Mul", ctx.cast(x, c), noise), dtype)
    a = 1.0 / math.sqrt((_SELU_ALPHA**2 * p + 1) * (1 - p))
    noise = ctx.op("Where", keep, ctx.const(a, c), ctx.const(0.0, c))
    shift = ctx.op("Where", keep, ctx.const(_SELU_ALPHA * a * p, c), ctx.const(_SELU_ALPHA * a * (p - 1), c))
    return ctx.cast(ctx.op("Add", ctx.op("Mul", ctx.cast(x, c), noise), shift), dtype)


@register("aten::dropout.default", "aten::dropout_.default")
def aten_dropout(ctx: NodeContext, input: ir.Value, p: float, train: bool) -> ir.Value:
    """dropout(Tensor input, float p, bool train) -> Tensor: the input in eval mode (``dropout_``: in place)."""
    return _dropout(ctx, input, p, train, feature=False, alpha=False)


@register("aten::feature_dropout.default", "aten::feature_dropout_.default")
def aten_feature_dropout(ctx: NodeContext, input: ir.Value, p: float, train: bool) -> ir.Value:
    """feature_dropout(Tensor input, float p, bool train) -> Tensor: whole channels dropped (dropout1d/2d/3d)."""
    return _dropout(ctx, input, p, train, feature=True, alpha=False)


@register("aten::alpha_dropout.default", "aten::alpha_dropout_.default")
def aten_alpha_dropout(ctx: NodeContext, input: ir.Value, p: float, train: bool) -> ir.Value:
    """alpha_dropout(Tensor input, float p, bool train) -> Tensor: dropout that keeps SELU's mean and variance."""
    return _dropout(ctx, input, p, train, feature=False, alpha=True)


@register("aten::feature_alpha_dropout.default", "aten::feature_alpha_dropout_.default")
def aten_feature_alpha_dropout(ctx: NodeContext, input: ir.Value, p: float, train: bool) -> ir.Value:
    """feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor: alpha dropout of whole channels."""
    return _dropout(ctx, input, p, train, feature=True, alpha=True)


@register("aten::native_dropout.default")
def aten_native_dropout(ctx: NodeContext, input: ir.Value, p: float, train: bool | None) -> tuple[ir.Value, ir.Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor): the output and the bool mask of
    the kept elements.

    In training (``train`` True or None, as PyTorch reads it) an element is kept where a uniform draw is below
    ``1 - p``, and the kept ones are multiplied by ``1 / (1 - p)`` rounded to the input's type (in float32 for
    float16/bfloat16), as PyTorch does; ONNX ``Dropout`` divides by ``1 - p`` in float32 instead, one ulp off for
    about one element in ten, so it is not used. ``p == 0`` (or ``train`` False) returns the input itself and
    an all-true mask, ``p == 1`` ``input * 0`` (NaN where the input is infinite) and an all-false mask.

    The draws come from onnxruntime's random generator, a new mask at each run (no fixed seed): the model
    follows PyTorch's law, not its sequence, and cannot reproduce the masks ``torch.manual_seed`` gives.
    """
    dtype = input.dtype
    mask_dtype = onnx_dtype(ctx.val[1].dtype)
    if train is False or p == 0 or p >= 1:
        shape = static_shape(ctx.val[1])
        shape = ctx.const(shape, INT64) if shape is not None else ctx.op("Shape", input)
        keep_all = train is False or p == 0
        mask = ctx.cast(filled(ctx, shape, BOOL, keep_all), mask_dtype)
        return (input if keep_all else kernel_op(ctx, "Mul", input, 0, dtype=dtype)), mask
    c = _draw_dtype(dtype)
    keep = ctx.op("Less", _uniform(ctx, input, c), ctx.const(1.0 - p, c))
    scale = float(np.array(1.0 / (1.0 - p), dtype=dtype.numpy()))
    noise = ctx.op("Where", keep, ctx.const(scale, c), ctx.const(0.0, c))
    return ctx.cast(ctx.op("Mul", ctx.cast(input, c), noise), dtype), ctx.cast(keep, mask_dtype)
