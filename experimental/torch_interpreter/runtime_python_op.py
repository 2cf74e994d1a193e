"""Runs ONNX models containing ``com.microsoft::PythonOp`` nodes on standard onnxruntime.

onnxruntime has a PythonOp kernel only in its training builds. Here the graph is cut at the PythonOp nodes:
the ONNX parts run in onnxruntime sessions, each PythonOp node calls its ``torch.autograd.Function`` (found
from ``func_name``, constants rebuilt from the attributes) on torch tensors. Tensors cross the boundary
through DLPack, without copies, and stay on the GPU when the sessions run on CUDA.

Cutting: every value gets a *stage*, the largest number of PythonOp nodes on a path from the graph inputs
to it. ONNX nodes of stage ``k`` form segment ``k``; PythonOp nodes whose inputs have stage ``k`` run after
segment ``k`` and produce values of stage ``k + 1``. A model with PythonOp nodes on ``n`` successive levels
thus needs at most ``n + 1`` sessions, however many PythonOp nodes each level has.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

from .dtypes import onnx_dtype
from .errors import RuntimeFeedError
from .python_op import custom_ops, table
from .python_op.attributes import DOMAIN, OP_TYPE, decode_constants
from .python_op.table import resolve_function

logger = logging.getLogger(__name__)


def _is_python_op(node: onnx.NodeProto) -> bool:
    return node.op_type == OP_TYPE and node.domain == DOMAIN


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _graph_has_python_op(graph: onnx.GraphProto) -> bool:
    return any(_is_python_op(n) or any(_graph_has_python_op(g) for g in _subgraphs(n)) for n in graph.node)


def has_python_ops(model: Any) -> bool:
    """Whether ``model`` (path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model``) has PythonOp nodes."""
    if isinstance(model, ir.Model):
        return any(
            n.op_type == OP_TYPE and n.domain == DOMAIN for n in ir.traversal.RecursiveGraphIterator(model.graph)
        )
    if isinstance(model, onnx.ModelProto):
        return _graph_has_python_op(model.graph)
    if isinstance(model, bytes):
        return OP_TYPE.encode() in model and _graph_has_python_op(onnx.load_from_string(model).graph)
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(OP_TYPE.encode()) < 0 or data.find(DOMAIN.encode()) < 0:
                    return False
        except (OSError, ValueError):  # missing or empty file: onnxruntime says what is wrong
            return False
        return _graph_has_python_op(onnx.load(os.fspath(model), load_external_data=False).graph)
    return False


def _type_string(elem_type: int) -> str:
    return f"tensor({ir.DataType(elem_type).name.lower()})"


@dataclass
class NodeArg:
    """What ``get_inputs()`` / ``get_outputs()`` return, as onnxruntime's ``NodeArg``."""

    name: str
    type: str
    shape: list[int | str | None]


def _node_arg(vi: onnx.ValueInfoProto) -> NodeArg:
    tt = vi.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
    return NodeArg(vi.name, _type_string(tt.elem_type), shape)


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    """Names a subgraph reads from the enclosing scopes."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(n for n in node.input if n)
        for g in _subgraphs(node):
            used |= _outer_names(g)
        defined.update(node.output)
    used.update(o.name for o in graph.output)
    return used - defined


def _node_inputs(node: onnx.NodeProto) -> list[str]:
    names = [n for n in node.input if n]
    for g in _subgraphs(node):
        names.extend(sorted(_outer_names(g)))
    return names


@dataclass
class _Segment:
    """ONNX nodes run by one onnxruntime session."""

    nodes: list[onnx.NodeProto]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    session: Any = None


@dataclass
class _PythonCall:
    """One PythonOp node: the Function class or the custom op, its constants by position, its input convention."""

    node: onnx.NodeProto
    label: str
    convention: str
    constants: dict[int, Any]
    output_types: list[int]
    cls: type | None = None
    op: torch._ops.OpOverload | None = None
    lists: dict[int, int] = field(default_factory=dict)

    def arguments(self, tensors: Sequence[torch.Tensor]) -> list[Any]:
        it = iter(tensors)
        return [next(it) if c == "d" else self.constants[i] for i, c in enumerate(self.convention)]

    def __call__(self, tensors: Sequence[torch.Tensor]) -> Any:
        if self.op is not None:
            args, kwargs = custom_ops.call_arguments(self.op, self.convention, self.constants, tensors, self.lists)
            return self.op(*args, **kwargs)
        return self.cls.apply(*self.arguments(tensors))  # type: ignore[union-attr]


def python_call(node: onnx.NodeProto) -> _PythonCall:
    """What a PythonOp node calls: a custom op (``func_name`` ``torch.ops.<ns>.<op>.<overload>``, found through
    ``torch.ops``) or a ``torch.autograd.Function`` (found by its qualified name), constants rebuilt."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    name, convention = attrs["func_name"], attrs["input_convention"]
    types = list(attrs.get("output_tensor_types", []))
    if name.startswith(custom_ops.PREFIX):
        op = custom_ops.resolve_op(name, attrs.get("comment", ""), node.name)
        pointer, floats = custom_ops.object_table(attrs.get("comment", ""))
        constants = decode_constants(attrs, pointer)
        constants.update(floats)  # full precision, the attributes are float32
        lists = custom_ops.tensor_lists(attrs.get("comment", ""))
        return _PythonCall(node, name, convention, constants, types, op=op, lists=lists)
    cls = resolve_function(name)
    return _PythonCall(node, name, convention, decode_constants(attrs, table.pointer), types, cls=cls)


