"""Fused attention kernels and their backward: what AOTAutograd's graphs hold for ``scaled_dot_product_attention``
under ``torch.compile`` (a training step), where torch.export's inference graphs keep
``aten::scaled_dot_product_attention`` (``attention.py``).

Every form computes the scores S = Q·K^T * scale (+ causal mask, + float mask or bias) in float32 for
float16/bfloat16 (double for double), their row maximum M and the sum Z of exp(S - M): the output is
exp(S - M)·V / Z, the saved logsumexp M + log Z (natural log, [B, H, L], float32 but for double). The backward
recomputes P = exp(S - logsumexp) and ``dV = P^T·dO``, ``dS = P * (dO·V^T - rowsum(dO * O))``, ``dQ = dS·K * scale``,
``dK = dS^T·Q * scale``; a key and value of fewer heads (grouped-query attention) are repeated for the products
and their gradients summed back over each group. A row that masks every key gives 0 and a logsumexp of 0 (+inf
for the CUDA flash kernel, -inf for cuDNN as documented), as the kernels do, and gradients 0.

* ``_scaled_dot_product_flash_attention_for_cpu`` (+ ``_backward``): a model running on the CPU;
* ``_scaled_dot_product_efficient_attention`` (+ ``_backward``), CUDA: a bias instead of a mask, whose gradient
  is dS; the logsumexp padded with +inf to a multiple of 32 rows;
* ``_scaled_dot_product_flash_attention`` (+ ``_backward``), CUDA: ``is_causal`` aligned to the bottom right
  (flash-attention 2; PyTorch's SDPA sets it only when L == S, ``CausalBias`` lower right when L != S); its
  philox seed and offset are zeros, read by no converter;
* ``_scaled_dot_product_cudnn_attention`` (+ ``_backward``), CUDA, PyTorch's first choice on recent GPUs (H100):
  a bias as the efficient kernel's but without gradient, ``is_causal`` from the top left, grouped-query heads; the
  logsumexp [B, H, L, 1] (float32).

Attention dropout (``dropout_p > 0``) draws its mask from PyTorch's random stream, which the model cannot
reproduce, and the backward needs that same mask: a :class:`ConversionError`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx_ir as ir
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..dtypes import onnx_dtype
from ..errors import ConversionError
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import (
    INT64,
    dim_of,
    filled,
    int_op,
    int_range,
    opmath_dtype,
    repeat_heads,
    slice_axis,
    uses_output,
)

#: the efficient kernel pads its logsumexp to a multiple of this many rows (``kAlignLSE``)
_LSE_ALIGN = 32
#: K^T of a [B, H, S, E] tensor
_T = [0, 1, 3, 2]


def _no_dropout(ctx: NodeContext, dropout_p: float) -> None:
    if dropout_p:
        raise ConversionError(
            f"{ctx.key} with dropout_p={dropout_p}: attention dropout draws its mask from PyTorch's random stream, "
            "which the ONNX model cannot reproduce (and the backward needs that same mask); training with attention "
            "dropout is not supported by these converters: pass dropout_p=0.0"
        )


def _typed(ctx: NodeContext, value: ir.Value | None, index: int) -> ir.Value | None:
    """``value`` cast to the dtype of the node's output ``index``."""
    return None if value is None else ctx.cast(value, onnx_dtype(ctx.val[index].dtype))


def _zeros(ctx: NodeContext, index: int) -> ir.Value:
    """Output ``index`` (a static shape) filled with zeros: the philox seed and offset, no debug mask."""
    val = ctx.val[index]
    dtype = onnx_dtype(val.dtype)
    return ctx.const(np.zeros(tuple(int(d) for d in val.shape), dtype=dtype.numpy()), dtype)


