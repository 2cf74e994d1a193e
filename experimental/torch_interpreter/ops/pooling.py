"""Pooling: max/avg pools, adaptive pools and max unpooling (their gradients are in ``pooling_backward.py``).

Inputs without a batch dimension get one for the ONNX op. Kernel, stride, padding and dilation must be
static; spatial sizes may be dynamic unless said otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BF16,
    BOOL,
    DOUBLE,
    F16,
    FLOAT,
    INT64,
    Ints,
    adaptive_bounds,
    adaptive_run_time_bounds,
    adaptive_windows,
    extremum_as_pytorch,
    filled,
    kernel_dtype,
    kernel_op,
    opmath_dtype,
    separable,
    spatial_dims,
    spatial_ints,
    spatial_rank,
    unpool,
    uses_output,
    with_batch,
)


def _pool_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's output size of a pooling window (``pooling_output_shape``)."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_pads(
    ctx: NodeContext, x: ir.Value, k: Ints, s: Ints, p: Ints, d: Ints, ceil_mode: bool
) -> tuple[list[int], bool]:
    """ONNX ``pads`` and ``ceil_mode`` giving PyTorch's output size.

    Before opset 22, ONNX's ceil mode also counts a last window starting in the right padding, which
    PyTorch drops: that window is removed by shortening the end padding in floor mode.
    """
    pads = list(p) + list(p)
    if not ceil_mode or ctx.opset >= 22:
        return pads, ceil_mode
    dims = spatial_dims(x, len(k))
    if any(v is None for v in dims):
        return pads, ceil_mode  # onnxruntime computes PyTorch's size; shapes stay symbolic
    naive = [_pool_size(n, *a, False) for n, a in zip(dims, zip(k, s, p, d))]
    torch_ = [_pool_size(n, *a, True) for n, a in zip(dims, zip(k, s, p, d))]
    onnx_ceil = [-(-(n + 2 * pi - di * (ki - 1) - 1) // si) + 1 for n, ki, si, pi, di in zip(dims, k, s, p, d)]
    if torch_ == onnx_ceil:
        return pads, True
    if torch_ == naive:
        return pads, False
    ends = [
        pi if o == f else (o - 1) * si + di * (ki - 1) + 1 - n - pi
        for o, f, n, ki, si, pi, di in zip(torch_, naive, dims, k, s, p, d)
    ]
    return list(p) + ends, False


def _plane_indices(ctx: NodeContext, x: ir.Value, indices: ir.Value, n: int) -> ir.Value:
    """ONNX MaxPool indices count over the whole tensor, PyTorch's over one ``(H, W)`` plane."""
    dims = spatial_dims(x, n)
    if all(d is not None for d in dims):
        plane = ctx.const(math.prod(dims), INT64)
    else:
        plane = ctx.op("ReduceProd", ctx.op("Shape", x, start=2), keepdims=0)
    return ctx.op("Mod", indices, plane)


def _max_pool(
    ctx: NodeContext, x: ir.Value, k: Ints, s: Ints, p: Ints, d: Ints, ceil_mode: bool, with_indices: bool
) -> Any:
    n = len(k)
    dtype = ctx.out_dtype
    compute = kernel_dtype("MaxPool", dtype)
    if compute in (ir.DataType.INT32, INT64):  # no integer MaxPool kernel: double holds them exactly
        compute = ir.DataType.DOUBLE

    def pool(x: ir.Value) -> Any:
        pads, ceil = _pool_pads(ctx, x, k, s, p, d, ceil_mode)
        attrs = {"kernel_shape": list(k), "strides": list(s), "pads": pads, "ceil_mode": int(ceil)}
        if any(v != 1 for v in d):
            attrs["dilations"] = list(d)
        xc = ctx.cast(x, compute)

        def max_pool(b: Any, v: ir.Value) -> ir.Value:
            return b.op("MaxPool", v, **attrs)

        # a window may hold padding only where a dilated window starting in the padding skips the input
        padding_only = any(di > 1 and pi > 0 for di, pi in zip(d, p))
        if not with_indices:
            out = ctx.cast(_as_pytorch(ctx, xc, max_pool, padding_only=padding_only), dtype)
            _mark(out, _excludes(x), padding_only)
            return out, None
        values, indices = _with_indices_as_pytorch(ctx, xc, attrs, padding_only)
        return ctx.cast(values, dtype), _plane_indices(ctx, x, indices, n)

    return with_batch(ctx, x, n, pool)


