"""Tensor creation: arange, full/zeros/ones/empty and their _like/new_ variants, scalar_tensor, triu/tril, eye,
linspace.

``layout``, ``device``, ``pin_memory`` and ``memory_format`` are accepted and ignored; the element type is the
one PyTorch computed (``ctx.out_dtype``), which follows torch's default-dtype rules when ``dtype`` is None.
``empty`` tensors are filled with zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from ..dtypes import FLOAT_TYPES, torch_dtype
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    DOUBLE,
    FLOAT,
    INT64,
    concat_shape,
    kernel_dtype,
    linspace_values,
    opmath_dtype,
    static_shape,
    widen,
)


def _fill(ctx: NodeContext, shape: ir.Value, value: Any) -> ir.Value:
    """A tensor of shape ``shape`` (1-D INT64) filled with ``value`` (Python scalar or 0-D value)."""
    dtype = ctx.out_dtype
    if isinstance(value, ir.Value):
        return ctx.cast(ctx.op("Expand", widen(ctx, ctx.cast(value, dtype), "Expand"), shape), dtype)
    # ConstantOfShape takes bfloat16 from opset 20
    compute = FLOAT if dtype == ir.DataType.BFLOAT16 and ctx.opset < 20 else dtype
    arr = np.array([value]).astype(compute.numpy())
    return ctx.cast(ctx.op("ConstantOfShape", shape, value=ir.tensor(arr, dtype=compute)), dtype)


def _size(ctx: NodeContext, size: Sequence[int | ir.Value]) -> ir.Value:
    shape = static_shape(ctx.val)
    return ctx.const(shape, INT64) if shape is not None else concat_shape(ctx, list(size))


def _like(ctx: NodeContext, self: ir.Value) -> ir.Value:
    shape = static_shape(ctx.val)
    return ctx.const(shape, INT64) if shape is not None else ctx.op("Shape", self)


_OPTIONS = ("dtype", "layout", "device", "pin_memory", "memory_format", "requires_grad")


def _check_options(kwargs: dict[str, Any]) -> None:
    unknown = set(kwargs) - set(_OPTIONS)
    if unknown:
        raise ValueError(f"unexpected keyword arguments {sorted(unknown)}")


# -- full, zeros, ones, empty -----------------------------------------------------------------------------
@register("aten::full.default")
def aten_full(ctx: NodeContext, size: Sequence[int | ir.Value], fill_value: Any, **options: Any) -> ir.Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), fill_value)


@register("aten::zeros.default", "aten::empty.memory_format", "aten::ones.default")
def aten_zeros(ctx: NodeContext, size: Sequence[int | ir.Value], **options: Any) -> ir.Value:
    """zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor (ones: filled with 1, empty: with 0)"""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), 1 if ctx.op_name == "ones" else 0)


@register("aten::empty_strided.default")
def aten_empty_strided(
    ctx: NodeContext, size: Sequence[int | ir.Value], stride: Sequence[int | ir.Value], **options: Any
) -> ir.Value:
    """empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, ...) -> Tensor: zeros."""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), 0)


@register("aten::full_like.default")
def aten_full_like(ctx: NodeContext, self: ir.Value, fill_value: Any, **options: Any) -> ir.Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _like(ctx, self), fill_value)


@register("aten::zeros_like.default", "aten::empty_like.default", "aten::ones_like.default")
def aten_zeros_like(ctx: NodeContext, self: ir.Value, **options: Any) -> ir.Value:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _like(ctx, self), 1 if ctx.op_name == "ones_like" else 0)


@register("aten::new_full.default")
def aten_new_full(
    ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value], fill_value: Any, **options: Any
) -> ir.Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), fill_value)


@register("aten::new_zeros.default", "aten::new_empty.default", "aten::new_ones.default")
def aten_new_zeros(ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value], **options: Any) -> ir.Value:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), 1 if ctx.op_name == "new_ones" else 0)


@register("aten::new_empty_strided.default")
def aten_new_empty_strided(
    ctx: NodeContext, self: ir.Value, size: Sequence[int | ir.Value], stride: Sequence[int | ir.Value], **options: Any
) -> ir.Value:
    """new_empty_strided(Tensor self, SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, ...) -> Tensor"""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), 0)


@register("aten::scalar_tensor.default")
def aten_scalar_tensor(ctx: NodeContext, s: Any, **options: Any) -> ir.Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor"""
    _check_options(options)
    if isinstance(s, ir.Value):
        return ctx.cast(s, ctx.out_dtype)
    return ctx.const(np.array(s).astype(ctx.out_dtype.numpy()), ctx.out_dtype)


# -- ranges -----------------------------------------------------------------------------------------------
def _is_float(v: Any) -> bool:
    return isinstance(v, float) or (isinstance(v, ir.Value) and v.dtype in FLOAT_TYPES)