class _Sdpa:
    """Query, key and value of one attention in the computation type, the key and value repeated to the query's
    heads; its scale. ``first``: the position of the query among the node's arguments."""

    def __init__(
        self, ctx: NodeContext, query: ir.Value, key: ir.Value, value: ir.Value, scale: float | None, first: int = 0
    ):
        self.ctx = ctx
        self.qv, self.kv, self.vv = (ctx.arg_val(first + i) for i in range(3))
        self.key, self.value = key, value
        self.dtype = dtype = opmath_dtype(query.dtype)
        self.q = ctx.cast(query, dtype)
        self.k = repeat_heads(ctx, ctx.cast(key, dtype), self.kv, self.qv, self.q)
        self.v = repeat_heads(ctx, ctx.cast(value, dtype), self.vv, self.qv, self.q)
        self.len_q = dim_of(ctx, query, 2, self.qv.shape[2])
        self.len_k = dim_of(ctx, key, 2, self.kv.shape[2])
        if scale is not None:
            self.scale = ctx.const(float(scale), dtype)
        else:  # 1 / sqrt(E)
            e = dim_of(ctx, query, 3, self.qv.shape[3])
            if isinstance(e, int):
                self.scale = ctx.const(1.0 / math.sqrt(e), dtype)
            else:
                self.scale = ctx.op("Reciprocal", ctx.op("Sqrt", ctx.cast(e, dtype)))

    def same_heads(self) -> None:
        """The efficient kernel takes no grouped-query attention."""
        if not statically_known_true(self.qv.shape[1] == self.kv.shape[1]):
            raise ConversionError(
                f"{self.ctx.key}: the query has {self.qv.shape[1]} heads, the key {self.kv.shape[1]}; this kernel "
                "takes the same number of heads"
            )

    def scores(self, bias: ir.Value | None, is_causal: bool, lower_right: bool = False) -> ir.Value:
        """S = Q·K^T * scale, -inf where the causal mask hides a key (top left: key j <= query i; bottom right:
        j <= i + S - L), plus ``bias``."""
        ctx = self.ctx
        s = ctx.op("Mul", ctx.op("MatMul", self.q, ctx.op("Transpose", self.k, perm=_T)), self.scale)
        if is_causal:
            last = int_range(ctx, self.len_q)
            if lower_right:
                last = ctx.op("Add", last, ctx.operand(int_op(ctx, "Sub", self.len_k, self.len_q), INT64))
            keep = ctx.op("LessOrEqual", int_range(ctx, self.len_k), ctx.op("Unsqueeze", last, ctx.const([1], INT64)))
            s = ctx.op("Where", keep, s, ctx.const(-math.inf, self.dtype))
        if bias is not None:
            s = ctx.op("Add", s, ctx.cast(bias, self.dtype))
        return s

    def forward(
        self,
        bias: ir.Value | None,
        is_causal: bool,
        lower_right: bool = False,
        hidden_lse: float = 0.0,
        lse: bool = True,
        keepdims: bool = False,
    ) -> tuple[ir.Value, ir.Value | None]:
        """The output [B, H, L, Ev] and, with ``lse``, the logsumexp [B, H, L] ([B, H, L, 1] with ``keepdims``;
        ``hidden_lse`` on the rows that mask every key), both in the computation type."""
        ctx, dtype = self.ctx, self.dtype
        s = self.scores(bias, is_causal, lower_right)
        axes = ctx.const([-1], INT64)
        # the maximum of a row of -inf taken as the lowest float: exp(S - M) is 0 there, not NaN (and onnxruntime's
        # CUDA ReduceMax returns that lowest float for such a row already)
        lowest = ctx.const(float(np.finfo(dtype.numpy()).min), dtype)
        top = ctx.op("Max", ctx.op("ReduceMax", s, axes, keepdims=1), lowest)
        e = ctx.op("Exp", ctx.op("Sub", s, top))
        total = ctx.op("ReduceSum", e, axes, keepdims=1)  # >= 1 (exp(0) at the maximum), 0 on a hidden row
        out = ctx.op("Div", ctx.op("MatMul", e, self.v), ctx.op("Max", total, ctx.const(1.0, dtype)))
        if not lse:
            return out, None
        logsumexp = ctx.op("Add", top, ctx.op("Log", total))
        hidden = ctx.op("Equal", total, ctx.const(0.0, dtype))
        logsumexp = ctx.op("Where", hidden, ctx.const(hidden_lse, dtype), logsumexp)
        return out, logsumexp if keepdims else ctx.op("Squeeze", logsumexp, axes)

    def backward(
        self,
        grad_out: ir.Value,
        out: ir.Value,
        logsumexp: ir.Value,
        bias: ir.Value | None,
        is_causal: bool,
        lower_right: bool = False,
        keepdims: bool = False,
    ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """dQ, dK, dV (the key's and value's heads) and dS (the gradient of the scores, that of a bias), in the
        computation type, from the forward's output ``out`` and ``logsumexp`` [B, H, L] ([B, H, L, 1] with
        ``keepdims``)."""
        ctx, dtype = self.ctx, self.dtype
        axes = ctx.const([-1], INT64)
        s = self.scores(bias, is_causal, lower_right)
        lse = ctx.cast(logsumexp, dtype)
        p = ctx.op("Exp", ctx.op("Sub", s, lse if keepdims else ctx.op("Unsqueeze", lse, axes)))
        do = ctx.cast(grad_out, dtype)
        dv = ctx.op("MatMul", ctx.op("Transpose", p, perm=_T), do)
        dp = ctx.op("MatMul", do, ctx.op("Transpose", self.v, perm=_T))
        rowsum = ctx.op("ReduceSum", ctx.op("Mul", do, ctx.cast(out, dtype)), axes, keepdims=1)
        ds = ctx.op("Mul", p, ctx.op("Sub", dp, rowsum))
        dq = ctx.op("Mul", ctx.op("MatMul", ds, self.k), self.scale)
        dk = ctx.op("Mul", ctx.op("MatMul", ctx.op("Transpose", ds, perm=_T), self.q), self.scale)
        return dq, self._grouped(dk, self.key, self.kv), self._grouped(dv, self.value, self.vv), ds

    def _grouped(self, grad: ir.Value, x: ir.Value, xv: Any) -> ir.Value:
        """``grad`` (the query's heads) summed over each group of heads that shares one head of ``x``."""
        if statically_known_true(self.qv.shape[1] == xv.shape[1]):
            return grad
        ctx = self.ctx
        b, h, s, e = (dim_of(ctx, x, i, xv.shape[i]) for i in range(4))
        grad = ctx.op("Reshape", grad, ctx.int64s([b, h, -1, s, e]))
        return ctx.op("ReduceSum", grad, ctx.const([2], INT64), keepdims=0)


def _bias_grad(ctx: NodeContext, ds: ir.Value, sdpa: _Sdpa, bias_val: Any) -> ir.Value:
    """dS [B, H, L, S] summed over the axes ``bias_val`` broadcasts, to its shape."""
    qv, kv = sdpa.qv, sdpa.kv
    full = [qv.shape[0], qv.shape[1], qv.shape[2], kv.shape[2]]
    lead = len(full) - bias_val.dim()
    broadcast = [
        lead + i
        for i, d in enumerate(bias_val.shape)
        if statically_known_true(d == 1) and not statically_known_true(full[lead + i] == 1)
    ]
    if broadcast:
        ds = ctx.op("ReduceSum", ds, ctx.const(broadcast, INT64), keepdims=1)
    if lead:
        ds = ctx.op("ReduceSum", ds, ctx.const(list(range(lead)), INT64), keepdims=0)
    return ds


@register("aten::_scaled_dot_product_flash_attention_for_cpu.default")
def aten__scaled_dot_product_flash_attention_for_cpu(
    ctx: NodeContext,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask: ir.Value | None = None,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value | None]:
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0.,
    bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)

    ``attn_mask``: a float mask added to the scores (SDPA turns a boolean one into 0 / -inf before), with the
    causal mask (top left) when both are given; a key and value of fewer heads are shared by groups of heads.
    """
    _no_dropout(ctx, dropout_p)
    sdpa = _Sdpa(ctx, query, key, value, scale)
    out, lse = sdpa.forward(attn_mask, is_causal, lse=uses_output(ctx, 1))
    return _typed(ctx, out, 0), _typed(ctx, lse, 1)


@register("aten::_scaled_dot_product_flash_attention_for_cpu_backward.default")
def aten__scaled_dot_product_flash_attention_for_cpu_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    out: ir.Value,
    logsumexp: ir.Value,
    dropout_p: float,
    is_causal: bool,
    *,
    attn_mask: ir.Value | None = None,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key,
    Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None,
    float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)"""
    _no_dropout(ctx, dropout_p)
    sdpa = _Sdpa(ctx, query, key, value, scale, first=1)
    dq, dk, dv, _ = sdpa.backward(grad_out, out, logsumexp, attn_mask, is_causal)
    return _typed(ctx, dq, 0), _typed(ctx, dk, 1), _typed(ctx, dv, 2)