# -- exactness guards of MaxPool ------------------------------------------------------------------------------
# onnxruntime's MaxPool differs from PyTorch on edge values (providers.py, QUIRKS): the CPU kernel skips NaN
# (PyTorch: NaN where the window holds one, and the last NaN's index), and its kernel without indices starts from
# the lowest finite value (a window of -inf only gives -3.4e38, PyTorch -inf; so does a window of padding only,
# which a dilation > 1 with padding makes over a short input). Checking every window costs passes over the input and a second
# pool (9x a plain MaxPool on the CPU); one ReduceSum of the input is NaN when it holds a NaN, NaN or -inf when it
# holds a -inf, so an ``If`` runs the plain pool when neither is there (about 1.3 to 1.45x a plain MaxPool on the
# CPU) and the exact computation otherwise.
#
# A guard is left out where its answer is known from the node computing the input (:func:`_excludes`): the output
# of a Relu holds no -inf (ResNet's, GoogLeNet's, SqueezeNet's and DenseNet's pools), and without dilation or
# without padding no window is padding only (each window starts in the input or, by at most half the kernel, in
# the padding, and PyTorch's ceil mode drops a last window starting in the padding: onnxruntime's CPU kernel gave
# PyTorch's values on 1960 pools of finite inputs without dilation, the lowest float on 20 of 1606 with dilation 2
# and padding); an integer input holds neither NaN nor -inf.

#: ONNX ops whose output holds no -inf nor the lowest finite value, whatever their input (onnxruntime's CPU kernels
#: give 0 for -inf, measured in float16, float32 and float64); NaN stays NaN
_ABOVE_THE_FLOOR = frozenset({"Relu", "Sigmoid"})

#: casts that keep every float value (a narrowing one turns a large finite value into -inf)
_WIDENING = frozenset({(F16, FLOAT), (BF16, FLOAT), (F16, DOUBLE), (BF16, DOUBLE), (FLOAT, DOUBLE)})

#: ``ir.Value.meta`` key: the edge values a max pooling's output cannot hold (set by :func:`_mark`)
_EXCLUDED = "pkg.torch_interpreter.pooling.excludes"


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """The array of a Constant node's output or of an initializer, else None."""
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is not None and node.op_type == "Constant" and "value" in node.attributes:
        return node.attributes["value"].as_tensor().numpy()
    return None


def _excludes(x: ir.Value, depth: int = 8) -> frozenset[str]:
    """The edge values no element of ``x`` can be, read from the nodes computing it: ``"floor"`` (``-inf`` and
    the lowest finite value of its type) after a Relu or a Sigmoid, a Clip whose lower bound is a constant above
    the lowest value, or a max pooling of such a value without a window of padding only (:func:`_mark`); both
    ``"floor"`` and ``"nan"`` after a Cast of integers; what a Cast to a wider float keeps, what every input of a
    Concat excludes, and ``"nan"`` through a Relu or a Sigmoid. Empty when unknown (an input of the graph, any
    other node, ``depth`` nodes up)."""
    known = x.meta.get(_EXCLUDED)
    if known is not None:
        return known
    node = x.producer()
    if node is None or depth == 0 or not node.inputs or node.inputs[0] is None:
        return frozenset()
    first = node.inputs[0]
    if node.op_type == "Cast":
        if first.dtype is not None and (first.dtype.is_integer() or first.dtype == BOOL):
            return frozenset({"nan", "floor"})
        exact = first.dtype == x.dtype or (first.dtype, x.dtype) in _WIDENING
        return _excludes(first, depth - 1) if exact else frozenset()
    if node.op_type == "Concat":
        found = [_excludes(v, depth - 1) for v in node.inputs if v is not None]
        return frozenset.intersection(*found) if found else frozenset()
    if node.op_type in _ABOVE_THE_FLOOR:
        return frozenset({"floor"}) | (_excludes(first, depth - 1) & {"nan"})
    if node.op_type == "Clip" and x.dtype in FLOAT_TYPES:
        low = _constant(node.inputs[1] if len(node.inputs) > 1 else None)
        lowest = float(np.finfo(x.dtype.numpy()).min)
        if low is not None and low.size == 1 and float(low.reshape(())) > lowest:  # False for NaN
            return frozenset({"floor"})
    return frozenset()


def _mark(out: ir.Value, excluded: frozenset[str], padding_only: bool) -> None:
    """Records on the output of a max pooling what it cannot hold: what its input cannot, but the floor where a
    window may be padding only (PyTorch gives -inf there)."""
    kept = excluded - {"floor"} if padding_only else excluded
    if kept and out.producer() is not None:
        out.meta[_EXCLUDED] = kept


def _shaped(value: ir.Value, rank: int) -> ir.Value:
    """``value`` with a shape of ``rank`` unknown dimensions when it has none (the outputs of a branch)."""
    if value.shape is None:
        value.shape = ir.Shape([None] * rank)
    return value


def _if(ctx: NodeContext, b: Any, cond: ir.Value, then: Callable, other: Callable, like: Sequence[ir.Value]):
    """``If(cond, then(builder), other(builder))`` appended to ``b`` (``ctx`` or a branch), its outputs typed
    and ranked like ``like``; ``then`` is the kernel's result, ``other`` the exact computation."""

    def branch(build: Callable, name: str) -> ir.Graph:
        sub = ctx.new_subgraph()
        outs = list(build(sub))
        for out, ref in zip(outs, like):
            out.dtype = ref.dtype
            _shaped(out, len(ref.shape))
        sub.outputs(outs, [None] * len(outs))
        return sub.graph(name)

    outs = b.op("If", cond, then_branch=branch(then, "kernel"), else_branch=branch(other, "exact"),
                num_outputs=len(like))
    outs = outs if isinstance(outs, tuple) else (outs,)
    for out, ref in zip(outs, like):
        out.dtype = ref.dtype
        _shaped(out, len(ref.shape))
    return outs


