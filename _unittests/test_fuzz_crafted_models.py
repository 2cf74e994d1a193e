"""A property-based fuzzer of crafted model files: mutations of valid models with PythonOp, PythonOpGrad and
custom-op nodes, of their metadata and of their tensors' storage. Whatever the mutation, creating the session and
running it either works or raises one of the project's errors (:class:`TorchInterpreterError`) naming the node,
the tensor or the metadata entry, within bounded time and memory: never a crash of another type, a hang or a
file read outside the model's folder.
"""

from __future__ import annotations

import json
import os
import resource
import time

import numpy as np
import onnx
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from experimental.torch_interpreter import InferenceSession, TorchInterpreterError
from experimental.torch_interpreter.metadata import RANGE_CONSTRAINTS, SHAPE_GUARDS
from experimental.torch_interpreter.python_op.table import register_function

OPSETS = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
X = np.array([1.0, -2.0, 3.0], np.float32)
#: the most seconds one crafted model may take (session and run) and the most RSS the whole fuzzing may add
SECONDS, GROWTH_MB = 10, 1024


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, offsets):
        ctx.save_for_backward(x)
        return x * alpha + offsets[0]

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None


register_function(Scaled, "a2o_fuzz.Scaled")


@torch.library.custom_op("a2o_fuzz::scale", mutates_args=())
def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


def _scaled(name="crafted", training=0, outputs=("ctx", "y")):
    return helper.make_node(
        "PythonOp", ["x"], list(outputs), name=name, domain="com.microsoft", func_name="a2o_fuzz.Scaled",
        input_convention="dcc", input_float_scalars=[2.0], input_float_scalar_positions=[1],
        input_int_tuples=[3, 4], input_int_tuple_begins=[0], input_int_tuple_positions=[2],
        input_requires_grads=[1, 0, 0], output_tensor_types=[TensorProto.FLOAT], output_tensor_ranks=[1],
        training_mode=training,
    )


def _custom(name="crafted"):
    return helper.make_node(
        "PythonOp", ["x"], ["ctx", "y"], name=name, domain="com.microsoft", func_name="torch.ops.a2o_fuzz.scale.default",
        input_convention="dc", input_float_scalars=[0.5], input_float_scalar_positions=[1],
        output_tensor_types=[TensorProto.FLOAT], output_tensor_ranks=[1],
        comment=json.dumps({"custom_op": "a2o_fuzz::scale", "module": __name__, "floats": {"1": 0.5}}),
    )


def _grad(name="crafted"):
    return helper.make_node(
        "PythonOpGrad", ["ctx", "dy"], ["dx"], name=name, domain="com.microsoft", func_name="a2o_fuzz.Scaled",
        output_convention="dcc", output_tensor_types=[TensorProto.FLOAT], output_tensor_ranks=[1],
        output_tensor_requires_grads=[1], input_tensor_types=[TensorProto.FLOAT], input_tensor_ranks=[1],
    )


def _graph_model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "fuzzed", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=OPSETS)
    model.ir_version = 10
    return model


def _f(name, shape=(3,), dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def base_model(kind: str) -> onnx.ModelProto:
    """A valid model of each kind the fuzzer mutates."""
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [3], [0.5, 0.25, 0.125])
    if kind == "grad":
        nodes = [_grad(), helper.make_node("Add", ["dx", "bias"], ["out"], name="add_bias")]
        return _graph_model(nodes, [_f("ctx", (1,), TensorProto.INT64), _f("dy")], [_f("out")], [bias])
    node = {"function": _scaled, "custom": _custom, "training": lambda: _scaled(training=1)}[kind]()
    nodes = [
        helper.make_node("Neg", ["x0"], ["x"], name="neg"), node,
        helper.make_node("Add", ["y", "bias"], ["out"], name="add_bias"),
    ]
    outputs = [_f("out")] + ([_f("ctx", (1,), TensorProto.INT64)] if kind == "training" else [])
    model = _graph_model(nodes, [_f("x0")], outputs, [bias])
    helper.set_model_props(model, {
        SHAPE_GUARDS: json.dumps([{"check": "shape('x0', 0) <= 8", "why": "w", "node": "n", "source": "s"}]),
        RANGE_CONSTRAINTS: json.dumps([{"input": "x0", "axis": 0, "low": 2, "high": 8, "narrowed": True}]),
    })
    return model


