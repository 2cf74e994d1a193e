"""Attention: ``scaled_dot_product_attention`` as one family (ONNX ``Attention`` from opset 23).

torch.export keeps ``aten::scaled_dot_product_attention`` on CPU; the fused kernels
(``_scaled_dot_product_flash_attention_for_cpu``...) only appear after decomposition, which we never run.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..ort_kernels import ATTENTION_TYPES
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, FLOAT, INT64, dim_of, int_range, repeat_heads

def _meta(ctx: NodeContext, index: int, name: str) -> Any:
    """FakeTensor of argument ``name`` (positional ``index`` or keyword), None when absent."""
    if len(ctx.node.args) > index:
        return ctx.arg_val(index)
    return ctx.arg_val(name) if name in ctx.node.kwargs else None


def _same(a: Any, b: Any) -> bool:
    return statically_known_true(a == b)


def _decomposed(
    ctx: NodeContext,
    q: ir.Value,
    k: ir.Value,
    v: ir.Value,
    bias: ir.Value | None,
    seen: ir.Value | None,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    vals: tuple[Any, Any, Any],
) -> ir.Value:
    """softmax(Q·K^T * scale + bias)·V with sqrt(scale) applied to Q and K (as PyTorch's math kernel); 0 on the
    rows ``bias`` hides entirely (``seen``: the boolean mask ``bias`` comes from, None for a float mask)."""
    qv, kv, vv = vals
    dtype = q.dtype
    r = qv.dim()
    if scale is not None:
        factor: ir.Value | None = ctx.const(math.sqrt(scale), dtype)
    elif isinstance(qv.shape[-1], int):
        factor = ctx.const(qv.shape[-1] ** -0.25, dtype)
    else:  # dynamic head size: E ** -0.25
        e = ctx.cast(dim_of(ctx, q, r - 1, qv.shape[-1]), dtype)
        factor = ctx.op("Pow", e, ctx.const(-0.25, dtype))
    q = ctx.op("Mul", q, factor)
    if enable_gqa:
        k = repeat_heads(ctx, k, kv, qv, q)
        v = repeat_heads(ctx, v, vv, qv, q)
    perm = list(range(kv.dim()))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    # K^T then the factor: onnxruntime's MatMulScaleFusion breaks Mul(scalar) -> Transpose -> MatMul when
    # the Mul's input is another scalar Mul read elsewhere (key = value = x * 2): "input 'mul' is not ..."
    scores = ctx.op("MatMul", q, ctx.op("Mul", ctx.op("Transpose", k, perm=perm), factor))
    if is_causal:  # torch.ones(L, S).tril(): top-left aligned
        rows = int_range(ctx, dim_of(ctx, q, r - 2, qv.shape[-2]))
        cols = int_range(ctx, dim_of(ctx, k, kv.dim() - 2, kv.shape[-2]))
        keep = ctx.op("LessOrEqual", cols, ctx.op("Unsqueeze", rows, ctx.const([1], INT64)))
        scores = ctx.op("Where", keep, scores, ctx.const(-math.inf, dtype))
    if bias is not None:
        scores = ctx.op("Add", scores, bias)
    out = ctx.op("MatMul", ctx.op("Softmax", scores, axis=-1), v)
    if bias is not None:
        out = ctx.op("Where", _hides_row(ctx, bias, seen), ctx.const(0, dtype), out)
    return out


def _hides_row(ctx: NodeContext, bias: ir.Value, seen: ir.Value | None) -> ir.Value:
    """True on the query rows the mask hides entirely, where Softmax gives NaN and PyTorch 0. Read from the mask
    (no head axis, not the scores), on values 0 and 1 only: ``seen`` (the boolean mask) holds no True on the row,
    or every value of ``bias`` (a float mask) is ``-inf`` (a NaN counts as seen: its row stays NaN, as in PyTorch).

    Not ``ReduceMax(bias) == -inf``: onnxruntime's CUDA ReduceMax starts from the lowest finite float32 and
    returns it for a row of ``-inf``, so that test never held there and the NaN rows stayed (issue 25). uint8:
    a cast of a boolean to float costs ten times more on the CPU.
    """
    keys = ctx.const([-1], INT64)
    if seen is not None:
        seen_row = ctx.op("ReduceMax", ctx.cast(seen, ir.DataType.UINT8), keys, keepdims=1)
        return ctx.op("Not", ctx.cast(seen_row, BOOL))
    hidden = ctx.cast(ctx.op("Equal", bias, ctx.const(-math.inf, bias.dtype)), ir.DataType.UINT8)
    return ctx.cast(ctx.op("ReduceMin", hidden, keys, keepdims=1), BOOL)


@register("aten::scaled_dot_product_attention.default")
def aten_scaled_dot_product_attention(
    ctx: NodeContext,
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_mask: ir.Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    ONNX ``Attention`` for 4-D inputs when opset >= 23, else MatMul, Softmax, MatMul; a row the mask hides
    entirely gives 0, as PyTorch does.
    """
    if dropout_p:
        raise NotImplementedError(
            f"scaled_dot_product_attention with dropout_p={dropout_p} is random: the export targets inference. "
            "A model left in training mode (as a model is after its construction) passes its dropout here: call "
            "model.eval() before to_onnx; in code of your own, pass dropout_p=0.0 outside training "
            "(`dropout_p=self.p if self.training else 0.0`)"
        )
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: attn_mask must not be set when is_causal=True")
    qv, kv, vv = _meta(ctx, 0, "query"), _meta(ctx, 1, "key"), _meta(ctx, 2, "value")
    mv = _meta(ctx, 3, "attn_mask") if attn_mask is not None else None
    out_dtype = ctx.out_dtype
    # onnxruntime has no bfloat16 kernels for this: compute in float and cast back.
    dtype = FLOAT if out_dtype == ir.DataType.BFLOAT16 else out_dtype
    q, k, v = (ctx.cast(x, dtype) for x in (query, key, value))
    if scale is not None:
        scale = float(scale)

    use_attention = (
        ctx.opset >= 23
        and dtype in ATTENTION_TYPES
        and qv.dim() == kv.dim() == vv.dim() == 4
        and _same(qv.shape[0], kv.shape[0])
        and _same(kv.shape[0], vv.shape[0])
        and (enable_gqa or _same(qv.shape[1], kv.shape[1]))
        and (mv is None or 2 <= mv.dim() <= 4)
    )
    if use_attention:
        mask = None
        if attn_mask is not None:
            mask = attn_mask if attn_mask.dtype == BOOL else ctx.cast(attn_mask, dtype)
            if not (_same(mv.shape[-2], qv.shape[-2]) and _same(mv.shape[-1], kv.shape[-2])):
                # ONNX pads a short last dimension with -inf where PyTorch broadcasts it.
                lengths = ctx.int64s([dim_of(ctx, q, 2, qv.shape[-2]), dim_of(ctx, k, 2, kv.shape[-2])])
                mask = ctx.op("Expand", mask, lengths)
        out = ctx.op("Attention", q, k, v, mask, is_causal=int(is_causal), scale=scale)
    else:
        bias = seen = None
        if attn_mask is not None:
            if attn_mask.dtype == BOOL:  # True keeps the position
                bias = ctx.op("Where", attn_mask, ctx.const(0, dtype), ctx.const(-math.inf, dtype))
                seen = attn_mask
            else:
                bias = ctx.cast(attn_mask, dtype)
        out = _decomposed(ctx, q, k, v, bias, seen, is_causal, scale, enable_gqa, (qv, kv, vv))
    return ctx.cast(out, out_dtype)