def _flags(ctx: NodeContext, b: Any, x: ir.Value, op_type: str) -> ir.Value:
    """0/1 in ``x``'s type where ``IsNaN(x)`` (``op_type="IsNaN"``) or ``x > -inf`` (``"Greater"``): a Cast of
    the boolean, 3x cheaper than a Where on onnxruntime's CPU."""
    t = x.dtype
    flag = b.op("IsNaN", x) if op_type == "IsNaN" else b.op("Greater", x, ctx.const(-math.inf, t))
    return b.op("Cast", flag, to=t)


def _fix_floor(ctx: NodeContext, b: Any, x: ir.Value, pooled: ir.Value, pool: Callable) -> ir.Value:
    """``pooled`` with ``-inf`` where the window holds no value above ``-inf`` (a NaN is not: the NaN fix comes
    after)."""
    t = x.dtype
    none = b.op("Less", pool(b, _flags(ctx, b, x, "Greater")), ctx.const(0.5, t))
    return b.op("Where", none, ctx.const(-math.inf, t), pooled)


def _fix_nan(ctx: NodeContext, b: Any, x: ir.Value, pooled: ir.Value, pool: Callable) -> ir.Value:
    """``pooled`` with NaN where the window holds a NaN."""
    t = x.dtype
    nan = b.op("Greater", pool(b, _flags(ctx, b, x, "IsNaN")), ctx.const(0.5, t))
    return b.op("Where", nan, ctx.const(math.nan, t), pooled)


def _guards(
    ctx: NodeContext, x: ir.Value, measured: bool = True, padding_only: bool = False
) -> tuple[bool, bool]:
    """(NaN guard, floor guard) the providers of the model need for a MaxPool of ``x``: none for what ``x`` cannot
    hold (:func:`_excludes`), the floor guard where a window may be padding only; ``measured=False``
    for a kernel whose NaN was not measured on every provider (GlobalMaxPool, MaxPool with indices): the NaN guard
    stays for every provider."""
    if x.dtype not in FLOAT_TYPES:
        return False, False
    excluded = _excludes(x)
    nan = "nan" not in excluded and (not measured or ctx.needs_guard("max_pool_skips_nan"))
    floor = (padding_only or "floor" not in excluded) and ctx.needs_guard("max_pool_floor_is_finite")
    return nan, floor


