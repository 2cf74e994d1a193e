"""The FFTs: fft_irfft, fft_irfft2, fft_irfftn and the Hermitian FFTs fft_hfft* (of real inputs, or of complex
ones as real pairs); the complex FFTs fft_fft*, fft_ifft* and the one-sided fft_rfft*, fft_ihfft* (their complex
results as real pairs, ``complex::`` keys).

ONNX tensors are real: a complex tensor is carried as a real pair ``[..., 2]`` (``complex_pairs.py``). The
transforms are products by cosine and sine matrices, computed at export time for static sizes (the complex
FFTs also take dynamic axes: the matrices are then computed in the graph); inverse
complex DFTs along the leading axes, then the complex-to-real transform of the last axis, whose one-sided
spectrum counts twice except the first and the Nyquist terms, as PyTorch (and numpy) compute it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    dim_of,
    int_op,
    normalize_dim,
    opmath_dtype,
    roll_axis,
    static_dim,
    static_shape,
)


def _apply(ctx: NodeContext, x: ir.Value, axis: int, rank: int, matrix: np.ndarray | ir.Value) -> ir.Value:
    """``x`` multiplied by ``matrix`` (``[in, out]``, a constant or a value of ``x``'s type) along ``axis``."""
    perm = [i for i in range(rank) if i != axis] + [axis]
    moved = ctx.op("Transpose", x, perm=perm) if axis != rank - 1 else x
    if isinstance(matrix, np.ndarray):
        matrix = ctx.const(matrix.astype(x.dtype.numpy()))
    out = ctx.op("MatMul", moved, matrix)
    return ctx.op("Transpose", out, perm=[perm.index(i) for i in range(rank)]) if axis != rank - 1 else out


def _fit(ctx: NodeContext, x: ir.Value, axis: int, rank: int, size: int, want: int) -> ir.Value:
    """``x`` cut or zero-padded to ``want`` elements along ``axis`` (of ``size``)."""
    if want < size:
        return ctx.op("Slice", x, ctx.const([0], INT64), ctx.const([want], INT64), ctx.const([axis], INT64))
    if want > size:
        pads = [0] * (2 * rank)
        pads[rank + axis] = want - size
        return ctx.op("Pad", x, ctx.const(pads, INT64))
    return x


def _real_and_imaginary(ctx: NodeContext, x: ir.Value, val: Any, c: ir.DataType) -> tuple[ir.Value, ir.Value | None]:
    """The parts of ``x`` in type ``c``: a real tensor's imaginary part is None, a pair ``[..., 2]`` is split."""
    if not val.is_complex():
        return ctx.cast(x, c), None
    last = ctx.const([val.dim()], INT64)
    parts = ctx.op("Split", x, ctx.const([1, 1], INT64), axis=-1, num_outputs=2)
    re, im = (ctx.cast(ctx.op("Squeeze", p, last), c) for p in parts)
    return re, im


def _c2r(
    ctx: NodeContext, x: ir.Value, dims: Sequence[int], sizes: Sequence[int | None], norm: str | None, hermitian: bool
) -> ir.Value:
    """irfftn of ``x`` over ``dims`` (output sizes ``sizes``, None: the default), or hfftn: ``x`` real, or the
    real pair of a complex tensor (hfftn reads its conjugate)."""
    val = ctx.arg_val(0)
    shape = static_shape(val)
    if shape is None:
        raise NotImplementedError("inverse real FFT with a dynamic shape")
    rank = len(shape)
    dims = [normalize_dim(d, rank) for d in dims]
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    re, im = _real_and_imaginary(ctx, x, val, c)
    if im is not None and hermitian:
        im = ctx.op("Neg", im)
    out_sizes = []
    for d, s in zip(dims[:-1], sizes[:-1]):  # inverse complex DFTs
        n = shape[d] if s is None else s
        re = _fit(ctx, re, d, rank, shape[d], n)
        im = None if im is None else _fit(ctx, im, d, rank, shape[d], n)
        angle = 2 * math.pi * np.outer(np.arange(n), np.arange(n)) / n
        cos, sin = np.cos(angle), np.sin(angle)
        new_re = _apply(ctx, re, d, rank, cos)
        new_im = _apply(ctx, re, d, rank, sin)
        if im is not None:
            new_re = ctx.op("Sub", new_re, _apply(ctx, im, d, rank, sin))
            new_im = ctx.op("Add", new_im, _apply(ctx, im, d, rank, cos))
        re, im = new_re, new_im
        out_sizes.append(n)
    last = dims[-1]
    n = 2 * (shape[last] - 1) if sizes[-1] is None else sizes[-1]
    if n < 1:
        raise ValueError(f"invalid number of output points {n}")
    half = n // 2 + 1
    re = _fit(ctx, re, last, rank, shape[last], half)
    im = None if im is None else _fit(ctx, im, last, rank, shape[last], half)
    weight = np.full(half, 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    angle = 2 * math.pi * np.outer(np.arange(half), np.arange(n)) / n
    out = _apply(ctx, re, last, rank, weight[:, None] * np.cos(angle))
    if im is not None:
        out = ctx.op("Sub", out, _apply(ctx, im, last, rank, weight[:, None] * np.sin(angle)))
    out_sizes.append(n)
    total = float(np.prod(out_sizes))
    # irfft divides by n for norm="backward"; hfft is the forward transform: it divides for norm="forward"
    scaled = "forward" if hermitian else "backward"
    factor = 1.0 / total if (norm or "backward") == scaled else 1.0 / math.sqrt(total) if norm == "ortho" else 1.0
    if factor != 1.0:
        out = ctx.op("Mul", out, ctx.const(factor, c))
    return ctx.cast(out, dtype)


@register("aten::fft_irfft.default", "aten::fft_hfft.default", "complex::fft_irfft.default", "complex::fft_hfft.default")
def aten_fft_irfft(
    ctx: NodeContext, self: ir.Value, n: int | None = None, dim: int = -1, norm: str | None = None
) -> ir.Value:
    """fft_irfft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor (fft_hfft alike)"""
    return _c2r(ctx, self, [dim], [n], norm, ctx.op_name == "fft_hfft")


@register(
    "aten::fft_irfft2.default", "aten::fft_hfft2.default", "complex::fft_irfft2.default", "complex::fft_hfft2.default"
)
def aten_fft_irfft2(
    ctx: NodeContext,
    self: ir.Value,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
) -> ir.Value:
    """fft_irfft2(Tensor self, SymInt[1]? s=None, int[1] dim=[-2,-1], str? norm=None) -> Tensor (fft_hfft2 alike)"""
    return _c2r(
        ctx,
        self,
        list(dim),
        list(s) if s is not None else [None] * len(dim),
        norm,
        ctx.op_name == "fft_hfft2",
    )


@register(
    "aten::fft_irfftn.default", "aten::fft_hfftn.default", "complex::fft_irfftn.default", "complex::fft_hfftn.default"
)
def aten_fft_irfftn(
    ctx: NodeContext,
    self: ir.Value,
    s: Sequence[int] | None = None,
    dim: Sequence[int] | None = None,
    norm: str | None = None,
) -> ir.Value:
    """fft_irfftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor (fft_hfftn alike):
    without ``dim``, the last ``len(s)`` axes, or all of them."""
    rank = ctx.arg_val(0).dim()
    if dim is None:
        dim = list(range(rank - len(s), rank)) if s is not None else list(range(rank))
    sizes: list[Any] = list(s) if s is not None else [None] * len(dim)
    return _c2r(ctx, self, list(dim), sizes, norm, ctx.op_name == "fft_hfftn")


@register("aten::stft.default")
def aten_stft(
    ctx: NodeContext,
    self: ir.Value,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: ir.Value | None = None,
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool | None = None,
    align_to_window: bool | None = None,
) -> ir.Value:
    """stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None,
    bool normalized=False, bool? onesided=None, bool? return_complex=None, bool? align_to_window=None) -> Tensor

    Real output only (``return_complex=False``): the frames (one ``Gather``) times the window, by the cosine
    and sine matrices, ``[..., bins, frames, 2]``; ``center`` padding is done before, in the graph.
    """
    if return_complex or ctx.out_dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16):
        raise NotImplementedError("stft with a complex output (ONNX tensors are real)")
    shape = static_shape(ctx.arg_val(0))
    if shape is None:
        raise NotImplementedError("stft with a dynamic length")
    hop = hop_length or n_fft // 4
    win = win_length or n_fft
    length = shape[-1]
    frames = 1 + (length - n_fft) // hop
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    index = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    x = ctx.op("Gather", ctx.cast(self, c), ctx.const(index.astype(np.int64)), axis=-1)  # [..., frames, n_fft]
    if window is not None:
        w = ctx.cast(window, c)
        if win < n_fft:  # the window is centered in n_fft samples
            left = (n_fft - win) // 2
            w = ctx.op("Pad", w, ctx.const([left, n_fft - win - left], INT64))
        x = ctx.op("Mul", x, w)
    elif win < n_fft:
        left = (n_fft - win) // 2
        mask = np.zeros(n_fft)
        mask[left : left + win] = 1
        x = ctx.op("Mul", x, ctx.const(mask.astype(c.numpy())))
    bins = n_fft // 2 + 1 if onesided is None or onesided else n_fft
    angle = 2 * math.pi * np.outer(np.arange(n_fft), np.arange(bins)) / n_fft
    scale = 1.0 / math.sqrt(n_fft) if normalized else 1.0
    re = ctx.op("MatMul", x, ctx.const((np.cos(angle) * scale).astype(c.numpy())))
    im = ctx.op("MatMul", x, ctx.const((-np.sin(angle) * scale).astype(c.numpy())))
    rank = len(shape) + 1  # [..., frames, bins]
    perm = [*range(rank - 2), rank - 1, rank - 2]
    out = ctx.op("Concat", *[ctx.op("Unsqueeze", ctx.op("Transpose", v, perm=perm), ctx.const([-1], INT64))
                             for v in (re, im)], axis=-1)
    return ctx.cast(out, dtype)


# -- FFT shifts ---------------------------------------------------------------------------------------------
def _shift(ctx: NodeContext, self: ir.Value, dim: int | Sequence[int] | None, inverse: bool) -> ir.Value:
    rank = ctx.rank(self)
    dims = list(range(rank)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    sizes = [static_dim(ctx.arg_val(0).shape[d]) for d in dims]
    if any(s is None for s in sizes):
        raise NotImplementedError("fftshift over a dynamic dimension")
    shifts = [-(s // 2) if inverse else s // 2 for s in sizes]
    x = self
    for shift, d, size in zip(shifts, dims, sizes):
        x = roll_axis(ctx, x, shift, normalize_dim(d, rank), size)
    return x


@register("aten::fft_fftshift.default")
def aten_fft_fftshift(ctx: NodeContext, self: ir.Value, dim: Any = None) -> ir.Value:
    """fft_fftshift(Tensor self, int[1]? dim=None) -> Tensor: a roll by half of each axis."""
    return _shift(ctx, self, dim, False)


@register("aten::fft_ifftshift.default")
def aten_fft_ifftshift(ctx: NodeContext, self: ir.Value, dim: Any = None) -> ir.Value:
    """fft_ifftshift(Tensor self, int[1]? dim=None) -> Tensor"""
    return _shift(ctx, self, dim, True)


# -- complex FFTs: complex outputs, carried as real pairs (complex_pairs.py) ----------------------------------
def _dft_matrices(
    ctx: NodeContext, n: int | ir.Value, sign: float, c: ir.DataType
) -> tuple[np.ndarray | ir.Value, np.ndarray | ir.Value]:
    """The cosine and sine matrices ``[n, n]`` of a DFT of ``n`` points, ``exp(sign * 2i * pi * k * j / n)``:
    constants for a static ``n``, else computed in the graph (``k * j mod n`` in INT64, the angle in double)."""
    if isinstance(n, int):
        angle = 2 * math.pi * np.outer(np.arange(n), np.arange(n)) / n
        return np.cos(angle), sign * np.sin(angle)
    k = ctx.op("Range", ctx.const(0, INT64), n, ctx.const(1, INT64))
    kj = ctx.op("Mod", ctx.op("Mul", ctx.op("Unsqueeze", k, ctx.const([1], INT64)), k), n)
    double = ir.DataType.DOUBLE
    angle = ctx.op("Div", ctx.op("Mul", ctx.cast(kj, double), ctx.const(2 * math.pi, double)), ctx.cast(n, double))
    sin = ctx.op("Mul", ctx.op("Sin", angle), ctx.const(sign, double))
    return ctx.cast(ctx.op("Cos", angle), c), ctx.cast(sin, c)


def _c2c(
    ctx: NodeContext,
    x: ir.Value,
    dims: Sequence[int],
    sizes: Sequence[int | None],
    norm: str | None,
    inverse: bool,
    onesided: bool = False,
) -> ir.Value:
    """fftn (``inverse``: ifftn) over ``dims`` of ``x``, a real tensor or the real pair of a complex one; the
    result is a pair ``[..., 2]``: one complex DFT per axis, products by cosine and sine matrices (built in
    the graph for a dynamic axis transformed at its own length). ``onesided`` (rfftn, ihfftn of a real ``x``):
    the last axis keeps its ``n // 2 + 1`` first frequencies, the others being their conjugates."""
    val = ctx.arg_val(0)
    rank = val.dim()
    dims = [normalize_dim(d, rank) for d in dims]
    for d, s in zip(dims, sizes):
        if s is not None and static_dim(val.shape[d]) is None:
            raise NotImplementedError(
                f"{ctx.op_name} of a tensor of shape {ctx.onnx_shape(val)}: axis {d} is dynamic and cut or padded to "
                f"{s} points; declare it static (Dim.STATIC) or leave the size to the input's"
            )
    c = ir.DataType.DOUBLE if val.dtype in (torch.complex128, torch.float64) else ir.DataType.FLOAT
    re, im = _real_and_imaginary(ctx, x, val, c)
    sign = 1.0 if inverse else -1.0
    total: int | ir.Value = 1
    for d, s in zip(dims, sizes):
        size = static_dim(val.shape[d])
        n = size if s is None and isinstance(size, int) else s
        if n is None:
            n = dim_of(ctx, re, d, val.shape[d])
        elif n < 1:
            raise ValueError(f"invalid number of data points ({n}) specified")
        else:
            re = _fit(ctx, re, d, rank, size, n)
            im = None if im is None else _fit(ctx, im, d, rank, size, n)
        total = int_op(ctx, "Mul", total, n)
        cos, sin = _dft_matrices(ctx, n, sign, c)  # exp(sign * i * angle) = cos + i * sin
        if onesided and d == dims[-1]:
            cos, sin = (_first_columns(ctx, m, int_op(ctx, "Add", int_op(ctx, "Div", n, 2), 1)) for m in (cos, sin))
        new_re = _apply(ctx, re, d, rank, cos)
        new_im = _apply(ctx, re, d, rank, sin)
        if im is not None:
            new_re = ctx.op("Sub", new_re, _apply(ctx, im, d, rank, sin))
            new_im = ctx.op("Add", new_im, _apply(ctx, im, d, rank, cos))
        re, im = new_re, new_im
    axis = ctx.const([-1], INT64)
    out = ctx.op("Concat", ctx.op("Unsqueeze", re, axis), ctx.op("Unsqueeze", im, axis), axis=-1)
    norm, scaled = norm or "backward", "backward" if inverse else "forward"
    if norm not in (scaled, "ortho"):
        return out
    count = float(total) if isinstance(total, int) else ctx.cast(total, c)
    factor = count if norm == scaled else math.sqrt(count) if isinstance(count, float) else ctx.op("Sqrt", count)
    return ctx.op("Div", out, ctx.operand(factor, c))


def _first_columns(ctx: NodeContext, matrix: np.ndarray | ir.Value, count: int | ir.Value) -> np.ndarray | ir.Value:
    """The ``count`` first columns of a DFT matrix (a constant, or a value built in the graph)."""
    if isinstance(matrix, np.ndarray):
        return matrix[:, :count]
    end = ctx.op("Reshape", ctx.operand(count, INT64), ctx.const([1], INT64))
    return ctx.op("Slice", matrix, ctx.const([0], INT64), end, ctx.const([1], INT64))


def _dims_and_sizes(rank: int, s: Sequence[int] | None, dim: Sequence[int] | None) -> tuple[list[int], list[Any]]:
    """PyTorch's defaults of the n-dimensional transforms: without ``dim``, the last ``len(s)`` axes, or all."""
    if dim is None:
        dim = list(range(rank - len(s), rank)) if s is not None else list(range(rank))
    return list(dim), list(s) if s is not None else [None] * len(dim)


def _inverse(ctx: NodeContext) -> bool:
    """ifft* and ihfft* transform with exp(+i...), fft* and rfft* with exp(-i...)."""
    return ctx.op_name.startswith(("fft_ifft", "fft_ihfft"))


def _onesided(ctx: NodeContext) -> bool:
    """rfft* and ihfft* of a real input keep the first half of the last axis."""
    return ctx.op_name.startswith(("fft_rfft", "fft_ihfft"))


@register(
    "complex::fft_fft.default", "complex::fft_ifft.default", "complex::fft_rfft.default", "complex::fft_ihfft.default"
)
def complex_fft_fft(
    ctx: NodeContext, self: ir.Value, n: int | None = None, dim: int = -1, norm: str | None = None
) -> ir.Value:
    """fft_fft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor (fft_ifft, and the one-sided
    fft_rfft and fft_ihfft of a real input, alike), a real pair"""
    return _c2c(ctx, self, [dim], [n], norm, _inverse(ctx), _onesided(ctx))


@register(
    "complex::fft_fft2.default", "complex::fft_ifft2.default", "complex::fft_rfft2.default", "complex::fft_ihfft2.default"
)
def complex_fft_fft2(
    ctx: NodeContext,
    self: ir.Value,
    s: Sequence[int] | None = None,
    dim: Sequence[int] = (-2, -1),
    norm: str | None = None,
) -> ir.Value:
    """fft_fft2(Tensor self, SymInt[1]? s=None, int[1] dim=[-2,-1], str? norm=None) -> Tensor (fft_ifft2, fft_rfft2,
    fft_ihfft2 alike)"""
    sizes = list(s) if s is not None else [None] * len(dim)
    return _c2c(ctx, self, list(dim), sizes, norm, _inverse(ctx), _onesided(ctx))


@register(
    "complex::fft_fftn.default", "complex::fft_ifftn.default", "complex::fft_rfftn.default", "complex::fft_ihfftn.default"
)
def complex_fft_fftn(
    ctx: NodeContext,
    self: ir.Value,
    s: Sequence[int] | None = None,
    dim: Sequence[int] | None = None,
    norm: str | None = None,
) -> ir.Value:
    """fft_fftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor (fft_ifftn, fft_rfftn,
    fft_ihfftn alike): the complex result as a real pair ``[..., 2]``."""
    dims, sizes = _dims_and_sizes(ctx.arg_val(0).dim(), s, dim)
    return _c2c(ctx, self, dims, sizes, norm, _inverse(ctx), _onesided(ctx))


@register("aten::fft_fftfreq.default", "aten::fft_rfftfreq.default")
def aten_fft_fftfreq(ctx: NodeContext, n: int, d: float = 1.0, **kwargs: Any) -> ir.Value:
    """fft_fftfreq(int n, float d=1., *, ScalarType? dtype=None, ...) -> Tensor (fft_rfftfreq alike): the sample
    frequencies, a constant computed as PyTorch does: the integers ``k`` in the output type times
    ``1 / (n * d)`` (computed in double, rounded to the output type)"""
    if not isinstance(n, int):
        raise NotImplementedError(f"{ctx.op_name} of a dynamic length: its values depend on it, give a Python int")
    k = np.arange(n // 2 + 1) if ctx.op_name == "fft_rfftfreq" else np.rint(np.fft.fftfreq(n) * n)
    t = ctx.out_dtype.numpy()
    return ctx.const(k.astype(t) * t.type(1.0 / (n * d)), ctx.out_dtype)


# -- the primitives torch.fft lowers to (AOTAutograd's forward and backward graphs) --------------------------
def _norm_name(normalization: int, scaled: str) -> str:
    """The ``norm`` string of PyTorch's ``fft_norm_mode`` (0: none, 1: by ``1/sqrt(n)``, 2: by ``1/n``) for a
    transform whose ``scaled`` norm divides by ``n``."""
    if normalization not in (0, 1, 2):
        raise ValueError(f"unknown FFT normalization mode {normalization}")
    unscaled = "forward" if scaled == "backward" else "backward"
    return (unscaled, "ortho", scaled)[normalization]


@register("complex::_fft_r2c.default")
def complex__fft_r2c(ctx: NodeContext, self: ir.Value, dim: Sequence[int], normalization: int, onesided: bool) -> ir.Value:
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor: the forward DFT of a real
    tensor over ``dim`` (the last one-sided when ``onesided``), a real pair"""
    return _c2c(ctx, self, list(dim), [None] * len(dim), _norm_name(normalization, "forward"), False, onesided)


@register("complex::_fft_c2c.default")
def complex__fft_c2c(ctx: NodeContext, self: ir.Value, dim: Sequence[int], normalization: int, forward: bool) -> ir.Value:
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor: the complex DFT over
    ``dim`` (``exp(-i...)`` when ``forward``), a real pair"""
    scaled = "forward" if forward else "backward"
    return _c2c(ctx, self, list(dim), [None] * len(dim), _norm_name(normalization, scaled), not forward)


@register("complex::_fft_c2r.default")
def complex__fft_c2r(
    ctx: NodeContext, self: ir.Value, dim: Sequence[int], normalization: int, last_dim_size: int
) -> ir.Value:
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor: the inverse of a
    one-sided spectrum over ``dim``, ``last_dim_size`` real points on the last one"""
    sizes: list[Any] = [None] * (len(dim) - 1) + [last_dim_size]
    return _c2r(ctx, self, list(dim), sizes, _norm_name(normalization, "backward"), False)
