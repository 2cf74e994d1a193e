"""The rewrites of our own in the optimization levels (optimize/simplify.py, optimize/packed_projections.py...):
each one removes nodes only where the computation stays the same; the numbers are compared with eager PyTorch
on two shapes, and the cases that must stay as they are stay. Then the pipeline itself (optimize/pipeline.py):
its order and stages, the count each rewrite returns, a new rewrite added by one entry; and the onnxscript
adapter (optimize/onnxscript_adapter.py): onnxscript's optimizer and fusions as onnxscript runs them, the no-op
rules exact."""

from __future__ import annotations

import collections

import onnx_ir as ir
import onnxscript.optimizer
import pytest
import torch
from onnxscript.rewriter import ort_fusions, pattern

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.optimize import pipeline
from experimental.torch_interpreter.optimize.onnxscript_adapter import (
    FOLD_INPUT_SIZE_LIMIT,
    CanonicalAxesPass,
    optimize_with_exact_constants,
    ort_fusions_without_attention,
)
from experimental.torch_interpreter.optimize.rewrite import STAGES, Rewrite, rules
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types

MASK_DIMS = {0: "batch", 1: "seq"}


def _mask(batch, seq):
    mask = torch.rand(batch, seq, generator=torch.Generator().manual_seed(batch * seq)) > 0.3
    mask[0, 0] = False
    return mask


def _grid(mask, x):
    """transformers' padding mask: ``mask[arange(B)[:, None, None, None], arange(T)[None, None, None, :]]``"""
    b, t = torch.arange(mask.shape[0]), torch.arange(mask.shape[1])
    return torch.where(mask[b[:, None, None, None], t[None, None, None, :]], x, -x)


def _shifted_grid(mask, x):
    """the same index grid, the positions read backwards: not the mask with unit axes"""
    b, t = torch.arange(mask.shape[0]), torch.arange(mask.shape[1]).flip(0)
    return torch.where(mask[b[:, None, None, None], t[None, None, None, :]], x, -x)


def _swapped_grid(mask, x):
    """the grid's axes in the other order: a transposed mask"""
    b, t = torch.arange(mask.shape[0]), torch.arange(mask.shape[1])
    return torch.where(mask[b[None, None, None, :], t[:, None, None, None]], x.transpose(0, 3), -x.transpose(0, 3))


@pytest.mark.parametrize(("fn", "gathers"), [(_grid, 0), (_shifted_grid, 1), (_swapped_grid, 1)])
def test_gather_on_index_grid(fn, gathers):
    def inputs(batch, seq):
        return _mask(batch, seq), torch.randn(batch, 1, 1, seq)

    onx = check_model(
        Fn(fn), inputs(2, 5), dynamic_shapes=(MASK_DIMS, {0: "batch", 3: "seq"}), more_inputs=[(inputs(3, 8), None)]
    )
    assert op_types(onx).count("GatherND") == gathers, op_types(onx)


@pytest.mark.parametrize(("shape", "ands"), [((), 0), ((1, 4), 0), ((2, 3, 4), 1)])
def test_and_with_all_true(shape, ands):
    """``ones & x`` is ``x`` unless the ones broadcast ``x`` to a larger shape."""
    onx = check_model(Fn(lambda x: torch.where(torch.ones(shape, dtype=torch.bool) & (x > 0), x, 2 * x)),
                      (torch.randn(3, 4),))
    assert op_types(onx).count("And") == ands, op_types(onx)


def test_and_with_a_false_is_kept():
    ones = torch.ones(4, dtype=torch.bool)
    ones[1] = False
    onx = check_model(Fn(lambda x: torch.where(ones & (x > 0), x, 2 * x)), (torch.randn(3, 4),))
    assert "And" in op_types(onx)


