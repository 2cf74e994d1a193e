"""Normalizations of one element type: a half-precision residual normalized in float32 (Gemma's RMS norm casts
its input to float32 and multiplies by a float32 weight) given to the fused kernels in the types they take.

onnxscript's RMS-norm fusion reads the ``Cast`` of the input into ``SimplifiedLayerNormalization(x_half,
scale_float)``, and its skip-norm fusion then makes ``SkipSimplifiedLayerNormalization(x_half, skip_half,
gamma_float)``. The skip kernels bind their inputs and outputs to one type ``T``: onnxruntime refuses such a model
on every provider ("Type parameter (T) ... bound to different types"). The plain normalizations take a float32
scale with a half input in some combinations only (CUDA registers float16 -> float32, not bfloat16 -> float32;
ONNX's ``LayerNormalization`` none).

So each normalization whose input and scale types differ reads its input cast to the scale's type, as the
model's code does (the sum of a skip kernel computed in the input's type first, then cast): the same numbers, one
``Cast`` more. Written by hand: one node and its types, a local replacement.
"""

from __future__ import annotations

import onnx_ir as ir

from ..provenance import copy_provenance
from .graph_match import typed
from .skip_norm import SKIP_NORMS, reads_statistics, split_skip_norm

#: the normalizations with an input and a scale: op type -> the index of the scale input
_PLAIN = {"SimplifiedLayerNormalization": 1, "LayerNormalization": 1}


def uniform_norm_types(model: ir.Model) -> int:
    """Rewrites every normalization of ``model``'s main graph whose input and scale element types differ; returns
    how many.

    Example::

        >>> import onnx_ir as ir
        >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([2, 4]))
        >>> g = ir.Value(name="g", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([4]))
        >>> norm = ir.node("SimplifiedLayerNormalization", [x, g], attributes={"epsilon": 1e-6})
        >>> norm.outputs[0].dtype = ir.DataType.FLOAT
        >>> graph = ir.Graph([x, g], norm.outputs, nodes=[norm], opset_imports={"": 21})
        >>> uniform_norm_types(ir.Model(graph, ir_version=10)), [n.op_type for n in graph]
        (1, ['Cast', 'SimplifiedLayerNormalization'])
    """
    graph = model.graph
    count = 0
    for node in list(graph):
        if node.domain in ("", "ai.onnx") and node.op_type in _PLAIN:
            count += _cast_input(graph, node)
        elif node.domain == "com.microsoft" and node.op_type in SKIP_NORMS:
            count += _split_skip(graph, node)
    return count


def _mixed(x: ir.Value | None, scale: ir.Value | None) -> bool:
    return x is not None and scale is not None and None not in (x.dtype, scale.dtype) and x.dtype != scale.dtype


def _cast_input(graph: ir.Graph, node: ir.Node) -> int:
    x, scale = node.inputs[0], node.inputs[_PLAIN[node.op_type]]
    if not _mixed(x, scale):
        return 0
    cast = ir.node("Cast", [x], attributes={"to": scale.dtype}, name=f"{node.name}/input_as_scale_type")
    typed(cast, dtype=scale.dtype, shape=x.shape)
    copy_provenance(node, cast)
    graph.insert_before(node, cast)
    node.replace_input_with(0, cast.outputs[0])
    return 1


def _split_skip(graph: ir.Graph, node: ir.Node) -> int:
    """A skip kernel as the sum in its input's type, then cast to its gamma's, then the normalization
    (:func:`.skip_norm.split_skip_norm`); when its statistics are unread (the fusion's output)."""
    x, gamma = node.inputs[0], node.inputs[2]
    if not _mixed(x, gamma) or reads_statistics(node):
        return 0
    split_skip_norm(graph, node, norm_dtype=gamma.dtype)
    return 1
