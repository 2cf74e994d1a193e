"""Crafted model files, second round: what a model could make InferenceSession do although it imports nothing
unallowed. Each test builds the smallest file that showed one class of problem and checks that the session
refuses it with a project error naming the node, the tensor or the metadata entry, under default options:

* files read outside the model's folder (a ``Constant``'s ``sparse_value`` stored as external data);
* torch's own operators registered after ``import torch`` (``fsdp``, ``streams``, ``c10d_functional``...), and
  ops writing into their arguments;
* ``trusted_modules`` escaping through the attributes of an allowed module (``mylegit.torch....``) or torch's lazy
  submodules;
* denial of service: overlapping tuple constants, ``PythonOpGrad`` ranks, size conditions;
* a ``PythonOpGrad`` using a forward context it was not given;
* an initializer copied into every segment;
* crashes that were not the project's errors.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from experimental.torch_interpreter import (
    InferenceSession,
    MalformedModelError,
    RuntimeFeedError,
    UntrustedCodeError,
)
from experimental.torch_interpreter.metadata import RANGE_CONSTRAINTS, SHAPE_GUARDS
from experimental.torch_interpreter.python_op.table import register_function
from experimental.torch_interpreter.runtime import python_op_session, sharing
from experimental.torch_interpreter.runtime.custom_op_calls import registered_op, resolve_op
from experimental.torch_interpreter.runtime.trust import TrustPolicy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSETS = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


register_function(Twice, "a2o_bounds.Twice")
register_function(Square, "a2o_bounds.Square")
register_function(Twice, "a2o_bounds.Other")


def _python_op(inputs=("x",), outputs=("ctx", "y"), name="crafted", func_name="a2o_bounds.Twice", **attributes):
    attributes.setdefault("input_convention", "d" * len(inputs))
    attributes.setdefault("output_tensor_types", [TensorProto.FLOAT] * (len(outputs) - 1))
    attributes.setdefault("output_tensor_ranks", [1] * (len(outputs) - 1))
    return helper.make_node(
        "PythonOp", list(inputs), list(outputs), name=name, domain="com.microsoft", func_name=func_name, **attributes
    )


def _model(nodes, inputs=(("x0", TensorProto.FLOAT, [3]),), outputs=(("out", TensorProto.FLOAT, [3]),), inits=()):
    graph = helper.make_graph(
        list(nodes),
        "crafted",
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        initializer=list(inits),
    )
    model = helper.make_model(graph, opset_imports=OPSETS)
    model.ir_version = 10
    return model


def _twice_then(*nodes, **kwargs):
    """x0 -> Neg -> PythonOp(Twice) -> y -> nodes -> out."""
    return _model([helper.make_node("Neg", ["x0"], ["x"]), _python_op(), *nodes], **kwargs)


X = np.array([1.0, -2.0, 3.0], np.float32)


# -- 1. external data: the model's folder only --------------------------------------------------------------------
def _sparse_constant(location):
    values = onnx.TensorProto(name="values", data_type=TensorProto.FLOAT, dims=[1])
    values.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "4")):
        values.external_data.add(key=key, value=value)
    sparse = helper.make_sparse_tensor(values, helper.make_tensor("indices", TensorProto.INT64, [1], [1]), [3])
    return helper.make_node("Constant", [], ["c"], name="leaky", sparse_value=sparse)


def _save(model, folder):
    folder.mkdir(exist_ok=True)
    path = folder / "model.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "secret.bin", os.path.join(os.sep, "tmp", "secret.bin")])
def test_sparse_constant_reads_no_file_outside_the_folder(tmp_path, monkeypatch, location):
    secret = np.array([1234.5], np.float32).tobytes()
    (tmp_path / "secret.bin").write_bytes(secret)
    monkeypatch.chdir(tmp_path)  # the working directory holds the file the model names
    path = _save(_twice_then(_sparse_constant(location), helper.make_node("Add", ["y", "c"], ["out"])), tmp_path / "m")
    with pytest.raises(MalformedModelError, match="leaky"):
        InferenceSession(str(path))


def test_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(np.array([1234.5], np.float32).tobytes())
    folder = tmp_path / "m"
    folder.mkdir()
    os.symlink(tmp_path / "secret.bin", folder / "data.bin")
    path = _save(_twice_then(_sparse_constant("data.bin"), helper.make_node("Add", ["y", "c"], ["out"])), folder)
    with pytest.raises(MalformedModelError, match="out of the model's folder"):
        InferenceSession(str(path))


def test_external_data_in_the_folder_runs_and_bytes_have_no_folder(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "data.bin").write_bytes(np.array([0.5], np.float32).tobytes())
    model = _twice_then(_sparse_constant("data.bin"), helper.make_node("Add", ["y", "c"], ["out"]))
    sess = InferenceSession(str(_save(model, folder)), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x0": X})[0], -2 * X + np.array([0, 0.5, 0], np.float32))
    with pytest.raises(MalformedModelError, match="has no folder"):
        InferenceSession(model.SerializeToString())


def test_declared_sizes_are_checked():
    big = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[10**9, 10**9], float_data=[1.0])
    model = _twice_then(helper.make_node("Add", ["y", "w"], ["out"]), inits=[big])
    with pytest.raises(MalformedModelError, match="initializer 'w'"):
        InferenceSession(model)


# -- 2. torch's own operators, registered by its submodules -------------------------------------------------------
def _custom(func_name, convention="d"):
    node = _python_op(func_name=func_name, input_convention=convention)
    return _model([helper.make_node("Neg", ["x0"], ["x"]), node, helper.make_node("Identity", ["y"], ["out"])])


@pytest.mark.parametrize(
    "func_name",
    [
        "torch.ops.fsdp.copy_.default",
        "torch.ops.streams.record_event.default",
        "torch.ops.c10d_functional.all_reduce.default",
        "torch.ops.onnx_symbolic._symbolic.default",
    ],
)
def test_namespaces_registered_by_torch_submodules_are_refused(func_name):
    importlib.import_module("torch._dynamo")  # what any to_onnx imports: it registers these namespaces

    namespace, name, overload = func_name.split(".")[2:]
    assert registered_op(namespace, name, overload) is not None, "registered in this process"
    with pytest.raises(UntrustedCodeError, match="crafted.*registered by torch itself"):
        resolve_op(func_name, "", "crafted", TrustPolicy(trust_all=True))


def test_no_op_torch_registers_is_callable():
    """Deny by default: after importing torch's submodules that register ops, every op overload of the process
    is torch's for the session (the allowlist has no torch namespace)."""
    script = textwrap.dedent(
        """
        import importlib, json, torch
        for m in ["torch._dynamo", "torch._inductor", "torch.distributed", "torch.distributed.fsdp",
                  "torch.distributed._functional_collectives", "torch.onnx", "torch._higher_order_ops",
                  "torch.nn.attention.flex_attention", "torch.ao.quantization", "torch.distributed.tensor"]:
            try:
                importlib.import_module(m)
            except ImportError:
                pass
        from experimental.torch_interpreter.runtime.trust import torch_owned
        allowed, total = [], 0
        for qualname in torch._C._dispatch_get_all_op_names():
            namespace, name = qualname.split("::")
            packet = getattr(getattr(torch.ops, namespace), name.split(".")[0], None)
            for overload in packet.overloads() if packet is not None else []:
                total += 1
                if not torch_owned(getattr(packet, overload)):
                    allowed.append(f"{namespace}::{name}.{overload}")
        print(json.dumps({"total": total, "allowed": allowed}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["total"] > 5000 and result["allowed"] == []


@torch.library.custom_op("a2o_bounds::add_into", mutates_args=("x",))
def add_into(x: torch.Tensor) -> None:
    x.add_(1)


@torch.library.custom_op("a2o_bounds::plus_one", mutates_args=())
def plus_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def test_user_ops_run_and_ops_writing_their_arguments_are_refused():
    sess = InferenceSession(_custom("torch.ops.a2o_bounds.plus_one.default"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x0": X})[0], -X + 1)
    with pytest.raises(UntrustedCodeError, match="writes into"):
        InferenceSession(_custom("torch.ops.a2o_bounds.add_into.default"))


# -- 3. trusted_modules: exact names, no attribute walk -----------------------------------------------------------
_LEGIT = '''
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1
'''


def _fresh_process(tmp_path, body):
    (tmp_path / "a2o_legit.py").write_text(_LEGIT)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np, onnx
        from onnx import TensorProto, helper
        from experimental.torch_interpreter import InferenceSession, TorchInterpreterError
        def model(func_name):
            node = helper.make_node("PythonOp", ["x"], ["ctx", "y"], name="crafted", domain="com.microsoft",
                                    func_name=func_name, input_convention="d", output_tensor_types=[1],
                                    output_tensor_ranks=[1])
            graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [3])],
                                      [helper.make_tensor_value_info("y", 1, [3])])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                           helper.make_opsetid("com.microsoft", 1)])
        """
    ) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_trusted_module_reaches_only_its_own_classes(tmp_path):
    out = _fresh_process(
        tmp_path,
        """
        sess = InferenceSession(model("a2o_legit.Fn"), trusted_modules=["a2o_legit"])
        print("legit", sess.run(None, {"x": np.zeros(3, np.float32)})[0].tolist())
        for name in ["a2o_legit.torch.utils.checkpoint.CheckpointFunction",
                     "a2o_legit.torch._dynamo.external_utils.FakeBackwardCFunction",
                     "a2o_legit.torch.autograd.function.Function"]:
            try:
                InferenceSession(model(name), trusted_modules=["a2o_legit"])
                print("ran", name)
            except TorchInterpreterError as e:
                print("refused", type(e).__name__, "crafted" in str(e))
        print("dynamo imported", "torch._dynamo" in sys.modules)
        """,
    )
    assert "legit [1.0, 1.0, 1.0]" in out
    assert "\nran " not in out and out.count("refused MissingFunctionError True") == 3, out
    assert "dynamo imported False" in out


