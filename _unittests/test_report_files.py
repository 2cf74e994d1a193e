"""A report that cannot be written never hides what the export gave: the model, or the export's own error."""

from __future__ import annotations

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
