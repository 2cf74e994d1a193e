"""A report that cannot be written never hides what the export gave (the model, or the export's own error) and its
warning points at the user's line; what the report says about the capture and the ranges of the dynamic axes."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

from experimental.torch_interpreter import SaveError, TorchInterpreterWarning, to_onnx


def test_save_error_not_hidden_by_the_report(tmp_path):
    """A folder that refuses the model refuses its report too: the SaveError (which keeps the model) is raised,
    the report is a warning."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.warns(TorchInterpreterWarning, match="export report could not be written"):
        with pytest.raises(SaveError, match="could not save the ONNX model") as info:
            to_onnx(torch.nn.ReLU(), (torch.randn(2),), filename=blocker / "m.onnx", report=True)
    assert info.value.model is not None


def test_model_returned_when_only_the_report_fails(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.warns(TorchInterpreterWarning, match="report=ExportReport\\(\\) keeps it in memory"):
        onx = to_onnx(torch.nn.ReLU(), (torch.randn(2),), report=blocker / "report.md")
    assert [n.op_type for n in onx.graph.node] == ["Relu"]


def test_report_names_no_strategy_and_no_default_lower_bound(tmp_path):
    """A capture that needed no strategy says so; a dynamic axis is not said to need a size >= 2 (torch.export's
    default bound, from its specialization of 0 and 1): the ONNX model runs a batch of 1, as PyTorch does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    onx = to_onnx(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), report=tmp_path / "r.md")
    text = (tmp_path / "r.md").read_text()
    assert "- strategies: none needed" in text, text
    assert "= batch in [1, inf] (torch.export's bound 2 comes from" in text and "[2, inf]" not in text, text
    x = torch.randn(1, 4)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_report_keeps_a_range_the_model_narrowed(tmp_path):
    class AtLeastFive(torch.nn.Module):
        def forward(self, x):
            torch._check(x.shape[0] >= 5)
            return x + 1

    with pytest.warns(TorchInterpreterWarning, match="must be >= 5"):
        to_onnx(AtLeastFive(), (torch.randn(6, 3),), dynamic_shapes=({0: "n"},), report=tmp_path / "r.md")
    assert "= n in [5, inf], narrowed by the model's code" in (tmp_path / "r.md").read_text()


def test_unwritable_report_warns_at_the_line_calling_to_onnx(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        to_onnx(torch.nn.ReLU(), (torch.randn(2),), report=tmp_path / "no_such_folder" / "r.md")
    caught = [w for w in caught if "export report could not be written" in str(w.message)]
    assert len(caught) == 1 and caught[0].filename == __file__, [(w.filename, w.lineno) for w in caught]
