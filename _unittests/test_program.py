"""``export`` returns an ``OnnxProgram`` as ``torch.onnx.export(..., dynamo=True)`` does: ``.model_proto``,
``.save()``, ``.optimize()``, called on the PyTorch model's inputs; ``to_onnx`` keeps returning a ModelProto."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from experimental.torch_interpreter import ArgumentError, ExportReport, InputMismatchError, OnnxProgram, export, to_onnx


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

    def forward(self, x, scale=None):
        y = self.b(torch.relu(self.a(x)))
        return y * scale if scale is not None else y


MODEL = Mlp().eval()


@pytest.fixture(scope="module")
def program() -> OnnxProgram:
    return export(MODEL, (torch.randn(2, 4),), {"scale": torch.rand(3)}, dynamic_shapes=({0: "batch"}, None))


def test_called_like_the_model_on_other_sizes(program):
    x, scale = torch.randn(7, 4), torch.rand(3)
    got = program(x, scale=scale)
    assert isinstance(got, list) and isinstance(got[0], torch.Tensor) and got[0].shape == (7, 3)
    with torch.no_grad():
        torch.testing.assert_close(got[0], MODEL(x, scale=scale), atol=1e-5, rtol=1e-5)


def test_model_proto_and_save(program, tmp_path):
    proto = program.model_proto
    assert isinstance(proto, onnx.ModelProto) and [n.op_type for n in proto.graph.node][:1] == ["Gemm"]
    paths = program.save(tmp_path / "m.onnx")
    assert [p.endswith("m.onnx") for p in paths] == [True]
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    x, scale = np.random.rand(5, 4).astype(np.float32), np.ones(3, dtype=np.float32)
    assert sess.run(None, {"x": x, "scale": scale})[0].shape == (5, 3)


def test_report_and_exported_program_kept(program):
    assert isinstance(program.report, ExportReport) and "## Steps" in str(program.report)
    assert isinstance(program.exported_program, torch.export.ExportedProgram)
    assert repr(program).startswith("OnnxProgram(inputs=['x', 'scale'], outputs=['output'], ")


def test_optimize_in_place():
    prog = export(Mlp().eval(), (torch.randn(2, 4),), optimize=False)
    before = len(prog.model.graph)
    assert prog.optimize() is prog and len(prog.model.graph) <= before
    assert prog(torch.randn(2, 4))[0].shape == (2, 3)


def test_wrong_inputs_give_a_project_error(program):
    with pytest.raises(InputMismatchError, match="shape\\[1\\] to be equal to 4, but got 5"):
        program(torch.randn(7, 5), scale=torch.rand(3))


def test_as_ir_refused_report_path_written(tmp_path):
    with pytest.raises(ArgumentError, match="to_onnx takes as_ir"):
        export(torch.nn.ReLU(), (torch.randn(2),), as_ir=True)
    prog = export(torch.nn.ReLU(), (torch.randn(2),), report=tmp_path / "r.md")
    assert "## Steps" in (tmp_path / "r.md").read_text() and "## Steps" in str(prog.report)


def test_to_onnx_unchanged():
    assert isinstance(to_onnx(torch.nn.ReLU(), (torch.randn(2),)), onnx.ModelProto)
