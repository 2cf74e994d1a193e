"""float16 results keep PyTorch's float16 rounding on onnxruntime's CPU where it matters.

PyTorch computes a float16 op in float32 and rounds the result to float16. onnxruntime's CPU has no float16
kernel for most ops (arithmetic, comparisons, ``Floor``, ``Ceil``, ``ArgMax``, ``ArgMin``, ``TopK``, ``Neg``,
``Abs``, ``Where``...): it computes them in float32 between casts it inserts, then removes (optimizations on or
off) the ``Cast(float -> float16)`` it inserted before a ``Cast``, and any ``Cast(float -> float16) ->
Cast(float16 -> float)`` pair whose second cast is its own. The rounding is lost: ``Cast(Mul(a, b), to=FLOAT)``
reads the unrounded product (``float32 + float16 * float16`` half a float16 ulp off), and where the result jumps
the answer changes: ``Cast(Mul(x, 7), to=INT64)`` gives 3 for ``x = 0.5713``, 4 in PyTorch (the product rounds
to 4.0 in float16, is 3.999 in float32).

:func:`round_half_results` keeps the rounding. For every reader of a float16 value whose result depends on its
rounding (:func:`_read_inputs`: a ``Cast`` to another type, :data:`JUMPS`), it walks back through
:data:`SELECTIONS` to the float16 arithmetic nodes (and, for a reader that jumps, on through
:data:`CORRECTLY_ROUNDED` arithmetic: PyTorch rounds after each op of the chain), rewrites each into ``Cast ->
op in float32 -> Cast(to float16)`` (a rounding written in the model: onnxruntime keeps it before its readers'
own casts), and computes in float32 explicitly the readers onnxruntime has no float16 kernel for (their inserted
cast would cancel the rounding). Measured on onnxruntime 1.32 with every float16 value of ``[0, 8)`` times 7,
``Mul`` then the reader, at every optimization level (the same answers at all three):

* ``Cast`` to an integer type, bool, float or double: wrong on every value whose rounding crosses the boundary;
  the rounded ``Mul`` suffices, except before a cast to int8/uint8, which onnxruntime merges with the rounding
  (the ``Cast`` then reads through ``Cast(to FLOAT)``, the same values);
* ``Less``, ``Greater``, ``LessOrEqual``, ``GreaterOrEqual``, ``Equal``, ``Floor``, ``Ceil``, ``ArgMax``,
  ``ArgMin``, ``TopK`` and the selections without a float16 kernel (``Neg``, ``Abs``, ``Where``...): wrong, the
  rounded ``Mul`` alone too; right computed in float32 explicitly;
* ``Round``, ``Sign``, ``IsInf`` (opset 20) and the selections with a float16 kernel (``Reshape``, ``Max``,
  ``Clip``, ``Concat``...) read the rounded product: right as they are, except between two ops without one,
  which onnxruntime computes in float32 too (``Round`` then ``Mul``, ``Reshape`` then ``Floor``: wrong); the
  rounded ``Mul`` suffices. ``Mod`` (``fmod``) has a float16 kernel too and is read as ``Round``. ``IsInf``
  and ``IsNaN`` (float16 kernels, boolean results: never computed in float32) are left alone, and so is
  ``Sign``: the converters give it (and ``IsInf``) a float32 input, whose cast the walk reads.

The cost on onnxruntime's CPU: an arithmetic node rewritten costs nothing (its casts replace those onnxruntime
inserts), a reader computed in float32 keeps the two casts onnxruntime would have removed: ``(x * 7).long()``
runs one cast more, ``x * 7 < t`` two. Nothing else is rewritten: float16 chains read in float16 stay within
float16's tolerance, a float16 value read in float32 has only its last op rounded, unless a jump follows in
float32 (:class:`JumpsAfter`: the converters compute ``trunc``, ``remainder``, ``sign``... of float16 so); the
cast's reader then jumps, its chain is rounded after each op. bfloat16 needs nothing but
before int8/uint8: onnxruntime's CPU has no bfloat16 arithmetic kernel and inserts no cast for it, the
converters compute it in float32 between explicit casts it keeps (``kernel_dtype`` of the ops' kernel table).

:func:`cast_before_transpose` works around a crash: onnxruntime 1.31 (all optimizations, CPU) segfaults while
creating a session for ``Transpose(bfloat16) -> Cast(float) -> MatMul`` (``F.linear`` of a transposed
bfloat16 tensor); ``Cast -> Transpose`` (the same values) is read fine.

:func:`round_half_results` runs for models made for the CPU (``to_onnx(..., providers=...)``, default: any
provider): onnxruntime's CUDA provider has float16 kernels. Both are rewrites of the pipeline's
``"translation"`` stage (:mod:`.pipeline`): they run at every level,
``optimize=False`` included. Written by hand: :func:`round_half_results` walks the graph from the readers and
rewrites a node of any number of float16 inputs and outputs, each value cast once however many rewritten nodes
read it; :func:`cast_before_transpose` removes the ``Cast`` and keeps the ``Transpose`` when something else
reads it, where onnxscript's rewriter removes every matched node or none.
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from ..metadata import FX_OUTPUT
from ..ort_kernels import CPU_FLOAT16
from ..provenance import copy_provenance
from ..providers import needs_guard, of_model

logger = logging.getLogger(__name__)

F16 = ir.DataType.FLOAT16
BF16 = ir.DataType.BFLOAT16
_HALF = frozenset({F16, BF16})
_WIDER = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE})
_FLOATS = _HALF | _WIDER
_NARROW_INTEGERS = frozenset({ir.DataType.INT8, ir.DataType.UINT8})

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


#: op types whose result jumps on a difference of one ulp of a float16 input: comparisons, rounding ops, indices
#: (and ``Cast`` to an integer type, see :func:`_read_inputs`)
JUMPS = frozenset(
    {
        *("Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal"),
        *("Floor", "Ceil", "Round", "Mod"),
        *("ArgMax", "ArgMin", "TopK"),
    }
)

#: op types whose result is made of their inputs' elements (moved, selected, negated): the rounding of an
#: input reaches the reader of their result
SELECTIONS = frozenset(
    {
        *("Neg", "Abs", "Relu", "Max", "Min", "Clip", "Where", "ReduceMax", "ReduceMin", "Identity"),
        *("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Split", "Concat", "Expand"),
        *("Tile", "Pad", "Gather", "GatherElements", "GatherND"),
    }
)

#: arithmetic whose float16 result is its float32 result rounded once, in PyTorch as in onnxruntime (float32
#: holds more than twice float16's precision): the rounding of their inputs reaches their result, the walk goes on
#: through them. Through the others (exp, matmul, softmax, reductions...) no two libraries agree on the last bit
CORRECTLY_ROUNDED = frozenset({"Add", "Sub", "Mul", "Div", "Sqrt", "Reciprocal", "Pow", "Sum"})

def is_default(node: ir.Node) -> bool:
    """Whether ``node`` is of ONNX's main domain."""
    return node.domain in ("", "ai.onnx")