# -- 4. denial of service: checked before anything is decoded, allocated or computed ------------------------------
def _bounded(make, error, match, seconds=10):
    begin = time.perf_counter()
    with pytest.raises(error, match=match):
        make()
    assert time.perf_counter() - begin < seconds


def test_overlapping_tuple_constants_are_refused_before_decoding():
    n = 30_000  # decoded as they were: n tuples of up to n values, 4.5e8 ints
    node = _python_op(
        input_convention="dc",
        input_int_tuples=[0] * n,
        input_int_tuple_begins=[0] * n,
        input_int_tuple_positions=[1] * n,
    )
    model = _model([helper.make_node("Neg", ["x0"], ["x"]), node, helper.make_node("Identity", ["y"], ["out"])])
    _bounded(lambda: InferenceSession(model), MalformedModelError, "crafted")


def _grad_model(**attributes):
    attributes.setdefault("output_convention", "d")
    attributes.setdefault("output_tensor_types", [TensorProto.FLOAT])
    attributes.setdefault("output_tensor_ranks", [1] * len(attributes["output_tensor_types"]))
    attributes.setdefault("output_tensor_requires_grads", [1])
    outputs = attributes.pop("outputs", ["dx"])
    node = helper.make_node(
        "PythonOpGrad", ["ctx", "dy"], outputs, name="crafted_grad", domain="com.microsoft",
        func_name="a2o_bounds.Square", **{k: v for k, v in attributes.items() if v != []},
    )
    node.attribute.extend(helper.make_attribute(k, v, attr_type=onnx.AttributeProto.INTS)
                          for k, v in attributes.items() if v == [])
    return _model(
        [node, *[helper.make_node("Identity", [o], [f"out{i}"]) for i, o in enumerate(outputs)]],
        inputs=(("ctx", TensorProto.INT64, [1]), ("dy", TensorProto.FLOAT, [3])),
        outputs=[(f"out{i}", TensorProto.FLOAT, [3]) for i in range(len(outputs))],
    )


