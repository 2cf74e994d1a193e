"""Matrix products (linear, matmul, mm, bmm, addmm, baddbmm, dot, outer, kron, tensordot, einsum), cross
products, matrix powers, norms, distances and determinants.

Products run in float32 for bfloat16 (onnxruntime has no bfloat16 MatMul), as PyTorch accumulates them.
A product with an empty contracted dimension is zero, which onnxruntime does not always give: those
become constants of zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import FLOAT_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    BOOL,
    INT64,
    extremum_as_pytorch,
    filled,
    kernel_op,
    normalize_dim,
    opmath_dtype,
    static_dim,
    static_shape,
    vector_norm,
)

Scalar = Any  # an ir.Value or a Python number


def _scaled(ctx: NodeContext, x: ir.Value, factor: Scalar) -> ir.Value:
    if isinstance(factor, (int, float)) and factor == 1:
        return x
    return kernel_op(ctx, "Mul", x, factor, dtype=x.dtype)


def _zeros(ctx: NodeContext, dtype: ir.DataType | None = None) -> ir.Value:
    """Zeros of the node's (static) output shape."""
    shape = static_shape(ctx.val)
    if shape is None:
        raise NotImplementedError("an empty product with a dynamic output shape")
    return filled(ctx, ctx.const(shape, INT64), dtype or ctx.out_dtype)


def _empty_k(ctx: NodeContext, *dims: Any) -> bool:
    return any(static_dim(d) == 0 for d in dims)


def _matmul(ctx: NodeContext, a: ir.Value, b: ir.Value, dtype: ir.DataType | None = None) -> ir.Value:
    """``MatMul`` in the output dtype (computed in float32 for bfloat16).

    A 1-D ``b`` after a matrix or batch ``a`` is multiplied as a ``[k, 1]`` column, then squeezed:
    onnxruntime (1.32) fuses a ``Transpose`` of ``a`` into ``FusedMatMul(transA=1)`` and gets a 1-D ``b``
    wrong (``cummax(x, 0).values @ v`` ends in such a ``Transpose``: fuzz seed 9966)."""
    dtype = dtype or ctx.out_dtype
    vector = b.shape is not None and len(b.shape) == 1 and a.shape is not None and len(a.shape) >= 2
    # onnxruntime (1.32) crashes creating a CPU session (a segfault) where a float16 MatMul by a constant reads a
    # Transpose moving a batch axis, with or without a Cast between them (x.movedim(0, -1) @ w: fuzz seed 205178):
    # then the input is cast before the Transpose and the product computed in float32, rounded once, which is also
    # PyTorch's CPU kernel (float32 accumulation)
    compute = dtype
    perm = _batch_moving_perm(a)
    if dtype == ir.DataType.FLOAT16 and perm is not None:
        compute = ir.DataType.FLOAT
        a = ctx.op("Transpose", ctx.cast(a.producer().inputs[0], compute), perm=perm)
    a, b = ctx.cast(a, compute), ctx.cast(b, compute)
    if vector:
        column = ctx.op("Unsqueeze", b, ctx.const([1], INT64))
        out = ctx.op("Squeeze", kernel_op(ctx, "MatMul", a, column, dtype=compute), ctx.const([-1], INT64))
    else:
        out = kernel_op(ctx, "MatMul", a, b, dtype=compute)
    return ctx.cast(out, dtype)


def _batch_moving_perm(x: ir.Value) -> list[int] | None:
    """The permutation of the ``Transpose`` making ``x`` when it moves an axis other than the last two, else None."""
    node = x.producer()
    if node is None or node.op_type != "Transpose" or "perm" not in node.attributes:
        return None
    perm = list(node.attributes["perm"].as_ints())
    return perm if perm[:-2] != list(range(len(perm) - 2)) else None


