"""Grouped matrix products of mixture-of-experts layers: ``aten::_grouped_mm`` and transformers'
``transformers::grouped_mm_fallback`` (the custom op transformers routes experts through when
``torch.nn.functional.grouped_mm`` cannot be used, e.g. float32 weights under ``torch.export``).

Rows of the input are sorted by expert; ``offs[g]`` is the end row of group ``g``. The number of
groups is static, the row counts are not: each group is one ``Slice`` of rows (bounds read from
``offs`` at run time), one ``MatMul`` with its expert's matrix and a ``Concat`` of the results.
Rows past ``offs[-1]`` (expert-parallel sentinels) are zeros, as in transformers' fallback.
"""

from __future__ import annotations

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import INT64, kernel_dtype


def _group_bounds(ctx: NodeContext, offs: ir.Value, groups: int) -> list[tuple[ir.Value, ir.Value]]:
    """The rows ``[start, end)`` of each group (1-D INT64 values): ``offs[g - 1]`` (0 for the first) to ``offs[g]``."""
    ends = ctx.op("Cast", offs, to=INT64)
    bounds, start = [], ctx.const([0], INT64)
    for g in range(groups):
        end = ctx.op("Slice", ends, ctx.const([g], INT64), ctx.const([g + 1], INT64))
        bounds.append((start, end))
        start = end
    return bounds


def _grouped_rows_matmul(
    ctx: NodeContext, rows: ir.Value, weight: ir.Value, offs: ir.Value, bias: ir.Value | None, what: str
) -> ir.Value:
    """``out[r] = rows[r] @ weight[group(r)] (+ bias[group(r)])`` for ``rows [S, K]``, ``weight [G, K, N]``."""
    shape = ctx.arg_val(1).shape
    groups = shape[0]
    if not isinstance(groups, int):
        raise NotImplementedError(
            f"{what}: the number of experts (weight.shape[0] = {groups}) must be static; "
            "export with a static expert count"
        )
    dtype = rows.dtype
    compute = kernel_dtype("MatMul", dtype)  # bfloat16 experts: float32 on onnxruntime CPU
    rows, weight = ctx.cast(rows, compute), ctx.cast(weight, compute)
    bias = None if bias is None else ctx.cast(bias, compute)
    zero = ctx.const([0], INT64)
    axis0 = ctx.const([0], INT64)
    outputs = []
    bounds = _group_bounds(ctx, offs, groups)
    for g, (start, end) in enumerate(bounds):
        part = ctx.op("Slice", rows, start, end, axis0)
        w = ctx.op("Gather", weight, ctx.const(g, INT64), axis=0)
        out = ctx.op("MatMul", part, w)
        if bias is not None:
            out = ctx.op("Add", out, ctx.op("Gather", bias, ctx.const(g, INT64), axis=0))
        outputs.append(out)
    last_end = bounds[-1][1]
    result = outputs[0] if len(outputs) == 1 else ctx.op("Concat", *outputs, axis=0)
    # rows past the last offset (sentinels) are zeros: pad up to S
    missing = ctx.op("Sub", ctx.op("Shape", rows, start=0, end=1), last_end)
    pads = ctx.op("Concat", zero, zero, missing, zero, axis=0)
    return ctx.cast(ctx.op("Pad", result, pads, ctx.const(0, compute), mode="constant"), dtype)


@register("transformers::grouped_mm_fallback.default")
def transformers_grouped_mm_fallback(ctx: NodeContext, input: ir.Value, weight: ir.Value, offs: ir.Value) -> ir.Value:
    """grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor: ``input [S, K]`` sorted by
    expert, ``weight [G, K, N]``, ``offs [G]`` cumulative row counts; one ``MatMul`` per expert."""
    return _grouped_rows_matmul(ctx, input, weight, offs, None, "transformers::grouped_mm_fallback")


@register("transformers::grouped_mm_fallback_backward.default")
def transformers_grouped_mm_fallback_backward(
    ctx: NodeContext, input: ir.Value, weight: ir.Value, offs: ir.Value, grad_output: ir.Value
) -> tuple[ir.Value, ir.Value]:
    """grouped_mm_fallback_backward(Tensor input, Tensor weight, Tensor offs, Tensor grad_output) -> (Tensor, Tensor):
    ``grad_input[r] = grad_output[r] @ weight[group(r)].T`` (zeros past ``offs[-1]``) and
    ``grad_weight[g] = input[rows of g].T @ grad_output[rows of g]`` (zeros for an empty group)."""
    what = "transformers::grouped_mm_fallback_backward"
    grad_input = _grouped_rows_matmul(ctx, grad_output, ctx.op("Transpose", weight, perm=[0, 2, 1]), offs, None, what)
    groups = ctx.arg_val(1).shape[0]
    dtype = weight.dtype
    compute = kernel_dtype("MatMul", dtype)
    rows, grads = ctx.cast(input, compute), ctx.cast(grad_output, compute)
    axis0 = ctx.const([0], INT64)
    parts = []
    for start, end in _group_bounds(ctx, offs, groups):
        x = ctx.op("Slice", rows, start, end, axis0)
        dy = ctx.op("Slice", grads, start, end, axis0)
        parts.append(ctx.op("Unsqueeze", ctx.op("MatMul", ctx.op("Transpose", x, perm=[1, 0]), dy), axis0))
    grad_weight = parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)
    return grad_input, ctx.cast(grad_weight, dtype)


@register("aten::_grouped_mm.default")
def aten__grouped_mm(
    ctx: NodeContext,
    self: ir.Value,
    mat2: ir.Value,
    offs: ir.Value | None = None,
    bias: ir.Value | None = None,
    out_dtype: object = None,
) -> ir.Value:
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None)
    -> Tensor: the 2-D x 3-D form with ``offs`` (mixture of experts), one ``MatMul`` per group."""
    if offs is None or ctx.rank(self) != 2 or ctx.rank(mat2) != 3:
        raise NotImplementedError(
            "aten::_grouped_mm is converted for a 2-D input, 3-D weights and offsets (mixture of experts) only, "
            f"got ranks {ctx.rank(self)} and {ctx.rank(mat2)}, offs={'given' if offs is not None else 'None'}"
        )
    out = _grouped_rows_matmul(ctx, self, mat2, offs, bias, "aten::_grouped_mm")
    return ctx.cast(out, ctx.out_dtype)
