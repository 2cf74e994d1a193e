"""Loss functions: the formulas PyTorch's kernels compute (ATen's Loss*.cpp and torch/_decomp), in float32 for
float16/bfloat16 inputs.

``reduction`` is PyTorch's enum: 0 none, 1 mean, 2 sum; the mean of an empty loss is NaN as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, INT64, numel, opmath_dtype, vector_norm

NONE, MEAN, SUM = 0, 1, 2


class _Math:
    """Small formula builder on values of one float type."""

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx
        self.dtype = opmath_dtype(ctx.out_dtype)

    def __call__(self, x: Any) -> ir.Value:
        """``x`` (a value or a Python number) in the computation type."""
        return self.ctx.operand(x, self.dtype)

    def op(self, op_type: str, *inputs: Any, **attrs: Any) -> ir.Value:
        return self.ctx.op(
            op_type, *[self(x) if not isinstance(x, ir.Value) or x.dtype != BOOL else x for x in inputs], **attrs
        )

    def clamp_min(self, x: ir.Value, low: float) -> ir.Value:
        return self.op("Max", x, low)

    def log1p(self, x: ir.Value) -> ir.Value:
        return self.op("Log", self.op("Add", x, 1))

    def log_sigmoid(self, x: ir.Value) -> ir.Value:
        """``min(x, 0) - log1p(exp(-|x|))``, stable for large ``|x|``."""
        tail = self.log1p(self.op("Exp", self.op("Neg", self.op("Abs", x))))
        return self.op("Sub", self.op("Min", x, 0), tail)

    def where(self, cond: ir.Value, a: Any, b: Any) -> ir.Value:
        return self.ctx.op("Where", cond, self(a), self(b))

    def sum(self, x: ir.Value, axes: list[int] | None = None, keepdims: int = 0) -> ir.Value:
        ax = [] if axes is None else [self.ctx.const(axes, INT64)]
        return self.ctx.op("ReduceSum", x, *ax, keepdims=keepdims)


def _reduce(ctx: NodeContext, m: _Math, loss: ir.Value, reduction: int) -> ir.Value:
    """The loss reduced as ``reduction`` says, cast to the output dtype."""
    if reduction == SUM:
        loss = m.sum(loss)
    elif reduction == MEAN:  # sum / count: NaN for an empty loss, where ReduceMean gives 0
        loss = m.op("Div", m.sum(loss), ctx.cast(numel(ctx, loss), m.dtype))
    return ctx.cast(loss, ctx.out_dtype)


def _pointwise(ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int, formula: Any) -> ir.Value:
    m = _Math(ctx)
    return _reduce(ctx, m, formula(m, m(self), m(target)), reduction)


@register("aten::mse_loss.default")
def aten_mse_loss(ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN) -> ir.Value:
    """mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""

    def formula(m: _Math, x: ir.Value, t: ir.Value) -> ir.Value:
        d = m.op("Sub", x, t)
        return m.op("Mul", d, d)

    return _pointwise(ctx, self, target, reduction, formula)


@register("aten::l1_loss.default")
def aten_l1_loss(ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN) -> ir.Value:
    """l1_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor"""
    return _pointwise(ctx, self, target, reduction, lambda m, x, t: m.op("Abs", m.op("Sub", x, t)))


@register("aten::smooth_l1_loss.default")
def aten_smooth_l1_loss(
    ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN, beta: float = 1.0
) -> ir.Value:
    """smooth_l1_loss(Tensor self, Tensor target, int reduction=Mean, float beta=1.0) -> Tensor"""

    def formula(m: _Math, x: ir.Value, t: ir.Value) -> ir.Value:
        d = m.op("Abs", m.op("Sub", x, t))
        if beta == 0:
            return d
        square = m.op("Div", m.op("Mul", m.op("Mul", d, d), 0.5), beta)
        return m.where(m.op("Less", d, beta), square, m.op("Sub", d, 0.5 * beta))

    return _pointwise(ctx, self, target, reduction, formula)


@register("aten::huber_loss.default")
def aten_huber_loss(
    ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN, delta: float = 1.0
) -> ir.Value:
    """huber_loss(Tensor self, Tensor target, int reduction=Mean, float delta=1.0) -> Tensor"""

    def formula(m: _Math, x: ir.Value, t: ir.Value) -> ir.Value:
        d = m.op("Abs", m.op("Sub", x, t))
        square = m.op("Mul", m.op("Mul", d, d), 0.5)
        return m.where(m.op("Less", d, delta), square, m.op("Mul", m.op("Sub", d, 0.5 * delta), delta))

    return _pointwise(ctx, self, target, reduction, formula)