def test_scalar_round_trip():
    """``Reshape(Squeeze(Shape(x)[1:2]), [1])`` is the ``Shape`` slice itself (a size used as a slice end)."""

    def inputs(rows, cols):
        return (torch.randn(rows, cols),)

    onx = check_model(Fn(lambda x: x.reshape(-1)[: x.shape[1]] * 2), inputs(2, 3), dynamic_shapes=({1: "n"},),
                      more_inputs=[(inputs(2, 7), None)])
    assert "Squeeze" not in op_types(onx) and op_types(onx).count("Reshape") == 1, op_types(onx)


class _Projections(torch.nn.Module):
    """Query/key/value projections of one input (grouped-query sizes), with or without biases, optionally a
    weight another node also reads."""

    def __init__(self, bias: bool, n: int = 3, shared: bool = False):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(16, size, bias=bias) for size in (16, 8, 8)[:n])
        self.shared = shared

    def forward(self, x):
        outs = [(i + 2) * lin(x) for i, lin in enumerate(self.linears)]
        if self.shared:
            outs.append(torch.nn.functional.linear(x * 3, self.linears[0].weight))
        return tuple(outs)


def _projection_inputs(batch, seq):
    return (torch.randn(batch, seq, 16, generator=torch.Generator().manual_seed(seq)),)


@pytest.mark.parametrize(
    ("bias", "n", "shared", "matmuls", "splits"),
    [(True, 3, False, 1, 1), (False, 3, False, 1, 1), (True, 2, False, 1, 1), (False, 2, False, 2, 0),
     (True, 3, True, 3, 1)],
)
def test_packed_projections(bias, n, shared, matmuls, splits):
    """Packed when it removes nodes: with biases from 2 projections on, without from 3; a weight another node
    reads stays unpacked (it would be stored twice), the others of its group are packed (the third MatMul is
    that other reader)."""
    torch.manual_seed(0)
    onx = check_model(
        _Projections(bias, n, shared), _projection_inputs(2, 5), dynamic_shapes=({0: "batch", 1: "seq"},),
        more_inputs=[(_projection_inputs(3, 1), None)], optimize="onnxruntime",
    )
    ops = collections.Counter(op_types(onx))
    assert ops["MatMul"] == matmuls, ops
    assert ops["Split"] == splits, ops


def test_packed_weight_is_lazy():
    """The packed weight is concatenated when the model is serialized, not before (no copy of the weights in
    the ``ir.Model`` to_onnx returns)."""
    model = to_onnx(_Projections(True), _projection_inputs(2, 5), optimize="onnxruntime", as_ir=True)
    packed = [v for name, v in model.graph.initializers.items() if "packed_weight" in name and "bias" not in name]
    assert len(packed) == 1 and isinstance(packed[0].const_value, ir.LazyTensor), list(model.graph.initializers)
    weights = [lin.weight.detach() for lin in _Projections(True).linears]
    assert packed[0].const_value.shape == ir.Shape([16, sum(w.shape[0] for w in weights)])


class _SelfAttention(torch.nn.Module):
    """An encoder's self-attention: three biased projections, the heads split, ``scaled_dot_product_attention``
    with the given mask (or causal), the heads merged."""

    def __init__(self, causal: bool = False):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(16, 16) for _ in range(3))
        self.causal = causal

    def forward(self, x, mask=None):
        split = lambda t: t.view(t.shape[0], t.shape[1], 4, 4).transpose(1, 2)  # noqa: E731
        y = torch.nn.functional.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask, is_causal=self.causal
        )
        return y.transpose(1, 2).reshape(x.shape) * 2


def _attention_inputs(batch, seq, mask):
    gen = torch.Generator().manual_seed(batch * seq)
    x = torch.randn(batch, seq, 16, generator=gen)
    if mask is None:
        return (x,)
    keep = torch.rand(batch, 1, seq, seq, generator=gen) > 0.4
    keep[0, 0, 1] = False  # a query row that sees no key: 0 in PyTorch
    if mask == "bool":
        return x, keep
    return x, torch.where(keep, 0.0, -3.0)  # an additive mask, no row hidden entirely