_NAMES = [
    "a2o_fuzz.Scaled", "torch.ops.a2o_fuzz.scale.default", "torch.ops.aten.relu.default", "torch.ops.fsdp.copy_.default",
    "torch.ops.streams.record_event.default", "torch.ops.c10d_functional.all_reduce.default", "os.system",
    "a2o_fuzz.torch.utils.checkpoint.CheckpointFunction", "this.Zen", "", "\u00e9.F", "a" * 2000, "torch.ops.x",
]
_ATTRIBUTES = [
    "func_name", "input_convention", "output_convention", "comment", "training_mode", "output_tensor_types",
    "output_tensor_ranks", "input_tensor_types", "input_tensor_ranks", "input_requires_grads",
    "output_tensor_requires_grads", "input_float_scalars", "input_float_scalar_positions", "input_int_tuples",
    "input_int_tuple_begins", "input_int_tuple_positions", "input_int_scalars", "input_int_scalar_positions",
    "input_pointer_scalars", "input_pointer_scalar_positions", "input_bool_tuples", "input_bool_tuple_begins",
    "input_bool_tuple_positions",
]
_INTS = st.sampled_from([0, 1, 2, 3, -1, 128, 129, 10**8, 10**12, 2**62, -(2**63), 2**63 - 1])
_VALUES = st.one_of(
    _INTS,
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.lists(_INTS, max_size=40),
    st.lists(st.floats(width=32), max_size=8),
    st.sampled_from(_NAMES + ["d", "dc", "dcc", "dd", "c", "x", "{", "[" * 5000, '{"objects": [{"torch": "load"}]}',
                              json.dumps({"objects": [None, "s", {"device": "cpu"}], "tensor_lists": {"0": 3}})]),
)
_JSON = st.recursive(
    st.none() | st.booleans() | _INTS | st.text(max_size=20) | st.sampled_from(["10**10**10 > 1", "shape('x0', 0)"]),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
        st.sampled_from(["check", "input", "axis", "low", "high", "narrowed", "why"]), inner, max_size=6
    ),
    max_leaves=20,
)
_LOCATIONS = st.sampled_from(["../secret.bin", "/etc/hostname", "data.bin", "*/_ORT_MEM_ADDR_/*", "", "a/../../b"])


_STRINGS = ("func_name", "input_convention", "output_convention", "comment")


def _typed(key):
    """Values of the attribute's own type, near the valid ones: what reaches the checks after the type check."""
    if key in _STRINGS:
        return st.sampled_from(_NAMES + ["d", "dc", "dcc", "dcd", "ddc", "c", "ccc"]) | _VALUES.filter(
            lambda v: isinstance(v, str)
        )
    if key == "training_mode":
        return st.sampled_from([0, 1, 2, -1])
    if key in ("input_float_scalars",):
        return st.lists(st.floats(width=32), max_size=4)
    return st.lists(st.integers(-2, 4) | _INTS, max_size=5)


@st.composite
def mutations(draw):
    """A list of (what, arguments) mutations."""
    one = st.one_of(
        st.sampled_from(_ATTRIBUTES).flatmap(lambda k: st.tuples(st.just("set"), st.just(k), _typed(k))),
        st.tuples(st.just("set"), st.sampled_from(_ATTRIBUTES), _VALUES),
        st.tuples(st.just("drop"), st.sampled_from(_ATTRIBUTES), st.none()),
        st.tuples(st.just("inputs"), st.lists(st.sampled_from(["x", "", "ctx", "dy", "bias", "nowhere"]), max_size=4),
                  st.none()),
        st.tuples(st.just("outputs"), st.lists(st.sampled_from(["ctx", "y", "dx", "", "z"]), max_size=4), st.none()),
        st.tuples(st.just("metadata"), st.sampled_from([SHAPE_GUARDS, RANGE_CONSTRAINTS]),
                  st.one_of(_JSON.map(json.dumps), st.text(max_size=50))),
        st.tuples(st.just("external"), _LOCATIONS, st.sampled_from(["0", "-4", "4", "x", str(10**15)])),
        st.tuples(st.just("dims"), st.lists(st.sampled_from([0, 3, -1, 10**9]), max_size=3), st.none()),
        st.tuples(st.just("op_type"), st.sampled_from(["PythonOp", "PythonOpGrad"]), st.none()),
        st.tuples(st.just("type"), st.sampled_from(_ATTRIBUTES), st.sampled_from([1, 2, 3, 4, 6, 7, 8])),
    )
    return draw(st.lists(one, min_size=1, max_size=4))


