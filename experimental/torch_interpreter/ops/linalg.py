"""Matrix products: linear, matmul, mm, bmm, addmm, baddbmm."""

from __future__ import annotations

import onnx_ir as ir

from ..context import NodeContext
from ..registry import register


def _scaled(ctx: NodeContext, x: ir.Value, factor: float) -> ir.Value:
    return x if factor == 1 else ctx.op("Mul", x, ctx.const(factor, x.dtype))


@register("aten::linear.default")
def aten_linear(ctx: NodeContext, input: ir.Value, weight: ir.Value, bias: ir.Value | None = None) -> ir.Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor

    ``Gemm`` for a 2-D input, else ``MatMul`` by the transposed weight and ``Add``.
    """
    if ctx.rank(input) == 2 and ctx.rank(weight) == 2:
        return ctx.op("Gemm", input, weight, bias, transB=1)
    wt = ctx.op("Transpose", weight, perm=[1, 0]) if ctx.rank(weight) == 2 else weight
    out = ctx.op("MatMul", input, wt)
    return out if bias is None else ctx.op("Add", out, bias)


@register("aten::matmul.default", "aten::mm.default", "aten::bmm.default")
def aten_matmul(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """matmul(Tensor self, Tensor other) -> Tensor"""
    return ctx.op("MatMul", self, other)


@register("aten::addmm.default")
def aten_addmm(
    ctx: NodeContext, self: ir.Value, mat1: ir.Value, mat2: ir.Value, *, beta: float = 1, alpha: float = 1
) -> ir.Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    if ctx.out_dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        return ctx.op("Gemm", mat1, mat2, self, alpha=float(alpha), beta=float(beta))
    return ctx.op("Add", _scaled(ctx, ctx.op("MatMul", mat1, mat2), alpha), _scaled(ctx, self, beta))


@register("aten::baddbmm.default")
def aten_baddbmm(
    ctx: NodeContext, self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: float = 1, alpha: float = 1
) -> ir.Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return ctx.op("Add", _scaled(ctx, ctx.op("MatMul", batch1, batch2), alpha), _scaled(ctx, self, beta))
