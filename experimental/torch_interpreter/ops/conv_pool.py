"""Convolutions, pooling, upsampling (Resize) and pixel shuffles.

Inputs without a batch dimension (``conv2d`` of a ``(C, H, W)`` tensor) get one for the ONNX op.
Kernel, stride, padding and dilation must be static; spatial sizes may be dynamic unless said otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..context import NodeContext
from ..registry import register
from ._helpers import FLOAT, INT64, filled, kernel_dtype, kernel_op, uses_output

Ints = Sequence[int]


# -- shared -------------------------------------------------------------------------------------------


def _ints(value: Any, n: int, name: str, default: Ints | None = None) -> list[int]:
    """A static int or list of ints expanded to ``n`` values (``[2] -> [2, 2]``)."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0 and default is not None):
        return list(default)
    if isinstance(value, (list, tuple)):
        values = list(value)
    else:
        values = [value]
    if not all(isinstance(v, int) for v in values):
        raise NotImplementedError(f"{name}={value!r}: only static values are supported")
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise ValueError(f"{name}={value!r} does not have {n} values")
    return values


def _dims(x: ir.Value, n: int) -> list[int | None]:
    """The last ``n`` (spatial) dimensions of ``x``, None where dynamic."""
    return [d if isinstance(d, int) else None for d in list(x.shape)[-n:]]


def _with_batch(ctx: NodeContext, x: ir.Value, n: int, fn: Callable[[ir.Value], Any]) -> Any:
    """``fn(x)`` on ``x`` of rank ``n + 2``, adding and removing a batch dimension for a rank ``n + 1`` input."""
    if ctx.rank(x) == n + 2:
        return fn(x)
    if ctx.rank(x) != n + 1:
        raise ValueError(f"expected an input of rank {n + 1} or {n + 2}, got rank {ctx.rank(x)}")
    zero = ctx.const([0], INT64)
    batched = ctx.op("Unsqueeze", x, zero)
    batched.shape = ir.Shape([1, *x.shape])
    out = fn(batched)
    if isinstance(out, tuple):
        return tuple(None if o is None else ctx.op("Squeeze", o, zero) for o in out)
    return ctx.op("Squeeze", out, zero)


def _spatial_rank(ctx: NodeContext) -> int:
    """1, 2 or 3 from the name of the aten op (``max_pool2d...``)."""
    name = ctx.node.target._opname
    for n in (1, 2, 3):
        if f"{n}d" in name:
            return n
    raise ValueError(f"cannot tell the spatial rank of {name}")


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
    dims = _dims(x, len(k))
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


# -- convolutions ------------------------------------------------------------------------------------


