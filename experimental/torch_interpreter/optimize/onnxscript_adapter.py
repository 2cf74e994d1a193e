"""Everything the pipeline does to work with onnxscript (written against onnxscript 0.7.2): how its optimizer and
fusions are called, how our graphs are spelled for its patterns, and what is repaired, undone or retried after
it. Public onnxscript API only (``onnxscript.optimizer``, ``onnxscript.rewriter``, its rule and fusion modules);
each item names the onnxscript version whose behaviour it works around.

Calls:

* :func:`optimize_with_exact_constants`: onnxscript's optimizer (``onnxscript.optimizer.optimize``: constant
  folding, its default rewrite rules, unused removal, constants lifted, initializers deduplicated, common
  subexpressions merged), its default rules taken from ``onnxscript.rewriter.rules.common`` with the no-op rules
  (``x * 1``, ``x + 0``...) written again to match their constant exactly (:data:`EXACT_NO_OP_RULES`);
* :func:`onnxscript_fusions`: onnxscript's ORT fusions (``optimize_for_ort``) on a copy, retried without its
  attention fusion (:func:`ort_fusions_without_attention`) when they leave intermediate nodes.

Spelling: :class:`CanonicalAxesPass` writes axes as onnxscript 0.7.2's fusion patterns compare them.

Repairs and undos: :func:`register_dangling_constants`, :func:`split_constant_of_shape_casts`,
:func:`repair_empty_reshapes` (after the optimizer), :func:`split_batch_transposes` (after the fusions).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxscript.optimizer
from onnx_ir.passes import InPlacePass, PassManager, PassResult, Sequential
from onnx_ir.passes.common import (
    CommonSubexpressionEliminationPass,
    DeduplicateInitializersPass,
    InlinePass,
    LiftConstantsToInitializersPass,
    LiftSubgraphInitializersToMainGraphPass,
    NameFixPass,
    OutputFixPass,
    RemoveInitializersFromInputsPass,
    RemoveUnusedFunctionsPass,
    RemoveUnusedNodesPass,
    RemoveUnusedOpsetsPass,
    ShapeInferencePass,
)
from onnxscript.rewriter import RewritePass, ort_fusions, pattern, rewrite
from onnxscript.rewriter.ort_fusions import (
    attention,
    bias_gelu,
    cos_sin_cache,
    erfgelu,
    gelu,
    gqa,
    gqa_packed_qkv,
    mha,
    mha_bias,
    mha_scale,
    rms_normalization,
    rotary_embedding,
    sdpa_via_mha,
    shape_optimization,
    skip_normalization,
)
from onnxscript.rewriter.rules import common

from ..errors import ConversionError
from ..names import unique_name
from ..provenance import copy_provenance
from .graph_match import dims, int64s, typed
from .lazy_transposes import kept_in_place
from .orphan_uses import ReleaseOrphanUsesPass
from .rewrite import CountingPass

logger = logging.getLogger(__name__)

# -- onnxscript's optimizer, with exact no-op rules --------------------------------------------------------------

#: the largest constant (elements) onnxscript folds an op into; larger ones (the weights) are left to the
#: runtime, which folds ``Transpose(weight)`` when it loads the model: folding here would copy the weights
FOLD_INPUT_SIZE_LIMIT = 8192


def _exact(value: float) -> pattern.Constant:
    return pattern.Constant(value, rel_tol=0.0, abs_tol=0.0)


def _identity(op: Any, x: ir.Value, **_: Any) -> ir.Value:
    return op.Identity(x)


#: onnxscript 0.7.2's no-op rules (``onnxscript.rewriter.rules.common``: ``mul_by_1_rule``, ``add_0_rule``,
#: ``sub_0_rule``, ``div_by_1_rule``) with their constant matched exactly. onnxscript compares a pattern's constant
#: with ``math.isclose(rel_tol=1e-5, abs_tol=1e-8)``: its rules removed ``x + 1e-8`` as ``x + 0``
#: (``poisson_nll_loss``'s ``log(x + eps)`` gave ``inf`` for ``x = 0``) and would remove ``x * 1.000001`` as
#: ``x * 1``. Same patterns, same order, commuted as onnxscript commutes them.
EXACT_NO_OP_RULES: tuple[pattern.RewriteRule, ...] = (
    *pattern.RewriteRule(lambda op, x: op.Mul(x, _exact(1)), _identity).commute(),
    *pattern.RewriteRule(lambda op, x: op.Add(x, _exact(0)), _identity).commute(),
    pattern.RewriteRule(lambda op, x: op.Sub(x, _exact(0)), _identity),
    pattern.RewriteRule(lambda op, x: op.Div(x, _exact(1)), _identity),
)

#: onnxscript 0.7.2's default rewrite rules (what ``onnxscript.optimizer.optimize`` applies), in its order, from
#: the public rule objects, the no-op rules replaced by :data:`EXACT_NO_OP_RULES`. The other rules with a
#: constant in their pattern (``squeeze_reshape_1d_rule``, ``no_op_dynamic_scatter_nd_rule``) compare an int64
#: shape or index, which the tolerance cannot confuse with another integer.
GENERIC_RULES: tuple[pattern.RewriteRule, ...] = (
    *EXACT_NO_OP_RULES,
    common.dropout_zero_rule,
    common.dropout_inference_rule,
    common.two_reshapes_matmul_reshape_rule,
    common.one_reshape_matmul_reshape_rule,
    common.cast_constant_of_shape_rule,
    common.cast_constant_of_shape_without_value_rule,
    common.collapse_slice_rule,
    common.collapse_slice2_rule,
    common.materialize_reshape_shape_rule,
    common.min_min_rule,
    common.max_max_rule,
    common.min_max_rule,
    common.max_min_rule,
    common.successive_clip_relu_rule,
    common.successive_relu_clip_rule,
    common.successive_relu_rule,
    common.successive_clip_rule,
    common.cast_cast_rule,
    common.no_op_cast_rule,
    common.no_op_expand_rule,
    common.flatten_to_reshape_rule,
    common.reshape_reshape_rule,
    common.no_op_transpose_rule,
    common.transpose_transpose_rule,
    common.unsqueeze_unsqueeze_rule,
    common.squeeze_reshape_1d_rule,
    common.no_op_dynamic_scatter_nd_rule,
    common.no_op_static_scatter_nd_rule,
    common.normalize_pad_format_conv_rule,
    common.normalize_pad_format_conv_integer_rule,
    common.fuse_pad_into_conv_rule,
    common.fuse_pad_into_conv_integer_rule,
    common.fuse_batchnorm_into_conv_rule,
    common.fuse_batchnorm_into_conv_transpose_rule,
    common.fuse_batchnorm_into_gemm_rule,
    common.remove_optional_bias_from_conv_rule,
    common.remove_optional_bias_from_conv_transpose_rule,
    common.remove_optional_bias_from_qlinear_conv_rule,
    common.remove_optional_bias_from_gemm_rule,
)


class _FoldConstantsPass(InPlacePass):
    """onnxscript's constant folding (``onnxscript.optimizer.fold_constants_ir``), with ONNX shape inference."""

    def call(self, model: ir.Model) -> PassResult:
        return onnxscript.optimizer.fold_constants_ir(
            model, onnx_shape_inference=True, input_size_limit=FOLD_INPUT_SIZE_LIMIT,
            should_fold=lambda node: False if kept_in_place(node) else None,
        )


