"""Runs ONNX models containing ``com.microsoft::PythonOp`` nodes on standard onnxruntime.

onnxruntime has a PythonOp kernel only in its training builds. Here the graph is cut at the PythonOp nodes
(:mod:`.segments`): the ONNX parts run in low-level sessions (:class:`.session.OrtSession`), each PythonOp node
calls its ``torch.autograd.Function`` or custom op (:mod:`.python_calls`) on torch tensors. Tensors cross the
boundary through DLPack, without copies, and stay on the GPU when the sessions run on CUDA.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

from ..metadata import read as read_metadata
from ..dtypes import onnx_dtype
from ..errors import MalformedModelError, RuntimeFeedError, TorchInterpreterError
from .feeds import FeedChecks
from .guards import SizeChecks
from .model_loading import Model, load_contained
from .ort_values import CUDA, as_numpy, as_ortvalue, default_providers, to_torch
from .python_calls import ControlFlowCall, GradCall, PythonCall, check_python_ops, python_call
from .python_op_nodes import is_python_op, node_inputs
from .segments import NodeArg, Segment, evaluate_constant, node_arg, plan, segment_model, value_infos
from .sharing import SharedInitializers, constants_as_initializers
from .session import OrtSession
from .trust import TrustPolicy

logger = logging.getLogger(__name__)


def _own_options() -> ort.SessionOptions:
    """The options of a segment's session when the user gave none: onnxruntime's threads spin after each run,
    which slows torch down for tens of milliseconds when a PythonOp node follows; without spinning, the threads
    sleep at once."""
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _check_names(graph: onnx.GraphProto) -> None:
    """Raises :class:`MalformedModelError` naming the node when a node reads a value that no graph input,
    initializer or node before it defines, or when a graph output is defined by none. A graph in this order
    (ONNX's) is planned into steps each of which finds its inputs computed by the steps before it (:func:`.plan`)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        missing = [n for n in node_inputs(node) if n not in defined]
        if missing:
            raise MalformedModelError(
                f"{node.op_type} node {node.name!r} reads {missing[:8]}, which no graph input, initializer or "
                "node before it defines"
            )
        defined.update(o for o in node.output if o)
    missing = [o.name for o in graph.output if o.name not in defined]
    if missing:
        raise MalformedModelError(f"the graph outputs {missing[:8]} are defined by no node, input or initializer")


def _segment_session(
    sub: onnx.ModelProto, step: Segment, providers: list[str] | None, sess_options: ort.SessionOptions
) -> OrtSession:
    """The session of one segment; onnxruntime's refusal of a segment (the types a PythonOp node declares do not
    fit the nodes reading its outputs...) becomes a :class:`MalformedModelError` naming the segment's nodes."""
    try:
        return OrtSession(sub, providers=providers, sess_options=sess_options)
    except (TorchInterpreterError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - onnxruntime's Fail, InvalidGraph... derive from Exception only
        names = ", ".join(f"{n.op_type} node {n.name!r}" for n in step.nodes[:8])
        raise MalformedModelError(
            f"onnxruntime refused the part of the model between PythonOp nodes made of {names}"
            f"{'...' if len(step.nodes) > 8 else ''}: {str(e).splitlines()[0][:500]} (do the types and ranks "
            "the PythonOp nodes declare fit the nodes reading their outputs?)"
        ) from e


class PythonOpSession:
    """Runs a model with PythonOp nodes: onnxruntime for the ONNX segments, the Function's ``apply`` for each
    PythonOp node. :class:`experimental.torch_interpreter.InferenceSession` delegates to it.

    Without ``sess_options``, the sessions do not let their threads spin after a run (they would take the
    cores from the PythonOp's torch code); given options are used as they are. ``policy`` says which modules
    the session may import to find a node's code (:mod:`.trust`; default: none): every PythonOp node is read
    and resolved before any onnxruntime session is created.

    >>> from onnx import TensorProto, helper
    >>> from experimental.torch_interpreter.python_op.table import register_function
    >>> class Relu(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x.relu()
    >>> register_function(Relu, "doc_example.Relu")
    >>> relu = helper.make_node("PythonOp", ["n"], ["ctx", "r"], domain="com.microsoft", input_convention="d",
    ...                         func_name="doc_example.Relu", output_tensor_types=[TensorProto.FLOAT],
    ...                         output_tensor_ranks=[1])
    >>> graph = helper.make_graph([helper.make_node("Neg", ["x"], ["n"]), relu, helper.make_node("Abs", ["r"], ["y"])],
    ...                           "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    >>> opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    >>> model = helper.make_model(graph, opset_imports=opsets)
    >>> sess = PythonOpSession(model, providers=["CPUExecutionProvider"])
    >>> sess.num_segments, sess.run(None, {"x": torch.tensor([-1.0, 0.0, 2.0])})[0]
    (2, array([1., 0., 0.], dtype=float32))
    """

    def __init__(
        self,
        model: Model,
        providers: Sequence[str] | None = None,
        sess_options: ort.SessionOptions | None = None,
        policy: TrustPolicy | None = None,
    ):
        policy = policy or TrustPolicy()
        own_options = sess_options is None
        proto = load_contained(model)  # external data from the model's folder only, before anything reads it
        check_python_ops(proto, policy)  # refused here, before anything is created or run
        graph = proto.graph
        constants_as_initializers(graph)
        initializers = {t.name: t for t in graph.initializer}
        self._inputs = [node_arg(i) for i in graph.input if i.name not in initializers]
        self._outputs = [node_arg(o) for o in graph.output]
        self._output_names = [o.name for o in graph.output]
        # conditions on the input sizes the exported graph relies on (guards.py); the PythonOp path has never
        # looked for the scalars baked in at export (``baked={}``): an unknown feed is reported as such
        self._checks = FeedChecks(self._inputs, SizeChecks(read_metadata(proto)), {})
        types = value_infos(proto)

        _check_names(graph)
        steps, free = plan(graph)
        # an initializer several segments read is held once, not copied into each (sharing.py)
        shared = SharedInitializers.create(steps, initializers, own_options)
        in_segments = shared.segment_initializers(initializers)
        self._constants: dict[str, torch.Tensor] = dict(shared.fed)
        types.update(shared.types)
        self._steps: list[Segment | PythonCall | GradCall | ControlFlowCall] = []
        producers = {}  # name -> step index
        consumers: dict[str, list[int]] = {}
        for i, step in enumerate(steps):
            nodes = step.nodes if isinstance(step, Segment) else [step]
            produced: set[str] = set()
            for node in nodes:
                for name in node_inputs(node):
                    if name not in produced:
                        consumers.setdefault(name, []).append(i)
                produced.update(o for o in node.output if o)
            for name in produced:
                producers[name] = i
        graph_outputs = set(self._output_names)
        #: the values a later step or the caller reads
        self._read = graph_outputs | set(consumers)
        # constants read by PythonOp nodes or returned as they are: computed once here
        wanted = graph_outputs | {n for step in steps if not isinstance(step, Segment) for n in node_inputs(step)}
        self._shared = shared  # its OrtValues live as long as the segments' sessions
        for node in {id(free[n]): free[n] for n in wanted if n in free}.values():
            self._constants.update(evaluate_constant(node, proto))
        for name in graph_outputs:  # an output the optimizer folded into an initializer
            if name in initializers and name not in self._constants:
                self._constants[name] = to_torch(onnx.numpy_helper.to_array(initializers[name]).copy())

        self._providers: list[str] | None = list(providers) if providers is not None else None
        chosen = self._providers
        for i, step in enumerate(steps):
            if isinstance(step, Segment):
                produced = {o for n in step.nodes for o in n.output if o}
                step.inputs = sorted(
                    {n for node in step.nodes for n in node_inputs(node)} - produced - set(in_segments),
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
                    types.update(value_infos(proto, infer=True))
                sub = segment_model(proto, step, in_segments, types, i)
                options = sess_options
                if own_options:
                    options = _own_options()
                    shared.give(options, {n for node in step.nodes for n in node_inputs(node)})
                step.session = _segment_session(sub, step, chosen, options)
                chosen = step.session.get_providers()
                self._steps.append(step)
            else:
                node = step
                for name in node_inputs(node):
                    if name in initializers and name not in self._constants:
                        self._constants[name] = to_torch(onnx.numpy_helper.to_array(initializers[name]).copy())
                call = python_call(node, policy) if is_python_op(node) else ControlFlowCall.create(node, proto, policy)
                if isinstance(call, PythonCall) and not (
                    node.output[0] in graph_outputs or consumers.get(node.output[0])
                ):
                    call.requires_grads = None  # nobody reads the context: no backward will come, keep none
                self._steps.append(call)
        if chosen is None:  # no ONNX segment: the PythonOp nodes decide alone
            chosen = default_providers()
        self._providers = list(chosen)
        self._device = torch.device("cuda" if CUDA in self._providers else "cpu")
        self._constants = {name: tensor.to(self._device) for name, tensor in self._constants.items()}

        # values to drop after the step that reads them last
        last: dict[str, int] = {}
        for i, step in enumerate(self._steps):
            names = step.inputs if isinstance(step, Segment) else node_inputs(step.node)
            for name in names:
                last[name] = i
        self._release: list[list[str]] = [[] for _ in self._steps]
        for name, i in last.items():
            if name not in graph_outputs:
                self._release[i].append(name)
        logger.info(
            "PythonOpSession: %d onnxruntime segment(s), %d PythonOp or control-flow node(s) run in Python",
            sum(isinstance(s, Segment) for s in self._steps),
            sum(not isinstance(s, Segment) for s in self._steps),
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
        return sum(isinstance(s, Segment) for s in self._steps)

    # -- running -----------------------------------------------------------------------------------------------
    def run_values(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        """Runs the model on feeds already checked; returns each requested output as an ``OrtValue`` or a torch
        tensor (no copy)."""
        names = list(output_names) if output_names else self._output_names
        unknown = [n for n in names if n not in self._output_names]
        if unknown:
            raise RuntimeFeedError(f"unknown output(s) {unknown}; the model outputs are {self._output_names}")
        env: dict[str, Any] = {**self._constants, **feeds}
        for step, release in zip(self._steps, self._release):
            if isinstance(step, Segment):
                outs = step.session.run_ortvalues(step.outputs, {n: env[n] for n in step.inputs}, run_options)
                env.update(zip(step.outputs, outs))
            elif isinstance(step, ControlFlowCall):
                outs = step.run([self._value(n, env) for n in step.inputs])
                env.update((n, o.to(self._device)) for n, o in zip([o for o in step.node.output if o], outs))
            else:
                self._call(step, env)
            for name in release:
                env.pop(name, None)
        return [env[n] for n in names]

    def run(
        self, output_names: Sequence[str] | None, feeds: Mapping[str, Any], run_options: ort.RunOptions | None = None
    ) -> list[np.ndarray]:
        """Runs the model; returns numpy arrays."""
        self._checks.check(feeds)
        return [as_numpy(v) for v in self.run_values(output_names, feeds, run_options)]

    def run_torch(
        self, output_names: Sequence[str] | None, feeds: Mapping[str, Any], run_options: ort.RunOptions | None = None
    ) -> list[torch.Tensor]:
        """Runs the model; returns torch tensors (no copy)."""
        self._checks.check(feeds)
        return [to_torch(v) for v in self.run_values(output_names, feeds, run_options)]

    def run_ortvalues(
        self, output_names: Sequence[str] | None, feeds: Mapping[str, Any], run_options: ort.RunOptions | None = None
    ) -> list[ort.OrtValue]:
        """Runs the model; returns ``OrtValue`` (no copy)."""
        self._checks.check(feeds)
        return [as_ortvalue(v) for v in self.run_values(output_names, feeds, run_options)]

    def _value(self, name: str, env: Mapping[str, Any]) -> torch.Tensor:
        return to_torch(env[name], self._device)

    def _call(self, step: PythonCall | GradCall, env: dict[str, Any]) -> None:
        node = step.node
        tensors = [self._value(n, env) if n else None for n in node.input]
        context, outs = step.run(tensors, self._device)
        first = 1 if isinstance(step, PythonCall) else 0
        if len(outs) != len(node.output) - first:
            raise MalformedModelError(
                f"{node.op_type} node {node.name!r}: {step.label} returned {len(outs)} value(s), "
                f"the node has {len(node.output) - first} output(s)"
            )
        for i, (out, rank) in enumerate(zip(outs, step.output_ranks)):
            if isinstance(out, torch.Tensor) and out.dim() != rank:
                raise MalformedModelError(
                    f"{node.op_type} node {node.name!r}: output {i} of {step.label} has rank {out.dim()}, the node "
                    f"declares {rank} (output_tensor_ranks)"
                )
        for i, (out, expected) in enumerate(zip(outs, step.output_types)):
            if out is None and isinstance(step, GradCall):
                if node.output[i] in self._read:
                    raise RuntimeFeedError(
                        f"{node.op_type} node {node.name!r}: output {i} is read by the graph, but the forward's tensor input "
                        "it is the gradient of did not require one (input_requires_grads): the model was edited"
                    )
                continue
            if not isinstance(out, torch.Tensor):
                raise MalformedModelError(f"{node.op_type} node {node.name!r}: output {i} of {step.label} is not a tensor")
            if int(onnx_dtype(out.dtype)) != expected:
                raise MalformedModelError(
                    f"{node.op_type} node {node.name!r}: output {i} of {step.label} is {out.dtype}, the "
                    f"node declares {ir.DataType(expected).name} (output_tensor_types)"
                )
        if first and node.output[0]:
            env[node.output[0]] = context
        env.update((name, out) for name, out in zip(node.output[first:], outs) if name and out is not None)