class PythonOpSession:
    """Runs a model with PythonOp nodes: onnxruntime for the ONNX segments, the Function's ``apply`` for each
    PythonOp node. :class:`experimental.torch_interpreter.InferenceSession` delegates to it.

    Without ``sess_options``, the sessions do not let their threads spin after a run (they would take the
    cores from the PythonOp's torch code); given options are used as they are.
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes | onnx.ModelProto | ir.Model,
        providers: Sequence[str] | None = None,
        sess_options: ort.SessionOptions | None = None,
    ):
        from .runtime import CPU, CUDA, InferenceSession

        if sess_options is None:
            # onnxruntime's threads spin after each run, which slows torch down for tens of milliseconds when
            # a PythonOp node follows; without spinning, the threads sleep at once
            sess_options = ort.SessionOptions()
            sess_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        proto = _load(model)
        graph = proto.graph
        initializers = {t.name: t for t in graph.initializer}
        self._inputs = [_node_arg(i) for i in graph.input if i.name not in initializers]
        self._outputs = [_node_arg(o) for o in graph.output]
        self._output_names = [o.name for o in graph.output]
        types = _value_infos(proto)

        steps, free = _plan(graph)
        self._steps: list[_Segment | _PythonCall | _ControlFlowCall] = []
        producers = {}  # name -> step index
        consumers: dict[str, list[int]] = {}
        for i, step in enumerate(steps):
            nodes = step.nodes if isinstance(step, _Segment) else [step]
            produced: set[str] = set()
            for node in nodes:
                for name in _node_inputs(node):
                    if name not in produced:
                        consumers.setdefault(name, []).append(i)
                produced.update(o for o in node.output if o)
            for name in produced:
                producers[name] = i
        graph_outputs = set(self._output_names)
        # constants read by PythonOp nodes or returned as they are: computed once here
        wanted = graph_outputs | {n for step in steps if not isinstance(step, _Segment) for n in _node_inputs(step)}
        self._constants: dict[str, torch.Tensor] = {}
        for node in {id(free[n]): free[n] for n in wanted if n in free}.values():
            self._constants.update(_evaluate(node, proto))

        self._providers: list[str] | None = list(providers) if providers is not None else None
        chosen = self._providers
        for i, step in enumerate(steps):
            if isinstance(step, _Segment):
                produced = {o for n in step.nodes for o in n.output if o}
                step.inputs = sorted(
                    {n for node in step.nodes for n in _node_inputs(node)} - produced - set(initializers),
                    key=lambda n: (producers.get(n, -1), n),
                )
                step.outputs = [
                    o
                    for n in step.nodes
                    for o in n.output
                    if o and o not in free and (o in graph_outputs or any(c > i for c in consumers.get(o, ())))
                ]
                if not step.outputs:
                    continue
                if any(n not in types for n in step.inputs):  # a model without value_info: infer the types
                    types.update(_value_infos(proto, infer=True))
                sub = _segment_model(proto, step, initializers, types, i)
                step.session = InferenceSession(sub, providers=chosen, sess_options=sess_options)
                chosen = step.session.get_providers()
                self._steps.append(step)
            else:
                node = step
                for name in _node_inputs(node):
                    if name in initializers and name not in self._constants:
                        self._constants[name] = torch.from_numpy(onnx.numpy_helper.to_array(initializers[name]).copy())
                self._steps.append(python_call(node) if _is_python_op(node) else _ControlFlowCall.create(node, proto))
        if chosen is None:  # no ONNX segment: the PythonOp nodes decide alone
            chosen = [CUDA, CPU] if CUDA in ort.get_available_providers() and torch.cuda.is_available() else [CPU]
        self._providers = list(chosen)
        self._device = torch.device("cuda" if CUDA in self._providers else "cpu")
        self._constants = {name: tensor.to(self._device) for name, tensor in self._constants.items()}

        # values to drop after the step that reads them last
        last: dict[str, int] = {}
        for i, step in enumerate(self._steps):
            names = step.inputs if isinstance(step, _Segment) else _node_inputs(step.node)
            for name in names:
                last[name] = i
        self._release: list[list[str]] = [[] for _ in self._steps]
        for name, i in last.items():
            if name not in graph_outputs:
                self._release[i].append(name)
        logger.info(
            "PythonOpSession: %d onnxruntime segment(s), %d PythonOp or control-flow node(s) run in Python",
            sum(isinstance(s, _Segment) for s in self._steps),
            sum(not isinstance(s, _Segment) for s in self._steps),
        )

    # -- onnxruntime's interface -------------------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_providers(self) -> list[str]:
        return list(self._providers)

    @property
    def num_segments(self) -> int:
        """How many onnxruntime sessions the model was cut into."""
        return sum(isinstance(s, _Segment) for s in self._steps)

    # -- running -----------------------------------------------------------------------------------------------
    def run_values(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        """Runs the model; returns each requested output as an ``OrtValue`` or a torch tensor (no copy)."""
        names = list(output_names) if output_names else self._output_names
        unknown = [n for n in names if n not in self._output_names]
        if unknown:
            raise RuntimeFeedError(f"unknown output(s) {unknown}; the model outputs are {self._output_names}")
        env: dict[str, Any] = {**self._constants, **feeds}
        for step, release in zip(self._steps, self._release):
            if isinstance(step, _Segment):
                outs = step.session.run_ortvalues(step.outputs, {n: env[n] for n in step.inputs}, run_options)
                env.update(zip(step.outputs, outs))
            elif isinstance(step, _ControlFlowCall):
                outs = step.run([self._value(n, env) for n in step.inputs])
                env.update((n, o.to(self._device)) for n, o in zip([o for o in step.node.output if o], outs))
            else:
                self._call(step, env)
            for name in release:
                env.pop(name, None)
        return [env[n] for n in names]

    def run(self, output_names, feeds, run_options=None) -> list[np.ndarray]:
        return [_to_numpy(v) for v in self.run_values(output_names, feeds, run_options)]

    def run_torch(self, output_names, feeds, run_options=None) -> list[torch.Tensor]:
        return [to_torch(v) for v in self.run_values(output_names, feeds, run_options)]

    def run_ortvalues(self, output_names, feeds, run_options=None) -> list[ort.OrtValue]:
        return [_to_ortvalue(v) for v in self.run_values(output_names, feeds, run_options)]

    def _value(self, name: str, env: Mapping[str, Any]) -> torch.Tensor:
        return to_torch(env[name], self._device)

    def _call(self, step: _PythonCall, env: dict[str, Any]) -> None:
        node = step.node
        tensors = [self._value(n, env) for n in node.input]
        with torch.no_grad():
            result = step(tensors)
        outs = [result] if isinstance(result, torch.Tensor) else list(result)
        if len(outs) != len(node.output) - 1 or not all(isinstance(o, torch.Tensor) for o in outs):
            raise RuntimeError(
                f"PythonOp {node.name!r}: {step.label} returned {len(outs)} value(s), "
                f"the node has {len(node.output) - 1} output(s)"
            )
        for i, (out, expected) in enumerate(zip(outs, step.output_types)):
            if int(onnx_dtype(out.dtype)) != expected:
                raise RuntimeError(
                    f"PythonOp {node.name!r}: output {i} of {step.label} is {out.dtype}, the "
                    f"model says {ir.DataType(expected).name}"
                )
        if node.output[0]:
            env[node.output[0]] = torch.zeros(1, dtype=torch.int64, device=self._device)
        env.update((name, out) for name, out in zip(node.output[1:], outs) if name)


def to_torch(value: Any, device: torch.device | None = None) -> torch.Tensor:
    """A runtime value (OrtValue, torch tensor, numpy array, scalar) as a torch tensor, shared when possible."""
    from .runtime import _ortvalue_to_torch

    if isinstance(value, ort.OrtValue):
        tensor = _ortvalue_to_torch(value)
    elif isinstance(value, torch.Tensor):
        tensor = value
    elif isinstance(value, np.ndarray):
        tensor = torch.as_tensor(value)
    else:
        tensor = torch.as_tensor(value)
    if device is not None and tensor.device != device:
        tensor = tensor.to(device)
    return tensor


def _load(model: Any) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return ir.to_proto(model)
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model))
    raise TypeError(f"expected a path, bytes, onnx.ModelProto or onnx_ir.Model, not {type(model)}")


def _value_infos(model: onnx.ModelProto, infer: bool = False) -> dict[str, onnx.ValueInfoProto]:
    """The type of every value the model knows (with ``infer``, shape inference too), PythonOp outputs from
    their attributes."""
    infos: dict[str, onnx.ValueInfoProto] = {}
    inferred: Sequence[onnx.ValueInfoProto] = ()
    if infer:
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph.value_info
        except Exception as e:  # noqa: BLE001 - types then come from the model alone
            logger.debug("shape inference failed: %s", e)
    for vi in [*inferred, *model.graph.value_info, *model.graph.input, *model.graph.output]:
        if vi.type.tensor_type.elem_type:
            infos[vi.name] = vi
    for node in model.graph.node:
        if not _is_python_op(node):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.output[0] and node.output[0] not in infos:
            infos[node.output[0]] = onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.INT64, [1])
        for name, elem, rank in zip(
            node.output[1:], attrs.get("output_tensor_types", []), attrs.get("output_tensor_ranks", [])
        ):
            if name and name not in infos:
                infos[name] = onnx.helper.make_tensor_value_info(name, elem, [None] * rank)
    return infos


def _plan(graph: onnx.GraphProto) -> tuple[list[_Segment | onnx.NodeProto], dict[str, onnx.NodeProto]]:
    """Segments and PythonOp nodes in execution order (see the module's docstring), and the nodes without
    inputs (constants), copied into every segment that reads them instead of making a segment of their own."""
    stage: dict[str, int] = {}
    segments: dict[int, list[onnx.NodeProto]] = {}
    calls: dict[int, list[onnx.NodeProto]] = {}
    free: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        inputs = _node_inputs(node)
        level = max((stage.get(n, 0) for n in inputs), default=0)
        if _is_python_op(node) or _holds_python_op(node):  # run in Python (control flow: node by node)
            calls.setdefault(level, []).append(node)
            stage.update((o, level + 1) for o in node.output if o)
        elif not inputs:
            free.update((o, node) for o in node.output if o)
        else:
            segments.setdefault(level, []).append(node)
            stage.update((o, level) for o in node.output if o)
    steps: list[_Segment | onnx.NodeProto] = []
    for level in range(max([*segments, *calls], default=-1) + 1):
        if level in segments:
            nodes = segments[level]
            used = {n for node in nodes for n in _node_inputs(node)}
            constants = {id(free[n]): free[n] for n in used if n in free}
            steps.append(_Segment([n for n in graph.node if id(n) in constants] + nodes))
        steps.extend(calls.get(level, []))
    return steps, free


def _holds_python_op(node: onnx.NodeProto) -> bool:
    """A control-flow node (If, Loop, Scan) with a PythonOp node in one of its bodies."""
    return any(_graph_has_python_op(g) for g in _subgraphs(node))


def _python_op_run_class() -> type:
    """onnx's reference evaluator kernel for ``com.microsoft::PythonOp``: calls the function or the custom op
    (numpy in and out)."""
    from onnx.reference.op_run import OpRun

    class PythonOp(OpRun):
        op_domain = DOMAIN

        def _run(self, *inputs: np.ndarray, **attributes: Any) -> tuple[np.ndarray, ...]:
            call = getattr(self, "_call", None)
            if call is None:
                call = self._call = python_call(self.onnx_node)
            tensors = [torch.from_numpy(np.array(x, copy=True)) for x in inputs]
            with torch.no_grad():
                result = call(tensors)
            outs = [result] if isinstance(result, torch.Tensor) else list(result)
            if len(outs) != len(self.onnx_node.output) - 1:
                raise RuntimeError(
                    f"PythonOp {self.onnx_node.name!r}: {call.label} returned {len(outs)} value(s), the node has "
                    f"{len(self.onnx_node.output) - 1} output(s)"
                )
            return (np.zeros(1, dtype=np.int64), *(o.detach().cpu().numpy() for o in outs))

    return PythonOp


@dataclass
class _ControlFlowCall:
    """A control-flow node whose bodies hold PythonOp nodes, run node by node by onnx's reference evaluator
    (numpy, on the CPU), the PythonOp nodes calling back torch."""

    node: onnx.NodeProto
    inputs: list[str]
    evaluator: Any

    @classmethod
    def create(cls, node: onnx.NodeProto, model: onnx.ModelProto) -> _ControlFlowCall:
        from onnx.reference import ReferenceEvaluator

        inputs = list(dict.fromkeys(_node_inputs(node)))
        graph = onnx.helper.make_graph(
            [node],
            f"{node.name}_control_flow",
            [onnx.helper.make_empty_tensor_value_info(n) for n in inputs],
            [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
        )
        sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
        sub.ir_version = model.ir_version
        return cls(node, inputs, ReferenceEvaluator(sub, new_ops=[_python_op_run_class()]))

    def run(self, values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        feeds = {name: v.detach().cpu().numpy() for name, v in zip(self.inputs, values)}
        return [torch.from_numpy(np.asarray(o)) for o in self.evaluator.run(None, feeds)]


def _evaluate(node: onnx.NodeProto, model: onnx.ModelProto) -> dict[str, torch.Tensor]:
    """The outputs of a node without inputs (a constant a PythonOp node or the graph output reads)."""
    from onnx.reference import ReferenceEvaluator

    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output]
    graph = onnx.helper.make_graph([node], "constant", [], outputs)
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import)
    values = ReferenceEvaluator(sub).run(None, {})
    return {name: torch.from_numpy(np.array(v)) for name, v in zip(node.output, values) if name}


def _segment_model(
    model: onnx.ModelProto,
    segment: _Segment,
    initializers: Mapping[str, onnx.TensorProto],
    types: Mapping[str, onnx.ValueInfoProto],
    index: int,
) -> onnx.ModelProto:
    used = {n for node in segment.nodes for n in _node_inputs(node)}
    missing = [n for n in segment.inputs if n not in types]
    if missing:
        raise RuntimeError(f"the types of {missing} are unknown: cannot cut the model at its PythonOp nodes")
    outputs = [types[o] if o in types else onnx.helper.make_empty_tensor_value_info(o) for o in segment.outputs]
    graph = onnx.helper.make_graph(
        segment.nodes,
        f"{model.graph.name}_segment{index}",
        [types[n] for n in segment.inputs],
        outputs,
        initializer=[initializers[n] for n in sorted(used & set(initializers))],
    )
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
    sub.ir_version = model.ir_version
    return sub


def _to_ortvalue(value: Any) -> ort.OrtValue:
    if isinstance(value, ort.OrtValue):
        return value
    tensor = to_torch(value).detach()
    if tensor.dtype == torch.bool:  # DLPack's bool is not read by onnxruntime
        return ort.OrtValue.ortvalue_from_numpy(tensor.cpu().numpy())
    return ort.OrtValue.from_dlpack(tensor.contiguous())


def _to_numpy(value: Any) -> np.ndarray:
    from .runtime import _ortvalue_to_numpy, to_numpy

    return _ortvalue_to_numpy(value) if isinstance(value, ort.OrtValue) else to_numpy(value)