def optimize_with_exact_constants(model: ir.Model) -> int:
    """onnxscript 0.7.2's optimizer on ``model`` in place (``onnxscript.optimizer.optimize``, the passes of its
    ``optimize_ir`` in their order) with :data:`GENERIC_RULES` as its rewrite rules; returns 1 when it changed the
    model, else 0. The model keeps its inputs, outputs and node metadata.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import optimize_with_exact_constants
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> two = ir.node("Constant", [], attributes={"value": ir.tensor([2.0])})
        >>> tiny = ir.node("Constant", [], attributes={"value": ir.tensor(np.array(1e-9, dtype=np.float32))})
        >>> a = ir.node("Mul", [x, two.outputs[0]])
        >>> b = ir.node("Mul", [x, two.outputs[0]])
        >>> s = ir.node("Add", [a.outputs[0], b.outputs[0]])
        >>> eps = ir.node("Add", [s.outputs[0], tiny.outputs[0]])
        >>> eps.outputs[0].name = "y"
        >>> g = ir.Graph([x], eps.outputs, nodes=[two, tiny, a, b, s, eps], opset_imports={"": 18})
        >>> model = ir.Model(g, ir_version=10)
        >>> optimize_with_exact_constants(model), [n.op_type for n in model.graph]  # x + 1e-9 is not x + 0
        (1, ['Mul', 'Add', 'Add'])
    """
    optimizer = Sequential(
        InlinePass(),
        PassManager(
            [
                _FoldConstantsPass(),
                RewritePass(pattern.RewriteRuleSet(GENERIC_RULES)),
                ReleaseOrphanUsesPass(),  # the branch a folded If did not take still read outer values
                RemoveUnusedNodesPass(),
                RemoveUnusedFunctionsPass(),
                RemoveUnusedOpsetsPass(),
            ],
            steps=2,
            early_stop=True,
        ),
        RemoveUnusedNodesPass(),
        LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        LiftSubgraphInitializersToMainGraphPass(),
        DeduplicateInitializersPass(),
        CommonSubexpressionEliminationPass(),
        OutputFixPass(),
        NameFixPass(),
    )
    return int(optimizer(model).modified)  # its folding's warnings kept quiet by pipeline.run_stage