def _axpby(ctx: NodeContext, self: ir.Value, product: ir.Value, beta: Scalar, alpha: Scalar) -> ir.Value:
    """``beta * self + alpha * product``; ``self`` is ignored when ``beta == 0`` (NaN included), as PyTorch."""
    dtype = ctx.out_dtype
    if dtype == BOOL:
        out = product if alpha else ctx.const(False, BOOL)
        return ctx.op("Or", ctx.op("And", ctx.cast(self, BOOL), ctx.const(bool(beta), BOOL)), out) if beta else out
    product = _scaled(ctx, product, alpha)
    if isinstance(beta, (int, float)) and beta == 0:
        return product if same_shape_as_output(ctx, product) else ctx.op("Expand", product, ctx.op("Shape", self))
    return kernel_op(ctx, "Add", _scaled(ctx, ctx.cast(self, dtype), beta), product, dtype=dtype)


def same_shape_as_output(ctx: NodeContext, value: ir.Value) -> bool:
    return True  # the products below always have the output shape


@register("aten::linear.default")
def aten_linear(ctx: NodeContext, input: ir.Value, weight: ir.Value, bias: ir.Value | None = None) -> ir.Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor

    ``Gemm`` for a 2-D input, else ``MatMul`` by the transposed weight and ``Add``. With a bias, float16
    and bfloat16 compute both in float32 and round once, as PyTorch's CPU kernel (rounding the product
    before the ``Add`` gave 19.25 where PyTorch gives 19.375: fuzz seed 9362).
    """
    dtype = ctx.out_dtype
    if ctx.rank(input) == 2 and ctx.rank(weight) == 2 and dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16):
        return ctx.op("Gemm", input, weight, bias, transB=1)
    wt = ctx.op("Transpose", weight, perm=[1, 0]) if ctx.rank(weight) == 2 else weight
    if bias is None:
        return _matmul(ctx, input, wt)
    c = opmath_dtype(dtype)
    return ctx.cast(kernel_op(ctx, "Add", _matmul(ctx, input, wt, dtype=c), ctx.cast(bias, c), dtype=c), dtype)


@register(
    "aten::matmul.default",
    "aten::mm.default",
    "aten::bmm.default",
    "aten::mv.default",
    "aten::dot.default",
    "aten::vdot.default",
)
def aten_matmul(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """matmul(Tensor self, Tensor other) -> Tensor (mm, bmm, mv, dot and vdot of real tensors alike)"""
    if _empty_k(ctx, ctx.arg_val(0).shape[-1] if ctx.rank(self) else 1):
        return _zeros(ctx)
    return _matmul(ctx, self, other)


@register("aten::addmm.default")
def aten_addmm(
    ctx: NodeContext, self: ir.Value, mat1: ir.Value, mat2: ir.Value, *, beta: Scalar = 1, alpha: Scalar = 1
) -> ir.Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    if _empty_k(ctx, ctx.arg_val(1).shape[1]):
        return _axpby(ctx, self, _zeros(ctx), beta, 1)
    dtype = ctx.out_dtype
    if dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16) and beta != 0:
        return ctx.op("Gemm", mat1, mat2, self, alpha=float(alpha), beta=float(beta))
    return _axpby(ctx, self, _matmul(ctx, mat1, mat2), beta, alpha)


@register("aten::baddbmm.default", "aten::addmv.default")
def aten_baddbmm(
    ctx: NodeContext, self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: Scalar = 1, alpha: Scalar = 1
) -> ir.Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor (addmv alike)"""
    if _empty_k(ctx, ctx.arg_val(1).shape[-1]):
        return _axpby(ctx, self, _zeros(ctx), beta, 1)
    return _axpby(ctx, self, _matmul(ctx, batch1, batch2), beta, alpha)