def _conv(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    transposed: bool = False,
    output_padding: Any = None,
) -> ir.Value:
    n = ctx.rank(weight) - 2
    if not isinstance(groups, int):
        raise NotImplementedError("convolution: groups must be static")
    attrs: dict[str, Any] = {
        "strides": _ints(stride, n, "stride"),
        "dilations": _ints(dilation, n, "dilation"),
        "group": groups,
    }
    if isinstance(padding, str):
        if padding == "valid":
            attrs["pads"] = [0] * (2 * n)
        elif padding == "same":
            kernel = _ints(list(weight.shape)[2:], n, "kernel size")
            total = [d * (k - 1) for d, k in zip(attrs["dilations"], kernel)]
            attrs["pads"] = [t // 2 for t in total] + [t - t // 2 for t in total]  # extra on the right
        else:
            raise ValueError(f"convolution: unexpected padding={padding!r}")
    else:
        attrs["pads"] = _ints(padding, n, "padding") * 2
    op_type = "Conv"
    extra: list[int] = []  # zeros appended after the transposed convolution, before the bias
    if transposed:
        op_type = "ConvTranspose"
        out_pad = _ints(output_padding, n, "output_padding", [0] * n)
        if any(o >= s for o, s in zip(out_pad, attrs["strides"])):
            # onnxruntime wants output_padding < stride (PyTorch: < stride or dilation): the extra outputs are
            # the ones the end padding would cut, and zeros beyond the full convolution
            begin, end = attrs["pads"][:n], attrs["pads"][n:]
            attrs["pads"] = begin + [max(e - o, 0) for e, o in zip(end, out_pad)]
            extra = [max(o - e, 0) for e, o in zip(end, out_pad)]
        elif any(out_pad):
            attrs["output_padding"] = out_pad
    dtype = ctx.out_dtype
    # onnxruntime has no integer Conv, and its float16 ConvTranspose accumulates in float16: float32 then
    compute = dtype if dtype in (FLOAT,) or (dtype == ir.DataType.FLOAT16 and not transposed) else FLOAT
    if compute != dtype:
        weight = ctx.cast(weight, compute)
        bias = None if bias is None else ctx.cast(bias, compute)

    def conv(x: ir.Value) -> ir.Value:
        if compute != dtype:
            x = ctx.cast(x, compute)
            return ctx.cast(conv_in(x), dtype)
        return conv_in(x)

    def conv_in(x: ir.Value) -> ir.Value:
        dtype = x.dtype
        if any(extra):
            y = kernel_op(ctx, op_type, x, weight, dtype=dtype, **attrs)
            y = ctx.op("Pad", y, ctx.const([0] * (n + 2) + [0, 0, *extra], INT64))
            if bias is None:
                return y
            shape = ctx.const([-1] + [1] * n, INT64)
            return kernel_op(ctx, "Add", y, ctx.op("Reshape", bias, shape), dtype=dtype)
        return kernel_op(ctx, op_type, x, weight, *([] if bias is None else [bias]), dtype=dtype, **attrs)

    return _with_batch(ctx, input, n, conv)


@register("aten::conv1d.default", "aten::conv2d.default", "aten::conv3d.default")
def aten_conv(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None = None,
    stride: Ints = (1,),
    padding: Ints = (0,),
    dilation: Ints = (1,),
    groups: int = 1,
) -> ir.Value:
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0,
    SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    return _conv(ctx, input, weight, bias, stride, padding, dilation, groups)


@register("aten::conv1d.padding", "aten::conv2d.padding", "aten::conv3d.padding")
def aten_conv_padding(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None = None,
    stride: Ints = (1,),
    padding: str = "valid",
    dilation: Ints = (1,),
    groups: int = 1,
) -> ir.Value:
    """conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1,
    str padding="valid", SymInt[2] dilation=1, SymInt groups=1) -> Tensor

    ``same`` pads ``dilation * (kernel - 1)`` in all, the odd one at the end, as PyTorch does.
    """
    return _conv(ctx, input, weight, bias, stride, padding, dilation, groups)


@register("aten::convolution.default", "aten::_convolution.default")
def aten_convolution(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None,
    stride: Ints,
    padding: Ints,
    dilation: Ints,
    transposed: bool,
    output_padding: Ints,
    groups: int,
    *args: Any,
) -> ir.Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    return _conv(ctx, input, weight, bias, stride, padding, dilation, groups, transposed, output_padding)


@register("aten::conv_transpose1d.default", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input")
def aten_conv_transpose(
    ctx: NodeContext,
    input: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None = None,
    stride: Ints = (1,),
    padding: Ints = (0,),
    output_padding: Ints = (0,),
    groups: int = 1,
    dilation: Ints = (1,),
) -> ir.Value:
    """conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1,
    SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor"""
    return _conv(ctx, input, weight, bias, stride, padding, dilation, groups, True, output_padding)


# -- max pooling -------------------------------------------------------------------------------------


def _plane_indices(ctx: NodeContext, x: ir.Value, indices: ir.Value, n: int) -> ir.Value:
    """ONNX MaxPool indices count over the whole tensor, PyTorch's over one ``(H, W)`` plane."""
    dims = _dims(x, n)
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
        if not with_indices:
            return ctx.cast(ctx.op("MaxPool", xc, **attrs), dtype), None
        values, indices = ctx.op("MaxPool", xc, num_outputs=2, **attrs)
        indices.dtype = INT64
        return ctx.cast(values, dtype), _plane_indices(ctx, x, indices, n)

    return _with_batch(ctx, x, n, pool)


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
    n = _spatial_rank(ctx)
    k = _ints(kernel_size, n, "kernel_size")
    args = k, _ints(stride, n, "stride", k), _ints(padding, n, "padding"), _ints(dilation, n, "dilation")
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
    n = _spatial_rank(ctx)
    k = _ints(kernel_size, n, "kernel_size")
    args = k, _ints(stride, n, "stride", k), _ints(padding, n, "padding"), _ints(dilation, n, "dilation")
    return _max_pool(ctx, self, *args, ceil_mode, uses_output(ctx, 1))


# -- average pooling ---------------------------------------------------------------------------------


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
    n = _spatial_rank(ctx)
    k = _ints(kernel_size, n, "kernel_size")
    s, p, d = _ints(stride, n, "stride", k), _ints(padding, n, "padding"), [1] * n
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

    return _with_batch(ctx, self, n, pool)


def _window_sum(ctx: NodeContext, x: ir.Value, k: Ints, s: Ints, p: Ints, ceil_mode: bool, divisor: int) -> ir.Value:
    n = len(k)
    channels = x.shape[1]
    if not isinstance(channels, int):
        raise NotImplementedError("avg_pool with divisor_override needs a static number of channels")
    pads = list(p) * 2
    if ceil_mode:
        dims = _dims(x, n)
        if any(v is None for v in dims):
            raise NotImplementedError("avg_pool with divisor_override and ceil_mode needs static spatial sizes")
        out = [_pool_size(size, ki, si, pi, 1, True) for size, ki, si, pi in zip(dims, k, s, p)]
        ends = [
            pi if o == _pool_size(size, ki, si, pi, 1, False) else (o - 1) * si + ki - size - pi
            for o, size, ki, si, pi in zip(out, dims, k, s, p)
        ]
        pads = list(p) + ends
    dtype = ctx.out_dtype
    c = dtype if dtype.is_floating_point() else FLOAT  # integers: truncated as PyTorch's integer division
    ones = ctx.const(np.ones((channels, 1, *k), dtype=np.float32), c)
    total = kernel_op(ctx, "Conv", ctx.cast(x, c), ones, dtype=c, strides=list(s), pads=pads, group=channels)
    return ctx.cast(ctx.op("Div", total, ctx.const(float(divisor), c)), dtype)


# -- adaptive pooling --------------------------------------------------------------------------------


def _adaptive_kernel(x: ir.Value, output_size: Any, op: str) -> list[int]:
    """Kernel (and stride) of a regular pooling equal to the adaptive one, or NotImplementedError."""
    n = len(output_size)
    dims = _dims(x, n)
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


def _averaging_matrix(size: int, out: int) -> np.ndarray:
    """``(out, size)`` matrix averaging PyTorch's adaptive windows ``[floor(i*size/out), ceil((i+1)*size/out))``."""
    m = np.zeros((out, size), dtype=np.float64)
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


@register(
    "aten::adaptive_avg_pool1d.default",
    "aten::adaptive_avg_pool2d.default",
    "aten::adaptive_avg_pool3d.default",
    "aten::_adaptive_avg_pool2d.default",
    "aten::_adaptive_avg_pool3d.default",
)
def aten_adaptive_avg_pool(ctx: NodeContext, self: ir.Value, output_size: Ints) -> ir.Value:
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor

    GlobalAveragePool for an output size of 1, AveragePool when the sizes divide, else (static 1-D or 2-D
    sizes) MatMul by the matrices averaging PyTorch's overlapping windows.
    """
    n = len(output_size)
    dtype = ctx.out_dtype
    out_shape = [d if isinstance(d, int) else None for d in ctx.val.shape]
    if 0 in out_shape and None not in out_shape:  # empty: onnxruntime's MatMul rejects some empty inputs
        return filled(ctx, ctx.const(out_shape, INT64), dtype)

    def pool(x: ir.Value) -> ir.Value:
        if all(isinstance(o, int) and o == 1 for o in output_size):
            return kernel_op(ctx, "GlobalAveragePool", x, dtype=dtype)
        dims = _dims(x, n)
        static = all(d is not None for d in dims) and all(isinstance(o, int) for o in output_size)
        if static and any(d % o for d, o in zip(dims, output_size)):
            # averaging is separable: one MatMul per axis, that axis moved last
            c = kernel_dtype("MatMul", dtype)
            y = ctx.cast(x, c)
            for i, (size, out) in enumerate(zip(dims, output_size)):
                if size == out:
                    continue
                axis = 2 + i
                perm = [a for a in range(n + 2) if a != axis] + [axis]
                moved = ctx.op("Transpose", y, perm=perm) if axis != n + 1 else y
                moved = ctx.op("MatMul", moved, ctx.const(_averaging_matrix(size, out).T, c))
                y = ctx.op("Transpose", moved, perm=[perm.index(a) for a in range(n + 2)]) if axis != n + 1 else moved
            return ctx.cast(y, dtype)
        kernel = _adaptive_kernel(x, output_size, "adaptive_avg_pool")
        return kernel_op(ctx, "AveragePool", x, dtype=dtype, kernel_shape=kernel, strides=kernel)

    return _with_batch(ctx, self, n, pool)


@register(
    "aten::adaptive_max_pool1d.default", "aten::adaptive_max_pool2d.default", "aten::adaptive_max_pool3d.default"
)
def aten_adaptive_max_pool(ctx: NodeContext, self: ir.Value, output_size: Ints) -> tuple[ir.Value, ir.Value | None]:
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)

    GlobalMaxPool for an output size of 1 without indices, else MaxPool when the sizes divide.
    """
    n = len(output_size)
    dtype = ctx.out_dtype
    with_indices = uses_output(ctx, 1)
    if all(o == 1 for o in output_size) and not with_indices:
        return _with_batch(ctx, self, n, lambda x: kernel_op(ctx, "GlobalMaxPool", x, dtype=dtype)), None
    dims = _dims(self, n)
    if all(d is not None for d in dims) and any(d % o for d, o in zip(dims, output_size)):
        return _with_batch(ctx, self, n, lambda x: _adaptive_max_windows(ctx, x, dims, list(output_size)))
    kernel = _adaptive_kernel(self, output_size, "adaptive_max_pool")
    return _max_pool(ctx, self, kernel, kernel, [0] * n, [1] * n, False, with_indices)


def _adaptive_max_windows(ctx: NodeContext, x: ir.Value, dims: list[int], output_size: list[int]):
    """Adaptive max pooling of overlapping windows: each output position gathers the flat positions of its
    window (padded by repeating its last one), then ReduceMax and ArgMax (first maximum, as PyTorch)."""
    windows = []
    for size, out in zip(dims, output_size):
        bounds = [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]
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
    values = ctx.cast(ctx.op("ReduceMax", gathered, ctx.const([-1], INT64), keepdims=0), dtype)
    arg = ctx.op("ArgMax", gathered, axis=-1, keepdims=1)
    table = ctx.const(flat)
    index = ctx.op("Squeeze", ctx.op("GatherElements", ctx.op("Expand", table, ctx.op("Shape", gathered)), arg,
                                     axis=-1), ctx.const([-1], INT64))
    return values, index


# -- upsampling --------------------------------------------------------------------------------------


def _scale(size: int | None, out: int | None, factor: float) -> float:
    """``factor`` as float32, moved by a few ulps when needed so that ``floor(size * scale) == out`` in
    float32 and float64 (onnxruntime and ONNX shape inference) as it is for PyTorch in float64."""
    scale = np.float32(factor)
    if size is None or out is None:
        return float(scale)
    for _ in range(16):
        got = {math.floor(np.float32(size) * scale), math.floor(float(size) * float(scale))}
        if got == {out}:
            break
        scale = np.nextafter(scale, np.float32(np.inf if min(got) < out else -np.inf), dtype=np.float32)
    return float(scale)


def _resize(
    ctx: NodeContext,
    input: ir.Value,
    output_size: Any,
    scales: Sequence[float | None] | None,
    mode: str,
    align_corners: bool | None = None,
    antialias: bool = False,
) -> ir.Value:
    """ONNX Resize as PyTorch's ``upsample_*``: it maps output coordinates with the scale factors when
    given (``1 / scale``), else with ``input / output`` sizes."""
    n = ctx.rank(input) - 2
    attrs: dict[str, Any] = {"axes": list(range(2, n + 2))}
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        attrs.update(
            mode="nearest",
            coordinate_transformation_mode="half_pixel" if exact else "asymmetric",
            nearest_mode="round_prefer_ceil" if exact else "floor",
        )
    else:
        attrs.update(mode=mode, coordinate_transformation_mode="align_corners" if align_corners else "half_pixel")
        if mode == "cubic":
            attrs["cubic_coeff_a"] = -0.5 if antialias else -0.75
    if antialias:
        attrs.update(antialias=1, exclude_outside=1)
    dims = _dims(input, n)
    outs = [d if isinstance(d, int) else None for d in ctx.val.shape[2:]]
    if scales is not None:
        scales = list(scales) * n if len(scales) == 1 else list(scales)
        if any(s is None for s in scales):
            scales = None
    if scales is not None and output_size is not None:
        # both given (the .default overloads): keep the scales if they give the same sizes
        if any(d is None or o is None or math.floor(d * s) != o for d, o, s in zip(dims, outs, scales)):
            scales = None
    if scales is not None:
        values = [_scale(d, o, s) for d, o, s in zip(dims, outs, scales)]
        roi_scales_sizes: list[ir.Value | None] = [None, ctx.const(values, FLOAT)]
    elif output_size is not None:
        roi_scales_sizes = [None, None, ctx.int64s(list(output_size))]
    else:
        raise ValueError("upsample: neither output_size nor scale_factors is given")
    dtype = ctx.out_dtype
    compute = dtype if dtype in (FLOAT, ir.DataType.FLOAT16) else FLOAT
    if mode == "nearest" and dtype in (ir.DataType.INT32, ir.DataType.INT8, ir.DataType.UINT8):
        compute = dtype
    y = ctx.op("Resize", ctx.cast(input, compute), *roi_scales_sizes, **attrs)
    return ctx.cast(y, dtype)


_NEAREST = {
    "upsample_nearest1d": "nearest",
    "upsample_nearest2d": "nearest",
    "upsample_nearest3d": "nearest",
    "_upsample_nearest_exact1d": "nearest-exact",
    "_upsample_nearest_exact2d": "nearest-exact",
    "_upsample_nearest_exact3d": "nearest-exact",
}
_LINEAR = {
    "upsample_linear1d": ("linear", False),
    "upsample_bilinear2d": ("linear", False),
    "upsample_trilinear3d": ("linear", False),
    "upsample_bicubic2d": ("cubic", False),
    "_upsample_bilinear2d_aa": ("linear", True),
    "_upsample_bicubic2d_aa": ("cubic", True),
}


@register(*(f"aten::{name}.vec" for name in _NEAREST))
def aten_upsample_nearest_vec(
    ctx: NodeContext, input: ir.Value, output_size: Any, scale_factors: Sequence[float] | None
) -> ir.Value:
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor"""
    return _resize(ctx, input, output_size, scale_factors, _NEAREST[ctx.node.target._opname])


@register(*(f"aten::{name}.default" for name in _NEAREST))
def aten_upsample_nearest(ctx: NodeContext, self: ir.Value, output_size: Any, *scales: float | None) -> ir.Value:
    """upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor"""
    n = ctx.rank(self) - 2
    given = list(scales) + [None] * (n - len(scales))
    return _resize(ctx, self, output_size, given, _NEAREST[ctx.node.target._opname])


@register(*(f"aten::{name}.vec" for name in _LINEAR))
def aten_upsample_linear_vec(
    ctx: NodeContext,
    input: ir.Value,
    output_size: Any,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> ir.Value:
    """upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners,
    float[]? scale_factors) -> Tensor"""
    mode, antialias = _LINEAR[ctx.node.target._opname]
    return _resize(ctx, input, output_size, scale_factors, mode, align_corners, antialias)


@register(*(f"aten::{name}.default" for name in _LINEAR))
def aten_upsample_linear(
    ctx: NodeContext, self: ir.Value, output_size: Any, align_corners: bool, *scales: float | None
) -> ir.Value:
    """upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None,
    float? scales_w=None) -> Tensor"""
    mode, antialias = _LINEAR[ctx.node.target._opname]
    n = ctx.rank(self) - 2
    given = list(scales) + [None] * (n - len(scales))
    return _resize(ctx, self, output_size, given, mode, align_corners, antialias)


# -- pixel shuffle -----------------------------------------------------------------------------------


def _dim(ctx: NodeContext, x: ir.Value, axis: int) -> int | ir.Value:
    """Dimension ``axis`` of ``x``: an int, or a 1-D INT64 value when dynamic."""
    d = x.shape[axis]
    if isinstance(d, int):
        return d
    axis = axis % ctx.rank(x)
    return ctx.op("Shape", x, start=axis, end=axis + 1)


def _div(ctx: NodeContext, d: int | ir.Value, r: int) -> int | ir.Value:
    return d // r if isinstance(d, int) else ctx.op("Div", d, ctx.const([r], INT64))


@register("aten::pixel_shuffle.default")
def aten_pixel_shuffle(ctx: NodeContext, self: ir.Value, upscale_factor: int) -> ir.Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor: DepthToSpace in CRD mode."""
    rank = ctx.rank(self)
    dtype = ctx.out_dtype
    compute = kernel_dtype("DepthToSpace", dtype)
    if rank == 4:
        y = ctx.op("DepthToSpace", ctx.cast(self, compute), blocksize=upscale_factor, mode="CRD")
        return ctx.cast(y, dtype)
    # fold the leading dimensions into one batch dimension and back
    x4 = ctx.op("Reshape", self, ctx.int64s([-1, _dim(ctx, self, -3), _dim(ctx, self, -2), _dim(ctx, self, -1)]))
    y = ctx.op("DepthToSpace", ctx.cast(x4, compute), blocksize=upscale_factor, mode="CRD")
    shape = ctx.op("Concat", ctx.op("Shape", self, end=-3), ctx.op("Shape", y, start=1), axis=0)
    return ctx.cast(ctx.op("Reshape", y, shape), dtype)


