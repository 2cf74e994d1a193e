"""THE ordered list of the optimization's rewrites (:data:`PIPELINE`), each with its stage and the reason for its
position, and what runs a stage of it (:func:`run_stage`).

A stage runs its rewrites in the order of the list: ``"translation"`` at the end of every translation
(``optimize=False`` included), ``"default"`` for ``optimize=True``, ``"default"`` then ``"onnxruntime"`` for
``optimize="onnxruntime"`` (:func:`~experimental.torch_interpreter.optimize.optimize_model`).

Adding a rewrite is one module (a function ``model -> int``, an onnx-ir pass, or an onnxscript rule set with
:func:`~.rewrite.rules`) and one line here, at the position its ``why`` explains.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from ..logs import quiet_dependencies
from .attention_bsd import AttentionOnBsdPass
from .attention_heads import RepeatedHeadsIntoAttentionPass
from .domains import import_ms_domain
from .gelu import GELU_RULES
from .halves_split import halves_split
from .half_islands import half_islands
from .lazy_transposes import lazy_weight_transposes
from .half_precision import cast_before_transpose, round_half_results
from .masked_rows import GUARD_AFTER_MERGE_HEADS, WhereBetweenTransposesPass
from .onnxscript_adapter import (
    CanonicalAxesPass,
    onnxscript_fusions,
    optimize_with_exact_constants,
    register_dangling_constants,
    repair_empty_reshapes,
    split_batch_transposes,
    split_constant_of_shape_casts,
)
from .norm_types import uniform_norm_types
from .packed_attention import PackedAttentionPass
from .packed_projections import PackedProjectionsPass
from .rewrite import STAGES, Rewrite, Stage, ir_pass, rules
from .rotary import RotaryPass
from .simplify import and_with_all_true, gather_on_index_grid, scalar_round_trips
from .skip_norm import unfuse_skip_norms

PIPELINE: tuple[Rewrite, ...] = (
    # -- "translation": every level, optimize=False included ----------------------------------------------------
    Rewrite("remove_unused", "translation", ir_pass(RemoveUnusedNodesPass),
            why="converters may leave values nobody reads (a view overwritten by a mutation, an unused output); "
                "first, so the rewrites after it see only what the model computes"),
    Rewrite("round_half_results", "translation", round_half_results,
            why="float16 results read in float32, cast to integers, compared, rounded or made indices keep their "
                "float16 rounding as in PyTorch (onnxruntime's CPU removes the Cast pair around an op it computes in "
                "float32); after remove_unused: a reader nobody reads would make it rewrite nodes for nothing"),
    Rewrite("cast_before_transpose", "translation", cast_before_transpose,
            why="onnxruntime 1.31 crashed on Transpose(bfloat16) -> Cast(float) -> MatMul; after remove_unused: "
                "the Transpose goes when the Cast was its last reader"),
    Rewrite("half_islands", "translation", half_islands, cleanup=True,
            why="for a model made for CUDA only: the float32 islands of a half-precision model (linear with a "
                "bias, SiLU, bfloat16 attention) computed in half precision, the form CUDA's kernels and fusions "
                "take; after cast_before_transpose, whose moved casts are island borders too"),
    # -- "default": optimize=True and "onnxruntime" ---------------------------------------------------------------
    Rewrite("lazy_weight_transposes", "default", lazy_weight_transposes,
            why="Transpose(weight) as a lazy initializer, computed when the model is saved; before the optimizer, "
                "whose folding would compute every transposed weight at once, in memory"),
    Rewrite("onnxscript_optimizer", "default", optimize_with_exact_constants,
            why="constant folding, onnxscript's default rules (no-op constants matched exactly), unused removal, "
                "common subexpressions; first: the rewrites after it see folded constants and shapes"),
    Rewrite("halves_split", "default", halves_split, cleanup=True,
            why="the two halves of a last axis sliced apart (rotate_half) as one Split, onnxscript's SlicesSplit "
                "without its search of every pair of Slice nodes; after the folding, which makes the bounds "
                "constants"),
    Rewrite("gather_on_index_grid", "default", gather_on_index_grid, cleanup=True,
            why="transformers' padding mask as GatherND over an index grid; after the folding, which makes the "
                "Range bounds and the grid's shapes constants"),
    Rewrite("and_with_all_true", "default", and_with_all_true, cleanup=True,
            why="And(x, all true) is x; after the folding, which makes the all-true side a constant"),
    Rewrite("scalar_round_trips", "default", scalar_round_trips, cleanup=True,
            why="Reshape(Squeeze(v), [1]) of a one-element v is v (a size made a Python int and a tensor "
                "again); after the folding, which makes the target shape a constant"),
    Rewrite("register_dangling_constants", "default", register_dangling_constants,
            why="repairs onnxscript's rules (Clip bounds from Max/Min in no graph: onnxruntime refuses the "
                "model); after the optimizer whose rules leave them"),
    Rewrite("split_constant_of_shape_casts", "default", split_constant_of_shape_casts,
            why="undoes onnxscript's Cast folded into a bfloat16 ConstantOfShape below opset 20 (the checker "
                "refuses it); after the optimizer that made it"),
    Rewrite("repair_empty_reshapes", "default", repair_empty_reshapes,
            why="repairs onnxscript's MaterializeReshapeShape (-1 next to 0, no runtime infers it); after the "
                "optimizer that made it"),
    # -- "onnxruntime": optimize="onnxruntime", after the "default" stage -----------------------------------------
    Rewrite("canonical_axes", "onnxruntime", ir_pass(CanonicalAxesPass),
            why="axes spelled as onnxscript's fusion patterns compare them; first: without it no RMSNorm, "
                "skip-norm or rotary pattern matches"),
    Rewrite("gelu", "onnxruntime", rules(GELU_RULES),
            why="GELU as aten::gelu's translation spells it, into com.microsoft Gelu/FastGelu; before "
                "onnxscript's fusions, whose BiasGelu fusion reads com.microsoft::Gelu"),
    Rewrite("guard_after_merge_heads", "onnxruntime", rules(GUARD_AFTER_MERGE_HEADS),
            why="the masked-row guard moved after the heads are merged; before onnxscript's fusions, whose "
                "attention patterns end with the heads merged right after softmax(QK^T)V"),
    Rewrite("onnxscript_fusions", "onnxruntime", onnxscript_fusions,
            why="onnxscript's ORT fusions (RMSNorm, skip norms, rotary, attention, GELU, FusedMatMul), retried "
                "without attention when they leave intermediate nodes; after the spellings above"),
    Rewrite("fused_matmul_batch_transposes", "onnxruntime", split_batch_transposes,
            why="undoes onnxscript's FusedMatMul batch transposes onnxruntime cannot run; right after the "
                "fusions that made them"),
    Rewrite("uniform_norm_types", "onnxruntime", uniform_norm_types,
            why="a normalization whose input and scale types differ (a half residual normalized in float32) reads "
                "its input cast to the scale's type: the skip kernels bind one type (onnxruntime refused the "
                "model), CUDA has no bfloat16 -> float32 one; right after the fusions that made them"),
    Rewrite("skip_norms_unfused", "onnxruntime", unfuse_skip_norms,
            why="residual + norm kernels whose sum is read again given back as Add + norm (slower fused on "
                "onnxruntime's CPU); after the fusions that made them"),
    Rewrite("where_between_transposes", "onnxruntime", ir_pass(WhereBetweenTransposesPass),
            why="the masked-row guard left between the fused kernel's Transpose pair transposes its condition "
                "instead; after the fusions, which make that pair"),
    Rewrite("attention_gqa", "onnxruntime", ir_pass(RepeatedHeadsIntoAttentionPass), cleanup=True,
            why="grouped-query heads given to ONNX Attention unrepeated; before attention_bsd, which needs the "
                "key and value straight from their split"),
    Rewrite("rotary_embedding", "onnxruntime", ir_pass(RotaryPass), cleanup=True,
            why="transformers' rotary embedding into RotaryEmbedding (opset 23); before attention_bsd, which "
                "moves it before the head split"),
    Rewrite("attention_bsd", "onnxruntime", ir_pass(AttentionOnBsdPass), cleanup=True,
            why="ONNX Attention on [batch, sequence, hidden] with the cache as past inputs; after the rotary "
                "and the repeated heads, before the projections are packed"),
    Rewrite("packed_projections", "onnxruntime", ir_pass(PackedProjectionsPass), cleanup=True,
            why="the query/key/value projections of one input packed into one MatMul; after attention_bsd, so "
                "that a 3-D Attention reads the Split of the packed product"),
    Rewrite("packed_attention", "onnxruntime", ir_pass(PackedAttentionPass), cleanup=True,
            why="an encoder's packed projections and attention into com.microsoft::Attention; after "
                "packed_projections, whose Split(MatMul(x, W) + b) it reads"),
    Rewrite("import_ms_domain", "onnxruntime", import_ms_domain,
            why="the com.microsoft domain imported when a node uses it; last, after every rewrite that may add one"),
)


def named(name: str) -> Rewrite:
    """The rewrite of :data:`PIPELINE` called ``name``; ``KeyError`` if none.

    Example::

        >>> from experimental.torch_interpreter.optimize.pipeline import named
        >>> named("gelu").level
        'onnxruntime'
    """
    for rewrite in PIPELINE:
        if rewrite.name == name:
            return rewrite
    raise KeyError(f"no rewrite {name!r} in the pipeline: {[r.name for r in PIPELINE]}")


def run_stage(model: ir.Model, level: Stage, pipeline: Sequence[Rewrite] | None = None) -> dict[str, int]:
    """Runs the rewrites of stage ``level`` (``"translation"``, ``"default"`` or ``"onnxruntime"``) of
    ``pipeline`` (default :data:`PIPELINE`) on ``model`` in place, in their order; returns how many changes each
    made (those that made some).

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.pipeline import run_stage
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> dead, live = ir.node("Neg", [x]), ir.node("Abs", [x])
        >>> live.outputs[0].name = "y"
        >>> model = ir.Model(ir.Graph([x], live.outputs, nodes=[dead, live], opset_imports={"": 18}), ir_version=10)
        >>> run_stage(model, "translation"), [n.op_type for n in model.graph]
        ({'remove_unused': 1}, ['Abs'])
    """
    if level not in STAGES:
        raise ValueError(f"stage {level!r}: expected one of {STAGES}")
    counts: dict[str, int] = {}
    with quiet_dependencies():  # logs.py: onnx-ir's and onnxscript's INFO lines, one per pass, kept quiet
        for rewrite in PIPELINE if pipeline is None else pipeline:
            if rewrite.level == level:
                count = rewrite.apply(model)
                if count:
                    counts[rewrite.name] = count
    return counts
