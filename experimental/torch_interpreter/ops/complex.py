"""Complex tensors as real pairs: every converter here receives and returns a complex tensor of shape ``S`` as a
real tensor of shape ``S + [2]`` (real, imaginary on the last axis), see
:mod:`experimental.torch_interpreter.translation.complex_pairs`. The interpreter calls them, under the key
``complex::<op>.<overload>``, for the FX nodes that read or produce a complex tensor (rotary embeddings written
with ``torch.polar``, ``view_as_complex`` and a complex product, DeepSeek-V2 style). ``view_as_complex`` and
``view_as_real`` are the boundary: the pair is already the real view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, filled, normalize_dim, scatter_slice, slice_gradient, static_dim


def _is_pair(ctx: NodeContext, index: int) -> bool:
    """Whether argument ``index`` is a complex tensor (so carried as a real pair)."""
    val = ctx.arg_val(index)
    return hasattr(val, "is_complex") and val.is_complex()


def _parts(ctx: NodeContext, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Real and imaginary parts of a pair, each keeping a last axis of size 1."""
    return ctx.op("Split", x, ctx.const([1, 1], INT64), axis=-1, num_outputs=2)


def _pair_dtype(ctx: NodeContext) -> ir.DataType:
    return ir.DataType.DOUBLE if "128" in str(ctx.val.dtype) else ir.DataType.FLOAT


def _real_to_pair(ctx: NodeContext, x: ir.Value) -> ir.Value:
    """The pair of a real tensor: imaginary part 0 (zeros of its shape, not ``x * 0``, NaN where ``x`` is inf)."""
    real = ctx.cast(x, _pair_dtype(ctx))
    return complex_complex(ctx, real, filled(ctx, ctx.op("Shape", real), real.dtype))