@register("aten::soft_margin_loss.default")
def aten_soft_margin_loss(ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN) -> ir.Value:
    """soft_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor: ``log1p(exp(-x t))``."""

    def formula(m: _Math, x: ir.Value, t: ir.Value) -> ir.Value:
        e = m.op("Exp", m.op("Neg", m.op("Mul", x, t)))
        if ctx.out_dtype != m.dtype:  # PyTorch's exp overflows in float16 / bfloat16 as it rounds there
            e = ctx.cast(ctx.cast(e, ctx.out_dtype), m.dtype)
        return m.log1p(e)

    return _pointwise(ctx, self, target, reduction, formula)


@register("aten::hinge_embedding_loss.default")
def aten_hinge_embedding_loss(
    ctx: NodeContext, self: ir.Value, target: ir.Value, margin: float = 1.0, reduction: int = MEAN
) -> ir.Value:
    """hinge_embedding_loss(Tensor self, Tensor target, float margin=1.0, int reduction=Mean) -> Tensor"""

    def formula(m: _Math, x: ir.Value, t: ir.Value) -> ir.Value:
        margin_part = m.where(m.op("Not", m.op("Equal", t, 1)), m.clamp_min(m.op("Sub", margin, x), 0), 0)
        self_part = m.where(m.op("Not", m.op("Equal", t, -1)), x, 0)
        return m.op("Add", margin_part, self_part)

    return _pointwise(ctx, self, target, reduction, formula)


@register("aten::margin_ranking_loss.default")
def aten_margin_ranking_loss(
    ctx: NodeContext, input1: ir.Value, input2: ir.Value, target: ir.Value, margin: float = 0.0, reduction: int = MEAN
) -> ir.Value:
    """margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, int reduction=Mean) -> Tensor"""
    m = _Math(ctx)
    diff = m.op("Sub", m(input1), m(input2))
    loss = m.clamp_min(m.op("Add", m.op("Neg", m.op("Mul", m(target), diff)), margin), 0)
    return _reduce(ctx, m, loss, reduction)


@register("aten::kl_div.default")
def aten_kl_div(
    ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN, *, log_target: bool = False
) -> ir.Value:
    """kl_div(Tensor self, Tensor target, int reduction=Mean, *, bool log_target=False) -> Tensor"""
    m = _Math(ctx)
    x, t = m(self), m(target)
    if log_target:
        loss = m.op("Mul", m.op("Exp", t), m.op("Sub", t, x))
    else:  # xlogy(t, t) - t * x, 0 where t == 0
        xlogy = m.where(m.op("Equal", t, 0), 0, m.op("Mul", t, m.op("Log", t)))
        xlogy = m.where(m.op("IsNaN", t), t, xlogy)
        loss = m.op("Sub", xlogy, m.op("Mul", t, x))
    return _reduce(ctx, m, loss, reduction)


@register("aten::poisson_nll_loss.default")
def aten_poisson_nll_loss(
    ctx: NodeContext, input: ir.Value, target: ir.Value, log_input: bool, full: bool, eps: float, reduction: int
) -> ir.Value:
    """poisson_nll_loss(Tensor input, Tensor target, bool log_input, bool full, float eps, int reduction) -> Tensor"""
    m = _Math(ctx)
    x, t = m(input), m(target)
    if log_input:
        loss = m.op("Sub", m.op("Exp", x), m.op("Mul", t, x))
    else:
        loss = m.op("Sub", x, m.op("Mul", t, m.op("Log", m.op("Add", x, eps))))
    if full:
        stirling = m.op(
            "Add",
            m.op("Sub", m.op("Mul", t, m.op("Log", t)), t),
            m.op("Mul", m.op("Log", m.op("Mul", t, 2 * math.pi)), 0.5),
        )
        loss = m.op("Add", loss, m.where(m.op("LessOrEqual", t, 1), 0, stirling))
    return _reduce(ctx, m, loss, reduction)


@register("aten::binary_cross_entropy.default")
def aten_binary_cross_entropy(
    ctx: NodeContext, self: ir.Value, target: ir.Value, weight: ir.Value | None = None, reduction: int = MEAN
) -> ir.Value:
    """binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor

    The logarithms are clamped to -100, as PyTorch.
    """
    m = _Math(ctx)
    x, t = m(self), m(target)
    log_x = m.op("Max", m.op("Log", x), -100)
    log_1mx = m.op("Max", m.log1p(m.op("Neg", x)), -100)
    loss = m.op("Sub", m.op("Mul", m.op("Sub", t, 1), log_1mx), m.op("Mul", t, log_x))
    if weight is not None:
        loss = m.op("Mul", loss, m(weight))
    return _reduce(ctx, m, loss, reduction)