@pytest.mark.parametrize(
    "attributes, match",
    [
        ({"output_tensor_ranks": [10**8]}, "output_tensor_ranks"),
        ({"output_tensor_ranks": [1, 1]}, "output_tensor_ranks"),
        ({"input_tensor_ranks": [-3]}, "input_tensor_ranks"),
        ({"outputs": [], "output_convention": "c", "output_tensor_types": [], "output_tensor_ranks": [],
          "output_tensor_requires_grads": []}, "no output"),
    ],
)
def test_grad_node_attributes_are_bounded(attributes, match):
    _bounded(lambda: InferenceSession(_grad_model(**attributes)), MalformedModelError, f"crafted_grad.*{match}")


def test_float_ranks_are_refused():
    node = helper.make_node("PythonOpGrad", ["ctx", "dy"], ["dx"], name="crafted_grad", domain="com.microsoft",
                            func_name="a2o_bounds.Square", output_convention="d")
    node.attribute.append(helper.make_attribute("output_tensor_ranks", [1.5]))
    model = _model([node, helper.make_node("Identity", ["dx"], ["out"])],
                   inputs=(("ctx", TensorProto.INT64, [1]), ("dy", TensorProto.FLOAT, [3])))
    _bounded(lambda: InferenceSession(model), MalformedModelError, "crafted_grad.*FLOATS")