@pytest.mark.parametrize(
    ("mask", "causal", "fused"), [("bool", False, True), (None, False, True), ("float", False, False), (None, True, False)]
)
def test_packed_attention(mask, causal, fused):
    """com.microsoft::Attention (projection and attention in one kernel) for a boolean mask or none, rows the
    mask hides entirely set to 0 as PyTorch does; an additive mask or a causal attention stay ONNX Attention."""
    torch.manual_seed(0)
    dims = {0: "batch", 1: "seq"}
    dynamic = (dims,) if mask is None else (dims, {0: "batch", 2: "seq", 3: "seq"})
    onx = check_model(
        _SelfAttention(causal), _attention_inputs(2, 5, mask), dynamic_shapes=dynamic,
        more_inputs=[(_attention_inputs(3, 8, mask), None)], optimize="onnxruntime", check_onnx=False,
    )
    ops = collections.Counter((n.domain, n.op_type) for n in onx.graph.node)
    assert ops[("com.microsoft", "Attention")] == int(fused) and ops[("", "Attention")] == 1 - int(fused), ops
    assert ("", "MatMul") not in ops if fused else ops[("", "Split")] == 1, ops


def test_bert_sample_without_tokens():
    """A BERT batch where one sample's attention mask is all zeros: eager PyTorch gives that sample's attention
    0, so does the onnxruntime level (com.microsoft::Attention and its guard), on two shapes."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  vocab_size=100, max_position_embeddings=64)

    def inputs(batch, seq):
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[0] = 0
        mask[-1, seq // 2 :] = 0
        ids = torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(seq))
        return {"input_ids": ids, "attention_mask": mask}

    dims = {0: "batch", 1: "seq"}
    onx = check_model(
        transformers.BertModel(cfg), (), inputs(2, 6), dynamic_shapes={"input_ids": dims, "attention_mask": dims},
        more_inputs=[((), inputs(3, 9))], optimize="onnxruntime", check_onnx=False, atol=1e-4,
    )
    ops = collections.Counter((n.domain, n.op_type) for n in onx.graph.node)
    assert ops[("com.microsoft", "Attention")] == 2 and ("", "GatherND") not in ops, ops


class _BlockAttention(torch.nn.Module):
    """Inkling-2's attention over blocks: one learned query per position against two states, the positions as
    the heads (a symbolic number of heads). onnxscript's attention fusion marks it as its intermediate
    ``SDPA`` node and cannot make a kernel of it: onnxruntime refused the model."""

    def __init__(self):
        super().__init__()
        self.query = torch.nn.Parameter(torch.randn(16))

    def forward(self, states):
        q = self.query.view(1, 16).expand(*states.shape[:-2], -1, -1)
        weights = torch.softmax(torch.matmul(q, states.transpose(2, 3)) * 0.25, dim=-1)
        return torch.matmul(weights, states) * 2


def test_no_intermediate_fusion_node_left():
    torch.manual_seed(0)
    onx = check_model(
        _BlockAttention(), (torch.randn(2, 5, 3, 16),), dynamic_shapes=({0: "batch", 1: "seq"},),
        more_inputs=[((torch.randn(3, 7, 3, 16),), None)], optimize="onnxruntime", check_onnx=False,
    )
    assert not [n for n in onx.graph.node if n.domain.startswith("ai.onnxruntime")], op_types(onx)


class _TimeMajorHead(torch.nn.Module):
    """XLNet's language-model head: ``[seq, batch, hidden]`` states transposed to ``[batch, seq, hidden]`` into
    a Linear whose weight is the embedding's (tied: its ``Transpose`` stays a node). onnxscript folds both
    transposes into ``FusedMatMul(transB=1, transBatchA=1)``, which onnxruntime cannot run with a 2-D weight."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 16)
        self.head = torch.nn.Linear(16, 1000, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids).permute(1, 0, 2))