@register("aten::_scaled_dot_product_efficient_attention.default")
def aten__scaled_dot_product_efficient_attention(
    ctx: NodeContext,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_bias: ir.Value | None,
    compute_log_sumexp: bool,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value | None, ir.Value, ir.Value]:
    """_scaled_dot_product_efficient_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias,
    bool compute_log_sumexp, float dropout_p=0., bool is_causal=False, *, float? scale=None)
    -> (Tensor output, Tensor log_sumexp, Tensor philox_seed, Tensor philox_offset)

    The logsumexp [B, H, ceil(L / 32) * 32], its padding +inf, or [B, H, 0] without ``compute_log_sumexp``.
    """
    _no_dropout(ctx, dropout_p)
    sdpa = _Sdpa(ctx, query, key, value, scale)
    sdpa.same_heads()
    wanted = uses_output(ctx, 1)
    out, lse = sdpa.forward(attn_bias, is_causal, lse=wanted and compute_log_sumexp)
    if wanted and not compute_log_sumexp:
        b, h = (dim_of(ctx, query, i, sdpa.qv.shape[i]) for i in range(2))
        lse = filled(ctx, ctx.int64s([b, h, 0]), sdpa.dtype)
    elif lse is not None:
        n = sdpa.len_q
        pad = -n % _LSE_ALIGN if isinstance(n, int) else int_op(
            ctx, "Mod", int_op(ctx, "Sub", _LSE_ALIGN, int_op(ctx, "Mod", n, _LSE_ALIGN)), _LSE_ALIGN
        )
        if not (isinstance(pad, int) and pad == 0):
            lse = ctx.op("Pad", lse, ctx.int64s([0, 0, 0, 0, 0, pad]), ctx.const(math.inf, sdpa.dtype))
    return _typed(ctx, out, 0), _typed(ctx, lse, 1), _zeros(ctx, 2), _zeros(ctx, 3)


