"""Errors are part of the product: each names what failed and what to try."""

import os

import pytest
import torch

from experimental.torch_interpreter import (
    DynamicShapeError,
    ExportCaptureError,
    InferenceSession,
    InputMismatchError,
    InvalidModelError,
    RuntimeFeedError,
    TorchInterpreterError,
    UnsupportedOpError,
    to_onnx,
)


@torch.library.custom_op("aten2onnx_test::no_converter_a", mutates_args=())
def no_converter_a(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@torch.library.custom_op("aten2onnx_test::no_converter_b", mutates_args=())
def no_converter_b(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


for _op in (no_converter_a, no_converter_b):
    _op.register_fake(lambda x: torch.empty_like(x))


class TwoMissingOps(torch.nn.Module):
    def forward(self, x):
        y = no_converter_a(x)
        z = no_converter_b(x)
        return no_converter_a(y + z)


def test_unsupported_ops_are_listed_at_once(tmp_path):
    target = tmp_path / "model.onnx"
    with pytest.raises(UnsupportedOpError) as info:
        to_onnx(TwoMissingOps(), (torch.randn(3),), filename=target)
    message = str(info.value)
    assert "2 operator(s) have no converter" in message
    assert "aten2onnx_test::no_converter_a.default, used by 2 node(s)" in message
    assert "aten2onnx_test::no_converter_b.default, used by 1 node(s)" in message
    assert "test_errors.py" in message and "no_converter_a(x)" in message  # the user's source line
    assert "register" in message  # what to try
    assert set(info.value.missing) == {"aten2onnx_test::no_converter_a.default", "aten2onnx_test::no_converter_b.default"}
    assert not os.listdir(tmp_path), "no half-written file"


def test_not_a_module():
    with pytest.raises(InvalidModelError, match="torch.nn.Module or a torch.export.ExportedProgram"):
        to_onnx(lambda x: x + 1, (torch.randn(2),))


def test_inputs_do_not_match_forward():
    with pytest.raises(InputMismatchError, match="do not match Linear.forward"):
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(1, 2), torch.randn(1, 2)))


def test_args_must_be_a_tuple():
    with pytest.raises(InputMismatchError, match="args must be a tuple"):
        to_onnx(torch.nn.Linear(2, 2), {"input": torch.randn(1, 2)})


def test_dynamic_axis_out_of_range():
    with pytest.raises(DynamicShapeError, match=r"rank 2\) but the dynamic shape spec names axis 2"):
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes=({2: "batch"},))


def test_dynamic_shapes_wrong_arity():
    with pytest.raises(DynamicShapeError, match="2 entries but the model receives 1 inputs"):
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"}, None))


def test_dynamic_shapes_of_one_input_not_in_a_tuple():
    """torch.onnx habit: the axes of the only input given bare; the message says how to write it."""
    with pytest.raises(DynamicShapeError) as info:
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes={0: "batch"})
    message = str(info.value)
    assert "dynamic_shapes names [0] but the inputs are ['input']" in message
    assert "wrap it in a tuple, one entry per positional input (dynamic_shapes=({0: 'batch'},))" in message
    assert "dynamic_shapes={'input': {0: 'batch'}}" in message


def test_filename_in_third_position(tmp_path):
    """``to_onnx(model, args, "model.onnx")``, as torch.onnx.export is called: the model is saved there."""
    model, x = torch.nn.Linear(2, 3).eval(), torch.randn(4, 2)
    path = tmp_path / "model.onnx"
    onx = to_onnx(model, (x,), str(path))
    assert path.exists() and [o.name for o in onx.graph.output] == ["output"]
    got = InferenceSession(str(path)).run(None, {"input": x.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach(), atol=1e-6, rtol=1e-6)
    with pytest.raises(InputMismatchError, match="is a path and filename=.* too: give the path once"):
        to_onnx(model, (x,), path, filename=path)


def test_dynamic_name_not_identifier():
    with pytest.raises(DynamicShapeError, match="not a Python identifier"):
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes=({0: "batch size"},))


class FixedBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(3, 2) * 2


def test_dynamic_axis_made_static_by_model(tmp_path):
    with pytest.raises(DynamicShapeError) as info:
        to_onnx(FixedBatch(), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"},), filename=tmp_path / "m.onnx")
    assert "batch" in str(info.value)
    assert not os.listdir(tmp_path)


def test_all_errors_share_one_base():
    assert issubclass(UnsupportedOpError, TorchInterpreterError)
    assert issubclass(DynamicShapeError, TorchInterpreterError)


def test_runtime_feeds_checked():
    onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),))
    sess = InferenceSession(onx)
    with pytest.raises(RuntimeFeedError, match=r"missing \['input'\].*unknown \['x'\]"):
        sess.run(None, {"x": torch.randn(3)})


class RaisesInForward(torch.nn.Module):
    def forward(self, x):
        raise NotImplementedError("not for this input")


def test_strict_capture_failure_says_what_to_try():
    with pytest.raises(ExportCaptureError) as info:
        to_onnx(RaisesInForward(), (torch.randn(2),), strict=True)
    message = str(info.value)
    assert "torch.export.export (strict) failed" in message
    assert "What to try:" in message and "strict=False" in message
    assert isinstance(info.value.__cause__, Exception)


@torch.library.custom_op("aten2onnx_test::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.tanh(x) * alpha


@scaled_tanh.register_fake
def _(x, alpha):
    return torch.empty_like(x)


class ScaledTanh(torch.nn.Module):
    def forward(self, x):
        return scaled_tanh(x, 2.0)


def test_converter_mixing_element_types_is_caught():
    import onnx_ir as ir

    from experimental.torch_interpreter import ConversionError, default_registry

    def buggy(ctx, x, alpha):
        return ctx.op("Mul", ctx.op("Tanh", x), ctx.const(alpha, ir.DataType.DOUBLE))

    registry = default_registry.with_converter("aten2onnx_test::scaled_tanh.default", buggy)

    with pytest.raises(ConversionError) as info:
        to_onnx(ScaledTanh(), (torch.randn(3),), registry=registry)
    message = str(info.value)
    assert "aten2onnx_test::scaled_tanh.default" in message
    assert "Mul needs inputs of one element type, got ['FLOAT', 'DOUBLE']" in message
    assert "test_errors.py" in message  # the user's source line
