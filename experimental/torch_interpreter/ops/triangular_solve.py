"""Triangular systems: ``linalg_solve_triangular`` (the chunked gated delta rule of Qwen3.5 and other linear-attention
models solves one per chunk, in the forward and the backward graph).

ONNX has no triangular solve. The system is split in halves, recursively, down to single rows: for a lower
triangular ``A = [[A11, 0], [A21, A22]]``, ``X1 = A11 \\ B1`` then ``X2 = A22 \\ (B2 - A21 X1)`` (an upper one from
the bottom), each leaf divided by its diagonal element (not with ``unitriangular``). This is block forward
substitution, as stable as the row-by-row kind; a series of powers of the off-diagonal part (``(I + N)^-1 =
sum (-N)^k``) would lose everything to cancellation when the powers grow. The elements of the other triangle are
not read, as in PyTorch. The size of the system must be static; batch axes broadcast; float16 and bfloat16 (which
PyTorch's CPU does not solve) are solved in float32.
"""

from __future__ import annotations

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, opmath_dtype, slice_axis, static_shape


def _block(ctx: NodeContext, a: ir.Value, rows: tuple[int, int], cols: tuple[int, int]) -> ir.Value:
    return ctx.op(
        "Slice", a, ctx.const([rows[0], cols[0]], INT64), ctx.const([rows[1], cols[1]], INT64),
        ctx.const([-2, -1], INT64),
    )


def _solve(ctx: NodeContext, a: ir.Value, b: ir.Value, lo: int, hi: int, upper: bool, unit: bool) -> ir.Value:
    """``X`` with ``A[lo:hi, lo:hi] X = b`` (``b`` holds rows ``lo:hi`` of the right-hand side)."""
    if hi - lo == 1:
        if unit:
            return b
        return ctx.op("Div", b, _block(ctx, a, (lo, hi), (lo, hi)))
    mid = (lo + hi) // 2
    first, second = slice_axis(ctx, b, -2, 0, mid - lo), slice_axis(ctx, b, -2, mid - lo, hi - lo)
    if not upper:
        x1 = _solve(ctx, a, first, lo, mid, upper, unit)
        rest = ctx.op("Sub", second, ctx.op("MatMul", _block(ctx, a, (mid, hi), (lo, mid)), x1))
        x2 = _solve(ctx, a, rest, mid, hi, upper, unit)
    else:
        x2 = _solve(ctx, a, second, mid, hi, upper, unit)
        rest = ctx.op("Sub", first, ctx.op("MatMul", _block(ctx, a, (lo, mid), (mid, hi)), x2))
        x1 = _solve(ctx, a, rest, lo, mid, upper, unit)
    return ctx.op("Concat", x1, x2, axis=-2)


def _last_two_swapped(ctx: NodeContext, x: ir.Value, rank: int) -> ir.Value:
    return ctx.op("Transpose", x, perm=[*range(rank - 2), rank - 1, rank - 2])


@register("aten::linalg_solve_triangular.default")
def aten_linalg_solve_triangular(
    ctx: NodeContext, self: ir.Value, B: ir.Value, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> ir.Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False)
    -> Tensor: ``X`` with ``self @ X = B`` (``X @ self = B`` when not ``left``)."""
    n = ctx.arg_val(0).shape[-1]
    if not isinstance(n, int):
        raise NotImplementedError("linalg_solve_triangular of a matrix whose size is known at run time only")
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    a, b = ctx.cast(self, c), ctx.cast(B, c)
    if list(ctx.arg_val(0).shape[:-2]) != list(ctx.arg_val(1).shape[:-2]):
        # the batch axes broadcast: B expanded to the result's batch shape first (A broadcasts in MatMul and Div)
        shape = static_shape(ctx.val)
        if shape is not None:
            target = ctx.const(shape, INT64)
        else:  # the shape of the product, which is the result's
            target = ctx.op("Shape", ctx.op("MatMul", a, b) if left else ctx.op("MatMul", b, a))
        b = ctx.op("Expand", b, target)
    if not left:  # X A = B is A^T X^T = B^T, the other triangle
        a, b, upper = _last_two_swapped(ctx, a, ctx.rank(a)), _last_two_swapped(ctx, b, ctx.rank(b)), not upper
    x = b if n == 0 else _solve(ctx, a, b, 0, n, upper, unitriangular)
    if not left:
        x = _last_two_swapped(ctx, x, len(ctx.val.shape))
    return ctx.cast(x, dtype)