# -- repairs after the optimizer --------------------------------------------------------------------------------


def register_dangling_constants(model: ir.Model) -> int:
    """Makes initializers of the constants that nodes read but no graph holds; returns how many.

    onnxscript 0.7's rewrite rules may give a node a constant input (the bounds of a ``Clip`` made from
    ``Max``/``Min``) without adding it to any graph: onnxruntime then refuses the model ("not a graph input,
    initializer, or output of a previous node"). Such a value becomes an initializer of the main graph, which
    every subgraph sees. An input with neither producer nor value is a broken model: :class:`ConversionError`.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import register_dangling_constants
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> low = ir.Value(name="low", const_value=ir.tensor(0.0))
        >>> clip = ir.node("Clip", [x, low])
        >>> g = ir.Graph([x], clip.outputs, nodes=[clip], opset_imports={"": 18})
        >>> register_dangling_constants(ir.Model(g, ir_version=10)), list(g.initializers)
        (1, ['low'])
    """
    main = model.graph
    added = 0
    for node in ir.traversal.RecursiveGraphIterator(main):
        for value in node.inputs:
            if value is None or value.producer() is not None or value.graph is not None:
                continue  # a node's output, or a graph input or initializer
            if value.const_value is None:
                raise ConversionError(
                    f"the optimizer left node {node.name!r} ({node.op_type}) reading {value.name!r}, which nothing "
                    "produces; export with optimize=False and report this model"
                )
            value.name = unique_name(value.name or "dangling_constant", main.initializers)
            main.register_initializer(value)
            added += 1
    if added:
        logger.debug("%d dangling constant(s) registered as initializers", added)
    return added


#: element types ConstantOfShape takes only from opset 20 on
_CONSTANT_OF_SHAPE_20 = frozenset(
    {ir.DataType.BFLOAT16, ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
     ir.DataType.FLOAT8E5M2FNUZ}
)