def test_fused_matmul_batch_transpose_runs():
    def ids(seq, batch):
        return (torch.randint(0, 1000, (seq, batch), generator=torch.Generator().manual_seed(seq)),)

    onx = check_model(
        _TimeMajorHead(), ids(5, 2), dynamic_shapes=({0: "seq", 1: "batch"},), more_inputs=[(ids(7, 3), None)],
        optimize="onnxruntime", check_onnx=False,
    )
    fused = [n for n in onx.graph.node if n.op_type == "FusedMatMul"]
    assert fused and all(a.i == 0 for n in fused for a in n.attribute if a.name.startswith("transBatch")), fused


# -- the pipeline ------------------------------------------------------------------------------------------------

#: the pipeline as the documentation gives it (``_doc/design.rst``): (name, stage), in the order they run
DOCUMENTED_PIPELINE = [
    ("remove_unused", "translation"),
    ("round_half_results", "translation"),
    ("cast_before_transpose", "translation"),
    ("half_islands", "translation"),
    ("lazy_weight_transposes", "default"),
    ("onnxscript_optimizer", "default"),
    ("halves_split", "default"),
    ("gather_on_index_grid", "default"),
    ("and_with_all_true", "default"),
    ("scalar_round_trips", "default"),
    ("register_dangling_constants", "default"),
    ("split_constant_of_shape_casts", "default"),
    ("repair_empty_reshapes", "default"),
    ("canonical_axes", "onnxruntime"),
    ("gelu", "onnxruntime"),
    ("guard_after_merge_heads", "onnxruntime"),
    ("onnxscript_fusions", "onnxruntime"),
    ("fused_matmul_batch_transposes", "onnxruntime"),
    ("uniform_norm_types", "onnxruntime"),
    ("skip_norms_unfused", "onnxruntime"),
    ("where_between_transposes", "onnxruntime"),
    ("attention_gqa", "onnxruntime"),
    ("rotary_embedding", "onnxruntime"),
    ("attention_bsd", "onnxruntime"),
    ("packed_projections", "onnxruntime"),
    ("packed_attention", "onnxruntime"),
    ("import_ms_domain", "onnxruntime"),
]


def test_pipeline_order_and_stages():
    """The order and stages are the documented ones; each stage is one block, in the order the stages run; each
    rewrite says why it is there."""
    assert [(r.name, r.level) for r in pipeline.PIPELINE] == DOCUMENTED_PIPELINE
    levels = [r.level for r in pipeline.PIPELINE]
    assert levels == sorted(levels, key=STAGES.index)
    assert all(len(r.why) > 20 for r in pipeline.PIPELINE), [r.name for r in pipeline.PIPELINE if len(r.why) <= 20]
    with pytest.raises(ValueError, match="level='fast'"):
        Rewrite("fast", "fast", lambda model: 0, why="no such stage")


def test_each_rewrite_returns_a_count():
    """Every rewrite, applied in the pipeline's order to the raw translation of an encoder's self-attention,
    returns a count; those that apply to it count what they did."""
    torch.manual_seed(0)
    model = to_onnx(_SelfAttention(), _attention_inputs(2, 5, "bool"), target_opset=23, optimize=False, as_ir=True)
    counts = {}
    for rewrite in pipeline.PIPELINE:
        counts[rewrite.name] = rewrite.apply(model)
        assert isinstance(counts[rewrite.name], int) and counts[rewrite.name] >= 0, (rewrite.name, counts)
    fired = {name for name, count in counts.items() if count}
    assert {"onnxscript_optimizer", "attention_bsd", "packed_projections", "packed_attention"} <= fired, counts
    assert {(n.domain, n.op_type) for n in model.graph} >= {("com.microsoft", "Attention")}


def _abs_of_abs(op, x):
    return op.Abs(op.Abs(x))


def _abs(op, x, **_):
    return op.Abs(x)


#: the module of a new rewrite: its rules
ABS_OF_ABS = pattern.RewriteRuleSet([pattern.RewriteRule(_abs_of_abs, _abs)])