def _input_is_plain(ctx: NodeContext, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(the ReduceSum of ``x``, true when ``x`` holds no NaN and no ``-inf``): a NaN makes the sum NaN, a
    ``-inf`` makes it ``-inf`` or NaN. Finite values may overflow too: the exact branch runs then and gives the
    same values."""
    total = ctx.op("ReduceSum", x, keepdims=0)
    return total, ctx.op("Greater", total, ctx.const(-math.inf, x.dtype))


def _as_pytorch(
    ctx: NodeContext, x: ir.Value, pool: Callable[[Any, ir.Value], ir.Value], measured: bool = True,
    padding_only: bool = False,
) -> ir.Value:
    """``pool(b, x)`` (a MaxPool or GlobalMaxPool appended to ``b``: ``ctx`` or a branch) as PyTorch computes
    it on the providers the model is made for: NaN where the window holds a NaN (``max_pool_skips_nan``),
    ``-inf`` where it holds only ``-inf`` (``max_pool_floor_is_finite``).

    With the NaN guard, ``If(ReduceSum(x) > -inf, pool(x), exact)`` (see :func:`_input_is_plain`); the exact
    branch pools ``x``, then fixes the windows at the floor if the smallest result is the lowest finite value
    or below, and the windows holding a NaN if the sum is NaN, each behind its own ``If``: an input with a
    ``-inf`` pays a ReduceMin of the output, a window of ``-inf`` only or a NaN one more pool of 0/1 flags.
    Without the floor guard (no window of ``-inf`` only, :func:`_guards`), the exact branch fixes the windows
    holding a NaN without a second ``If``. Without the NaN guard (a model for CUDA, whose MaxPool propagates NaN,
    or an input without NaN): the floor fix, without ``If`` (whose condition CUDA copies to the host).
    ``measured=False`` (GlobalMaxPool, whose NaN was not measured on CUDA): the NaN guard for every provider.
    ``padding_only`` (a dilated pool with padding, whose window may skip a short input): the plain branch fixes
    the floor too, a finite input gives such windows."""
    nan_guard, floor_guard = _guards(ctx, x, measured, padding_only)
    if not (nan_guard or floor_guard):
        return pool(ctx, x)
    t, rank = x.dtype, ctx.rank(x)
    if not nan_guard:
        return _fix_floor(ctx, ctx, x, _shaped(pool(ctx, x), rank), pool)
    total, plain = _input_is_plain(ctx, x)
    like = [_shaped(ir.Value(type=ir.TensorType(t)), rank)]

    def exact(b: Any) -> list[ir.Value]:
        y = _shaped(pool(b, x), rank)
        if not floor_guard:  # x holds a NaN or a -inf (the sum does not tell which): the NaN windows fixed
            return [_fix_nan(ctx, b, x, y, pool)]
        lowest = float(np.finfo(t.numpy()).min)
        fine = b.op("Greater", b.op("ReduceMin", y, keepdims=0), ctx.const(lowest, t))
        z = _if(ctx, b, fine, lambda c: [y], lambda c: [_fix_floor(ctx, c, x, y, pool)], like)[0]
        no_nan = b.op("Not", b.op("IsNaN", total))
        return _if(ctx, b, no_nan, lambda c: [z], lambda c: [_fix_nan(ctx, c, x, z, pool)], like)

    def kernel(b: Any) -> list[ir.Value]:
        y = pool(b, x)
        # a window of padding only gives the lowest float however finite x is
        return [_fix_floor(ctx, b, x, _shaped(y, rank), pool)] if padding_only else [y]

    return _if(ctx, ctx, plain, kernel, exact, like)[0]


def _with_indices_as_pytorch(
    ctx: NodeContext, x: ir.Value, attrs: dict[str, Any], padding_only: bool
) -> tuple[ir.Value, ir.Value]:
    """MaxPool of ``x`` with its indices (flat over the tensor, or over each plane where a NaN decides), as
    PyTorch computes them: a window holding a NaN gives NaN at the last NaN's position (PyTorch takes every NaN
    it meets), a window of ``-inf`` only gives ``-inf`` at its first position, a window whose maximum is the
    lowest finite value gives it at its first position.

    onnxruntime's CPU kernel with indices starts from the first value of the window and takes a value strictly
    greater: PyTorch's answer but for NaN. CUDA's kernel with indices was not measured: both parts are kept for
    every provider. The kernel alone runs when ``x`` holds no NaN, no ``-inf`` and no window stops at the lowest
    finite value or below (a ReduceSum of ``x``, a ReduceMin of the values); else :func:`_exact_with_indices`."""
    nan_guard, floor_guard = _guards(ctx, x, measured=False, padding_only=padding_only)
    values, indices = ctx.op("MaxPool", x, num_outputs=2, **attrs)
    indices.dtype = INT64
    if not (nan_guard or floor_guard):
        return values, indices
    t, rank = x.dtype, ctx.rank(x)
    _shaped(values, rank)
    _shaped(indices, rank)
    _, plain = _input_is_plain(ctx, x)
    if floor_guard:
        lowest = float(np.finfo(t.numpy()).min)
        above = ctx.op("Greater", ctx.op("ReduceMin", values, keepdims=0), ctx.const(lowest, t))
        plain = ctx.op("And", plain, above)
    return _if(ctx, ctx, plain, lambda b: [values, indices],
               lambda b: _exact_with_indices(ctx, b, x, attrs, floor_guard), [values, indices])


def _exact_with_indices(ctx: NodeContext, b: Any, x: ir.Value, attrs: dict[str, Any], floor: bool) -> list:
    """Values and indices of the MaxPool of ``x`` as PyTorch, built in ``b``; the indices are flat over the
    tensor, or over each plane where the window holds a NaN (the caller takes them modulo the plane).

    NaN read as ``-inf`` in a first MaxPool (right where the window's maximum is above the lowest finite value);
    windows at the floor take the first position of the maximum of a code, 2 for a finite value, 1 for ``-inf``
    (its value then the lowest finite value or ``-inf``); windows holding a NaN take the largest plane position
    of a NaN (the last one PyTorch meets), from a MaxPool of the positions, -1 where no NaN."""
    t, rank = x.dtype, ctx.rank(x)
    inf = ctx.const(-math.inf, t)
    isnan = b.op("IsNaN", x)
    clean = b.op("Where", isnan, inf, x)
    values, indices = b.op("MaxPool", clean, num_outputs=2, **attrs)
    indices.dtype = INT64
    if floor:
        lowest = ctx.const(float(np.finfo(t.numpy()).min), t)
        code = b.op("Where", b.op("Equal", clean, inf), ctx.const(1.0, t), ctx.const(2.0, t))
        top, first = b.op("MaxPool", code, num_outputs=2, **attrs)
        first.dtype = INT64
        low = b.op("LessOrEqual", values, lowest)
        values = b.op("Where", low, b.op("Where", b.op("Greater", top, ctx.const(1.5, t)), lowest, inf), values)
        indices = b.op("Where", low, first, indices)
    # positions in a plane: exact in float32 up to 2**24, in double beyond (or when the size is dynamic)
    dims = spatial_dims(x, rank - 2)
    size = math.prod(dims) if all(v is not None for v in dims) else None
    pt = ir.DataType.FLOAT if size is not None and size <= 2**24 and t != ir.DataType.DOUBLE else ir.DataType.DOUBLE
    if size is not None:
        spatial, count = ctx.const(dims, INT64), ctx.const(float(size), pt)
    else:
        spatial = b.op("Shape", x, start=2)
        count = b.op("Cast", b.op("ReduceProd", spatial, keepdims=0), to=pt)
    positions = b.op("Reshape", b.op("Range", ctx.const(0.0, pt), count, ctx.const(1.0, pt)), spatial)
    last = b.op("MaxPool", b.op("Where", isnan, positions, ctx.const(-1.0, pt)), **attrs)
    has_nan = b.op("Greater", last, ctx.const(-0.5, pt))
    values = b.op("Where", has_nan, ctx.const(math.nan, t), values)
    indices = b.op("Where", has_nan, b.op("Cast", last, to=INT64), indices)
    return [values, indices]


@register("aten::max_pool1d.default", "aten::max_pool2d.default", "aten::max_pool3d.default")
def aten_max_pool(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Ints,
    stride: Ints = (),
    padding: Ints = (0,),
    dilation: Ints = (1,),
    ceil_mode: bool = False,
) -> ir.Value:
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1,
    bool ceil_mode=False) -> Tensor"""
    n = spatial_rank(ctx)
    k = spatial_ints(kernel_size, n, "kernel_size")
    args = k, spatial_ints(stride, n, "stride", k), spatial_ints(padding, n, "padding"), spatial_ints(dilation, n, "dilation")
    return _max_pool(ctx, self, *args, ceil_mode, False)[0]


@register(
    "aten::max_pool1d_with_indices.default",
    "aten::max_pool2d_with_indices.default",
    "aten::max_pool3d_with_indices.default",
)
def aten_max_pool_with_indices(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Ints,
    stride: Ints = (),
    padding: Ints = (0,),
    dilation: Ints = (1,),
    ceil_mode: bool = False,
) -> tuple[ir.Value, ir.Value | None]:
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)

    The indices (flat over each ``(H, W)`` plane) are computed only when the graph reads them.
    """
    n = spatial_rank(ctx)
    k = spatial_ints(kernel_size, n, "kernel_size")
    args = k, spatial_ints(stride, n, "stride", k), spatial_ints(padding, n, "padding"), spatial_ints(dilation, n, "dilation")
    return _max_pool(ctx, self, *args, ceil_mode, uses_output(ctx, 1))


@register("aten::avg_pool1d.default", "aten::avg_pool2d.default", "aten::avg_pool3d.default")
def aten_avg_pool(
    ctx: NodeContext,
    self: ir.Value,
    kernel_size: Ints,
    stride: Ints = (),
    padding: Ints = (0,),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> ir.Value:
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False,
    bool count_include_pad=True, int? divisor_override=None) -> Tensor

    With ``divisor_override``, a depthwise Conv of ones sums each window.
    """
    n = spatial_rank(ctx)
    k = spatial_ints(kernel_size, n, "kernel_size")
    s, p, d = spatial_ints(stride, n, "stride", k), spatial_ints(padding, n, "padding"), [1] * n
    dtype = ctx.out_dtype

    def pool(x: ir.Value) -> ir.Value:
        if divisor_override is not None:
            return _window_sum(ctx, x, k, s, p, ceil_mode, divisor_override)
        pads, ceil = _pool_pads(ctx, x, k, s, p, d, ceil_mode)
        include = count_include_pad
        if include and pads[n:] != list(p):
            # the last window passes the padding: PyTorch divides by its part inside the padded input
            if any(p):
                x = ctx.op("Pad", x, ctx.const([0, 0, *p, 0, 0, *p], INT64))
            pads, include = [0] * n + [e - pi for e, pi in zip(pads[n:], p)], False
        attrs = {"kernel_shape": list(k), "strides": list(s), "pads": pads, "ceil_mode": int(ceil)}
        if not dtype.is_floating_point():  # integers: in float32, truncated as PyTorch's integer division
            y = ctx.op("AveragePool", ctx.cast(x, FLOAT), count_include_pad=int(include), **attrs)
            return ctx.cast(y, dtype)
        return kernel_op(ctx, "AveragePool", x, dtype=dtype, count_include_pad=int(include), **attrs)

    return with_batch(ctx, self, n, pool)


