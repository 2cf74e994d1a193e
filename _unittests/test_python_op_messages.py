"""What a new user is told about models with custom ``torch.autograd.Function``: at export, that the PythonOp
nodes need this package's InferenceSession and how to get plain ONNX instead; at run time, advice that works as
written, and why an allowed module could not be imported."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

from experimental.torch_interpreter import (
    InferenceSession,
    MissingFunctionError,
    PythonOpWarning,
    UntrustedCodeError,
    to_onnx,
)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x**3


class UsesCube(torch.nn.Module):
    def forward(self, x):
        return Cube.apply(x) + 1


def test_export_says_what_runs_python_op_nodes():
    x = torch.randn(3)
    with pytest.warns(PythonOpWarning, match=r"Cube.*InferenceSession.*autograd_functions='inline'"):
        onx = to_onnx(UsesCube(), (x,))
    assert "PythonOp" in [n.op_type for n in onx.graph.node]
    np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": x.numpy()})[0], (x**3 + 1).numpy(), rtol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonOpWarning)
        plain = to_onnx(UsesCube(), (x,), autograd_functions="inline")
    assert "PythonOp" not in [n.op_type for n in plain.graph.node]
    np.testing.assert_allclose(InferenceSession(plain).run(None, {"x": x.numpy()})[0], (x**3 + 1).numpy(), rtol=1e-5)


def _model(func_name):
    node = helper.make_node("PythonOp", ["x"], ["ctx", "y"], name="cube", domain="com.microsoft",
                            func_name=func_name, input_convention="d", output_tensor_types=[TensorProto.FLOAT],
                            output_tensor_ranks=[1])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def test_the_advice_to_register_works_as_written():
    model = _model("a2o_messages_elsewhere.Cube")
    with pytest.raises(UntrustedCodeError) as caught:
        InferenceSession(model)
    message = str(caught.value)
    statement = "from experimental.torch_interpreter.python_op.table import register_function"
    assert statement in message and "autograd_functions='inline'" in message, message
    namespace: dict = {}
    exec(statement, namespace)  # the advice imports
    namespace["register_function"](Cube, "a2o_messages_elsewhere.Cube")
    out = InferenceSession(model).run(None, {"x": np.array([1.0, 2.0, -1.0], np.float32)})[0]
    np.testing.assert_allclose(out, [1.0, 8.0, -1.0])


def test_allowed_module_that_cannot_be_imported_says_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingFunctionError) as caught:
        InferenceSession(_model("a2o_messages_nowhere.layers.Cube"), trusted_modules=["a2o_messages_nowhere"])
    message = str(caught.value)
    assert "node 'cube'" in message and "importing it failed" in message, message
    assert "No module named 'a2o_messages_nowhere'" in message and str(tmp_path) in message, message