@register("aten::binary_cross_entropy_with_logits.default")
def aten_binary_cross_entropy_with_logits(
    ctx: NodeContext,
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    pos_weight: ir.Value | None = None,
    reduction: int = MEAN,
) -> ir.Value:
    """binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, Tensor? pos_weight=None,
    int reduction=Mean) -> Tensor: ``(1 - t) x - w_pos log_sigmoid(x)``."""
    m = _Math(ctx)
    x, t = m(self), m(target)
    log_sig = m.log_sigmoid(x)
    if pos_weight is not None:
        log_sig = m.op("Mul", m.op("Add", m.op("Mul", m.op("Sub", m(pos_weight), 1), t), 1), log_sig)
    loss = m.op("Sub", m.op("Mul", m.op("Sub", 1, t), x), log_sig)
    if weight is not None:
        loss = m.op("Mul", loss, m(weight))
    return _reduce(ctx, m, loss, reduction)


@register("aten::cosine_embedding_loss.default")
def aten_cosine_embedding_loss(
    ctx: NodeContext, input1: ir.Value, input2: ir.Value, target: ir.Value, margin: float = 0.0, reduction: int = MEAN
) -> ir.Value:
    """cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, int reduction=Mean)
    -> Tensor: ``1 - cos`` where the target is 1, ``max(0, cos - margin)`` where it is -1."""
    m = _Math(ctx)
    a, b, t = m(input1), m(input2), m(target)
    axis = [ctx.rank(target)]
    eps = 1e-12
    dot = m.sum(m.op("Mul", a, b), axis)
    norm2 = m.op(
        "Mul", m.op("Add", m.sum(m.op("Mul", a, a), axis), eps), m.op("Add", m.sum(m.op("Mul", b, b), axis), eps)
    )
    cos = m.op("Div", dot, m.op("Sqrt", norm2))
    positive = m.where(m.op("Equal", t, 1), m.op("Sub", 1, cos), 0)
    negative = m.where(m.op("Equal", t, -1), m.clamp_min(m.op("Sub", cos, margin), 0), 0)
    return _reduce(ctx, m, m.op("Add", positive, negative), reduction)


@register("aten::triplet_margin_loss.default")
def aten_triplet_margin_loss(
    ctx: NodeContext,
    anchor: ir.Value,
    positive: ir.Value,
    negative: ir.Value,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: int = MEAN,
) -> ir.Value:
    """triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, float p=2, float eps=1e-06,
    bool swap=False, int reduction=Mean) -> Tensor"""
    m = _Math(ctx)
    rank = max(ctx.rank(anchor), ctx.rank(positive), ctx.rank(negative))

    def distance(x: ir.Value, y: ir.Value) -> ir.Value:
        return vector_norm(ctx, m.op("Add", m.op("Sub", m(x), m(y)), eps), p, [rank - 1], False)

    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = m.op("Min", d_neg, distance(positive, negative))
    loss = m.clamp_min(m.op("Sub", m.op("Add", d_pos, margin), d_neg), 0)
    return _reduce(ctx, m, loss, reduction)


@register("aten::multi_margin_loss.default")
def aten_multi_margin_loss(
    ctx: NodeContext,
    self: ir.Value,
    target: ir.Value,
    p: int = 1,
    margin: float = 1,
    weight: ir.Value | None = None,
    reduction: int = MEAN,
) -> ir.Value:
    """multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, Tensor? weight=None,
    int reduction=Mean) -> Tensor: ``max(0, margin - x[y] + x[i])^p`` over the classes ``i != y``."""
    m = _Math(ctx)
    classes = ctx.arg_val(0).shape[-1] if ctx.rank(self) else 1
    x = ctx.op("Reshape", m(self), ctx.const([-1, classes], INT64)) if ctx.rank(self) < 2 else m(self)
    index = ctx.op("Reshape", ctx.cast(target, INT64), ctx.const([-1, 1], INT64))
    picked = ctx.op("GatherElements", x, index, axis=1)
    z = m.clamp_min(m.op("Add", m.op("Sub", margin, picked), x), 0)
    if p == 2:
        z = m.op("Mul", z, z)
    if weight is not None:
        z = m.op("Mul", z, ctx.op("Gather", m(weight), index, axis=0))
    others = ctx.op("Not", ctx.op("Equal", ctx.const(list(range(classes)), INT64), index))
    z = m.where(others, z, 0)
    if reduction == MEAN:
        loss = m.op("Div", m.sum(z), ctx.cast(numel(ctx, z), m.dtype))
    elif reduction == SUM:
        loss = m.op("Div", m.sum(z), classes)
    else:
        loss = m.op("Div", m.sum(z, [1]), classes)
        if ctx.rank(self) < 2:
            loss = ctx.op("Reshape", loss, ctx.const([], INT64))
    return ctx.cast(loss, ctx.out_dtype)