@register("aten::addbmm.default")
def aten_addbmm(
    ctx: NodeContext, self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: Scalar = 1, alpha: Scalar = 1
) -> ir.Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    The batch of products summed.
    """
    if _empty_k(ctx, ctx.arg_val(1).shape[-1], ctx.arg_val(1).shape[0]):
        return _axpby(ctx, self, _zeros(ctx), beta, 1)
    product = kernel_op(ctx, "ReduceSum", _matmul(ctx, batch1, batch2), ctx.const([0], INT64), dtype=ctx.out_dtype,
                        keepdims=0)
    return _axpby(ctx, self, product, beta, alpha)


def _outer(ctx: NodeContext, a: ir.Value, b: ir.Value) -> ir.Value:
    dtype = ctx.out_dtype
    col = ctx.op("Unsqueeze", ctx.cast(a, dtype), ctx.const([1], INT64))
    row = ctx.op("Unsqueeze", ctx.cast(b, dtype), ctx.const([0], INT64))
    if dtype == BOOL:
        return ctx.op("And", col, row)
    return kernel_op(ctx, "Mul", col, row, dtype=dtype)


@register("aten::outer.default", "aten::ger.default")
def aten_outer(ctx: NodeContext, self: ir.Value, vec2: ir.Value) -> ir.Value:
    """outer(Tensor self, Tensor vec2) -> Tensor"""
    return _outer(ctx, self, vec2)


@register("aten::addr.default")
def aten_addr(
    ctx: NodeContext, self: ir.Value, vec1: ir.Value, vec2: ir.Value, *, beta: Scalar = 1, alpha: Scalar = 1
) -> ir.Value:
    """addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    product = _outer(ctx, vec1, vec2)
    out = _axpby(ctx, self, product, beta, alpha)
    if isinstance(beta, (int, float)) and beta == 0 and static_shape(ctx.arg_val(0)) != static_shape(ctx.val):
        return out
    return out


