"""Convolutions: conv1d/2d/3d (also with string padding), conv_transpose, ``convolution``.

Inputs without a batch dimension (``conv2d`` of a ``(C, H, W)`` tensor) get one for the ONNX op.
Kernel, stride, padding and dilation must be static; spatial sizes may be dynamic.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import FLOAT, INT64, Ints, kernel_op, spatial_ints, with_batch


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
        "strides": spatial_ints(stride, n, "stride"),
        "dilations": spatial_ints(dilation, n, "dilation"),
        "group": groups,
    }
    if isinstance(padding, str):
        if padding == "valid":
            attrs["pads"] = [0] * (2 * n)
        elif padding == "same":
            kernel = spatial_ints(list(weight.shape)[2:], n, "kernel size")
            total = [d * (k - 1) for d, k in zip(attrs["dilations"], kernel)]
            attrs["pads"] = [t // 2 for t in total] + [t - t // 2 for t in total]  # extra on the right
        else:
            raise ValueError(f"convolution: unexpected padding={padding!r}")
    else:
        attrs["pads"] = spatial_ints(padding, n, "padding") * 2
    op_type = "Conv"
    extra: list[int] = []  # zeros appended after the transposed convolution, before the bias
    if transposed:
        op_type = "ConvTranspose"
        out_pad = spatial_ints(output_padding, n, "output_padding", [0] * n)
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

    return with_batch(ctx, input, n, conv)


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
