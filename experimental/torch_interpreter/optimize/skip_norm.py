"""Residual + normalization as ``Add`` and the normalization again, where onnxruntime's fused kernel is slower.

onnxscript fuses ``LayerNormalization(x + skip)`` (its sum read again by the next residual) into
``com.microsoft::SkipLayerNormalization``, and the RMS variant into ``SkipSimplifiedLayerNormalization``. On
onnxruntime's CPU provider (1.32, float32, ``[2, 128, 512]``, one thread or two) the fused kernels are the
slower ones: ``SkipLayerNormalization`` 0.81 ms against 0.19 ms for ``Add`` + ``LayerNormalization``,
``SkipSimplifiedLayerNormalization`` 0.21 ms against 0.15 ms for ``Add`` + ``SimplifiedLayerNormalization``
(the 4× on a medium GPT-2: 5 % of the whole model). A fused node whose sum is read again (pre-norm models:
the residual stream) becomes ``Add`` (its bias input first, as a ``Linear`` adds it, then the residual) and
the unfused normalization, when its mean and inverse deviation outputs are unused. Where the norm alone reads
the sum (post-norm models: BERT), onnxruntime's own fusion would make the same kernel again when it loads the
model: the node stays.

Only for a model that runs on the CPU (``to_onnx(..., providers=...)``, default: any provider): CUDA keeps the
fused kernels. Written by hand: one fused node of four outputs, whose replacement depends on which outputs are read.
"""

from __future__ import annotations

import onnx_ir as ir

from ..provenance import copy_provenance
from ..providers import needs_guard, of_model
from .graph_match import typed

#: fused kernel -> (the normalization it runs, the index of its ``bias`` input)
SKIP_NORMS = {
    "SkipLayerNormalization": ("LayerNormalization", 4),
    "SkipSimplifiedLayerNormalization": ("SimplifiedLayerNormalization", 3),
}


def reads_statistics(node: ir.Node) -> bool:
    """Whether the mean or inverse deviation output of the fused node ``node`` is read."""
    return any(o is not None and (o.uses() or o.is_graph_output()) for o in list(node.outputs)[1:3])


def split_skip_norm(graph: ir.Graph, node: ir.Node, norm_dtype: ir.DataType | None = None) -> None:
    """Replaces the fused node ``node`` (its mean and inverse deviation unread) by ``Add`` (its bias input first, as
    a ``Linear`` adds it, then the residual) and the normalization it runs, the sum cast to ``norm_dtype`` first when
    given (a half-precision residual normalized in float32: :mod:`.norm_types`); the outputs keep their names."""
    norm_type, bias_index = SKIP_NORMS[node.op_type]
    outputs = list(node.outputs)
    x, skip, gamma = node.inputs[:3]
    beta = node.inputs[3] if norm_type == "LayerNormalization" and len(node.inputs) > 3 else None
    bias = node.inputs[bias_index] if len(node.inputs) > bias_index else None
    like = outputs[0]
    nodes = []
    if bias is not None:
        nodes.append(typed(ir.node("Add", [x, bias], name=f"{node.name}_bias"), dtype=x.dtype, shape=x.shape))
        x = nodes[-1].outputs[0]
    nodes.append(typed(ir.node("Add", [x, skip], name=f"{node.name}_residual"), dtype=x.dtype, shape=x.shape))
    total = normalized = nodes[-1].outputs[0]
    if norm_dtype is not None:
        cast = ir.node("Cast", [total], attributes={"to": norm_dtype}, name=f"{node.name}_sum_cast")
        nodes.append(typed(cast, dtype=norm_dtype, shape=total.shape))
        normalized = nodes[-1].outputs[0]
    epsilon = node.attributes.get("epsilon")
    attributes = {"axis": -1, **({"epsilon": epsilon.as_float()} if epsilon is not None else {})}
    norm_inputs = [normalized, gamma] + ([beta] if beta is not None else [])
    nodes.append(typed(ir.node(norm_type, norm_inputs, attributes=attributes, name=f"{node.name}_norm"), like))
    copy_provenance(node, *nodes)
    graph.insert_before(node, nodes)
    for old, new in ((outputs[0], nodes[-1].outputs[0]), *(((outputs[3], total),) if len(outputs) > 3 else ())):
        if old.is_graph_output():
            graph.outputs[graph.outputs.index(old)] = new
        old.replace_all_uses_with(new)
        new.name, old.name = old.name, None
    graph.remove(node, safe=True)


def _unfuse(graph: ir.Graph, node: ir.Node) -> bool:
    outputs = list(node.outputs)
    if reads_statistics(node):
        return False
    if len(outputs) < 4 or not (outputs[3].uses() or outputs[3].is_graph_output()):
        return False  # the sum read by the norm alone: onnxruntime fuses Add + norm back into this kernel
    split_skip_norm(graph, node)
    return True


def unfuse_skip_norms(model: ir.Model) -> int:
    """Replaces the main graph's ``SkipLayerNormalization`` and ``SkipSimplifiedLayerNormalization`` nodes as
    the module's docstring says, in place; returns how many.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.skip_norm import unfuse_skip_norms
        >>> x, skip = ir.val("x", ir.DataType.FLOAT, [2, 3, 4]), ir.val("skip", ir.DataType.FLOAT, [2, 3, 4])
        >>> gamma = ir.Value(name="gamma", const_value=ir.tensor([1.0] * 4))
        >>> fused = ir.node("SkipLayerNormalization", [x, skip, gamma], num_outputs=4, domain="com.microsoft")
        >>> fused.outputs[0].name, fused.outputs[3].name = "y", "sum"
        >>> g = ir.Graph([x, skip], [fused.outputs[0], fused.outputs[3]], nodes=[fused], initializers=[gamma],
        ...              opset_imports={"": 23, "com.microsoft": 1})
        >>> unfuse_skip_norms(ir.Model(g, ir_version=10)), [n.op_type for n in g], [v.name for v in g.outputs]
        (1, ['Add', 'LayerNormalization'], ['y', 'sum'])
    """
    if not needs_guard(of_model(model), "skip_norm_kernel_slower"):
        return 0  # a model for CUDA only keeps its fused kernels
    count = 0
    graph = model.graph
    for node in list(graph):
        if node.domain == "com.microsoft" and node.op_type in SKIP_NORMS and _unfuse(graph, node):
            count += 1
    return count