@register("aten::arange.default", "aten::arange.start", "aten::arange.start_step")
def aten_arange(ctx: NodeContext, start: Any, end: Any = None, step: Any = 1, **options: Any) -> ir.Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor

    ``Range`` in INT64 for integers, in DOUBLE otherwise (as PyTorch computes), then cast.
    """
    _check_options(options)
    if end is None:  # arange.default(Scalar end, ...)
        start, end = 0, start
    dtype = ctx.out_dtype
    if not any(isinstance(b, ir.Value) for b in (start, end, step)):  # PyTorch's values exactly
        return ctx.const(torch.arange(start, end, step, dtype=torch_dtype(dtype)), dtype)
    bounds = (start, end, step)
    compute = DOUBLE if dtype in FLOAT_TYPES or any(_is_float(b) for b in bounds) else INT64
    return ctx.cast(ctx.op("Range", *(ctx.operand(b, compute) for b in bounds)), dtype)


@register("aten::linspace.default", "aten::linspace.Tensor_Tensor", "aten::linspace.Tensor_Scalar", "aten::linspace.Scalar_Tensor")
def aten_linspace(ctx: NodeContext, start: Any, end: Any, steps: int | ir.Value, **options: Any) -> ir.Value:
    """linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, ...) -> Tensor

    ``start + i * step`` in DOUBLE for the first half and ``end - (steps - 1 - i) * step`` for the second,
    as PyTorch computes it.
    """
    _check_options(options)
    dtype = ctx.out_dtype
    if not any(isinstance(b, ir.Value) for b in (start, end, steps)):
        return ctx.const(torch.linspace(start, end, steps, dtype=torch_dtype(dtype)), dtype)
    return ctx.cast(linspace_values(ctx, start, end, steps, dtype if dtype not in FLOAT_TYPES else None), dtype)


@register("aten::logspace.default", "aten::logspace.Tensor_Tensor", "aten::logspace.Tensor_Scalar", "aten::logspace.Scalar_Tensor")
def aten_logspace(
    ctx: NodeContext, start: Any, end: Any, steps: int | ir.Value, base: float = 10.0, **options: Any
) -> ir.Value:
    """logspace(Scalar start, Scalar end, int steps, float base=10.0, *, ScalarType? dtype=None, ...) -> Tensor"""
    _check_options(options)
    dtype = ctx.out_dtype
    if not any(isinstance(b, ir.Value) for b in (start, end, steps)):
        return ctx.const(torch.logspace(start, end, steps, base, dtype=torch_dtype(dtype)), dtype)
    return ctx.cast(ctx.op("Pow", ctx.const(float(base), DOUBLE), _logspace_exponents(ctx, start, end, steps)), dtype)


def _logspace_exponents(ctx: NodeContext, start: Any, end: Any, steps: int | ir.Value) -> ir.Value:
    """The exponents as PyTorch's CPU logspace computes them: the bounds rounded to the output type, the
    step and the exponents in double, the second half (from ``steps // 2``) counted back from the end; one
    step is the start itself, not rounded."""
    dtype = ctx.out_dtype
    exact = ctx.operand(start, DOUBLE)
    start, end = (ctx.cast(ctx.cast(b, dtype), DOUBLE) for b in (exact, ctx.operand(end, DOUBLE)))
    n = ctx.operand(steps, DOUBLE)
    one = ctx.const(1.0, DOUBLE)
    step = ctx.op("Div", ctx.op("Sub", end, start), ctx.op("Max", ctx.op("Sub", n, one), one))
    i = ctx.op("Range", ctx.const(0.0, DOUBLE), n, one)
    low = ctx.op("Add", start, ctx.op("Mul", step, i))
    high = ctx.op("Sub", end, ctx.op("Mul", step, ctx.op("Sub", ctx.op("Sub", n, one), i)))
    halfway = ctx.op("Floor", ctx.op("Div", n, ctx.const(2.0, DOUBLE)))
    exponents = ctx.op("Where", ctx.op("Less", i, halfway), low, high)
    return ctx.op("Where", ctx.op("Equal", n, one), exact, exponents)


@register("aten::eye.default", "aten::eye.m")
def aten_eye(ctx: NodeContext, n: int | ir.Value, m: int | ir.Value | None = None, **options: Any) -> ir.Value:
    """eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, ...) -> Tensor"""
    _check_options(options)
    dtype = ctx.out_dtype
    shape = _size(ctx, [n, n if m is None else m])
    compute = kernel_dtype("EyeLike", dtype)
    zeros = ctx.op("ConstantOfShape", shape, value=ir.tensor(np.zeros(1, dtype=compute.numpy()), dtype=compute))
    return ctx.cast(ctx.op("EyeLike", zeros), dtype)


@register("aten::empty_permuted.default")
def aten_empty_permuted(
    ctx: NodeContext, size: Sequence[int | ir.Value], physical_layout: Sequence[int], **options: Any
) -> ir.Value:
    """empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, ...) -> Tensor:
    zeros, the memory layout does not exist in ONNX."""
    _check_options(options)
    return _fill(ctx, _size(ctx, size), 0)


@register("aten::item.default", "aten::_local_scalar_dense.default")
def aten_item(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """item(Tensor self) -> Scalar: the single element as a 0-D tensor (INT64, FLOAT or BOOL)."""
    out = ctx.cast(ctx.op("Reshape", self, ctx.const([], INT64)), ctx.out_dtype)
    out.shape = ir.Shape([])
    return out