@register("aten::multilabel_margin_loss.default")
def aten_multilabel_margin_loss(ctx: NodeContext, self: ir.Value, target: ir.Value, reduction: int = MEAN) -> ir.Value:
    """multilabel_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor

    The target lists class indices up to the first -1; ``sum_{j target, i not} max(0, 1 - x[j] + x[i]) / C``.
    """
    m = _Math(ctx)
    rank = ctx.rank(self)
    classes = ctx.arg_val(0).shape[-1] if rank else 1
    x, t = m(self), ctx.cast(target, INT64)
    if rank < 2:
        x, t = (ctx.op("Reshape", v, ctx.const([-1, classes], INT64)) for v in (x, t))
    idx = ctx.const(list(range(classes)), INT64)
    is_end = ctx.op("Equal", t, ctx.const(-1, INT64))
    end = ctx.op(
        "ReduceMin", ctx.op("Where", is_end, idx, ctx.const(classes, INT64)), ctx.const([-1], INT64), keepdims=1
    )
    valid = ctx.op("Less", idx, end)  # [N, C]: positions of the target list before the first -1
    safe = ctx.op("Where", valid, t, ctx.const(0, INT64))
    picked = ctx.op("GatherElements", x, safe, axis=1)  # x[n, target[n, k]]
    listed = ctx.op("Where", valid, t, ctx.const(-1, INT64))
    # is_target[n, i]: class i appears in the list of row n
    hits = ctx.op("Equal", ctx.op("Unsqueeze", listed, ctx.const([-1], INT64)), idx)  # [N, K, C]
    is_target = ctx.op("Cast", ctx.op("ReduceMax", ctx.cast(hits, INT64), ctx.const([1], INT64), keepdims=0), to=BOOL)
    # z[n, k, i] = max(0, 1 - picked[n, k] + x[n, i]) / C, for valid k and non-target i
    z = m.op(
        "Add",
        m.op("Sub", 1, ctx.op("Unsqueeze", picked, ctx.const([-1], INT64))),
        ctx.op("Unsqueeze", x, ctx.const([1], INT64)),
    )
    z = m.op("Div", m.clamp_min(z, 0), classes)
    keep = ctx.op(
        "And",
        ctx.op("Unsqueeze", valid, ctx.const([-1], INT64)),
        ctx.op("Not", ctx.op("Unsqueeze", is_target, ctx.const([1], INT64))),
    )
    per_row = m.sum(m.where(keep, z, 0), [1, 2])
    if reduction == MEAN:
        loss = m.op("Div", m.sum(per_row), ctx.cast(numel(ctx, per_row), m.dtype))
    elif reduction == SUM:
        loss = m.sum(per_row)
    else:
        loss = per_row if rank > 1 else ctx.op("Reshape", per_row, ctx.const([], INT64))
    return ctx.cast(loss, ctx.out_dtype)


# -- negative log likelihood and cross entropy -----------------------------------------------------------
def _nll(
    ctx: NodeContext, m: _Math, logp: ir.Value, target: ir.Value, weight: ir.Value | None, rank: int, ignore_index: int
) -> tuple[ir.Value, ir.Value]:
    """``(-logp[target] * w, w)`` per target element, ``w`` the class weight or 1, 0 where ignored."""
    class_axis = 0 if rank == 1 else 1
    t = ctx.cast(target, INT64)
    kept = ctx.op("Not", ctx.op("Equal", t, ctx.const(ignore_index, INT64)))
    safe = ctx.op("Where", kept, t, ctx.const(0, INT64))
    axis = ctx.const([class_axis], INT64)
    picked = ctx.op("Squeeze", ctx.op("GatherElements", logp, ctx.op("Unsqueeze", safe, axis), axis=class_axis), axis)
    w = m(1.0) if weight is None else ctx.op("Gather", m(weight), safe, axis=0)
    w = m.where(kept, w, 0)
    return m.op("Neg", m.op("Mul", picked, w)), ctx.op("Expand", w, ctx.op("Shape", t))