@register("aten::_scaled_dot_product_efficient_attention_backward.default")
def aten__scaled_dot_product_efficient_attention_backward(
    ctx: NodeContext,
    grad_out_: ir.Value,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_bias: ir.Value | None,
    out: ir.Value,
    logsumexp: ir.Value,
    philox_seed: ir.Value,
    philox_offset: ir.Value,
    dropout_p: float,
    grad_input_mask: list[bool],
    is_causal: bool = False,
    *,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value | None]:
    """_scaled_dot_product_efficient_attention_backward(Tensor grad_out_, Tensor query, Tensor key, Tensor value,
    Tensor attn_bias, Tensor out, Tensor logsumexp, Tensor philox_seed, Tensor philox_offset, float dropout_p,
    bool[4] grad_input_mask, bool is_causal=False, *, float? scale=None) -> (Tensor, Tensor, Tensor, Tensor)

    The gradients of query, key and value always (as the kernel), that of ``attn_bias`` when
    ``grad_input_mask[3]`` asks for it (None else).
    """
    _no_dropout(ctx, dropout_p)
    sdpa = _Sdpa(ctx, query, key, value, scale, first=1)
    sdpa.same_heads()
    lse = slice_axis(ctx, logsumexp, 2, 0, sdpa.len_q)  # the padding off
    dq, dk, dv, ds = sdpa.backward(grad_out_, out, lse, attn_bias, is_causal)
    grad_bias = None
    if attn_bias is not None and grad_input_mask[3]:
        grad_bias = _typed(ctx, _bias_grad(ctx, ds, sdpa, ctx.arg_val(4)), 3)
    return _typed(ctx, dq, 0), _typed(ctx, dk, 1), _typed(ctx, dv, 2), grad_bias


