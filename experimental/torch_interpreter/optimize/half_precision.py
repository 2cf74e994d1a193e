"""float16 results read in float32 keep their float16 rounding, as in PyTorch.

PyTorch computes a float16 op in float32 and rounds the result to float16; ``y.float()`` then reads the
rounded value. onnxruntime's CPU has no float16 kernel for most arithmetic ops: it computes them in float32
between casts it inserts, and removes the pair ``Cast(float -> float16) -> Cast(float16 -> float)`` it finds
after such an op, so ``Cast(Mul(a, b), to=FLOAT)`` reads the unrounded float32 product (``float32 + float16``
off by half a float16 ulp). Casts written in the model are kept: :func:`round_half_results` rewrites each
arithmetic node whose float16 output is cast to a wider float type into ``Cast -> op in float32 -> Cast``,
which is what PyTorch computes.

:func:`cast_before_transpose` works around a crash: onnxruntime 1.31 (all optimizations, CPU) segfaults while
creating a session for ``Transpose(bfloat16) -> Cast(float) -> MatMul`` (``F.linear`` of a transposed
bfloat16 tensor); ``Cast -> Transpose`` (the same values) is read fine.

:func:`round_half_results` runs for models made for the CPU (``to_onnx(..., providers=...)``, default: any
provider): onnxruntime's CUDA provider has float16 kernels. Both are rewrites of the pipeline's
``"translation"`` stage (:mod:`.pipeline`): they run at every level,
``optimize=False`` included. Written by hand: :func:`round_half_results` rewrites a node of any number of float16
inputs and outputs, each input cast once however many times the node reads it; :func:`cast_before_transpose`
removes the ``Cast`` and keeps the ``Transpose`` when something else reads it, where onnxscript's rewriter
removes every matched node or none.
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from ..providers import needs_guard, of_model

logger = logging.getLogger(__name__)

F16 = ir.DataType.FLOAT16
_WIDER = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE})

#: op types whose float16 result is rounded arithmetic (data movement and selections are exact in any type)
ARITHMETIC = frozenset(
    {
        *("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Reciprocal", "Mean", "Sum", "Einsum"),
        *("Tanh", "Sigmoid", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh"),
        *("Asinh", "Acosh", "Atanh", "Softmax", "LogSoftmax", "Softplus", "Softsign", "Elu", "Selu", "Celu"),
        *("LeakyRelu", "HardSigmoid", "HardSwish", "Mish", "Gelu", "PRelu", "ThresholdedRelu"),
        *("MatMul", "Gemm", "Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "Resize", "CumSum"),
        *("ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"),
        *("ReduceSumSquare", "LayerNormalization", "InstanceNormalization", "BatchNormalization"),
        *("GroupNormalization", "RMSNormalization", "LpNormalization"),
    }
)


def _is_default(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx")


def _widening_cast(node: ir.Node) -> bool:
    if node.op_type != "Cast" or not _is_default(node) or node.inputs[0] is None:
        return False
    to = node.attributes.get("to")
    return node.inputs[0].dtype == F16 and to is not None and ir.DataType(to.as_int()) in _WIDER


def _compute_in_float(node: ir.Node) -> None:
    """``node`` computed in float32: its float16 inputs cast up, its float16 outputs cast back down."""
    graph = node.graph
    cast: dict[int, ir.Value] = {}
    for i, value in enumerate(node.inputs):
        if value is not None and value.dtype == F16 and id(value) in cast:
            node.replace_input_with(i, cast[id(value)])
        elif value is not None and value.dtype == F16:
            up = ir.node("Cast", [value], {"to": ir.DataType.FLOAT}, name=f"{node.name}/to_float_{i}")
            up.outputs[0].dtype = ir.DataType.FLOAT
            up.outputs[0].shape = value.shape
            up.outputs[0].name = f"{node.name}__in{i}_float"
            up.metadata_props.update(node.metadata_props)
            graph.insert_before(node, up)
            node.replace_input_with(i, up.outputs[0])
            cast[id(value)] = up.outputs[0]
    for value in node.outputs:
        if value.dtype != F16:
            continue
        name = value.name
        value.name = f"{name}__float"
        value.dtype = ir.DataType.FLOAT
        users = list(value.uses())
        down = ir.node("Cast", [value], {"to": F16}, name=f"{node.name}/to_float16")
        rounded = down.outputs[0]
        rounded.dtype, rounded.shape, rounded.name = F16, value.shape, name
        down.metadata_props.update(node.metadata_props)
        graph.insert_after(node, down)
        for user, index in users:
            user.replace_input_with(index, rounded)
        for i, out in enumerate(graph.outputs):
            if out is value:
                graph.outputs[i] = rounded


def cast_before_transpose(model: ir.Model) -> int:
    """Rewrites ``Cast(Transpose(x: bfloat16), to=FLOAT)`` into ``Transpose(Cast(x, to=FLOAT))`` (the same
    values, see the module's docstring); returns how many casts it moved.

    >>> import onnx_ir as ir
    >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([2, 3]))
    >>> t = ir.node("Transpose", [x], {"perm": [1, 0]})
    >>> t.outputs[0].dtype = ir.DataType.BFLOAT16
    >>> cast = ir.node("Cast", [t.outputs[0]], {"to": ir.DataType.FLOAT})
    >>> graph = ir.Graph([x], cast.outputs, nodes=[t, cast], opset_imports={"": 18})
    >>> cast_before_transpose(ir.Model(graph, ir_version=10))
    1
    >>> [n.op_type for n in graph]
    ['Cast', 'Transpose']
    """
    todo = []
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type != "Cast" or not _is_default(node) or node.inputs[0] is None:
            continue
        to = node.attributes.get("to")
        producer = node.inputs[0].producer()
        if (
            node.inputs[0].dtype == ir.DataType.BFLOAT16
            and to is not None
            and ir.DataType(to.as_int()) == ir.DataType.FLOAT
            and producer is not None
            and producer.op_type == "Transpose"
            and _is_default(producer)
        ):
            todo.append((node, producer))
    for cast, transpose in todo:
        graph = cast.graph
        source = transpose.inputs[0]
        value = cast.outputs[0]
        up = ir.node("Cast", [source], {"to": ir.DataType.FLOAT}, name=f"{cast.name}/before_transpose")
        up.outputs[0].dtype, up.outputs[0].shape = ir.DataType.FLOAT, source.shape
        up.outputs[0].name = f"{value.name}__untransposed"
        perm = transpose.attributes.get("perm")
        moved = ir.node("Transpose", [up.outputs[0]], {"perm": perm.as_ints()} if perm is not None else {},
                        name=f"{cast.name}/transpose")
        out = moved.outputs[0]
        out.dtype, out.shape = ir.DataType.FLOAT, value.shape
        for node in (up, moved):
            node.metadata_props.update(cast.metadata_props)
        graph.insert_before(cast, [up, moved])
        users = list(value.uses())
        for user, index in users:
            user.replace_input_with(index, out)
        for i, o in enumerate(graph.outputs):
            if o is value:
                graph.outputs[i] = out
        name = value.name
        value.name = f"{name}__unused"
        out.name = name
        graph.remove(cast, safe=True)
        if not list(transpose.outputs[0].uses()) and transpose.outputs[0] not in graph.outputs:
            graph.remove(transpose, safe=True)
    return len(todo)


def round_half_results(model: ir.Model) -> int:
    """Rewrites each float16 arithmetic node whose result is cast to float32/float64 to compute in float32
    and round to float16 explicitly (see the module's docstring); returns how many nodes it rewrote.

    >>> import onnx_ir as ir
    >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT16), shape=ir.Shape([3]))
    >>> mul = ir.node("Mul", [x, x])
    >>> mul.outputs[0].dtype = ir.DataType.FLOAT16
    >>> cast = ir.node("Cast", [mul.outputs[0]], {"to": ir.DataType.FLOAT})
    >>> graph = ir.Graph([x], cast.outputs, nodes=[mul, cast], opset_imports={"": 18})
    >>> round_half_results(ir.Model(graph, ir_version=10))
    1
    >>> [n.op_type for n in graph]
    ['Cast', 'Mul', 'Cast', 'Cast']
    """
    if not needs_guard(of_model(model), "half_computed_in_float"):
        return 0  # a model for CUDA only: its float16 kernels round as PyTorch does
    todo: list[ir.Node] = []
    seen: set[int] = set()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if not _widening_cast(node):
            continue
        producer = node.inputs[0].producer()
        if (
            producer is not None
            and _is_default(producer)
            and producer.op_type in ARITHMETIC
            and id(producer) not in seen
        ):
            seen.add(id(producer))
            todo.append(producer)
    for node in todo:
        _compute_in_float(node)
    if todo:
        logger.debug("%d float16 nodes computed in float32 and rounded explicitly", len(todo))
    return len(todo)
