"""InferenceSession: onnxruntime's interface, torch and numpy feeds, provider choice."""

import numpy as np
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.runtime import default_providers


class Mixed(torch.nn.Module):
    def forward(self, x, mask, scale: float = 2.0):
        return (x * scale).masked_fill(mask, 0.0), mask.logical_not()


@pytest.fixture(scope="module")
def onx():
    return to_onnx(Mixed(), (torch.randn(2, 3), torch.rand(2, 3) > 0.5), dynamic_shapes=({0: "n"}, {0: "n"}))


def test_interface(onx):
    sess = InferenceSession(onx)
    assert [i.name for i in sess.get_inputs()] == ["x", "mask"]
    assert len(sess.get_outputs()) == 2
    assert sess.get_providers()[-1] == "CPUExecutionProvider"


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_feeds_torch_or_numpy(onx, kind):
    x, mask = torch.randn(4, 3), torch.rand(4, 3) > 0.5
    feeds = {"x": x, "mask": mask} if kind == "torch" else {"x": x.numpy(), "mask": mask.numpy()}
    out, neg = InferenceSession(onx).run(None, feeds)
    expected, expected_neg = Mixed()(x, mask)
    np.testing.assert_allclose(out, expected.numpy())
    np.testing.assert_array_equal(neg, expected_neg.numpy())


def test_run_torch_returns_tensors(onx):
    x, mask = torch.randn(4, 3), torch.rand(4, 3) > 0.5
    out, neg = InferenceSession(onx).run_torch(None, {"x": x, "mask": mask})
    assert isinstance(out, torch.Tensor) and neg.dtype == torch.bool
    torch.testing.assert_close(out, Mixed()(x, mask)[0])


def test_bfloat16_feeds_and_outputs():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x.float() * 3).bfloat16()

    x = torch.randn(5).bfloat16()
    sess = InferenceSession(to_onnx(M(), (x,)))
    torch.testing.assert_close(sess.run_torch(None, {"x": x})[0], M()(x))
    assert sess.run(None, {"x": x})[0].dtype.name == "bfloat16"


def test_default_providers_fall_back_to_cpu():
    providers = default_providers()
    assert providers[-1] == "CPUExecutionProvider"
    if not torch.cuda.is_available():
        assert providers == ["CPUExecutionProvider"]


def test_model_from_path_bytes_and_ir(tmp_path, onx):
    path = tmp_path / "m.onnx"
    path.write_bytes(onx.SerializeToString())
    for model in (str(path), onx.SerializeToString()):
        assert [i.name for i in InferenceSession(model).get_inputs()] == ["x", "mask"]
    ir_model = to_onnx(Mixed(), (torch.randn(2, 3), torch.rand(2, 3) > 0.5), as_ir=True)
    assert len(InferenceSession(ir_model).get_outputs()) == 2