@register("aten::_scaled_dot_product_flash_attention.default")
def aten__scaled_dot_product_flash_attention(
    ctx: NodeContext,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple[Any, ...]:
    """_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, float dropout_p=0.,
    bool is_causal=False, bool return_debug_mask=False, *, float? scale=None) -> (Tensor output,
    Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, Tensor rng_state,
    Tensor unused, Tensor debug_attn_mask)

    ``is_causal`` from the bottom right; a row with no key left (L > S) gives 0 and a logsumexp of +inf.
    """
    _no_dropout(ctx, dropout_p)
    if return_debug_mask:
        raise ConversionError(f"{ctx.key}: return_debug_mask=True (the kernel's dropout mask) is not supported")
    sdpa = _Sdpa(ctx, query, key, value, scale)
    out, lse = sdpa.forward(None, is_causal, lower_right=True, hidden_lse=math.inf, lse=uses_output(ctx, 1))
    return (
        _typed(ctx, out, 0), _typed(ctx, lse, 1), None, None, sdpa.len_q, sdpa.len_k,
        _zeros(ctx, 6), _zeros(ctx, 7), _zeros(ctx, 8),
    )


@register("aten::_scaled_dot_product_flash_attention_backward.default")
def aten__scaled_dot_product_flash_attention_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    out: ir.Value,
    logsumexp: ir.Value,
    cum_seq_q: ir.Value | None,
    cum_seq_k: ir.Value | None,
    max_q: Any,
    max_k: Any,
    dropout_p: float,
    is_causal: bool,
    philox_seed: ir.Value,
    philox_offset: ir.Value,
    *,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_scaled_dot_product_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value,
    Tensor out, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k,
    float dropout_p, bool is_causal, Tensor philox_seed, Tensor philox_offset, *, float? scale=None)
    -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)"""
    _no_dropout(ctx, dropout_p)
    if cum_seq_q is not None and not statically_known_true(ctx.arg_val(6).numel() == 0):
        raise ConversionError(f"{ctx.key}: packed sequences (cum_seq_q, nested tensors) are not supported")
    sdpa = _Sdpa(ctx, query, key, value, scale, first=1)
    dq, dk, dv, _ = sdpa.backward(grad_out, out, logsumexp, None, is_causal, lower_right=True)
    return _typed(ctx, dq, 0), _typed(ctx, dk, 1), _typed(ctx, dv, 2)


@register("aten::_scaled_dot_product_cudnn_attention.default")
def aten__scaled_dot_product_cudnn_attention(
    ctx: NodeContext,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_bias: ir.Value | None,
    compute_log_sumexp: bool,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple[Any, ...]:
    """_scaled_dot_product_cudnn_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias,
    bool compute_log_sumexp, float dropout_p=0., bool is_causal=False, bool return_debug_mask=False, *,
    float? scale=None) -> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q,
    SymInt max_k, Tensor philox_seed, Tensor philox_offset, Tensor debug_attn_mask)

    The kernel (``_cudnn_attention_forward``, ATen's ``cudnn/MHA.cpp``) builds a cuDNN graph with
    ``set_causal_mask(is_causal)``, cuDNN's causal mask from the top left (key j <= query i, PyTorch's documented
    ``is_causal``), and adds ``attn_bias`` expanded to [B, 1 or H, L, S] (a 2-D or 3-D bias broadcast, as here);
    ``scale`` defaults to 1/sqrt(E); the key and value may have fewer heads (grouped-query attention). Its softmax
    statistics are the natural logsumexp of the scaled scores, [B, H, L, 1] float32 (the meta kernel's shape, whatever
    ``compute_log_sumexp``: computed whenever the graph reads it). The philox seed and offset are 0-D int64 tensors
    the kernel leaves unset without dropout (zeros here); the cumulative sequence lengths and the debug mask are
    None (the kernel ignores ``return_debug_mask``).

    A row whose bias is -inf for every key: output 0, PyTorch's SDPA convention, and a logsumexp of -inf, the
    value cuDNN's maintainers give for it (cudnn-frontend issue 262); not checked on the kernel itself (no GPU).
    """
    _no_dropout(ctx, dropout_p)
    sdpa = _Sdpa(ctx, query, key, value, scale)
    out, lse = sdpa.forward(attn_bias, is_causal, hidden_lse=-math.inf, lse=uses_output(ctx, 1), keepdims=True)
    return (
        _typed(ctx, out, 0), _typed(ctx, lse, 1), None, None, sdpa.len_q, sdpa.len_k,
        _zeros(ctx, 6), _zeros(ctx, 7), None,
    )


@register("aten::_scaled_dot_product_cudnn_attention_backward.default")
def aten__scaled_dot_product_cudnn_attention_backward(
    ctx: NodeContext,
    grad_out: ir.Value,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    out: ir.Value,
    logsumexp: ir.Value,
    philox_seed: ir.Value,
    philox_offset: ir.Value,
    attn_bias: ir.Value | None,
    cum_seq_q: ir.Value | None,
    cum_seq_k: ir.Value | None,
    max_q: Any,
    max_k: Any,
    dropout_p: float,
    is_causal: bool,
    *,
    scale: float | None = None,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_scaled_dot_product_cudnn_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value,
    Tensor out, Tensor logsumexp, Tensor philox_seed, Tensor philox_offset, Tensor attn_bias, Tensor cum_seq_q,
    Tensor cum_seq_k, SymInt max_q, SymInt max_k, float dropout_p, bool is_causal, *, float? scale=None)
    -> (Tensor, Tensor, Tensor)

    The gradients of query, key and value (the bias has none: autograd refuses a bias that requires it), from the
    logsumexp [B, H, L, 1]. On a row that masks every key they are 0 (PyTorch's convention): its logsumexp of -inf
    is read as +inf, so that exp(S - logsumexp) is 0 there, not NaN. ``cum_seq_q`` or ``cum_seq_k`` given (the
    nested, ragged kernel): a :class:`ConversionError`.
    """
    _no_dropout(ctx, dropout_p)
    if cum_seq_q is not None or cum_seq_k is not None:
        raise ConversionError(f"{ctx.key}: packed sequences (cum_seq_q, nested tensors) are not supported")
    sdpa = _Sdpa(ctx, query, key, value, scale, first=1)
    lse = ctx.cast(logsumexp, sdpa.dtype)
    lse = ctx.op("Where", ctx.op("IsInf", lse, detect_positive=0), ctx.const(math.inf, sdpa.dtype), lse)
    dq, dk, dv, _ = sdpa.backward(grad_out, out, lse, attn_bias, is_causal, keepdims=True)
    return _typed(ctx, dq, 0), _typed(ctx, dk, 1), _typed(ctx, dv, 2)