def cast_target(node: ir.Node | None) -> ir.DataType | None:
    """The type a main-domain ``Cast`` casts to; None for any other node (or a ``Cast`` without ``to``)."""
    if node is None or node.op_type != "Cast" or not is_default(node):
        return None
    to = node.attributes.get("to")
    return None if to is None else ir.DataType(to.as_int())


def _compute_in_float(node: ir.Node, cast: dict[tuple[int, int], ir.Value] | None = None) -> None:
    """``node`` computed in float32: its float16 inputs cast up, its float16 outputs cast back down. ``cast``:
    the casts up made so far, by value and graph (nodes rewritten in the order of their graph share them)."""
    graph = node.graph
    cast = {} if cast is None else cast
    for i, value in enumerate(node.inputs):
        key = (id(value), id(graph))
        if value is not None and value.dtype == F16 and key in cast:
            node.replace_input_with(i, cast[key])
        elif value is not None and value.dtype == F16:
            up = ir.node("Cast", [value], {"to": ir.DataType.FLOAT}, name=f"{node.name}/to_float_{i}")
            up.outputs[0].dtype = ir.DataType.FLOAT
            up.outputs[0].shape = value.shape
            up.outputs[0].name = f"{node.name}__in{i}_float"
            copy_provenance(node, up)
            graph.insert_before(node, up)
            node.replace_input_with(i, up.outputs[0])
            cast[key] = up.outputs[0]
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
        if FX_OUTPUT in value.metadata_props:  # the FX node's value is the rounded one (find_discrepancies reads it)
            rounded.metadata_props[FX_OUTPUT] = value.metadata_props.pop(FX_OUTPUT)
        copy_provenance(node, down)
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
        if node.op_type != "Cast" or not is_default(node) or node.inputs[0] is None:
            continue
        to = node.attributes.get("to")
        producer = node.inputs[0].producer()
        if (
            node.inputs[0].dtype == ir.DataType.BFLOAT16
            and to is not None
            and ir.DataType(to.as_int()) == ir.DataType.FLOAT
            and producer is not None
            and producer.op_type == "Transpose"
            and is_default(producer)
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
            copy_provenance(cast, node)
        graph.insert_before(cast, [up, moved])
        name = value.name
        value.name = f"{name}__unused"
        out.name = name
        value.replace_all_uses_with(out, replace_graph_outputs=True)
        graph.remove(cast, safe=True)
        if not list(transpose.outputs[0].uses()) and transpose.outputs[0] not in graph.outputs:
            graph.remove(transpose, safe=True)
    return len(todo)


class JumpsAfter:
    """Whether a value reaches, through the op types ``through`` and casts to float types whose results are of the
    types ``kept``, an op whose result jumps (:data:`JUMPS`, ``Sign``, ``IsInf``, ``IsNaN``, a ``Cast`` to an
    integer type). Memoized, iterative.

    By default a float32/float64 value, through arithmetic and selections computed in its type (a cast to half
    precision is a new rounding): the converters compute ``trunc``, ``remainder``, ``sign``... of float16 in
    float32 after a ``Cast``. :mod:`.half_islands` walks a half-precision value through selections and correctly
    rounded arithmetic of any float type."""

    JUMPING = JUMPS | {"Sign", "IsInf", "IsNaN"}

    def __init__(self, through: frozenset = ARITHMETIC | SELECTIONS, kept: frozenset = _WIDER) -> None:
        self._through, self._kept = through, kept
        self._memo: dict[int, bool] = {}

    def __call__(self, root: ir.Value) -> bool:
        stack: list[tuple[ir.Value, bool]] = [(root, False)]
        while stack:
            value, children_done = stack.pop()
            if id(value) in self._memo and not children_done:
                continue
            jumps, onward = False, []
            for node, _ in value.uses():
                if not is_default(node):
                    continue
                to = cast_target(node)
                if node.op_type in self.JUMPING or to is not None and to not in _FLOATS:
                    jumps = True
                elif node.op_type in self._through or to is not None:
                    onward.extend(o for o in node.outputs if o.dtype in self._kept)
            if not children_done and not jumps and onward:
                self._memo[id(value)] = False
                stack.append((value, True))
                stack.extend((o, False) for o in onward if id(o) not in self._memo)
                continue
            self._memo[id(value)] = jumps or any(self._memo.get(id(o), False) for o in onward)
        return self._memo[id(root)]


def _read_inputs(node: ir.Node, jumps_after: JumpsAfter) -> tuple[list[ir.Value], bool]:
    """The half-precision inputs of ``node`` whose rounding its result depends on, and whether it jumps on them:
    every input of a :data:`JUMPS` op and of a ``Cast`` from float16 to an integer type or bool (True: the
    arithmetic before is followed while :data:`CORRECTLY_ROUNDED`), the input of a ``Cast`` from float16 to
    another float type (True when a jump follows in that type, else False: the rounding of the last result only,
    within float16's tolerance otherwise); from bfloat16, only a ``Cast`` to int8 or uint8 (the only cast
    onnxruntime merges with an explicit rounding to bfloat16)."""
    if not is_default(node):
        return [], False
    if node.op_type == "Cast":
        value, to = node.inputs[0], node.attributes.get("to")
        if value is None or to is None:
            return [], False
        target = ir.DataType(to.as_int())
        if value.dtype == F16 and target in _WIDER:
            return [value], jumps_after(node.outputs[0])
        if value.dtype == F16 and target != F16:
            return [value], target != BF16
        return ([value], True) if value.dtype == BF16 and target in _NARROW_INTEGERS else ([], False)
    if node.op_type not in JUMPS:
        return [], False
    inputs = node.inputs[:1] if node.op_type == "TopK" else node.inputs
    return [v for v in inputs if v is not None and v.dtype == F16], True


def _narrowing_cast(node: ir.Node) -> bool:
    """``Cast(float32/float64 -> float16/bfloat16)``: a rounding written in the model."""
    if node.op_type != "Cast" or not is_default(node) or node.inputs[0] is None:
        return False
    to = node.attributes.get("to")
    return to is not None and ir.DataType(to.as_int()) in _HALF and node.inputs[0].dtype in _WIDER


class _Walk:
    """Walks from the inputs of the readers back to the roundings they read, through :data:`SELECTIONS` (and
    :data:`CORRECTLY_ROUNDED` arithmetic for a reader that jumps): ``sources``, the float16 arithmetic nodes
    onnxruntime computes in float32 (to round explicitly), and the casts to half precision written in the model.
    ``frontier``: the nodes that read a rounding directly or through selections with a float16 kernel
    (onnxruntime drops the rounding when they have none). Iterative: a chain of thousands of additions is walked
    without recursion."""

    def __init__(self) -> None:
        self.sources: dict[int, ir.Node] = {}
        self.frontier: dict[int, ir.Node] = {}
        #: per (value, jumps): (a rounding lies upstream, the value is a rounding seen through float16 kernels)
        self._memo: dict[tuple[int, bool], tuple[bool, bool]] = {}

    def read(self, value: ir.Value, reader: ir.Node, jumps: bool) -> None:
        """Walks back from ``value``, an input of ``reader``; ``jumps``: through correctly rounded arithmetic."""
        self._walk(value, jumps)
        if self._memo[id(value), jumps][1]:
            self.frontier.setdefault(id(reader), reader)

    @staticmethod
    def _kind(value: ir.Value) -> str | None:
        node = value.producer()
        if node is None or not is_default(node):
            return None
        if _narrowing_cast(node):
            return "cast"
        if node.op_type in ARITHMETIC and value.dtype == F16:
            return "arithmetic"
        return "selection" if node.op_type in SELECTIONS else None

    def _walk(self, root: ir.Value, jumps: bool) -> None:
        stack: list[tuple[ir.Value, bool]] = [(root, False)]
        while stack:
            value, children_done = stack.pop()
            key = (id(value), jumps)
            if key in self._memo and not children_done:
                continue
            kind = self._kind(value)
            node = value.producer()
            walked = kind == "selection" or jumps and kind == "arithmetic" and node.op_type in CORRECTLY_ROUNDED
            inputs = [v for v in node.inputs if v is not None and v.dtype in _HALF] if walked else []
            if not children_done:
                self._memo[key] = (kind in ("cast", "arithmetic"), kind in ("cast", "arithmetic"))
                if kind == "arithmetic":
                    self.sources.setdefault(id(node), node)
                if inputs:
                    stack.append((value, True))
                    stack.extend((v, False) for v in inputs if (id(v), jumps) not in self._memo)
                continue
            reached = direct = False
            for v in inputs:
                r, d = self._memo[id(v), jumps]
                reached, direct = reached or r, direct or d
                if d:  # the node reads a rounding
                    self.frontier.setdefault(id(node), node)
            if kind == "selection":
                # a selection without a float16 kernel is computed in float32 explicitly: its result is exact
                self._memo[key] = (reached, direct and node.op_type in CPU_FLOAT16)
            # an arithmetic node keeps its own answer: it is rounded explicitly, whatever it reads


def _cast_up_first(node: ir.Node) -> None:
    """``Cast(x: half, to=int8/uint8)`` becomes ``Cast(Cast(x, to=FLOAT), to=...)``: the same values (float32
    holds every half-precision value), a cast onnxruntime does not merge with the rounding before it."""
    value = node.inputs[0]
    up = ir.node("Cast", [value], {"to": ir.DataType.FLOAT}, name=f"{node.name}/to_float")
    up.outputs[0].dtype, up.outputs[0].shape = ir.DataType.FLOAT, value.shape
    up.outputs[0].name = f"{node.name}__float_input"
    copy_provenance(node, up)
    node.graph.insert_before(node, up)
    node.replace_input_with(0, up.outputs[0])


def round_half_results(model: ir.Model) -> int:
    """Makes every float16 result that reaches a cast to another type, a comparison, a rounding op or an
    index-producing op (:data:`JUMPS`), directly or through :data:`SELECTIONS`, keep its float16 rounding on
    onnxruntime's CPU (see the module's docstring); returns how many nodes it rewrote.

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

    A comparison has no float16 kernel: it is computed in float32 too, so that it reads the rounded product.

    >>> t = ir.Value(name="t", type=ir.TensorType(ir.DataType.FLOAT16), shape=ir.Shape([3]))
    >>> mul = ir.node("Mul", [t, t])
    >>> mul.outputs[0].dtype = ir.DataType.FLOAT16
    >>> less = ir.node("Less", [mul.outputs[0], t])
    >>> less.outputs[0].dtype = ir.DataType.BOOL
    >>> graph = ir.Graph([t], less.outputs, nodes=[mul, less], opset_imports={"": 18})
    >>> round_half_results(ir.Model(graph, ir_version=10))
    2
    >>> [n.op_type for n in graph]
    ['Cast', 'Mul', 'Cast', 'Cast', 'Less']
    """
    if not needs_guard(of_model(model), "half_computed_in_float"):
        return 0  # a model for CUDA only: its float16 kernels round as PyTorch does
    walk, jumps_after = _Walk(), JumpsAfter()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        values, jumps = _read_inputs(node, jumps_after)
        for value in values:
            walk.read(value, node, jumps)
    in_float: set[int] = set(walk.sources)
    cast_up: list[ir.Node] = []
    for key, node in walk.frontier.items():
        if node.op_type == "Cast":
            to = ir.DataType(node.attributes["to"].as_int())
            if to in _NARROW_INTEGERS and node.inputs[0].dtype in _HALF:
                cast_up.append(node)
        elif node.op_type not in CPU_FLOAT16 and any(v is not None and v.dtype == F16 for v in node.inputs):
            in_float.add(key)
    casts: dict[tuple[int, int], ir.Value] = {}
    for node in [n for n in ir.traversal.RecursiveGraphIterator(model.graph) if id(n) in in_float]:
        _compute_in_float(node, casts)  # in the graph's order: a cast up is made before the first node reading it
    for node in cast_up:
        _cast_up_first(node)
    count = len(in_float) + len(cast_up)
    if count:
        logger.debug("%d half-precision nodes rewritten to keep their rounding", count)
    return count
