"""The arguments people bring from ``torch.onnx.export``: input_names, output_names, opset_version, dynamic_axes,
a filename in third position or as ``f``; each checked against eager PyTorch through onnxruntime. Its other
keywords are accepted where their value means what to_onnx does, otherwise an ArgumentError naming the keyword
and what to do; a typo gets the closest names; an opset too old names the keyword the user gave."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from experimental.torch_interpreter import (
    ArgumentError,
    DynamicShapeError,
    InferenceSession,
    InputMismatchError,
    OpsetError,
    TorchInterpreterWarning,
    export,
    to_onnx,
)


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y, (x - y).sum(dim=1)


def _dims(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _check(onx: onnx.ModelProto, model: torch.nn.Module, feeds: dict, inputs: tuple) -> None:
    got = InferenceSession(onx).run(None, {k: v.numpy() for k, v in feeds.items()})
    for g, e in zip(got, model(*inputs)):
        torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-6, rtol=1e-6)


def test_names_and_dynamic_axes_as_torch_onnx_export_takes_them():
    model, x, y = TwoInputs(), torch.randn(3, 4), torch.randn(3, 4)
    with pytest.warns(TorchInterpreterWarning, match="dynamic_axes .* translated into dynamic_shapes="):
        onx = to_onnx(
            model, (x, y), input_names=["a", "b"], output_names=["sum", "diff"], opset_version=20,
            dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}, "sum": {0: "batch"}},
        )
    assert [i.name for i in onx.graph.input] == ["a", "b"]
    assert [o.name for o in onx.graph.output] == ["sum", "diff"]
    assert _dims(onx.graph.input[0]) == ["batch", 4] and _dims(onx.graph.output[1]) == ["batch"]
    assert {o.domain: o.version for o in onx.opset_import}[""] == 20
    x2, y2 = torch.randn(7, 4), torch.randn(7, 4)  # another batch size
    _check(onx, model, {"a": x2, "b": y2}, (x2, y2))


def test_dynamic_axes_as_a_list_and_by_parameter_name():
    model, x, y = TwoInputs(), torch.randn(3, 4), torch.randn(3, 4)
    with pytest.warns(TorchInterpreterWarning):
        onx = to_onnx(model, (x, y), dynamic_axes={"x": [0], "y": [0]})
    assert _dims(onx.graph.input[0])[0] == _dims(onx.graph.input[1])[0]  # one dimension: x + y needs it
    x2, y2 = torch.randn(5, 4), torch.randn(5, 4)
    _check(onx, model, {"x": x2, "y": y2}, (x2, y2))


def test_torch_onnx_arguments_refused_clearly():
    model, x, y = TwoInputs(), torch.randn(3, 4), torch.randn(3, 4)
    with pytest.raises(InputMismatchError, match="opset_version=20 and target_opset=19 disagree"):
        to_onnx(model, (x, y), opset_version=20, target_opset=19)
    with pytest.raises(InputMismatchError, match="input_names has 3 names but the graph has 2 inputs"):
        to_onnx(model, (x, y), input_names=["a", "b", "c"])
    with pytest.raises(DynamicShapeError, match="dynamic_shapes and dynamic_axes are both given"):
        to_onnx(model, (x, y), dynamic_shapes=({0: "b"}, {0: "b"}), dynamic_axes={"x": [0]})
    with pytest.raises(DynamicShapeError, match="dynamic_axes names 'z', which is neither an input"):
        to_onnx(model, (x, y), dynamic_axes={"z": [0]})


# -- the other keywords of torch.onnx.export ------------------------------------------------------------------------
def _linear():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


X = torch.randn(2, 4)


def test_values_that_mean_what_to_onnx_does_are_accepted(tmp_path):
    path = tmp_path / "model.onnx"
    onx = to_onnx(
        _linear(), (X,), f=str(path), export_params=True, do_constant_folding=True,
        keep_initializers_as_inputs=False, dynamo=True, training=torch.onnx.TrainingMode.EVAL, opset_version=18,
    )
    assert path.exists() and {o.domain: o.version for o in onx.opset_import}[""] == 18
    got = InferenceSession(str(path)).run(None, {"input": X.numpy()})[0]
    np.testing.assert_allclose(got, _linear()(X).detach().numpy(), rtol=1e-5, atol=1e-6)
    program = export(_linear(), (X,), dynamo=True, do_constant_folding=True)
    assert [n.op_type for n in program.model_proto.graph.node] == ["Gemm", "Relu"]


@pytest.mark.parametrize(
    "keyword, value, advice",
    [
        ("export_params", False, "always stores the weights"),
        ("do_constant_folding", False, "optimize=False"),
        ("keep_initializers_as_inputs", True, "add_initializer"),
        ("dynamo", False, "TorchScript exporter"),
        ("training", torch.onnx.TrainingMode.TRAINING, r"call model.train\(\)"),
    ],
)
def test_other_values_say_what_to_do(keyword, value, advice):
    for function in (to_onnx, export):
        with pytest.raises(ArgumentError, match=f"{keyword}=.*{advice}"):
            function(_linear(), (X,), **{keyword: value})


def test_training_mode_must_be_the_models():
    model = _linear().train()
    with pytest.raises(ArgumentError, match=r"training mode.*model.eval\(\)"):
        to_onnx(model, (X,), training=torch.onnx.TrainingMode.EVAL)
    to_onnx(model, (X,), training=torch.onnx.TrainingMode.PRESERVE)


def test_typo_and_duplicate_filename(tmp_path):
    with pytest.raises(ArgumentError, match="opset_vesion=18; did you mean opset_version"):
        to_onnx(_linear(), (X,), opset_vesion=18)
    with pytest.raises(ArgumentError, match="f= and filename="):
        to_onnx(_linear(), (X,), f=str(tmp_path / "a.onnx"), filename=str(tmp_path / "b.onnx"))


def test_opset_too_old_names_the_keyword_given():
    with pytest.raises(OpsetError, match=r"^opset_version=10: .*opset 11"):
        to_onnx(_linear(), (X,), opset_version=10)
    with pytest.raises(OpsetError, match=r"^target_opset=10: .*opset 11"):
        to_onnx(_linear(), (X,), target_opset=10)


def test_older_opset_converted_down():
    """``opset_version=17`` (the official exporter converts down too): the translation at 18 through onnx's version
    converter, the same numbers at another size; an op without a version there is refused naming it, below the
    oldest opset the message names it."""
    import transformers

    from experimental.torch_interpreter import OpsetError
    from experimental.torch_interpreter.runtime import InferenceSession

    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 100, (2, 5))
    onx = to_onnx(model, (ids,), opset_version=17, dynamic_shapes=({0: "b", 1: "s"},))
    assert [(o.domain, o.version) for o in onx.opset_import if o.domain == ""] == [("", 17)]
    assert any(p.key.startswith("aten2onnx.") for p in onx.metadata_props)  # the export's metadata kept
    other = torch.randint(0, 100, (3, 7))
    got = InferenceSession(onx).run(None, {"input_ids": other.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), model(other).last_hidden_state, atol=1e-5, rtol=1e-4)
    with pytest.raises(OpsetError, match="LayerNormalization has no version at opset 14"):
        to_onnx(model, (ids,), target_opset=14)
    with pytest.raises(OpsetError, match="need opset 11 or more"):
        to_onnx(model, (ids,), target_opset=9)