def _window_sum(ctx: NodeContext, x: ir.Value, k: Ints, s: Ints, p: Ints, ceil_mode: bool, divisor: int) -> ir.Value:
    n = len(k)
    channels = x.shape[1]
    if not isinstance(channels, int):
        raise NotImplementedError("avg_pool with divisor_override needs a static number of channels")
    pads = list(p) * 2
    if ceil_mode:
        dims = spatial_dims(x, n)
        if any(v is None for v in dims):
            raise NotImplementedError("avg_pool with divisor_override and ceil_mode needs static spatial sizes")
        out = [_pool_size(size, ki, si, pi, 1, True) for size, ki, si, pi in zip(dims, k, s, p)]
        ends = [
            pi if o == _pool_size(size, ki, si, pi, 1, False) else (o - 1) * si + ki - size - pi
            for o, size, ki, si, pi in zip(out, dims, k, s, p)
        ]
        pads = list(p) + ends
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype) if dtype.is_floating_point() else FLOAT  # integers: truncated as PyTorch's integer division
    ones = ctx.const(np.ones((channels, 1, *k), dtype=np.float32), c)
    total = kernel_op(ctx, "Conv", ctx.cast(x, c), ones, dtype=c, strides=list(s), pads=pads, group=channels)
    return ctx.cast(ctx.op("Div", total, ctx.const(float(divisor), c)), dtype)


