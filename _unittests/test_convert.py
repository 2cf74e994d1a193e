"""to_onnx end to end: inputs, outputs, names, metadata, saving, strict mode, ExportedProgram."""

import os

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, default_registry, to_onnx
from experimental.torch_interpreter.testing.check import check_model, op_types


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, mask=None):
        y = self.lin(x)
        return {"hidden": y * mask, "total": y.sum(dim=-1)}


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_kwargs_dict_outputs_and_shared_dim_names():
    x, m = torch.randn(2, 3, 4), torch.rand(2, 3, 4)
    ds = {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}
    onx = check_model(
        TwoInputs(), (x,), {"mask": m}, dynamic_shapes=ds,
        more_inputs=[((torch.randn(5, 7, 4),), {"mask": torch.rand(5, 7, 4)})],
    )
    assert [i.name for i in onx.graph.input] == ["x", "mask"]
    assert [o.name for o in onx.graph.output] == ["hidden", "total"]
    assert _dims(onx.graph.input[0]) == _dims(onx.graph.input[1]) == ["batch", "seq", 4]
    assert _dims(onx.graph.output[1]) == ["batch", "seq"]


@pytest.mark.parametrize("strict", [False, True])
def test_strict_and_non_strict(strict):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    onx = check_model(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), strict=strict,
                      more_inputs=[((torch.randn(6, 4),), None)])
    assert op_types(onx) == ["Gemm", "Relu", "Gemm"]


def test_exported_program_is_accepted():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("n")},))
    onx = to_onnx(ep)
    assert _dims(onx.graph.input[0])[1] == 4
    sess = InferenceSession(onx)
    x = torch.randn(5, 4)
    np.testing.assert_allclose(sess.run(None, {"input": x})[0], model(x).detach().numpy(), atol=1e-6)


def test_node_metadata_and_names():
    onx = to_onnx(TwoInputs(), (torch.randn(2, 4),), {"mask": torch.rand(2, 4)})
    node = next(n for n in onx.graph.node if n.op_type == "Mul")
    meta = {p.key: p.value for p in node.metadata_props}
    assert meta["pkg.torch.fx_node"] == "mul"
    assert meta["pkg.torch.target"] == "aten::mul.Tensor"
    assert "test_convert.py" in meta["pkg.torch.source"] and "y * mask" in meta["pkg.torch.source"]
    gemm = next(n for n in onx.graph.node if n.op_type in ("Gemm", "MatMul"))
    gemm_meta = {p.key: p.value for p in gemm.metadata_props}
    assert gemm_meta["pkg.torch.module_scope"].startswith("lin: ")
    assert "lin.weight" in {i.name for i in onx.graph.initializer}


def test_node_sources_hold_no_path_of_this_machine(monkeypatch, tmp_path):
    """The source of each node names a library's file from its package folder on and the user's file relative to
    the working directory, or by its name from elsewhere: a model shipped to others (a GenAI package) carried 38
    absolute paths of the exporting machine (its home folder, its Python installation)."""
    monkeypatch.chdir(tmp_path)  # the test file is then outside the working directory
    linear = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.GELU())
    onx = to_onnx(linear, (torch.randn(2, 4),))
    sources = [p.value for n in onx.graph.node for p in n.metadata_props if p.key == "pkg.torch.source"]
    assert sources and not any(v.startswith("/") or os.sep + "site-packages" in v for v in sources), sources
    assert any(v.startswith("torch/nn/modules/") for v in sources), sources


def test_save_with_external_data(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU()).eval()
    target = tmp_path / "big.onnx"
    x = torch.randn(2, 512)
    proto = to_onnx(model, (x,), filename=target)
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
    weight = next(i for i in proto.graph.initializer if i.name == "0.weight")
    assert weight.data_location == onnx.TensorProto.EXTERNAL and not weight.raw_data
    sess = InferenceSession(str(target))
    np.testing.assert_allclose(sess.run(None, {"input": x})[0], model(x).detach().numpy(), atol=1e-5)