# -- boundary ---------------------------------------------------------------------------------------------
@register("complex::view_as_complex.default")
def complex_view_as_complex(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """view_as_complex(Tensor(a) self) -> Tensor(a): the real tensor ``[..., 2]`` already is the pair."""
    return ctx.op("Identity", self)


@register("complex::view_as_real.default")
def complex_view_as_real(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """view_as_real(Tensor(a) self) -> Tensor(a): the pair is the real view."""
    return ctx.op("Identity", self)


@register("complex::polar.default")
def complex_polar(ctx: NodeContext, abs: ir.Value, angle: ir.Value) -> ir.Value:
    """polar(Tensor abs, Tensor angle) -> Tensor: ``abs * cos(angle)``, ``abs * sin(angle)``."""
    dtype = _pair_dtype(ctx)
    r, theta = ctx.cast(abs, dtype), ctx.cast(angle, dtype)
    last = ctx.const([-1], INT64)
    re = ctx.op("Unsqueeze", ctx.op("Mul", r, ctx.op("Cos", theta)), last)
    im = ctx.op("Unsqueeze", ctx.op("Mul", r, ctx.op("Sin", theta)), last)
    return ctx.op("Concat", re, im, axis=-1)


@register("complex::real.default", "complex::imag.default")
def complex_real(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """real(Tensor(a) self) -> Tensor(a), imag(...): one part of the pair, a real tensor (a boundary too)."""
    index = 1 if ctx.node.target.__name__.startswith("imag") else 0
    return ctx.op("Gather", self, ctx.const(index, INT64), axis=-1)


# -- arithmetic -------------------------------------------------------------------------------------------
def _operand_pair(ctx: NodeContext, x: Any, index: int, dtype: ir.DataType) -> ir.Value:
    """Argument ``index`` as a pair: a real tensor or number is promoted as PyTorch promotes it, imaginary part 0
    (zeros, not ``x * 0``, which is NaN where ``x`` is infinite)."""
    if isinstance(x, ir.Value):
        return ctx.cast(x, dtype) if _is_pair(ctx, index) else _real_to_pair(ctx, x)
    if isinstance(x, complex):
        raise NotImplementedError(f"a Python complex scalar ({x}) as operand is not supported")
    return ctx.const([float(x), 0.0], dtype)


@register("complex::mul.Tensor", "complex::mul.Scalar")
def complex_mul(ctx: NodeContext, self: Any, other: Any) -> ir.Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor: ``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``; a real
    operand is promoted first (``d = 0``), as PyTorch does: ``(inf + 2i) * 3`` is ``inf + nan i`` there too."""
    dtype = _pair_dtype(ctx)
    a, b = _parts(ctx, _operand_pair(ctx, self, 0, dtype))
    c, d = _parts(ctx, _operand_pair(ctx, other, 1, dtype))
    re = ctx.op("Sub", ctx.op("Mul", a, c), ctx.op("Mul", b, d))
    im = ctx.op("Add", ctx.op("Mul", a, d), ctx.op("Mul", b, c))
    return ctx.op("Concat", re, im, axis=-1)


def _add_sub(ctx: NodeContext, op_type: str, self: Any, other: Any, alpha: Any) -> ir.Value:
    """``self ± alpha * other`` as PyTorch computes it: ``other`` promoted, then multiplied by the complex
    ``alpha = 1 + 0i`` (``c + di`` becomes ``(c - 0d) + (d + 0c)i``: a NaN part beside an infinite one)."""
    dtype = _pair_dtype(ctx)
    if alpha != 1:
        raise NotImplementedError(f"complex {op_type} with alpha={alpha} is not supported")
    c, d = _parts(ctx, _operand_pair(ctx, other, 1, dtype))
    zero = ctx.const(0.0, dtype)
    scaled = ctx.op(
        "Concat",
        ctx.op("Sub", c, ctx.op("Mul", zero, d)),
        ctx.op("Add", d, ctx.op("Mul", zero, c)),
        axis=-1,
    )
    return ctx.op(op_type, _operand_pair(ctx, self, 0, dtype), scaled)


@register("complex::add.Tensor")
def complex_add(ctx: NodeContext, self: Any, other: Any, alpha: Any = 1) -> ir.Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor: parts added."""
    return _add_sub(ctx, "Add", self, other, alpha)


@register("complex::sub.Tensor")
def complex_sub(ctx: NodeContext, self: Any, other: Any, alpha: Any = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor: parts subtracted."""
    return _add_sub(ctx, "Sub", self, other, alpha)


@register("complex::neg.default")
def complex_neg(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """neg(Tensor self) -> Tensor: both parts negated."""
    return ctx.op("Neg", self)


@register("complex::sgn.default")
def complex_sgn(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """sgn(Tensor self) -> Tensor: ``z / |z|``, 0 where ``z`` is 0; the division written as PyTorch's complex
    division by a real ``c`` (``rat = 0 / c``, ``scl = 1 / (c + 0 * rat)``, ``((a + b rat) scl, (b - a rat) scl)``)
    so that infinite and NaN parts give its NaNs, in the pair's type."""
    dtype = _pair_dtype(ctx)
    a, b = _parts(ctx, self)
    c = ctx.op("Unsqueeze", _modulus(ctx, self, dtype), ctx.const([-1], INT64))
    zero = ctx.const(0.0, dtype)
    rat = ctx.op("Div", zero, c)
    scl = ctx.op("Reciprocal", ctx.op("Add", c, ctx.op("Mul", zero, rat)))
    re = ctx.op("Mul", ctx.op("Add", a, ctx.op("Mul", b, rat)), scl)
    im = ctx.op("Mul", ctx.op("Sub", b, ctx.op("Mul", a, rat)), scl)
    is_zero = ctx.op("And", ctx.op("Equal", a, zero), ctx.op("Equal", b, zero))
    return ctx.op("Where", is_zero, zero, ctx.op("Concat", re, im, axis=-1))


@register("complex::resolve_conj.default", "complex::resolve_neg.default")
def complex_resolve_conj(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """resolve_conj(Tensor(a) self) -> Tensor(a): the pair already holds the values a conjugate view reads."""
    return self


@register("complex::conj.default", "complex::_conj.default", "complex::conj_physical.default")
def complex_conj_physical(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """conj_physical(Tensor self) -> Tensor: the imaginary part negated."""
    return ctx.op("Mul", self, ctx.const([1.0, -1.0], _pair_dtype(ctx)))


@register("complex::abs.default")
def complex_abs(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor: ``|a + bi|`` as PyTorch's ``hypot(a, b)``, a real tensor: ``sqrt(a² + b²)``
    in double for complex64 (no overflow nor underflow of float32 parts), scaled by ``max(|a|, |b|)`` for
    complex128; ``inf`` when a part is infinite, even with a NaN beside it."""
    return _modulus(ctx, self, ctx.out_dtype)


def _modulus(ctx: NodeContext, self: ir.Value, dtype: ir.DataType) -> ir.Value:
    """``|a + bi|`` of a pair, a real tensor of type ``dtype`` (the pair's real type), as ``complex_abs``."""
    double = ir.DataType.DOUBLE
    a, b = (ctx.cast(p, double) for p in _parts(ctx, self))
    infinite = ctx.op("Or", ctx.op("IsInf", a), ctx.op("IsInf", b))
    if dtype == double:
        m = ctx.op("Max", ctx.op("Abs", a), ctx.op("Abs", b))
        zero = ctx.op("Equal", m, ctx.const(0.0, double))
        safe = ctx.op("Where", zero, ctx.const(1.0, double), m)
        a, b = ctx.op("Div", a, safe), ctx.op("Div", b, safe)
    out = ctx.op("Sqrt", ctx.op("Add", ctx.op("Mul", a, a), ctx.op("Mul", b, b)))
    if dtype == double:
        out = ctx.op("Mul", out, m)
    out = ctx.op("Where", infinite, ctx.const(math.inf, double), out)
    return ctx.cast(ctx.op("Squeeze", out, ctx.const([-1], INT64)), dtype)


@register("complex::complex.default")
def complex_complex(ctx: NodeContext, real: ir.Value, imag: ir.Value) -> ir.Value:
    """complex(Tensor real, Tensor imag) -> Tensor: the parts broadcast to one shape and stacked on a last axis."""
    dtype = _pair_dtype(ctx)
    re, im = ctx.cast(real, dtype), ctx.cast(imag, dtype)
    shape = ctx.op("Shape", ctx.op("Add", re, im))  # the broadcast shape (the sum's values are not read)
    last = ctx.const([-1], INT64)
    parts = [ctx.op("Unsqueeze", ctx.op("Expand", v, shape), last) for v in (re, im)]
    return ctx.op("Concat", *parts, axis=-1)


# -- moves: the pair's last axis stays last ---------------------------------------------------------------
@register("complex::_assert_tensor_metadata.default")
def complex__assert_tensor_metadata(ctx: NodeContext, *args: Any, **kwargs: Any) -> None:
    """_assert_tensor_metadata(Tensor a, SymInt[]? size=None, ...) -> (): checked by torch.export, no ONNX."""
    return None


@register("complex::to.dtype_layout", "complex::to.dtype", "complex::_to_copy.default", "complex::clone.default",
          "complex::alias.default", "complex::contiguous.default")
def complex_to(ctx: NodeContext, self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, ...) -> Tensor(a): a copy; the complex
    dtype kept, or a real tensor made complex (imaginary part 0; a complex to real conversion, which drops the
    imaginary part, and one between complex types are not supported)."""
    if not _is_pair(ctx, 0) and ctx.val.is_complex():
        return _real_to_pair(ctx, self)
    if not (_is_pair(ctx, 0) and ctx.val.is_complex()) or ctx.arg_val(0).dtype != ctx.val.dtype:
        raise NotImplementedError(
            f"a conversion from {ctx.arg_val(0).dtype} to {ctx.val.dtype} is not supported; "
            "use torch.view_as_real / view_as_complex"
        )
    return ctx.op("Identity", self)


@register("complex::unsqueeze.default")
def complex_unsqueeze(ctx: NodeContext, self: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    axis = normalize_dim(dim, ctx.arg_val(0).dim() + 1)
    return ctx.op("Unsqueeze", self, ctx.const([axis], INT64))


@register("complex::squeeze.dim", "complex::squeeze.dims")
def complex_squeeze(ctx: NodeContext, self: ir.Value, dim: int | Sequence[int]) -> ir.Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a): the axes of size 1 among ``dim`` removed."""
    val = ctx.arg_val(0)
    dims = [dim] if isinstance(dim, int) else list(dim)
    axes = [a for a in (normalize_dim(d, max(val.dim(), 1)) for d in dims) if val.dim() and val.shape[a] == 1]
    return ctx.op("Squeeze", self, ctx.const(axes, INT64)) if axes else ctx.op("Identity", self)


@register("complex::view.default", "complex::reshape.default", "complex::_unsafe_view.default")
def complex_view(ctx: NodeContext, self: ir.Value, size: Sequence[Any]) -> ir.Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a): the new shape with the pair axis appended."""
    return ctx.op("Reshape", self, ctx.int64s([*size, 2]))


@register("complex::transpose.int")
def complex_transpose(ctx: NodeContext, self: ir.Value, dim0: int, dim1: int) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = ctx.arg_val(0).dim()
    perm = list(range(rank + 1))
    a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("Transpose", self, perm=perm)


@register("complex::permute.default")
def complex_permute(ctx: NodeContext, self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    rank = ctx.arg_val(0).dim()
    return ctx.op("Transpose", self, perm=[normalize_dim(d, rank) for d in dims] + [rank])


@register("complex::expand.default")
def complex_expand(ctx: NodeContext, self: ir.Value, size: Sequence[Any], implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a): ``-1`` keeps a size
    (Expand's 1 does the same where the input has that axis)."""
    sizes = [1 if isinstance(s, int) and s == -1 else s for s in size]
    return ctx.op("Expand", self, ctx.int64s([*sizes, 2]))


@register("complex::slice.Tensor")
def complex_slice(
    ctx: NodeContext, self: ir.Value, dim: int = 0, start: Any = None, end: Any = None, step: Any = 1
) -> ir.Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)"""
    axis = normalize_dim(dim, ctx.arg_val(0).dim())
    start = 0 if start is None else start
    end = 2**63 - 1 if end is None else min(end, 2**63 - 1) if isinstance(end, int) else end
    return ctx.op(
        "Slice", self, ctx.int64s([start]), ctx.int64s([end]), ctx.const([axis], INT64), ctx.int64s([step])
    )


@register("complex::cat.default")
def complex_cat(ctx: NodeContext, tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor: every operand complex (a real one is not supported)."""
    vals = [n.meta["val"] for n in ctx.node.args[0]]
    if not all(v.is_complex() for v in vals):
        raise NotImplementedError("cat of complex and real tensors is not supported")
    axis = normalize_dim(dim, vals[0].dim())
    return ctx.op("Concat", *tensors, axis=axis)


# -- creation and writes ------------------------------------------------------------------------------------
@register("complex::new_zeros.default")
def complex_new_zeros(ctx: NodeContext, self: ir.Value, size: Sequence[Any], **options: Any) -> ir.Value:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor: zeros of a complex type
    (a real dtype given by ``dtype`` is not supported here)."""
    if not ctx.val.is_complex():
        raise NotImplementedError(f"new_zeros of {ctx.val.dtype} from a complex tensor is not supported")
    return filled(ctx, ctx.int64s([*size, 2]), _pair_dtype(ctx))


@register("complex::copy.default")
def complex_copy(ctx: NodeContext, self: ir.Value, src: ir.Value, non_blocking: bool = False) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: ``src`` (a real one with imaginary part
    0) broadcast to ``self``'s shape."""
    if not ctx.val.is_complex():
        raise NotImplementedError("copy of a complex tensor into a real one (torch drops the imaginary part)")
    pair = src if _is_pair(ctx, 1) else _real_to_pair(ctx, src)
    return ctx.op("Expand", pair, ctx.op("Shape", self))


@register("complex::slice_scatter.default")
def complex_slice_scatter(
    ctx: NodeContext, self: ir.Value, src: ir.Value, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> ir.Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1)
    -> Tensor: the real converter on the pairs, ``dim`` counted without the pair axis."""
    if not (_is_pair(ctx, 0) and _is_pair(ctx, 1)):
        raise NotImplementedError("slice_scatter of a real tensor into a complex one (or back) is not supported")
    axis = normalize_dim(dim, ctx.arg_val(0).dim())
    return scatter_slice(ctx, self, src, axis, start, step, static_dim(ctx.arg_val(0).shape[axis]))


@register("complex::slice_backward.default")
def complex_slice_backward(
    ctx: NodeContext, grad_output: ir.Value, input_sizes: Sequence[Any], dim: int, start: Any, end: Any, step: int
) -> ir.Value:
    """slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, SymInt step)
    -> Tensor: the real converter on the pair, whose axis is one more size."""
    axis = normalize_dim(dim, len(input_sizes))
    return slice_gradient(ctx, grad_output, [*input_sizes, 2], axis, start, step)