def split_constant_of_shape_casts(model: ir.Model) -> int:
    """Gives back the ``Cast`` that onnxscript 0.7.2's optimizer (``cast_constant_of_shape_rule``) folded into a
    ``ConstantOfShape`` of a type the model's opset does not allow it (bfloat16 before opset 20: the checker
    refuses the model); returns how many.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import split_constant_of_shape_casts
        >>> shape = ir.val("shape", ir.DataType.INT64, [2])
        >>> fill = ir.tensor(np.array([1.0], dtype=ir.DataType.BFLOAT16.numpy()), dtype=ir.DataType.BFLOAT16)
        >>> node = ir.node("ConstantOfShape", [shape], attributes={"value": fill})
        >>> g = ir.Graph([shape], node.outputs, nodes=[node], opset_imports={"": 18})
        >>> split_constant_of_shape_casts(ir.Model(g, ir_version=10)), [n.op_type for n in g]
        (1, ['ConstantOfShape', 'Cast'])
    """
    if model.opset_imports.get("", 0) >= 20:
        return 0
    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        value = node.attributes.get("value")
        if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or value is None:
            continue
        tensor = value.as_tensor()
        if tensor.dtype not in _CONSTANT_OF_SHAPE_20:
            continue
        as_float = ir.tensor(tensor.numpy().astype("float32"), dtype=ir.DataType.FLOAT)
        fill = ir.node("ConstantOfShape", list(node.inputs), attributes={"value": as_float}, name=node.name)
        copy_provenance(node, fill)
        fill.outputs[0].dtype = ir.DataType.FLOAT
        fill.outputs[0].shape = node.outputs[0].shape
        cast = ir.node("Cast", fill.outputs, attributes={"to": tensor.dtype}, name=f"{node.name}/cast")
        copy_provenance(node, cast)
        old = node.outputs[0]
        new = cast.outputs[0]
        new.dtype, new.shape = old.dtype, old.shape
        graph = node.graph
        graph.insert_before(node, [fill, cast])
        if old.is_graph_output():
            outputs = graph.outputs
            for i, out in enumerate(outputs):
                if out is old:
                    outputs[i] = new
        old.replace_all_uses_with(new)
        new.name = old.name
        graph.remove(node, safe=True)
        changed += 1
    return changed


def repair_empty_reshapes(model: ir.Model) -> int:
    """Gives a dynamic size back to the ``Reshape`` nodes whose shape onnxscript's optimizer made a constant
    holding both ``-1`` and ``0`` (``allowzero=1``): onnxscript 0.7.2's ``MaterializeReshapeShape`` rule writes
    ``-1`` for the one symbolic dimension, which no runtime can infer next to a 0 (onnxruntime refuses the model:
    "Product cannot be 0 in combination with -1"). The ``-1`` becomes the size of an axis with the same symbolic
    dimension, of the reshaped value or of a model input; returns how many nodes changed. Without such an
    axis: :class:`ConversionError`.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import repair_empty_reshapes
        >>> x = ir.val("x", ir.DataType.FLOAT, ["n", 1, 0])
        >>> node = ir.node("Reshape", [x, ir.Value(name="s", const_value=ir.tensor(np.array([-1, 0])))],
        ...                attributes={"allowzero": 1})
        >>> node.outputs[0].shape = ir.Shape(["n", 0])
        >>> g = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 18})
        >>> repair_empty_reshapes(ir.Model(g, ir_version=10)), [n.op_type for n in g]
        (1, ['Shape', 'Concat', 'Reshape'])
    """
    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
            continue
        allowzero = node.attributes.get("allowzero")
        if allowzero is None or allowzero.as_int() != 1:  # 0 copies the input's size: valid next to -1
            continue
        target = node.inputs[1].const_value if node.inputs[1] is not None else None
        if target is None:
            continue
        shape = [int(d) for d in target.numpy().reshape(-1)]
        if -1 not in shape or 0 not in shape:
            continue
        data, out = node.inputs[0], node.outputs[0]
        k = shape.index(-1)
        wanted = out.shape[k] if out.shape is not None and len(out.shape) == len(shape) else None
        found = _axis_of(wanted, [data, *model.graph.inputs])
        if found is None:
            raise ConversionError(
                f"the optimizer made Reshape {node.name!r} a constant shape {shape} with -1 next to 0, which no "
                "runtime can infer; export with optimize=False and report this model"
            )
        source, axis = found
        size = ir.node("Shape", [source], attributes={"start": axis, "end": axis + 1}, name=f"{node.name}/size")
        before = ir.Value(name=f"{node.name}_before", const_value=ir.tensor(np.array(shape[:k], dtype=np.int64)))
        after = ir.Value(name=f"{node.name}_after", const_value=ir.tensor(np.array(shape[k + 1 :], dtype=np.int64)))
        for v in (before, after):
            model.graph.register_initializer(v)
        concat = ir.node("Concat", [before, size.outputs[0], after], attributes={"axis": 0}, name=f"{node.name}/shape")
        copy_provenance(node, size, concat)
        node.graph.insert_before(node, [size, concat])
        node.replace_input_with(1, concat.outputs[0])
        changed += 1
    return changed


