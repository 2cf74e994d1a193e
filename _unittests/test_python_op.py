"""Custom torch.autograd.Function -> one com.microsoft::PythonOp node, run by InferenceSession."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from experimental.torch_interpreter import ExportCaptureError, InferenceSession, to_onnx
from experimental.torch_interpreter.python_op.attributes import constant_kind, decode_constants
from experimental.torch_interpreter.python_op.capture import capture_autograd_functions
from experimental.torch_interpreter.python_op.table import func_name
from experimental.torch_interpreter.runtime.python_op_nodes import has_python_ops
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types
from experimental.torch_interpreter.testing.models import IssueModel, ScalarAndTupleFunction


# -- Functions ---------------------------------------------------------------------------------------------------
class TwoInTwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b + 1, (a - b).amax(dim=-1)

    @staticmethod
    def backward(ctx, g1, g2):
        return g1, g1


class Mixed(torch.autograd.Function):
    """Every kind of constant: bool, int, float, tuples of each, objects by reference, a default value."""

    @staticmethod
    def forward(ctx, x, flag, n, scale, dims, factors, flags, act, y, none, offset=0.25):
        out = x * scale * n + y * factors[1] + offset
        if flag and all(flags) and none is None:
            out = out.sum(dim=dims[0], keepdim=True) + out
        return out.relu() if act == "relu" else out


class NumpyTanh(torch.autograd.Function):
    """Stands for a Triton or C++ kernel: the forward leaves torch for numpy, torch.export cannot trace it."""

    @staticmethod
    def forward(ctx, x, scale):
        return torch.from_numpy(np.tanh(x.detach().cpu().numpy()) * scale).to(x.device)


class NumpyWithRule(NumpyTanh):
    onnx_output_rule = staticmethod(lambda x, scale: torch.empty_like(x))


class Stack(torch.autograd.Function):
    """Variadic forward: the same class called with several arities."""

    @staticmethod
    def forward(ctx, *xs):
        return torch.cat(xs, dim=-1)


class Threshold(torch.autograd.Function):
    """New style: forward without ctx, setup_context apart; bool and int64 outputs."""

    @staticmethod
    def forward(x, limit):
        mask = x > limit
        return mask, mask.sum(dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(*output)


class Inlined(torch.autograd.Function):
    onnx_export = "inline"

    @staticmethod
    def forward(ctx, x):
        return x.sigmoid()


def _node(onx, index=0):
    return [n for n in onx.graph.node if n.op_type == "PythonOp"][index]


def _attrs(node):
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


# -- the issue's example -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("strict", [False, True])
def test_issue_example(strict):
    onx = check_model(
        IssueModel(),
        (torch.randn(3, 4),),
        dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.randn(7, 4),), None)],
        strict=strict,
    )
    assert op_types(onx) == ["Gemm", "PythonOp"]
    node = _node(onx)
    assert node.domain == "com.microsoft"
    assert {o.domain: o.version for o in onx.opset_import}["com.microsoft"] == 1
    attrs = _attrs(node)
    expected = f"{ScalarAndTupleFunction.__module__}.ScalarAndTupleFunction"
    assert attrs["func_name"] == func_name(ScalarAndTupleFunction) == expected
    assert attrs["input_convention"] == "dccc"
    assert attrs["input_float_scalars"] == [2.0, 0.5]
    assert attrs["input_float_scalar_positions"] == [1, 3]
    assert attrs["input_int_tuples"] == [2, 3]
    assert attrs["input_int_tuple_positions"] == [2]
    assert attrs["input_int_tuple_begins"] == [0]
    assert attrs["input_tensor_types"] == [onnx.TensorProto.FLOAT]
    assert attrs["input_tensor_ranks"] == [2]
    assert attrs["output_tensor_types"] == [onnx.TensorProto.FLOAT]
    assert attrs["output_tensor_ranks"] == [2]
    assert attrs["input_requires_grads"] == [1, 0, 0, 0]
    assert attrs["training_mode"] == 0 and attrs["safe_run_mode"] == 1 and attrs["comment"] == ""
    assert not any(k.startswith(("input_int_scalar", "input_bool", "input_pointer")) for k in attrs)
    # output 0 is the context, int64 of shape [1]; the function's output follows
    assert len(node.output) == 2 and node.output[1] == onx.graph.output[0].name
    ctx = {vi.name: vi for vi in onx.graph.value_info}[node.output[0]].type.tensor_type
    assert ctx.elem_type == onnx.TensorProto.INT64 and [d.dim_value for d in ctx.shape.dim] == [1]


# -- several inputs and outputs, mixed constants, untraceable forwards -------------------------------------------
@pytest.mark.parametrize("strict", [False, True])
def test_two_inputs_two_outputs(strict):
    def fn(x, y):
        s, m = TwoInTwoOut.apply(x.relu(), y)
        return s.sigmoid(), m * 2

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    onx = check_model(
        Fn(fn),
        (x, y),
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        more_inputs=[((torch.randn(5, 4), torch.randn(5, 4)), None)],
        strict=strict,
    )
    assert op_types(onx).count("PythonOp") == 1
    node = _node(onx)
    attrs = _attrs(node)
    assert len(node.input) == 2 and len(node.output) == 3
    assert attrs["input_convention"] == "dd"
    assert attrs["input_tensor_types"] == [1, 1] and attrs["input_tensor_ranks"] == [2, 2]
    assert attrs["output_tensor_types"] == [1, 1] and attrs["output_tensor_ranks"] == [2, 1]
    assert attrs["input_requires_grads"] == [0, 0]


MIXED_ARGS = (True, 3, 0.5, (1,), (0.5, 2.0), (True, True), "relu")


@pytest.mark.parametrize("strict", [False, True])
def test_mixed_scalars(strict):
    def fn(x, y):
        return Mixed.apply(x, *MIXED_ARGS, y, None)

    onx = check_model(
        Fn(fn),
        (torch.randn(2, 3), torch.randn(2, 3)),
        dynamic_shapes=({0: "n"}, {0: "n"}),
        more_inputs=[((torch.randn(4, 3), torch.randn(4, 3)), None)],
        strict=strict,
    )
    assert op_types(onx) == ["PythonOp"]
    attrs = _attrs(_node(onx))
    assert attrs["input_convention"] == "dcccccccdcc"
    assert (attrs["input_bool_scalars"], attrs["input_bool_scalar_positions"]) == ([1], [1])
    assert (attrs["input_int_scalars"], attrs["input_int_scalar_positions"]) == ([3], [2])
    assert attrs["input_float_scalars"] == [0.5, 0.25] and attrs["input_float_scalar_positions"] == [3, 10]
    assert (attrs["input_int_tuples"], attrs["input_int_tuple_positions"], attrs["input_int_tuple_begins"]) == (
        [1], [4], [0],
    )
    assert (attrs["input_float_tuples"], attrs["input_float_tuple_positions"]) == ([0.5, 2.0], [5])
    assert (attrs["input_bool_tuples"], attrs["input_bool_tuple_positions"]) == ([1, 1], [6])
    assert attrs["input_pointer_scalar_positions"] == [7, 9]  # "relu" and None, by reference
    assert attrs["input_tensor_types"] == [1, 1] and attrs["input_tensor_ranks"] == [2, 2]
    constants = decode_constants(attrs, lambda address: {id("relu"): "relu", id(None): None}[address])
    assert constants == {1: True, 2: 3, 3: 0.5, 4: (1,), 5: (0.5, 2.0), 6: (True, True), 7: "relu", 9: None, 10: 0.25}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("how", ["to_onnx", "class"])
def test_untraceable_forward(strict, how):
    cls = NumpyTanh if how == "to_onnx" else NumpyWithRule
    rules = {NumpyTanh: lambda x, scale: torch.empty_like(x)} if how == "to_onnx" else None

    def fn(x):
        return cls.apply(x + 1, 0.5) * 2

    onx = check_model(
        Fn(fn),
        (torch.randn(3, 5),),
        dynamic_shapes=({0: "batch", 1: "width"},),
        more_inputs=[((torch.randn(6, 2),), None)],
        strict=strict,
        autograd_functions=rules,
    )
    assert [t for t in op_types(onx) if t != "Constant"] == ["Add", "PythonOp", "Mul"]
    assert _attrs(_node(onx))["func_name"] == func_name(cls)


def test_untraceable_forward_without_rule():
    with pytest.raises(ExportCaptureError, match="output rule"):
        to_onnx(Fn(lambda x: NumpyTanh.apply(x, 1.0)), (torch.randn(2, 3),))


def test_setup_context_and_bool_outputs():
    def fn(x):
        mask, count = Threshold.apply(x * 2, 0.5)
        return mask.logical_not(), count + 1

    onx = check_model(
        Fn(fn), (torch.randn(3, 6),), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(5, 6),), None)]
    )
    attrs = _attrs(_node(onx))
    assert attrs["input_convention"] == "dc" and attrs["input_float_scalars"] == [0.5]
    assert attrs["output_tensor_types"] == [onnx.TensorProto.BOOL, onnx.TensorProto.INT64]
    assert attrs["output_tensor_ranks"] == [2, 1]


def test_refused_arguments():
    with pytest.raises(ExportCaptureError, match="dynamic value"):
        to_onnx(
            Fn(lambda x: ScalarAndTupleFunction.apply(x, 1.0, (1, 2), x.shape[0])),
            (torch.randn(3, 2),),
            dynamic_shapes=({0: "batch"},),
        )
    with pytest.raises(ExportCaptureError, match="tensors inside a tuple"):
        to_onnx(Fn(lambda x: ScalarAndTupleFunction.apply(x, 1.0, (x, 2), 0.5)), (torch.randn(3, 2),))


# -- several Functions, several arities, several levels of PythonOp nodes in one model -----------------------------
def test_several_functions_and_arities():
    def fn(x, y):
        a = Stack.apply(x, y)  # 2 inputs
        b = Stack.apply(x, y, x)  # 3 inputs: another arity of the same class
        s, m = TwoInTwoOut.apply(a[:, :4], b[:, 4:8])  # needs a and b: a second level of PythonOp nodes
        c = ScalarAndTupleFunction.apply(s.tanh(), 1.5, (1, 2), 2.0)  # a third level
        return c, m, b

    onx = check_model(Fn(fn), (torch.randn(2, 4), torch.randn(2, 4)))
    nodes = [n for n in onx.graph.node if n.op_type == "PythonOp"]
    assert [_attrs(n)["input_convention"] for n in nodes] == ["dd", "ddd", "dd", "dccc"]
    assert [_attrs(n)["func_name"].rsplit(".", 1)[1] for n in nodes] == [
        "Stack", "Stack", "TwoInTwoOut", "ScalarAndTupleFunction"
    ]
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    assert sess._python_ops.num_segments == 2  # slicing before level 2, tanh before level 3
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    feeds = dict(zip([i.name for i in sess.get_inputs()], (x, y)))
    for g, e in zip(sess.run_torch(None, feeds), fn(x, y)):
        torch.testing.assert_close(g, e)
    del onx.graph.value_info[:]  # the segments' types then come from shape inference and the attributes
    for g, e in zip(InferenceSession(onx).run(None, feeds), fn(x, y)):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5)


# -- inline ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strict", [False, True])
def test_inline(strict):
    def fn(x):
        return TwoInTwoOut.apply(ScalarAndTupleFunction.apply(x, 2.0, (2, 3), 0.5), Inlined.apply(x))

    x = torch.randn(3, 4)
    everything = check_model(Fn(fn), (x,), strict=strict, autograd_functions="inline")
    assert "PythonOp" not in op_types(everything) and "Sigmoid" in op_types(everything)
    one = check_model(Fn(fn), (x,), strict=strict, autograd_functions={ScalarAndTupleFunction: "inline"})
    assert [_attrs(n)["func_name"] for n in one.graph.node if n.op_type == "PythonOp"] == [func_name(TwoInTwoOut)]
    assert "Sigmoid" in op_types(one)  # Inlined says onnx_export = "inline"
    by_name = to_onnx(Fn(fn), (x,), strict=strict, autograd_functions={func_name(Inlined): "python_op"})
    assert op_types(by_name).count("PythonOp") == 3


def test_bad_policy():
    with pytest.raises(ValueError, match="python_op"):
        to_onnx(Fn(lambda x: x), (torch.randn(2),), autograd_functions="onnx")


# -- runtime and capture details ------------------------------------------------------------------------------------
def test_saved_model_and_exported_program(tmp_path):
    model = IssueModel().eval()
    x = torch.randn(3, 4)
    with capture_autograd_functions():
        ep = torch.export.export(model, (x,))
    expected = model(x)
    torch.testing.assert_close(ep.module()(x), expected)  # the custom op runs eagerly too
    path = tmp_path / "model.onnx"
    to_onnx(ep, filename=path)
    assert has_python_ops(path) and has_python_ops(path.read_bytes())
    sess = InferenceSession(path, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert [i.name for i in sess.get_inputs()] == ["x"]
    torch.testing.assert_close(sess.run_torch(None, {"x": x})[0], expected)
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], expected.detach().numpy(), rtol=1e-5)
    assert torch.allclose(torch.from_dlpack(sess.run_ortvalues(None, {"x": x})[0]), expected)


def test_constant_kinds():
    kinds = [constant_kind(v) for v in (False, 2**70, 1.0, [1, 2], (True,), (1, 2.0), torch.float32)]
    assert kinds == ["bool", "pointer", "float", "int_tuple", "bool_tuple", "pointer", "pointer"]