def _nll_reduce(ctx: NodeContext, m: _Math, loss: ir.Value, w: ir.Value, reduction: int) -> ir.Value:
    if reduction == SUM:
        return m.sum(loss)
    if reduction == MEAN:
        return m.op("Div", m.sum(loss), m.sum(w))
    return loss


@register("aten::nll_loss_nd.default", "aten::nll_loss.default", "aten::nll_loss2d.default")
def aten_nll_loss_nd(
    ctx: NodeContext,
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = MEAN,
    ignore_index: int = -100,
) -> ir.Value:
    """nll_loss_nd(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100)
    -> Tensor: the mean is weighted by the class weights of the targets not ignored."""
    m = _Math(ctx)
    loss, w = _nll(ctx, m, m(self), target, weight, ctx.rank(self), ignore_index)
    return ctx.cast(_nll_reduce(ctx, m, loss, w, reduction), ctx.out_dtype)


@register("aten::nll_loss_forward.default", "aten::nll_loss2d_forward.default")
def aten_nll_loss_forward(
    ctx: NodeContext, self: ir.Value, target: ir.Value, weight: ir.Value | None, reduction: int, ignore_index: int
) -> tuple[ir.Value, ir.Value]:
    """nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index)
    -> (Tensor output, Tensor total_weight)"""
    m = _Math(ctx)
    loss, w = _nll(ctx, m, m(self), target, weight, ctx.rank(self), ignore_index)
    total = m.sum(w) if reduction != NONE or ctx.rank(self) == 1 else m(0.0)
    return ctx.cast(_nll_reduce(ctx, m, loss, w, reduction), ctx.out_dtype), ctx.cast(total, ctx.out_dtype)


@register("aten::cross_entropy_loss.default")
def aten_cross_entropy_loss(
    ctx: NodeContext,
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = MEAN,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ir.Value:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean,
    SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor

    ``nll_loss(log_softmax(self))`` for class indices, ``-sum(log_softmax(self) * target)`` for
    probabilities, with PyTorch's label smoothing.
    """
    m = _Math(ctx)
    rank = ctx.rank(self)
    class_axis = 0 if rank == 1 else 1
    classes = ctx.arg_val(0).shape[class_axis]
    logp = ctx.op("LogSoftmax", m(self), axis=class_axis)
    w_shape = [1] * rank
    w_shape[class_axis] = -1
    weight_b = None if weight is None else ctx.op("Reshape", m(weight), ctx.const(w_shape, INT64))
    if ctx.arg_val(1).dtype.is_floating_point:  # probabilities
        t = m(target)
        if label_smoothing > 0:
            t = m.op("Add", m.op("Mul", t, 1 - label_smoothing), label_smoothing / classes)
        product = m.op("Mul", logp, t)
        if weight_b is not None:
            product = m.op("Mul", product, weight_b)
        if reduction == NONE:
            loss = m.op("Neg", m.sum(product, [class_axis]))
        else:
            loss = m.op("Neg", m.sum(product))
            if reduction == MEAN:
                batch = ctx.op("Div", numel(ctx, self), ctx.const(classes, INT64))
                loss = m.op("Div", loss, ctx.cast(batch, m.dtype))
        return ctx.cast(loss, ctx.out_dtype)
    loss, w = _nll(ctx, m, logp, target, weight, rank, ignore_index)
    nll = _nll_reduce(ctx, m, loss, w, reduction)
    if label_smoothing <= 0:
        return ctx.cast(nll, ctx.out_dtype)
    ignored = ctx.op("Equal", ctx.cast(target, INT64), ctx.const(ignore_index, INT64))
    weighted = logp if weight_b is None else m.op("Mul", logp, weight_b)
    smooth = m.where(ignored, 0, m.op("Neg", m.sum(weighted, [class_axis])))
    if reduction == SUM:
        smooth = m.sum(smooth)
    elif reduction == MEAN:
        smooth = m.op(
            "Div", m.sum(smooth), m.sum(w) if weight is not None else m.sum(ctx.cast(ctx.op("Not", ignored), m.dtype))
        )
    out = m.op("Add", m.op("Mul", nll, 1 - label_smoothing), m.op("Mul", smooth, label_smoothing / classes))
    return ctx.cast(out, ctx.out_dtype)
