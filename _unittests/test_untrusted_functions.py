"""Local functions of a crafted model: the defaults of their attributes stored in an external file (onnxruntime
resolves that file against the working directory, not the model's folder: round two's leak in another place), and
a PythonOp node hidden in a function (``has_python_ops`` looked at the main graph only, so the node reached plain
onnxruntime and its raw error instead of the PythonOp checks)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from experimental.torch_interpreter import InferenceSession
from experimental.torch_interpreter.errors import MalformedModelError
from experimental.torch_interpreter.python_op.attributes import DOMAIN, OP_TYPE
from experimental.torch_interpreter.runtime.python_op_nodes import has_python_ops

X = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
Y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])


def _model(function: onnx.FunctionProto, *domains: str) -> onnx.ModelProto:
    graph = oh.make_graph([oh.make_node("F", ["x"], ["y"], domain="local")], "g", [X], [Y])
    opsets = [oh.make_opsetid("", 18), oh.make_opsetid("local", 1), *(oh.make_opsetid(d, 1) for d in domains)]
    return oh.make_model(graph, functions=[function], opset_imports=opsets, ir_version=10)


def _external_default() -> onnx.ModelProto:
    """F(x) = x + t, where t is the default of F's attribute, stored in 'secret.bin'."""
    t = onnx.TensorProto(name="t", data_type=onnx.TensorProto.FLOAT, dims=[2], data_location=onnx.TensorProto.EXTERNAL)
    for key, value in (("location", "secret.bin"), ("offset", "0"), ("length", "8")):
        t.external_data.add(key=key, value=value)
    constant = oh.make_node("Constant", [], ["c"])
    constant.attribute.append(onnx.AttributeProto(name="value", ref_attr_name="t", type=onnx.AttributeProto.TENSOR))
    function = oh.make_function("local", "F", ["x"], ["y"], [constant, oh.make_node("Add", ["x", "c"], ["y"])],
                                [oh.make_opsetid("", 18)], attributes=[], attribute_protos=[oh.make_attribute("t", t)])
    return _model(function)


@pytest.mark.parametrize("given", ["path", "bytes", "proto"])
def test_function_default_in_an_external_file_is_refused(tmp_path, monkeypatch, given):
    model = _external_default()
    (tmp_path / "model").mkdir()
    (tmp_path / "cwd").mkdir()
    onnx.save(model, str(tmp_path / "model" / "m.onnx"))
    for folder in ("model", "cwd"):  # where onnxruntime looks (the working directory) and the model's folder
        np.array([5, 6], np.float32).tofile(tmp_path / folder / "secret.bin")
    monkeypatch.chdir(tmp_path / "cwd")
    source = {"path": str(tmp_path / "model" / "m.onnx"), "bytes": model.SerializeToString(), "proto": model}[given]
    with pytest.raises(MalformedModelError, match="default of attribute 't' of the function 'F'.*working directory"):
        InferenceSession(source)


def test_ordinary_model_still_runs(tmp_path):
    """The check parses a path only when its bytes mention external data; an ordinary model runs as before."""
    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g", [X], [Y])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10), str(tmp_path / "m.onnx"))
    out = InferenceSession(str(tmp_path / "m.onnx")).run(None, {"x": np.array([-1, 2], np.float32)})[0]
    np.testing.assert_array_equal(out, [0, 2])


def test_python_op_in_a_local_function_goes_through_the_python_op_checks():
    node = oh.make_node(OP_TYPE, ["x"], ["y"], domain=DOMAIN, func_name="os.system")
    model = _model(oh.make_function("local", "F", ["x"], ["y"], [node], [oh.make_opsetid(DOMAIN, 1)]), DOMAIN)
    assert has_python_ops(model) and has_python_ops(model.SerializeToString())
    with pytest.raises(MalformedModelError, match="PythonOp node"):
        InferenceSession(model)