def _with_metadata(**props):
    model = _twice_then(helper.make_node("Identity", ["y"], ["out"]))
    helper.set_model_props(model, props)
    return model


def test_size_conditions_are_bounded_in_number_and_cost():
    heavy = " + ".join(f"({2**200 + i} * 3 // 7)" for i in range(60))
    _bounded(
        lambda: InferenceSession(_with_metadata(**{SHAPE_GUARDS: json.dumps([{"check": f"{heavy} > 0"}] * 2000)})),
        MalformedModelError,
        "metadata_props",
    )
    sess = InferenceSession(_with_metadata(**{SHAPE_GUARDS: json.dumps([{"check": f"{heavy} > 0"}] * 20)}))
    assert len(sess._sess._checks.size_checks.guards) == 20
    begin = time.perf_counter()
    for _ in range(20):
        sess.run(None, {"x0": X})
    assert time.perf_counter() - begin < 5
    ranges = [{"input": "x0", "axis": 0, "low": 4, "narrowed": True}]  # no "high": unbounded above
    sess = InferenceSession(_with_metadata(**{RANGE_CONSTRAINTS: json.dumps(ranges)}))
    with pytest.raises(RuntimeFeedError, match="x0"):
        sess.run(None, {"x0": X})


# -- 5. contexts: random handles, tied to their Function ----------------------------------------------------------
def test_grad_node_uses_only_a_context_of_its_function():
    forward = _model(
        [helper.make_node("Neg", ["x0"], ["x"]),
         _python_op(func_name="a2o_bounds.Square", training_mode=1, input_requires_grads=[1])],
        outputs=(("ctx", TensorProto.INT64, [1]), ("y", TensorProto.FLOAT, [3])),
    )
    sess = InferenceSession(forward, providers=["CPUExecutionProvider"])
    handles = [sess.run_torch(None, {"x0": X})[0] for _ in range(3)]
    assert all(int(h[0]) > 2**32 for h in handles), "handles are random, not counted"
    ctx, _ = sess.run_torch(None, {"x0": X})
    dy = np.ones(3, np.float32)
    another = _grad_model()
    another.graph.node[0].attribute[0].s = b"a2o_bounds.Other"  # the backward of another Function
    with pytest.raises(RuntimeFeedError, match="crafted_grad.*a2o_bounds.Other"):
        InferenceSession(another).run(None, {"ctx": ctx, "dy": dy})
    grad = InferenceSession(_grad_model())
    with pytest.raises(RuntimeFeedError, match="handle 1 "):
        grad.run(None, {"ctx": torch.tensor([1]), "dy": dy})
    np.testing.assert_allclose(grad.run(None, {"ctx": ctx, "dy": dy})[0], 2 * -X)  # its own Function, once
    with pytest.raises(RuntimeFeedError, match="serves one backward"):
        grad.run(None, {"ctx": ctx, "dy": dy})


def test_grad_output_without_gradient_read_by_the_graph():
    forward = _model(
        [helper.make_node("Neg", ["x0"], ["x"]),
         _python_op(func_name="a2o_bounds.Square", training_mode=1, input_requires_grads=[0])],
        outputs=(("ctx", TensorProto.INT64, [1]), ("y", TensorProto.FLOAT, [3])),
    )
    ctx, _ = InferenceSession(forward).run_torch(None, {"x0": X})
    with pytest.raises(RuntimeFeedError, match="crafted_grad.*did not require"):
        InferenceSession(_grad_model()).run(None, {"ctx": ctx, "dy": np.ones(3, np.float32)})