@register("aten::inner.default")
def aten_inner(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """inner(Tensor self, Tensor other) -> Tensor: the sum over the last axes of both."""
    dtype = ctx.out_dtype
    if ctx.rank(self) == 0 or ctx.rank(other) == 0:
        return kernel_op(ctx, "Mul", self, other, dtype=dtype)
    return _tensordot(ctx, self, other, [ctx.rank(self) - 1], [ctx.rank(other) - 1])


def _tensordot(ctx: NodeContext, a: ir.Value, b: ir.Value, dims_a: Sequence[int], dims_b: Sequence[int]) -> ir.Value:
    """Contracts ``dims_a`` of ``a`` with ``dims_b`` of ``b``: both transposed and flattened to matrices."""
    sa, sb = static_shape(ctx.arg_val(0)), static_shape(ctx.arg_val(1))
    out = static_shape(ctx.val)
    if sa is None or sb is None or out is None:
        raise NotImplementedError("tensordot with dynamic shapes")
    ra, rb = len(sa), len(sb)
    dims_a = [normalize_dim(d, ra) for d in dims_a]
    dims_b = [normalize_dim(d, rb) for d in dims_b]
    free_a = [i for i in range(ra) if i not in dims_a]
    free_b = [i for i in range(rb) if i not in dims_b]
    for i, j in zip(dims_a, dims_b):  # a contracted axis of size 1 broadcasts
        if sa[i] != sb[j]:
            if sa[i] == 1:
                sa[i] = sb[j]
                a = ctx.op("Expand", a, ctx.const(sa, INT64))
            else:
                sb[j] = sa[i]
                b = ctx.op("Expand", b, ctx.const(sb, INT64))
    k = math.prod(sa[d] for d in dims_a)
    if k == 0:
        return _zeros(ctx)
    ta = ctx.op("Transpose", a, perm=free_a + dims_a) if free_a + dims_a != list(range(ra)) else a
    tb = ctx.op("Transpose", b, perm=dims_b + free_b) if dims_b + free_b != list(range(rb)) else b
    ma = ctx.op("Reshape", ta, ctx.const([math.prod(sa[i] for i in free_a), k], INT64))
    mb = ctx.op("Reshape", tb, ctx.const([k, math.prod(sb[i] for i in free_b)], INT64))
    return ctx.op("Reshape", _matmul(ctx, ma, mb), ctx.const(out, INT64), allowzero=1)


@register("aten::tensordot.default")
def aten_tensordot(ctx: NodeContext, self: ir.Value, other: ir.Value, dims_self: Sequence[int], dims_other: Sequence[int]) -> ir.Value:
    """tensordot(Tensor self, Tensor other, int[] dims_self, int[] dims_other) -> Tensor"""
    return _tensordot(ctx, self, other, dims_self, dims_other)


@register("aten::kron.default")
def aten_kron(ctx: NodeContext, self: ir.Value, other: ir.Value) -> ir.Value:
    """kron(Tensor self, Tensor other) -> Tensor: ``a[:, None, :, None] * b[None, :, None, :]`` reshaped."""
    sa, sb, out = static_shape(ctx.arg_val(0)), static_shape(ctx.arg_val(1)), static_shape(ctx.val)
    if sa is None or sb is None or out is None:
        raise NotImplementedError("kron with dynamic shapes")
    rank = max(len(sa), len(sb))
    sa, sb = [1] * (rank - len(sa)) + sa, [1] * (rank - len(sb)) + sb
    a = ctx.op("Reshape", self, ctx.const([d for s in sa for d in (s, 1)], INT64), allowzero=1)
    b = ctx.op("Reshape", other, ctx.const([d for s in sb for d in (1, s)], INT64), allowzero=1)
    dtype = ctx.out_dtype
    product = ctx.op("And", a, b) if dtype == BOOL else kernel_op(ctx, "Mul", a, b, dtype=dtype)
    return ctx.op("Reshape", product, ctx.const(out, INT64), allowzero=1)


@register("aten::einsum.default")
def aten_einsum(ctx: NodeContext, equation: str, tensors: Sequence[ir.Value], *, path: Any = None) -> ir.Value:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor: ONNX Einsum."""
    dtype = ctx.out_dtype
    inputs = [ctx.cast(t, dtype) for t in tensors]
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if "..." not in lhs:
        return kernel_op(ctx, "Einsum", *inputs, dtype=dtype, equation=equation)
    # ONNX wants every ellipsis to cover as many axes: the shorter ones get leading axes of size 1
    counts = [ctx.rank(t) - len(term.replace("...", "")) if "..." in term else 0 for t, term in zip(tensors, terms)]
    most = max(counts)
    for i, (term, count) in enumerate(zip(terms, counts)):
        if "..." in term and count < most:
            at = term.index("...")
            inputs[i] = ctx.op("Unsqueeze", inputs[i], ctx.const(list(range(at, at + most - count)), INT64))
    if arrow and "..." not in rhs:  # PyTorch sums the axes of the ellipsis the output omits
        out = kernel_op(ctx, "Einsum", *inputs, dtype=dtype, equation=f"{lhs}->...{rhs}")
        if most == 0:
            return out
        return kernel_op(ctx, "ReduceSum", out, ctx.const(list(range(most)), INT64), dtype=dtype, keepdims=0)
    return kernel_op(ctx, "Einsum", *inputs, dtype=dtype, equation=f"{lhs}{arrow}{rhs}")


@register("aten::bilinear.default")
def aten_bilinear(
    ctx: NodeContext, input1: ir.Value, input2: ir.Value, weight: ir.Value, bias: ir.Value | None = None
) -> ir.Value:
    """bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor:
    ``Einsum('...i,kij,...j->...k')`` plus the bias."""
    dtype = ctx.out_dtype
    out = kernel_op(ctx, "Einsum", input1, weight, input2, dtype=dtype, equation="...i,kij,...j->...k")
    return out if bias is None else kernel_op(ctx, "Add", out, bias, dtype=dtype)


@register("aten::linalg_multi_dot.default", "aten::chain_matmul.default")
def aten_linalg_multi_dot(ctx: NodeContext, tensors: Sequence[ir.Value]) -> ir.Value:
    """linalg_multi_dot(Tensor[] tensors) -> Tensor: the products from left to right (1-D ends as MatMul
    treats them)."""
    shapes = [n.meta["val"].shape for n in ctx.node.args[0]]
    if any(_empty_k(ctx, s[-1]) for s in shapes[:-1]):
        return _zeros(ctx)
    out = tensors[0]
    for t in tensors[1:]:
        out = _matmul(ctx, out, t)
    return out


@register("aten::linalg_matrix_power.default", "aten::matrix_power.default")
def aten_linalg_matrix_power(ctx: NodeContext, self: ir.Value, n: int) -> ir.Value:
    """linalg_matrix_power(Tensor self, int n) -> Tensor: products by squaring; ``n < 0`` needs an inverse,
    which ONNX does not have."""
    if n < 0:
        raise NotImplementedError("matrix_power with a negative exponent needs a matrix inverse (not in ONNX)")
    dtype = ctx.out_dtype
    if n == 0:
        shape = static_shape(ctx.val)
        if shape is None:
            raise NotImplementedError("matrix_power(x, 0) with a dynamic shape")
        eye = np.broadcast_to(np.eye(shape[-1]), shape).astype(np.float32)
        return ctx.const(eye, dtype)
    result, square = None, self
    while n:
        if n & 1:
            result = square if result is None else _matmul(ctx, result, square)
        n >>= 1
        if n:
            square = _matmul(ctx, square, square)
    return result


# -- cross products ---------------------------------------------------------------------------------------
def _cross(ctx: NodeContext, a: ir.Value, b: ir.Value, dim: int) -> ir.Value:
    dtype = ctx.out_dtype
    shape = static_shape(ctx.val)
    if shape is None:
        raise NotImplementedError("cross with dynamic shapes")
    target = ctx.const(shape, INT64)
    a = ctx.op("Expand", ctx.cast(a, dtype), target) if static_shape(ctx.arg_val(0)) != shape else ctx.cast(a, dtype)
    b = ctx.op("Expand", ctx.cast(b, dtype), target) if static_shape(ctx.arg_val(1)) != shape else ctx.cast(b, dtype)
    axis = normalize_dim(dim, len(shape))
    first, second = ctx.const([1, 2, 0], INT64), ctx.const([2, 0, 1], INT64)

    def rolled(x: ir.Value, index: ir.Value) -> ir.Value:
        return ctx.op("Gather", x, index, axis=axis)

    left = kernel_op(ctx, "Mul", rolled(a, first), rolled(b, second), dtype=dtype)
    right = kernel_op(ctx, "Mul", rolled(a, second), rolled(b, first), dtype=dtype)
    return kernel_op(ctx, "Sub", left, right, dtype=dtype)


@register("aten::linalg_cross.default")
def aten_linalg_cross(ctx: NodeContext, self: ir.Value, other: ir.Value, *, dim: int = -1) -> ir.Value:
    """linalg_cross(Tensor self, Tensor other, *, int dim=-1) -> Tensor"""
    return _cross(ctx, self, other, dim)


@register("aten::cross.default")
def aten_cross(ctx: NodeContext, self: ir.Value, other: ir.Value, dim: int | None = None) -> ir.Value:
    """cross(Tensor self, Tensor other, int? dim=None) -> Tensor: without ``dim``, the first axis of size 3."""
    if dim is None:
        dim = next(i for i, d in enumerate(ctx.val.shape) if static_dim(d) == 3)
    return _cross(ctx, self, other, dim)


@register("aten::linalg_vecdot.default")
def aten_linalg_vecdot(ctx: NodeContext, x: ir.Value, y: ir.Value, *, dim: int = -1) -> ir.Value:
    """linalg_vecdot(Tensor x, Tensor y, *, int dim=-1) -> Tensor: ``sum(x * y, dim)`` for real tensors."""
    dtype = ctx.out_dtype
    rank = max(ctx.rank(x), ctx.rank(y))
    product = kernel_op(ctx, "Mul", ctx.cast(x, dtype), ctx.cast(y, dtype), dtype=dtype)
    c = opmath_dtype(dtype)
    total = ctx.op("ReduceSum", ctx.cast(product, c), ctx.const([normalize_dim(dim, rank)], INT64), keepdims=0)
    return ctx.cast(total, dtype)


def _float_input(ctx: NodeContext, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``x`` in the type the norm is computed in, and the output dtype."""
    dtype = ctx.out_dtype
    return ctx.cast(x, opmath_dtype(dtype)), dtype


def _matrix_norm(ctx: NodeContext, x: ir.Value, ord: Any, dims: Sequence[int], keepdim: bool) -> ir.Value:
    """Frobenius, 1, -1, inf and -inf norms of the matrices of axes ``dims`` (the others need an SVD)."""
    rank = ctx.rank(x) if x.shape is not None else len(ctx.arg_val(0).shape)
    d0, d1 = (normalize_dim(d, rank) for d in dims)
    if ord == "fro":
        return vector_norm(ctx, x, 2, [d0, d1], keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        if 0 in (static_dim(ctx.arg_val(0).shape[d0]), static_dim(ctx.arg_val(0).shape[d1])):
            return _zeros(ctx, x.dtype)  # PyTorch's value for an empty matrix
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = ctx.op("ReduceSum", ctx.op("Abs", x), ctx.const([inner], INT64), keepdims=1)
        op_type, ax = "ReduceMax" if ord > 0 else "ReduceMin", ctx.const([outer], INT64)
        # NaN kept (onnxruntime's kernels skip it), +inf when every sum is (CUDA's ReduceMin: the largest float)
        out = extremum_as_pytorch(ctx, op_type, sums, ctx.op(op_type, sums, ax, keepdims=1), [ax], True)
        return out if keepdim else ctx.op("Squeeze", out, ctx.const(sorted([d0, d1]), INT64))
    raise NotImplementedError(f"matrix norm ord={ord!r} needs singular values, which ONNX cannot compute")


@register("aten::linalg_matrix_norm.default", "aten::linalg_matrix_norm.str_ord")
def aten_linalg_matrix_norm(
    ctx: NodeContext, self: ir.Value, ord: Any = "fro", dim: Sequence[int] = (-2, -1), keepdim: bool = False,
    *, dtype: Any = None
) -> ir.Value:
    """linalg_matrix_norm(Tensor self, Scalar ord, int[] dim=[-2,-1], bool keepdim=False, *, ScalarType? dtype=None)
    -> Tensor"""
    x, out_dtype = _float_input(ctx, self)
    return ctx.cast(_matrix_norm(ctx, x, ord, dim, keepdim), out_dtype)


@register("aten::linalg_norm.default", "aten::linalg_norm.ord_str")
def aten_linalg_norm(
    ctx: NodeContext, self: ir.Value, ord: Any = None, dim: Sequence[int] | None = None, keepdim: bool = False,
    *, dtype: Any = None
) -> ir.Value:
    """linalg_norm(Tensor self, Scalar? ord=None, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
    -> Tensor: a vector norm over one axis (or all axes without ``ord``), a matrix norm over two."""
    x, out_dtype = _float_input(ctx, self)
    rank = ctx.rank(self)
    if isinstance(dim, int):
        dim = [dim]
    if dim is None and ord is not None:
        dim = list(range(rank))
    if dim is not None and len(dim) == 2:
        out = _matrix_norm(ctx, x, "fro" if ord is None else ord, dim, keepdim)
    else:
        axes = None if dim is None else [normalize_dim(d, rank) for d in dim]
        out = vector_norm(ctx, x, 2 if ord is None else ord, axes, keepdim)
        if axes is None and keepdim:
            out = ctx.op("Reshape", out, ctx.const([1] * rank, INT64))
    return ctx.cast(out, out_dtype)


@register("aten::dist.default")
def aten_dist(ctx: NodeContext, self: ir.Value, other: ir.Value, p: float = 2) -> ir.Value:
    """dist(Tensor self, Tensor other, Scalar p=2) -> Tensor: the p-norm of the difference."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    diff = ctx.op("Sub", ctx.cast(self, c), ctx.cast(other, c))
    return ctx.cast(vector_norm(ctx, diff, p, None, False), dtype)


@register("aten::pairwise_distance.default")
def aten_pairwise_distance(
    ctx: NodeContext, x1: ir.Value, x2: ir.Value, p: float = 2, eps: float = 1e-6, keepdim: bool = False
) -> ir.Value:
    """pairwise_distance(Tensor x1, Tensor x2, float p=2, float eps=1e-06, bool keepdim=False) -> Tensor:
    the p-norm of ``x1 - x2 + eps`` over the last axis."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    rank = max(ctx.rank(x1), ctx.rank(x2))
    diff = ctx.op("Add", ctx.op("Sub", ctx.cast(x1, c), ctx.cast(x2, c)), ctx.const(eps, c))
    if rank == 0:
        return ctx.cast(vector_norm(ctx, diff, p, None, False), dtype)
    return ctx.cast(vector_norm(ctx, diff, p, [rank - 1], keepdim), dtype)


@register("aten::cdist.default", "aten::_cdist_forward.default")
def aten_cdist(
    ctx: NodeContext, x1: ir.Value, x2: ir.Value, p: float = 2, compute_mode: int | None = None
) -> ir.Value:
    """cdist(Tensor x1, Tensor x2, float p=2, int? compute_mode=None) -> Tensor: the p-norms of all the
    differences ``x1[..., i, :] - x2[..., j, :]``."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    a = ctx.op("Unsqueeze", ctx.cast(x1, c), ctx.const([-2], INT64))
    b = ctx.op("Unsqueeze", ctx.cast(x2, c), ctx.const([-3], INT64))
    rank = max(ctx.rank(x1), ctx.rank(x2)) + 1
    return ctx.cast(vector_norm(ctx, ctx.op("Sub", a, b), p, [rank - 1], False), dtype)


@register("aten::cosine_similarity.default")
def aten_cosine_similarity(
    ctx: NodeContext, x1: ir.Value, x2: ir.Value, dim: int = 1, eps: float = 1e-8
) -> ir.Value:
    """cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor:
    ``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps), dim)`` as PyTorch computes it."""
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    rank = max(ctx.rank(x1), ctx.rank(x2))
    a, b = ctx.cast(x1, c), ctx.cast(x2, c)
    if static_shape(ctx.arg_val(0)) != static_shape(ctx.arg_val(1)) or static_shape(ctx.arg_val(0)) is None:
        a, b = ctx.op("Expand", a, ctx.op("Shape", b)), ctx.op("Expand", b, ctx.op("Shape", a))  # broadcast
    if rank == 0:
        a, b = (ctx.op("Reshape", v, ctx.const([1], INT64)) for v in (a, b))
        rank = 1
    axis = [normalize_dim(dim, rank)]
    na = ctx.op("Max", vector_norm(ctx, a, 2, axis, True), ctx.const(eps, c))
    nb = ctx.op("Max", vector_norm(ctx, b, 2, axis, True), ctx.const(eps, c))
    product = ctx.op("Mul", ctx.op("Div", a, na), ctx.op("Div", b, nb))
    return ctx.cast(ctx.op("ReduceSum", product, ctx.const(axis, INT64), keepdims=0), dtype)


@register("aten::trace.default")
def aten_trace(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """trace(Tensor self) -> Tensor: the sum of the diagonal (int64 for integers)."""
    shape = static_shape(ctx.arg_val(0))
    if shape is None:
        raise NotImplementedError("trace with a dynamic shape")
    n, m = shape
    diagonal = ctx.op("Gather", ctx.op("Reshape", self, ctx.const([-1], INT64)),
                      ctx.const(np.arange(min(n, m), dtype=np.int64) * (m + 1)))
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    return ctx.cast(kernel_op(ctx, "ReduceSum", ctx.cast(diagonal, c), dtype=c, keepdims=0), dtype)


# -- determinants -----------------------------------------------------------------------------------------
def _det(ctx: NodeContext, x: ir.Value) -> ir.Value:
    dtype = x.dtype if x.dtype in FLOAT_TYPES else ir.DataType.FLOAT
    return kernel_op(ctx, "Det", ctx.cast(x, dtype), dtype=dtype)


@register("aten::linalg_det.default", "aten::det.default")
def aten_linalg_det(ctx: NodeContext, A: ir.Value) -> ir.Value:
    """linalg_det(Tensor A) -> Tensor: ONNX Det."""
    return ctx.cast(_det(ctx, A), ctx.out_dtype)


@register("aten::logdet.default")
def aten_logdet(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """logdet(Tensor self) -> Tensor: NaN for a negative determinant, as PyTorch."""
    return ctx.cast(ctx.op("Log", _det(ctx, self)), ctx.out_dtype)


@register("aten::linalg_slogdet.default", "aten::slogdet.default")
def aten_linalg_slogdet(ctx: NodeContext, A: ir.Value) -> tuple[ir.Value, ir.Value]:
    """linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)"""
    det = ctx.cast(_det(ctx, A), opmath_dtype(ctx.out_dtype))
    dtype = ctx.out_dtype
    # the sign of a NaN determinant is 0 in PyTorch and onnxruntime's CUDA Sign, NaN in its CPU Sign
    sign = ctx.op("Sign", det)
    if ctx.needs_guard("sign_of_nan_is_nan"):
        sign = ctx.op("Where", ctx.op("IsNaN", det), ctx.const(0, det.dtype), sign)
    return ctx.cast(sign, dtype), ctx.cast(ctx.op("Log", ctx.op("Abs", det)), dtype)


@register("aten::pdist.default", "aten::_pdist_forward.default")
def aten_pdist(ctx: NodeContext, self: ir.Value, p: float = 2.0) -> ir.Value:
    """pdist(Tensor self, float p=2.) -> Tensor: the p-norms of ``x[i] - x[j]`` for ``i < j``, rows gathered
    at the index pairs computed at export time."""
    n = static_dim(ctx.arg_val(0).shape[0])
    if n is None:
        raise NotImplementedError("pdist with a dynamic number of rows")
    first, second = np.triu_indices(n, k=1)
    dtype = ctx.out_dtype
    c = opmath_dtype(dtype)
    x = ctx.cast(self, c)
    diff = ctx.op("Sub", ctx.op("Gather", x, ctx.const(first.astype(np.int64)), axis=0),
                  ctx.op("Gather", x, ctx.const(second.astype(np.int64)), axis=0))
    return ctx.cast(vector_norm(ctx, diff, p, [1], False), dtype)


@register("aten::linalg_vander.default")
def aten_linalg_vander(ctx: NodeContext, x: ir.Value, *, N: int | None = None) -> ir.Value:
    """linalg_vander(Tensor x, *, SymInt? N=None) -> Tensor: the powers ``x^0 ... x^(N-1)`` on a new last axis,
    by cumulative products (exact for integers)."""
    n = static_dim(ctx.val.shape[-1])
    dtype = ctx.out_dtype
    x = ctx.cast(x, dtype)
    if ctx.arg_val(0).dim() == 0:  # PyTorch treats it as one value of a vector
        x = ctx.op("Reshape", x, ctx.const([1], INT64))
    col = ctx.op("Unsqueeze", x, ctx.const([-1], INT64))
    powers = [ctx.op("Expand", ctx.const(1, dtype), ctx.op("Shape", col))] if n else []
    for _ in range(1, n or 0):
        powers.append(kernel_op(ctx, "Mul", powers[-1], col, dtype=dtype))
    return powers[0] if len(powers) == 1 else ctx.op("Concat", *powers, axis=-1)