def test_small_model_is_one_file(tmp_path):
    to_onnx(torch.nn.Linear(2, 2), (torch.randn(1, 2),), filename=tmp_path / "small.onnx")
    assert os.listdir(tmp_path) == ["small.onnx"]


def test_as_ir_shares_weights():
    model = torch.nn.Linear(3, 3)
    m = to_onnx(model, (torch.randn(1, 3),), as_ir=True)
    assert isinstance(m, ir.Model)
    weight = m.graph.initializers["weight"].const_value
    assert isinstance(weight, ir.tensor_adapters.TorchTensor)
    assert weight.raw.data_ptr() == model.weight.data_ptr()


def test_opset_and_ir_version():
    onx = to_onnx(torch.nn.ReLU(), (torch.randn(2),), target_opset=21)
    assert onx.ir_version <= 13
    assert {o.domain: o.version for o in onx.opset_import}[""] == 21
    assert {o.domain: o.version for o in to_onnx(torch.nn.ReLU(), (torch.randn(2),), target_opset=17).opset_import}[
        ""] == 17  # converted down by onnx's version converter
    with pytest.raises(ValueError, match="opset 11"):
        to_onnx(torch.nn.ReLU(), (torch.randn(2),), target_opset=10)


class NoGradRegion(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x * 2
        return y + 1


def test_grad_region_inlined():
    onx = check_model(NoGradRegion(), (torch.randn(3),), optimize=False)  # the raw translation
    assert op_types(onx) == ["Constant", "Mul", "Constant", "Add"]


def test_registry_lists_coverage():
    supported = default_registry.supported()
    for key in ["aten::linear.default", "aten::scaled_dot_product_attention.default", "aten::add.Tensor"]:
        assert key in supported


class _CachedAnchors(torch.nn.Module):
    """Caches a grid and the size it was made for, as ultralytics' detection heads do (``self.shape != shape``)."""

    def __init__(self):
        super().__init__()
        self.shape = None

    def forward(self, x):
        if self.shape != x.shape:
            self.anchors = torch.arange(x.shape[-1], dtype=x.dtype)
            self.shape = x.shape
        return x + self.anchors


@pytest.mark.parametrize("eager_first", [False, True])
def test_capture_leaves_the_models_attributes_as_they_were(eager_first):
    """The exported model kept the fake tensor ``forward`` cached during the capture: the next eager call gave a
    FakeTensor without values (ultralytics YOLO after to_onnx)."""
    model, x = _CachedAnchors(), torch.randn(2, 5)
    if eager_first:
        model(x)
    before = {k: v for k, v in vars(model).items() if k in ("shape", "anchors")}
    onx = to_onnx(model, (x,))
    assert {k: v for k, v in vars(model).items() if k in ("shape", "anchors")} == before
    got = model(x)
    assert type(got) is torch.Tensor
    torch.testing.assert_close(got, x + torch.arange(5.0))
    sess = InferenceSession(onx)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], got.numpy(), rtol=1e-6)


class _BiasCache(torch.nn.Module):
    """Fills a dictionary in place in eval mode, as timm's EfficientFormer-V2 caches its attention biases."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.ones(4))
        self.cache = {}

    def forward(self, x):
        if str(x.device) not in self.cache:
            self.cache[str(x.device)] = self.bias * 2
        return x + self.cache[str(x.device)]


def test_capture_leaves_the_models_caches_as_they_were():
    """The dictionary kept torch.export's fake tensor: eager then failed (``.numpy() is not supported for tensor
    subclasses``)."""
    model, x = _BiasCache().eval(), torch.randn(3, 4)
    onx = to_onnx(model, (x,))
    assert model.cache == {}
    with torch.no_grad():
        got = model(x)
    assert type(got) is torch.Tensor
    np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": x})[0], got.numpy(), rtol=1e-6)