# -- 6. memory: an initializer read by every segment is held once -------------------------------------------------
def _levels(levels, size):
    weight = helper.make_tensor("w", TensorProto.FLOAT, [size], np.full(size, 1 / size, np.float32).tobytes(), raw=True)
    nodes, previous = [], "x0"
    for i in range(levels):  # each level reads w after the PythonOp node before it: w is in every segment
        nodes += [
            helper.make_node("ReduceMax", [previous], [f"m{i}"], keepdims=1),
            helper.make_node("Mul", ["w", f"m{i}"], [f"p{i}"]),
            helper.make_node("ReduceSum", [f"p{i}"], [f"s{i}"], keepdims=1),
            helper.make_node("Add", [previous, f"s{i}"], [f"a{i}"]),
            _python_op(inputs=(f"a{i}",), outputs=(f"ctx{i}", f"t{i}"), name=f"twice{i}"),
        ]
        previous = f"t{i}"
    nodes.append(helper.make_node("Identity", [previous], ["out"]))
    return _model(nodes, inits=[weight])


@pytest.mark.parametrize("own_options", [True, False])
def test_initializer_read_by_every_segment_is_held_once(monkeypatch, own_options):
    size, levels = 1 << 20, 10  # 4 MB read at 10 levels of PythonOp nodes
    given = []
    real = python_op_session.OrtSession

    def recording(sub, *args, **kwargs):
        given.append(sub.ByteSize())
        return real(sub, *args, **kwargs)

    monkeypatch.setattr(python_op_session, "OrtSession", recording)
    import onnxruntime as ort

    options = None if own_options else ort.SessionOptions()
    sess = InferenceSession(_levels(levels, size), providers=["CPUExecutionProvider"], sess_options=options)
    assert len(given) == levels + 1 and sum(given) < size  # each segment's model without the 4 MB
    shared = sess._sess._shared
    assert list(shared.values if own_options else shared.fed) == ["w"]  # 88 MB of session copies: allowed
    expected = X.copy()
    for _ in range(levels):
        expected = (expected + expected.max()) * 2
    np.testing.assert_allclose(sess.run(None, {"x0": X})[0], expected, rtol=1e-4)


def test_session_copies_of_a_shared_initializer_are_bounded(monkeypatch):
    """onnxruntime copies (and prepacks) an initializer in every session: above the bound, it is fed instead."""
    monkeypatch.setattr(sharing, "MAX_SESSION_COPIES", 1 << 20)
    size, levels = 1 << 18, 6
    sess = InferenceSession(_levels(levels, size), providers=["CPUExecutionProvider"])
    assert list(sess._sess._shared.fed) == ["w"] and not sess._sess._shared.values
    expected = X.copy()
    for _ in range(levels):
        expected = (expected + expected.max()) * 2
    np.testing.assert_allclose(sess.run(None, {"x0": X})[0], expected, rtol=1e-4)


def _axes_on_both_sides():
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("Unsqueeze", ["x0", "axes"], ["u0"]), helper.make_node("Squeeze", ["u0", "axes"], ["x"]),
        _python_op(),
        helper.make_node("Unsqueeze", ["y", "axes"], ["u1"]), helper.make_node("Squeeze", ["u1", "axes"], ["out"]),
    ]
    return _model(nodes, inits=[axes])


def test_small_shared_constants_stay_in_each_segment(monkeypatch):
    """onnxruntime's shape inference reads a Squeeze's axes in the model: a small initializer read by several
    segments is copied into each, not shared (shared, the session could not be created)."""
    sess = InferenceSession(_axes_on_both_sides(), providers=["CPUExecutionProvider"])
    assert not sess._sess._shared.values and not sess._sess._shared.fed
    np.testing.assert_allclose(sess.run(None, {"x0": X})[0], 2 * X)
    monkeypatch.setattr(sharing, "MIN_SHARED_BYTES", 0)  # what the first version did
    with pytest.raises(MalformedModelError, match="external tensors"):
        InferenceSession(_axes_on_both_sides(), providers=["CPUExecutionProvider"])
