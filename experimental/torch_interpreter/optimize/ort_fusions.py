"""The onnxruntime level: fusions into the ``com.microsoft`` kernels onnxruntime runs fastest.

The fusions are onnxscript's (``onnxscript.rewriter.ort_fusions.optimize_for_ort``, the ones
``torch.onnx.export`` users run): RMS normalization (``SimplifiedLayerNormalization``), residual + norm
(``SkipSimplifiedLayerNormalization``, ``SkipLayerNormalization``), rotary embedding, attention
(``MultiHeadAttention``/``GroupQueryAttention`` from the softmax(QK^T)V pattern, when the translation is
below opset 23; from 23 on it is one ONNX ``Attention`` node already, whose repeated grouped-query heads
:mod:`.attention_heads` removes), GELU (``FastGelu``, ``BiasGelu``), ``FusedMatMul``. Their patterns spell axes
the way ``torch.onnx.export`` writes them; :class:`CanonicalAxesPass` rewrites ours the same way first, without it
no RMSNorm or skip-norm pattern matches the graphs of ``to_onnx``. GELU, and what the fusions leave around
attention, are rewritten by :mod:`.ort_rewrites`; the rotary embedding, whose ``cos``/``sin`` onnxscript's
pattern expects spelled otherwise, by :mod:`.rotary` (ONNX ``RotaryEmbedding``, opset 23); then
:mod:`.attention_bsd` gives ``Attention`` the projections unsplit and the cache as its past inputs, and
:mod:`.packed_projections` packs the query/key/value projections of one input into one ``MatMul``, which
:mod:`.packed_attention` gives with the attention to ``com.microsoft::Attention`` in an encoder.

* ``ReduceMean(x, axes=[-1], noop_with_empty_axes=0)``: the RMSNorm pattern compares the axes and the
  attribute literally, the translation writes the positive axis (``[2]``) and leaves the attribute out;
* ``Concat(..., axis=-1)``: the rotary pattern's ``rotate_half``;
* ``Slice(x, starts, ends, axes, steps)`` with explicit unit steps: the rotary pattern lists five inputs.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult

from .attention_bsd import attention_on_bsd
from .attention_heads import attention_without_repeated_heads
from .fused_matmul import split_batch_transposes
from .graph_match import int64s
from .ort_rewrites import rewrite_around_attention, rewrite_before_fusions
from .packed_attention import attention_on_packed_projections
from .packed_projections import pack_projections
from .rotary import fuse_rotary
from .skip_norm import unfuse_skip_norms

logger = logging.getLogger(__name__)

_REDUCE = frozenset(
    {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"}
)


def _rank(value: ir.Value | None) -> int | None:
    return len(value.shape) if value is not None and value.shape is not None else None


class CanonicalAxesPass(InPlacePass):
    """Writes axes as onnxscript's ORT fusion patterns expect them: negative ``Concat`` axis and
    reduction axes (the input's rank known), explicit ``noop_with_empty_axes=0`` on reductions with
    axes, explicit unit ``steps`` on ``Slice``. Same computation, another spelling; main graph only
    (the fusions do not look into subgraphs)."""

    def call(self, model: ir.Model) -> PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Concat":
                modified |= self._concat(node)
            elif node.op_type in _REDUCE:
                modified |= self._reduce(graph, node)
            elif node.op_type == "Slice":
                modified |= self._slice(graph, node)
        return PassResult(model, modified)

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


#: the domain of the intermediate nodes of onnxscript's fusions (``SDPA``...), which no runtime implements
FUSION_DOMAIN = "ai.onnxruntime._fusion"


def _fusion_leftovers(model: ir.Model) -> list[str]:
    return sorted({n.op_type for n in model.graph.all_nodes() if n.domain == FUSION_DOMAIN})


def onnxscript_fusions(model: ir.Model) -> dict[str, int]:
    """onnxscript's ``optimize_for_ort`` on ``model``, in place; returns its counts.

    Its attention fusion first marks ``softmax(QK^T)V`` as an intermediate ``SDPA`` node (domain
    :data:`FUSION_DOMAIN`), then turns it into a kernel; where it cannot (Inkling-2's attention: a query of one
    head against keys of two), the node stays and onnxruntime refuses the model. The fusions then run again on
    the graph as it was, without the attention fusion; if intermediate nodes still stay, without onnxscript's
    fusions at all (the rewrites of our own still apply).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.ort_fusions import CanonicalAxesPass, onnxscript_fusions
        >>> class RMSNorm(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = torch.nn.Parameter(torch.ones(8))
        ...     def forward(self, x):
        ...         return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        >>> m = to_onnx(RMSNorm(), (torch.randn(2, 3, 8),), as_ir=True)
        >>> _ = CanonicalAxesPass()(m)  # the axes spelled as onnxscript's patterns expect
        >>> {k: v for k, v in onnxscript_fusions(m).items() if v}, [n.op_type for n in m.graph]
        ({'rms_normalization': 1}, ['SimplifiedLayerNormalization'])
    """
    from onnxscript.rewriter import ort_fusions
    from onnxscript.rewriter.ort_fusions import _core

    trial, counts = ort_fusions.optimize_for_ort(model.clone())
    left = _fusion_leftovers(trial)
    if left and hasattr(_core, "fuse_sdpa"):
        logger.info("onnxscript's fusions left %s nodes: again without its attention fusion", left)
        saved = _core.fuse_sdpa
        _core.fuse_sdpa = lambda *args, **kwargs: 0
        try:
            trial, counts = ort_fusions.optimize_for_ort(model.clone())
        finally:
            _core.fuse_sdpa = saved
        left = _fusion_leftovers(trial)
    if left:
        logger.warning("onnxscript's ONNX Runtime fusions left %s nodes no runtime runs: not applied", left)
        return {}
    model.graph = trial.graph
    model.functions.clear()
    model.functions.update(trial.functions)
    return counts


def fuse_for_onnxruntime(model: ir.Model) -> dict[str, int]:
    """Fuses ``model`` (already through the generic level) into onnxruntime's kernels, in place.

    :param model: an ``onnx_ir.Model``
    :return: how many times each fusion applied (only those that did)

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.ort_fusions import fuse_for_onnxruntime
        >>> class RMSNorm(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = torch.nn.Parameter(torch.ones(8))
        ...     def forward(self, x):
        ...         x32 = x.to(torch.float32)
        ...         return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6))
        >>> m = to_onnx(RMSNorm(), (torch.randn(2, 3, 8),), as_ir=True)
        >>> fuse_for_onnxruntime(m)
        {'rms_normalization': 1}
        >>> [n.op_type for n in m.graph]
        ['SimplifiedLayerNormalization']
    """
    CanonicalAxesPass()(model)
    ir_version = model.ir_version
    # before onnxscript's fusions: its BiasGelu fusion reads com.microsoft::Gelu, its attention patterns
    # end with the heads merged (Transpose, Reshape) right after softmax(QK^T)V
    ours = rewrite_before_fusions(model)
    counts = onnxscript_fusions(model)
    counts.update(split_batch_transposes(model))
    counts.update(unfuse_skip_norms(model))
    counts.update(ours)
    counts.update(rewrite_around_attention(model))
    counts.update(attention_without_repeated_heads(model))
    counts.update(fuse_rotary(model))
    counts.update(attention_on_bsd(model))
    counts.update(pack_projections(model))
    counts.update(attention_on_packed_projections(model))
    model.ir_version = ir_version
    if any(n.domain == "com.microsoft" for n in model.graph.all_nodes()):
        model.opset_imports.setdefault("com.microsoft", 1)
    return {k: v for k, v in counts.items() if v}