@register("aten::pixel_unshuffle.default")
def aten_pixel_unshuffle(ctx: NodeContext, self: ir.Value, downscale_factor: int) -> ir.Value:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor

    Reshape ``(B, C, H/r, r, W/r, r)``, Transpose, Reshape: SpaceToDepth orders channels otherwise.
    """
    r = downscale_factor
    rank = ctx.rank(self)
    c, h, w = (_dim(ctx, self, a) for a in (-3, -2, -1))
    batch = ctx.op("Shape", self, end=-3) if rank > 4 else None
    if all(isinstance(d, int) for d in self.shape):  # static: exact shapes, empty tensors included
        lead = int(np.prod(self.shape[:-3]))
        six = ctx.op("Reshape", self, ctx.const([lead, c, h // r, r, w // r, r], INT64), allowzero=1)
        y = ctx.op("Transpose", six, perm=[0, 1, 3, 5, 2, 4])
        return ctx.op("Reshape", y, ctx.const([int(d) for d in ctx.val.shape], INT64), allowzero=1)
    six = ctx.op("Reshape", self, ctx.int64s([-1, c, _div(ctx, h, r), r, _div(ctx, w, r), r]))
    y = ctx.op("Transpose", six, perm=[0, 1, 3, 5, 2, 4])
    c_out = c * r * r if isinstance(c, int) else ctx.op("Mul", c, ctx.const([r * r], INT64))
    if rank == 4:  # Reshape copies the batch dimension (0)
        shape = ctx.int64s([0, c_out, _div(ctx, h, r), _div(ctx, w, r)])
    else:
        tail = ctx.int64s([c_out, _div(ctx, h, r), _div(ctx, w, r)])
        shape = tail if batch is None else ctx.op("Concat", batch, tail, axis=0)
    return ctx.op("Reshape", y, shape)