def _axis_of(dim: Any, values: list[ir.Value]) -> tuple[ir.Value, int] | None:
    """The first value of ``values`` and its axis whose size is the symbolic dimension ``dim``."""
    if dim is None or isinstance(dim, int):
        return None
    for value in values:
        for axis, d in enumerate(value.shape or []):
            if not isinstance(d, int) and d.value is not None and d == dim:
                return value, axis
    return None


# -- spelling for onnxscript's fusion patterns ------------------------------------------------------------------

_REDUCE = frozenset(
    {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"}
)


def _rank(value: ir.Value | None) -> int | None:
    return len(value.shape) if value is not None and value.shape is not None else None


class CanonicalAxesPass(CountingPass):
    """Writes axes as onnxscript 0.7.2's ORT fusion patterns compare them (they spell axes the way
    ``torch.onnx.export`` writes them): negative ``Concat`` axis and reduction axes (the input's rank known),
    explicit ``noop_with_empty_axes=0`` on reductions with axes, explicit unit ``steps`` on ``Slice``. Same
    computation, another spelling; main graph only (the fusions do not look into subgraphs); ``count`` is the
    nodes respelled. Without it no RMSNorm or skip-norm pattern matches the graphs of ``to_onnx``:

    * ``ReduceMean(x, axes=[-1], noop_with_empty_axes=0)``: the RMSNorm pattern compares the axes and the
      attribute literally, the translation writes the positive axis (``[2]``) and leaves the attribute out;
    * ``Concat(..., axis=-1)``: the rotary pattern's ``rotate_half``;
    * ``Slice(x, starts, ends, axes, steps)`` with explicit unit steps: the rotary pattern lists five inputs.

    Written by hand: it edits attributes and inputs of the nodes in place and replaces none.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import CanonicalAxesPass
        >>> x = ir.val("x", ir.DataType.FLOAT, [2, 3])
        >>> concat = ir.node("Concat", [x, x], attributes={"axis": 1})
        >>> concat.outputs[0].shape = ir.Shape([2, 6])
        >>> g = ir.Graph([x], concat.outputs, nodes=[concat], opset_imports={"": 18})
        >>> axes = CanonicalAxesPass()
        >>> _ = axes(ir.Model(g, ir_version=10))
        >>> axes.count, concat.attributes["axis"].value
        (1, -1)
    """

    def rewrite(self, model: ir.Model) -> int:
        graph = model.graph
        count = 0
        for node in list(graph):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Concat":
                count += self._concat(node)
            elif node.op_type in _REDUCE:
                count += self._reduce(graph, node)
            elif node.op_type == "Slice":
                count += self._slice(graph, node)
        return count

    @staticmethod
    def _concat(node: ir.Node) -> bool:
        rank = _rank(node.outputs[0])
        attr = node.attributes.get("axis")
        if rank is None or attr is None or attr.value < 0:
            return False
        node.attributes["axis"] = ir.AttrInt64("axis", attr.value - rank)
        return True

    @staticmethod
    def _reduce(graph: ir.Graph, node: ir.Node) -> bool:
        axes = node.inputs[1] if len(node.inputs) > 1 else None
        if axes is None or axes.const_value is None:
            return False
        modified = False
        if "noop_with_empty_axes" not in node.attributes:
            node.attributes["noop_with_empty_axes"] = ir.AttrInt64("noop_with_empty_axes", 0)
            modified = True
        rank = _rank(node.inputs[0])
        values = [int(a) for a in axes.const_value.numpy().reshape(-1)]
        if rank is not None and any(a >= 0 for a in values):
            node.replace_input_with(1, int64s(graph, f"{axes.name}_neg", [a - rank if a >= 0 else a for a in values]))
            modified = True
        return modified

    @staticmethod
    def _slice(graph: ir.Graph, node: ir.Node) -> bool:
        if len(node.inputs) not in (3, 4) or node.inputs[1] is None:
            return False
        starts = node.inputs[1]
        n = starts.shape[0] if starts.shape is not None and len(starts.shape) == 1 else None
        if not isinstance(n, int):
            return False
        if len(node.inputs) == 3:  # default axes: 0..n-1
            node.resize_inputs(4)
            node.replace_input_with(3, int64s(graph, "slice_axes", list(range(n))))
        node.resize_inputs(5)
        node.replace_input_with(4, int64s(graph, "slice_steps", [1] * n))
        return True


# -- onnxscript's ORT fusions, and their retry ------------------------------------------------------------------

#: the domain of the intermediate nodes of onnxscript's fusions (``SDPA``...), which no runtime implements
FUSION_DOMAIN = "ai.onnxruntime._fusion"


def _fusion_leftovers(model: ir.Model) -> list[str]:
    return sorted({n.op_type for n in model.graph.all_nodes() if n.domain == FUSION_DOMAIN})


def ort_fusions_without_attention(model: ir.Model) -> dict[str, int]:
    """onnxscript 0.7.2's ``optimize_for_ort`` (the steps of its ``_core`` module in their order, through the
    public fusion modules) without its ``SDPA`` fusion (and so without the attention kernels made from it), in
    place; returns its counts.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import (
        ...     CanonicalAxesPass, ort_fusions_without_attention)
        >>> class RMSNorm(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = torch.nn.Parameter(torch.ones(8))
        ...     def forward(self, x):
        ...         return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        >>> m = to_onnx(RMSNorm(), (torch.randn(2, 3, 8),), as_ir=True)
        >>> _ = CanonicalAxesPass()(m)
        >>> {k: v for k, v in ort_fusions_without_attention(m).items() if v}
        {'rms_normalization': 1}
    """
    rewrite(model, [common.gemm_to_matmul_add_rule])
    ShapeInferencePass()(model)
    onnxscript.optimizer.optimize(model)
    shape_optimization.rules.apply_to_model(model)
    onnxscript.optimizer.optimize(model)
    counts = {
        "erf_gelu": erfgelu.fuse_erfgelu(model, debug=False),
        "rms_normalization": rms_normalization.fuse_rms_normalization(model, debug=False),
        "skip_layer_normalization": skip_normalization.fuse_skip_layer_normalization(model, debug=False),
        "skip_rms_normalization": skip_normalization.fuse_skip_rms_normalization(model, debug=False),
        "rotary_embedding": rotary_embedding.fuse_rotary_embedding(model, debug=False),
        "cos_sin_cache": cos_sin_cache.fuse_cos_sin_cache(model, debug=False),
    }
    CommonSubexpressionEliminationPass()(model)
    counts["partial_rotary_embedding"] = rotary_embedding.fuse_partial_rotary_embedding(model, debug=False)
    counts["sdpa"] = 0  # the fusion left out
    counts["gqa"] = gqa.fuse_gqa(model, debug=False)
    counts["packed_qkv_for_gqa"] = gqa_packed_qkv.fuse_qkv_gqa(model, debug=False)
    counts["mha1"] = mha.fuse_mha1(model, debug=False)
    counts["mha2"] = mha.fuse_mha2(model, debug=False)
    counts["mha_scale"] = mha_scale.fuse_mha_scale(model, debug=False)
    if counts["mha1"] == 0 and counts["mha2"] == 0:
        counts["mha_bias"] = counts["attention"] = 0
    else:
        counts["mha_bias"] = mha_bias.fuse_mha_bias(model, debug=False)
        counts["attention"] = attention.fuse_attention(model, debug=False)
    counts["gelu"] = gelu.fuse_gelu(model, debug=False)
    counts["bias_gelu"] = bias_gelu.fuse_bias_gelu(model, debug=False)
    counts["sdpa_via_mha"] = sdpa_via_mha.replace_sdpa_by_mha(model, debug=False)
    onnxscript.optimizer.optimize(model)
    rewrite(model, ort_fusions.ORT_PATTERN_REWRITE_RULES)
    Sequential(
        LiftConstantsToInitializersPass(lift_all_constants=False, size_limit=1),
        RemoveInitializersFromInputsPass(),
        ShapeInferencePass(),
    )(model)
    return counts


def onnxscript_fusions(model: ir.Model) -> int:
    """onnxscript's ``optimize_for_ort`` on ``model``, in place; returns how many fusions it made (their
    counts are logged).

    Its attention fusion first marks ``softmax(QK^T)V`` as an intermediate ``SDPA`` node (domain
    :data:`FUSION_DOMAIN`), then turns it into a kernel; where it cannot (onnxscript 0.7.2, Inkling-2's attention:
    a query of one head against keys of two), the node stays and onnxruntime refuses the model. The fusions then
    run again on the graph as it was, without the attention fusion; if intermediate nodes still stay, without
    onnxscript's fusions at all (the rewrites of our own still apply).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import CanonicalAxesPass, onnxscript_fusions
        >>> class RMSNorm(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = torch.nn.Parameter(torch.ones(8))
        ...     def forward(self, x):
        ...         return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        >>> m = to_onnx(RMSNorm(), (torch.randn(2, 3, 8),), as_ir=True)
        >>> _ = CanonicalAxesPass()(m)  # the axes spelled as onnxscript's patterns expect
        >>> onnxscript_fusions(m), [n.op_type for n in m.graph]
        (1, ['SimplifiedLayerNormalization'])
    """
    trial, counts = ort_fusions.optimize_for_ort(model.clone())
    left = _fusion_leftovers(trial)
    if left:
        logger.info("onnxscript's fusions left %s nodes: again without its attention fusion", left)
        trial = model.clone()
        counts = ort_fusions_without_attention(trial)
        left = _fusion_leftovers(trial)
    if left:
        logger.warning("onnxscript's ONNX Runtime fusions left %s nodes no runtime runs: not applied", left)
        return 0
    model.graph = trial.graph
    model.functions.clear()
    model.functions.update(trial.functions)
    made = {k: v for k, v in counts.items() if v}
    if made:
        logger.info("onnxscript's fusions: %s", made)
    return sum(made.values())


def fuse_skip_norms(model: ir.Model) -> int:
    """Every residual ``Add`` read by a normalization over the last axis fused into onnxruntime's
    ``SkipLayerNormalization`` / ``SkipSimplifiedLayerNormalization`` (onnxscript's rules), its sum kept as the
    kernel's fourth output where it is read again; in place, returns how many. The default pipeline gives back the
    pairs whose sum is read again on the CPU (:mod:`.skip_norm`: slower over a long sequence); a model that runs one
    token at a time (a GenAI decoder) keeps them fused: equal there, one node less per pair.

    Example::

        >>> import onnx_ir as ir
        >>> x, skip = ir.val("x", ir.DataType.FLOAT, [2, 3, 4]), ir.val("skip", ir.DataType.FLOAT, [2, 3, 4])
        >>> gamma = ir.Value(name="gamma", const_value=ir.tensor([1.0] * 4), shape=ir.Shape([4]))
        >>> add = ir.node("Add", [x, skip])
        >>> norm = ir.node("SimplifiedLayerNormalization", [add.outputs[0], gamma], attributes={"axis": -1})
        >>> add.outputs[0].name, norm.outputs[0].name = "sum", "y"
        >>> g = ir.Graph([x, skip], [norm.outputs[0], add.outputs[0]], nodes=[add, norm], initializers=[gamma],
        ...              opset_imports={"": 18, "com.microsoft": 1})
        >>> fuse_skip_norms(ir.Model(g, ir_version=10)), [n.op_type for n in g], [v.name for v in g.outputs]
        (1, ['SkipSimplifiedLayerNormalization'], ['y', 'sum'])
    """
    count = skip_normalization.fuse_skip_layer_normalization(model, debug=False)
    count += skip_normalization.fuse_skip_rms_normalization(model, debug=False)
    return count


# -- undone after the fusions -----------------------------------------------------------------------------------


def _batch_perm(rank: int) -> list[int]:
    """The permutation ``transBatch=1`` applies: the first axis moves before the last one."""
    return [*range(1, rank - 1), 0, rank - 1]


def split_batch_transposes(model: ir.Model) -> int:
    """Gives back the ``Transpose`` of the ``com.microsoft::FusedMatMul`` nodes whose ``transBatchA``/
    ``transBatchB`` onnxruntime cannot run, in place; returns how many ``Transpose`` it gave back.

    onnxscript 0.7.2's fusion folds ``Transpose(a, [1, ..., N-2, 0, N-1])`` into ``FusedMatMul(transBatchA=1)``
    (and the same for ``b``) without checking the other operand: onnxruntime's kernel runs a batch transpose only
    when both operands have the same rank, at least 3, and fails otherwise (XLNet's ``[seq, batch, hidden]``
    states times the 2-D output projection: "Two inputs should have same rank and rank >= 3 if transBatchA or
    transBatchB is true"). Such a node gets the ``Transpose`` before it again and loses the attribute.
    Written by hand: the node is edited in place (one input, one attribute), one or two ``Transpose`` inserted.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.onnxscript_adapter import split_batch_transposes
        >>> a, b = ir.val("a", ir.DataType.FLOAT, [5, 2, 4]), ir.val("b", ir.DataType.FLOAT, [4, 3])
        >>> mm = ir.node("FusedMatMul", [a, b], attributes={"transBatchA": 1}, domain="com.microsoft")
        >>> mm.outputs[0].name = "y"
        >>> g = ir.Graph([a, b], mm.outputs, nodes=[mm], opset_imports={"": 23, "com.microsoft": 1})
        >>> split_batch_transposes(ir.Model(g, ir_version=10))
        1
        >>> [(n.op_type, {k: list(v.value) if k == "perm" else v.value for k, v in n.attributes.items()}) for n in g]
        [('Transpose', {'perm': [1, 0, 2]}), ('FusedMatMul', {'transBatchA': 0})]
    """
    count = 0
    for node in list(model.graph.all_nodes()):
        if node.op_type != "FusedMatMul" or node.domain != "com.microsoft":
            continue
        shapes = [dims(v) for v in node.inputs[:2]]
        if None in shapes:
            continue
        ranks = [len(s) for s in shapes]
        if ranks[0] == ranks[1] and ranks[0] >= 3:
            continue
        for i, name in enumerate(("transBatchA", "transBatchB")):
            attr = node.attributes.get(name)
            if attr is None or attr.as_int() == 0:
                continue
            value, perm = node.inputs[i], _batch_perm(ranks[i])
            transpose = ir.node("Transpose", [value], attributes={"perm": perm}, name=f"{node.name}_{name}")
            typed(transpose, dtype=value.dtype, shape=[shapes[i][p] for p in perm])
            copy_provenance(node, transpose)
            node.graph.insert_before(node, transpose)
            node.replace_input_with(i, transpose.outputs[0])
            node.attributes[name] = ir.AttrInt64(name, 0)
            count += 1
    return count