def _python_node(model):
    return next(n for n in model.graph.node if n.domain == "com.microsoft")  # found again after an op_type change


def mutate(model: onnx.ModelProto, changes) -> onnx.ModelProto:
    node = _python_node(model)
    for what, key, value in changes:
        if what == "set":
            kept = [a for a in node.attribute if a.name != key]
            del node.attribute[:]
            node.attribute.extend(kept)
            try:
                node.attribute.append(helper.make_attribute(key, value))
            except (ValueError, TypeError):  # a value onnx cannot store (empty list): the attribute is dropped
                pass
        elif what == "drop":
            kept = [a for a in node.attribute if a.name != key]
            del node.attribute[:]
            node.attribute.extend(kept)
        elif what == "inputs":
            del node.input[:]
            node.input.extend(key)
        elif what == "outputs":
            del node.output[:]
            node.output.extend(key)
        elif what == "metadata":
            helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props}, key: value})
        elif what == "external":
            bias = model.graph.initializer[0]
            bias.ClearField("float_data")
            bias.data_location = TensorProto.EXTERNAL
            del bias.external_data[:]
            bias.external_data.add(key="location", value=key)
            bias.external_data.add(key="offset", value=value)
        elif what == "op_type":
            node.op_type = key
        elif what == "type":  # the attribute declared with another type than the value it holds
            for a in node.attribute:
                if a.name == key:
                    a.type = value
        elif what == "dims":
            bias = model.graph.initializer[0]
            del bias.dims[:]
            bias.dims.extend(key)
    return model


def _names_what_failed(message: str) -> bool:
    nodes = ("node 'crafted'", "node 'neg'", "node 'add_bias'")
    return any(w in message for w in (*nodes, "initializer 'bias'", "metadata_props", "input 'x0'", "input 'ctx'",
                                       "input 'dy'", "graph outputs ['out']"))


def _exercise(kind, model, folder):
    path = folder / "model.onnx"
    onnx.save(model, path)
    sess = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if kind == "grad":
        forward = InferenceSession(base_model("training"), providers=["CPUExecutionProvider"])
        _, ctx = forward.run_torch(None, {"x0": X})
        sess.run(None, {"ctx": ctx, "dy": np.ones(3, np.float32)})
    else:
        sess.run(None, {"x0": X})


@settings(max_examples=int(os.environ.get("A2O_FUZZ_EXAMPLES", 300)), deadline=None,
          derandomize=not os.environ.get("A2O_FUZZ_RANDOM"), suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(["function", "custom", "training", "grad"]), changes=mutations())
def test_crafted_models_fail_only_with_project_errors(tmp_path_factory, kind, changes):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder.parent / "secret.bin").write_bytes(np.array([1234.5] * 3, np.float32).tobytes())
    model = mutate(base_model(kind), changes)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    begin = time.perf_counter()
    try:
        _exercise(kind, model, folder)
    except TorchInterpreterError as e:
        assert _names_what_failed(str(e)), f"{type(e).__name__} names nothing: {e}"
    elapsed = time.perf_counter() - begin
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert elapsed < SECONDS, f"{elapsed:.1f} s for {changes}"
    assert grown < GROWTH_MB, f"{grown:.0f} MB for {changes}"


def test_base_models_run():
    """The models the fuzzer mutates are valid: each runs and gives PyTorch's numbers."""
    out = InferenceSession(base_model("function")).run(None, {"x0": X})[0]
    np.testing.assert_allclose(out, -X * 2 + 3 + np.array([0.5, 0.25, 0.125], np.float32))
    out = InferenceSession(base_model("custom")).run(None, {"x0": X})[0]
    np.testing.assert_allclose(out, -X * 0.5 + np.array([0.5, 0.25, 0.125], np.float32))
    out, ctx = InferenceSession(base_model("training")).run_torch(None, {"x0": X})
    dx = InferenceSession(base_model("grad")).run(None, {"ctx": ctx, "dy": np.ones(3, np.float32)})[0]
    np.testing.assert_allclose(dx, 2 + np.array([0.5, 0.25, 0.125], np.float32))