def _adaptive_kernel(x: ir.Value, output_size: Any, op: str) -> list[int]:
    """Kernel (and stride) of a regular pooling equal to the adaptive one, or NotImplementedError."""
    n = len(output_size)
    dims = spatial_dims(x, n)
    if any(d is None for d in dims) or not all(isinstance(o, int) for o in output_size):
        raise NotImplementedError(
            f"{op} to {list(output_size)} needs static input and output sizes, unless the output size is 1"
        )
    if any(d % o for d, o in zip(dims, output_size)):
        raise NotImplementedError(
            f"{op} from {dims} to {list(output_size)}: only input sizes that are multiples of the output size "
            "are supported (ONNX has no adaptive pooling)"
        )
    return [d // o for d, o in zip(dims, output_size)]


def _window_means(ctx: NodeContext, x: ir.Value, size: int, out: int) -> ir.Value:
    """Means of PyTorch's adaptive windows ``[floor(i*size/out), ceil((i+1)*size/out))`` along the last axis
    of ``x``: each window gathered (padded to the longest), padding replaced by 0, summed, divided by its
    length. A product by an averaging matrix would let an inf or NaN leak into other windows (inf * 0)."""
    bounds = adaptive_bounds(size, out)
    k = max(e - s for s, e in bounds)
    index = np.array([[min(s + j, e - 1) for j in range(k)] for s, e in bounds], dtype=np.int64)
    valid = np.array([[s + j < e for j in range(k)] for s, e in bounds])
    lengths = np.array([e - s for s, e in bounds])
    windows = ctx.op("Gather", x, ctx.const(index), axis=-1)  # [..., out, k]
    windows = ctx.op("Where", ctx.const(valid), windows, ctx.const(0, x.dtype))
    total = ctx.op("ReduceSum", windows, ctx.const([-1], INT64), keepdims=0)
    return ctx.op("Div", total, ctx.const(lengths.astype(x.dtype.numpy())))


def _dynamic_window_reduce(ctx: NodeContext, x: ir.Value, out: int, largest: bool) -> ir.Value:
    """Adaptive means (``largest=False``) or maxima of the windows along the last axis of ``x`` (dynamic
    size): each window masked out of ``[..., out, size]``, padding 0 (means) or the lowest value (maxima)."""
    mask, lengths = adaptive_windows(ctx, ctx.op("Squeeze", ctx.op("Shape", x, start=-1), ctx.const([0], INT64)), out)
    grid = ctx.op("Unsqueeze", x, ctx.const([-2], INT64))  # [..., 1, size]
    if not largest:
        windows = ctx.op("Where", mask, grid, ctx.const(0, x.dtype))
        total = ctx.op("ReduceSum", windows, ctx.const([-1], INT64), keepdims=0)
        return ctx.op("Div", total, ctx.cast(lengths, x.dtype))
    if x.dtype in FLOAT_TYPES:
        low: float | int = float("-inf")
    else:
        low = int(np.iinfo(x.dtype.numpy()).min)
    windows = ctx.op("Where", mask, grid, ctx.const(low, x.dtype))
    last = ctx.const([-1], INT64)
    values = ctx.op("ReduceMax", windows, last, keepdims=0)
    if x.dtype in FLOAT_TYPES:  # a NaN in the window wins, -inf where the window holds only -inf, as in PyTorch
        # (float16: onnxruntime's CUDA ReduceMax gives -inf itself there)
        values = extremum_as_pytorch(ctx, "ReduceMax", grid, values, [last], False, members=mask,
                                     infinity=x.dtype != ir.DataType.FLOAT16)
    return values


def _static_output(output_size: Any, op: str) -> list[int]:
    if not all(isinstance(o, int) for o in output_size):
        raise NotImplementedError(
            f"{op} to an output size known at run time only ({list(output_size)}): ONNX has no adaptive pooling; "
            "make the output size a Python int in the model"
        )
    return list(output_size)


@register(
    "aten::adaptive_avg_pool1d.default",
    "aten::adaptive_avg_pool2d.default",
    "aten::adaptive_avg_pool3d.default",
    "aten::_adaptive_avg_pool2d.default",
    "aten::_adaptive_avg_pool3d.default",
)
def aten_adaptive_avg_pool(ctx: NodeContext, self: ir.Value, output_size: Ints) -> ir.Value:
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor

    GlobalAveragePool for an output size of 1, AveragePool when the sizes divide, else the means of
    PyTorch's overlapping windows, one axis at a time (windows from Range over a dynamic axis).
    """
    n = len(output_size)
    dtype = ctx.out_dtype
    out_shape = [d if isinstance(d, int) else None for d in ctx.val.shape]
    if 0 in out_shape and None not in out_shape:  # empty: onnxruntime's MatMul rejects some empty inputs
        return filled(ctx, ctx.const(out_shape, INT64), dtype)

    def pool(x: ir.Value) -> ir.Value:
        if all(isinstance(o, int) and o == 1 for o in output_size):
            return kernel_op(ctx, "GlobalAveragePool", x, dtype=dtype)
        dims = spatial_dims(x, n)
        static = all(d is not None for d in dims) and all(isinstance(o, int) for o in output_size)
        if static and any(d % o for d, o in zip(dims, output_size)):
            # averaging is separable: one axis at a time, moved last
            y = ctx.cast(x, opmath_dtype(dtype))
            y = separable(ctx, y, output_size, lambda moved, size, out: _window_means(ctx, moved, size, out))
            return ctx.cast(y, dtype)
        if any(d is None for d in dims):  # a dynamic spatial axis: windows from Range, one axis at a time
            out = _static_output(output_size, "adaptive_avg_pool")
            c = opmath_dtype(dtype)

            def reduce(moved: ir.Value, size: int | None, o: int) -> ir.Value:
                if size is None:
                    return _dynamic_window_reduce(ctx, moved, o, largest=False)
                return _window_means(ctx, moved, size, o)

            return ctx.cast(separable(ctx, ctx.cast(x, c), out, reduce), dtype)
        kernel = _adaptive_kernel(x, output_size, "adaptive_avg_pool")
        return kernel_op(ctx, "AveragePool", x, dtype=dtype, kernel_shape=kernel, strides=kernel)

    return with_batch(ctx, self, n, pool)


@register(
    "aten::adaptive_max_pool1d.default", "aten::adaptive_max_pool2d.default", "aten::adaptive_max_pool3d.default"
)
def aten_adaptive_max_pool(ctx: NodeContext, self: ir.Value, output_size: Ints) -> tuple[ir.Value, ir.Value | None]:
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)

    GlobalMaxPool for an output size of 1 without indices, else MaxPool when the sizes divide; over a
    dynamic spatial axis, the maxima of windows from Range, one axis at a time (with the indices: the windows
    gathered one axis at a time, as below).
    """
    n = len(output_size)
    dtype = ctx.out_dtype
    with_indices = uses_output(ctx, 1)
    if all(o == 1 for o in output_size) and not with_indices:
        c = kernel_dtype("GlobalMaxPool", dtype)

        def global_max(x: ir.Value) -> ir.Value:
            pooled = _as_pytorch(ctx, ctx.cast(x, c), lambda b, v: b.op("GlobalMaxPool", v), measured=False)
            return ctx.cast(pooled, dtype)

        return with_batch(ctx, self, n, global_max), None
    dims = spatial_dims(self, n)
    if any(d is None for d in dims):
        out = _static_output(output_size, "adaptive_max_pool")
        if with_indices:  # the training graphs read them
            return with_batch(ctx, self, n, lambda x: _dynamic_adaptive_max_windows(ctx, x, out))
        c = kernel_dtype("ReduceMax", dtype)

        def reduce(moved: ir.Value, size: int | None, o: int) -> ir.Value:
            return _dynamic_window_reduce(ctx, moved, o, largest=True)

        return with_batch(ctx, self, n, lambda x: ctx.cast(separable(ctx, ctx.cast(x, c), out, reduce), dtype)), None
    if all(d is not None for d in dims) and any(d % o for d, o in zip(dims, output_size)):
        return with_batch(ctx, self, n, lambda x: _adaptive_max_windows(ctx, x, dims, list(output_size)))
    kernel = _adaptive_kernel(self, output_size, "adaptive_max_pool")
    return _max_pool(ctx, self, kernel, kernel, [0] * n, [1] * n, False, with_indices)


def _adaptive_max_windows(ctx: NodeContext, x: ir.Value, dims: list[int], output_size: list[int]):
    """Adaptive max pooling of overlapping windows: each output position gathers the flat positions of its
    window (padded by repeating its last one), then ArgMax (the first maximum, as PyTorch; the last NaN where the
    window holds one) and the value there."""
    windows = []
    for size, out in zip(dims, output_size):
        bounds = adaptive_bounds(size, out)
        k = max(e - s for s, e in bounds)
        windows.append(np.array([[min(s + j, e - 1) for j in range(k)] for s, e in bounds], dtype=np.int64))
    n = len(dims)
    flat = np.zeros([*output_size, *[w.shape[1] for w in windows]], dtype=np.int64)
    for i, w in enumerate(windows):  # flat position = sum of coordinate * stride
        stride = int(np.prod(dims[i + 1 :]))
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = w.shape
        flat = flat + (w * stride).reshape(shape)
    flat = flat.reshape(*output_size, -1)
    dtype = ctx.out_dtype
    c = kernel_dtype("ReduceMax", dtype)
    batch = ctx.op("Shape", x, start=0, end=2)
    planes = ctx.op("Reshape", ctx.cast(x, c), ctx.op("Concat", batch, ctx.const([-1], INT64), axis=0))
    gathered = ctx.op("Gather", planes, ctx.const(flat), axis=2)  # [N, C, *out, K]
    last = ctx.const([-1], INT64)
    # the values are read at the ArgMax (onnxruntime's CUDA ReduceMax would give the lowest finite float32 for a
    # window of -inf)
    arg = _argmax_as_pytorch(ctx, gathered)
    values = ctx.cast(ctx.op("Squeeze", ctx.op("GatherElements", gathered, arg, axis=-1), last), dtype)
    table = ctx.const(flat)
    index = ctx.op("Squeeze", ctx.op("GatherElements", ctx.op("Expand", table, ctx.op("Shape", gathered)), arg,
                                     axis=-1), ctx.const([-1], INT64))
    return values, index


def _argmax_as_pytorch(ctx: NodeContext, gathered: ir.Value) -> ir.Value:
    """The position along the last axis PyTorch's max pooling keeps: the first maximum, the last NaN where there
    is one (ArgMax skips NaN on the CPU and CUDA; a row of -inf gives its first position)."""
    arg = ctx.op("ArgMax", gathered, axis=-1, keepdims=1)
    if gathered.dtype in FLOAT_TYPES:
        nan = ctx.cast(ctx.op("IsNaN", gathered), ir.DataType.UINT8)
        any_nan = ctx.cast(ctx.op("ReduceMax", nan, ctx.const([-1], INT64), keepdims=1), BOOL)
        arg = ctx.op("Where", any_nan, ctx.op("ArgMax", nan, axis=-1, keepdims=1, select_last_index=1), arg)
    return arg


def _dynamic_adaptive_max_windows(ctx: NodeContext, x: ir.Value, output_size: list[int]) -> tuple[ir.Value, ir.Value]:
    """Adaptive max pooling with indices over spatial sizes known at run time, one axis at a time from the last:
    each window gathered (``[start, end)`` from Range, padded by repeating its last position), its maximum taken as
    PyTorch takes it, and the flat index built from the position on this axis and the one kept on the axes after.
    Row by row then across rows, the first maximum is the first in PyTorch's row-major scan, the last NaN its
    last."""
    n = len(output_size)
    dtype = ctx.out_dtype
    values = ctx.cast(x, kernel_dtype("ReduceMax", dtype))
    flat: ir.Value | None = None
    stride: ir.Value | int = 1
    one, last = ctx.const(1, INT64), ctx.const([-1], INT64)
    for i in reversed(range(n)):
        axis = 2 + i
        perm = [a for a in range(n + 2) if a != axis] + [axis]
        back = [perm.index(a) for a in range(n + 2)]
        moved = ctx.op("Transpose", values, perm=perm) if axis != n + 1 else values
        size = ctx.op("Squeeze", ctx.op("Shape", moved, start=-1), ctx.const([0], INT64))
        out = output_size[i]
        start, end = adaptive_run_time_bounds(ctx, size, out)
        longest = ctx.op("ReduceMax", ctx.op("Sub", end, start), keepdims=0)
        index = ctx.op("Min", ctx.op("Add", start, ctx.op("Range", ctx.const(0, INT64), longest, one)),
                       ctx.op("Sub", end, one))  # [out, K]
        gathered = ctx.op("Gather", moved, index, axis=-1)  # [..., out, K]
        arg = _argmax_as_pytorch(ctx, gathered)
        values = ctx.op("Squeeze", ctx.op("GatherElements", gathered, arg, axis=-1), last)
        shape = ctx.op("Shape", gathered)
        position = ctx.op("Squeeze", ctx.op("GatherElements", ctx.op("Expand", index, shape), arg, axis=-1), last)
        if flat is None:
            flat = position
        else:
            moved_flat = ctx.op("Transpose", flat, perm=perm) if axis != n + 1 else flat
            kept = ctx.op("Gather", moved_flat, index, axis=-1)  # the inner flat index of each candidate
            kept = ctx.op("Squeeze", ctx.op("GatherElements", kept, arg, axis=-1), last)
            flat = ctx.op("Add", ctx.op("Mul", position, stride), kept)
        stride = size if isinstance(stride, int) else ctx.op("Mul", stride, size)
        if axis != n + 1:
            values = ctx.op("Transpose", values, perm=back)
            flat = ctx.op("Transpose", flat, perm=back)
    return ctx.cast(values, dtype), flat


@register("aten::max_unpool2d.default")
def aten_max_unpool2d(ctx: NodeContext, self: ir.Value, indices: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """max_unpool2d(Tensor self, Tensor indices, SymInt[2] output_size) -> Tensor: ``ScatterElements`` of the
    values at their positions in each output plane."""
    return unpool(ctx, self, indices, list(output_size), None)


@register("aten::max_unpool3d.default")
def aten_max_unpool3d(
    ctx: NodeContext,
    self: ir.Value,
    indices: ir.Value,
    output_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> ir.Value:
    """max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size, int[3] stride, int[3] padding) -> Tensor"""
    return unpool(ctx, self, indices, list(output_size), None)