def test_a_new_rewrite_is_one_module_and_one_line(monkeypatch):
    """A new rewrite: its rules (``ABS_OF_ABS`` above) and one entry in ``PIPELINE``; ``to_onnx`` then runs it."""
    model, x = Fn(lambda x: x.abs().abs() * 2), torch.randn(3, 4)
    assert op_types(to_onnx(model, (x,))).count("Abs") == 2
    entry = Rewrite("abs_of_abs", "default", rules(ABS_OF_ABS), why="Abs(Abs(x)) is Abs(x); after the folding")
    monkeypatch.setattr(pipeline, "PIPELINE", (*pipeline.PIPELINE, entry))
    assert op_types(check_model(model, (x,))).count("Abs") == 1
    raw = to_onnx(model, (x,), optimize=False, as_ir=True)
    assert pipeline.run_stage(raw, "default") == {"onnxscript_optimizer": 1, "abs_of_abs": 1}


# -- the onnxscript adapter --------------------------------------------------------------------------------------


def _near_no_ops(x):
    """``x * 1``, ``x + 0``, ``x / 1``, ``x - 0`` (no-ops onnxscript removes), the same with constants off by
    less than onnxscript's tolerance (not no-ops), and shape ops its other rules fold."""
    y = ((x * 1 + 0) / 1 - 0).reshape(-1).reshape(x.shape).transpose(0, 1).transpose(0, 1)
    return y + 1e-9, y * 1.000001


def test_optimizer_is_onnxscripts_with_exact_no_ops():
    """``optimize_with_exact_constants`` is onnxscript's optimizer, its no-op rules matching their constant
    exactly: the same graph as ``onnxscript.optimizer.optimize`` once the near no-ops are taken out, which
    onnxscript removes and we keep (the values change: ``1 / (x + 1e-12)`` is not ``1 / x``)."""
    raw = to_onnx(Fn(_near_no_ops), (torch.randn(2, 3),), optimize=False, as_ir=True)
    ours, theirs = raw.clone(), raw.clone()
    optimize_with_exact_constants(ours)
    onnxscript.optimizer.optimize(theirs, input_size_limit=FOLD_INPUT_SIZE_LIMIT)
    assert [n.op_type for n in ours.graph] == ["Add", "Mul"], [n.op_type for n in ours.graph]
    assert [n.op_type for n in theirs.graph] == ["Identity", "Identity"], [n.op_type for n in theirs.graph]
    exact = to_onnx(Fn(lambda x: ((x * 1 + 0) / 1 - 0).reshape(-1).reshape(x.shape).transpose(0, 1).transpose(0, 1)
                       * 2), (torch.randn(2, 3),), optimize=False, as_ir=True)
    ours, theirs = exact.clone(), exact.clone()
    optimize_with_exact_constants(ours)
    onnxscript.optimizer.optimize(theirs, input_size_limit=FOLD_INPUT_SIZE_LIMIT)
    assert ir.to_proto(ours) == ir.to_proto(theirs)


class _NormGeluNorm(torch.nn.Module):
    """RMSNorm, Linear, GELU, LayerNorm after a residual: onnxscript's fusions without attention."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(16))
        self.linear, self.norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        return self.norm(x + torch.nn.functional.gelu(self.linear(h)))


def test_ort_fusions_without_attention_is_onnxscripts():
    """Where there is no attention, the retry's fusions are onnxscript's ``optimize_for_ort`` exactly."""
    torch.manual_seed(0)
    model = to_onnx(_NormGeluNorm(), (torch.randn(2, 5, 16),), as_ir=True)
    CanonicalAxesPass()(model)
    ours, theirs = model.clone(), model.clone()
    counts = ort_fusions_without_attention(ours)
    _, expected = ort_fusions.optimize_for_ort(theirs)
    assert counts == expected, (counts, expected)
    assert counts["rms_normalization"] == counts["skip_layer_normalization"] == 1, counts
    assert ir.to_proto(ours) == ir.to_proto(theirs)
