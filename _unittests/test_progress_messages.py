"""What a user sees while exporting: a line when each step starts at ``verbose=1``, nothing at ``verbose=0`` (no
warning of a dependency either), a warning naming the axes made dynamic for a transformers model given no
``dynamic_shapes``."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
import transformers

from experimental.torch_interpreter import CaptureStrategyWarning, DynamicShapeError, logs, to_onnx


def _bert() -> torch.nn.Module:
    cfg = transformers.BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                  vocab_size=100)
    return transformers.BertModel(cfg).eval()


def test_each_step_announced_at_verbose_1(caplog):
    caplog.set_level(logging.INFO)
    to_onnx(torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(2, 4),), verbose=1)
    starts = [r.getMessage() for r in caplog.records if r.getMessage().endswith("...")]
    assert starts == [
        "capture: torch.export.export of Sequential (strict=False)...",
        "translation: 5 FX nodes...",
        "optimization: optimize=True, 1 nodes...",
    ], starts


def test_silent_at_verbose_0(capfd, caplog, monkeypatch):
    """A static transformers model: onnxscript's folding cannot evaluate some nodes and says so at WARNING level;
    the user at the default level sees nothing of it (nor a progress line: it shows after 3 s, which a loaded
    machine may take, and is tested below)."""
    monkeypatch.setattr(logs, "PROGRESS_DELAY", 600.0)
    ids = torch.randint(0, 100, (2, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_onnx(_bert(), (), {"input_ids": ids}, dynamic_shapes={})
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records


def test_axes_made_dynamic_for_the_user_are_shown():
    ids = torch.randint(0, 100, (2, 7))
    with pytest.warns(CaptureStrategyWarning, match=r"the usual axes were made dynamic \(input_ids: \{0: 'batch', "
                                                    r"1: 'seq'\}\); pass dynamic_shapes to choose them"):
        onx = to_onnx(_bert(), (), {"input_ids": ids})
    assert [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim] == ["batch", "seq"]


def test_verbose_1_prints_the_steps_not_the_report(caplog):
    caplog.set_level(logging.DEBUG)
    to_onnx(torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(2, 4),), verbose=1)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(info) <= 10, info
    assert info[-1].startswith("to_onnx done in ") and "report='export.md'" in info[-1], info
    assert not any("# Export report" in m for m in info), info
    # verbose=2 is for whoever investigates: the whole report, at DEBUG
    caplog.clear()
    to_onnx(torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(2, 4),), verbose=2)
    assert any("# Export report" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)


def test_logging_info_shows_the_package_steps_not_each_pass_of_the_optimizers(caplog):
    """A user who sets logging.INFO for everything: onnx-ir and onnxscript log one line per pass (with a stack);
    they stay quiet while the package optimizes."""
    caplog.set_level(logging.INFO)
    to_onnx(_bert(), (), {"input_ids": torch.randint(0, 100, (2, 7))}, dynamic_shapes={}, optimize="onnxruntime")
    names = {r.name.split(".")[0] for r in caplog.records}
    assert names <= {"experimental", "torch", "transformers", "py"}, names
    assert any(r.getMessage().startswith("to_onnx done in ") for r in caplog.records)


def test_a_long_export_shows_a_progress_line(capfd, monkeypatch):
    """An export longer than logs.PROGRESS_DELAY seconds (3) shows the step it runs on stderr; 0 here."""
    monkeypatch.setattr(logs, "PROGRESS_DELAY", 0.0)
    to_onnx(torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(2, 4),), filename=None)
    err = capfd.readouterr().err
    assert "to_onnx: capture" in err and "to_onnx: done" in err, err
    assert "3/3" in err or "to_onnx: done after" in err, err  # tqdm's bar, or a line per step without tqdm


def test_progress_to_a_log_file_is_one_line_per_step():
    """stderr sent to a file (a CI job, nohup): lines, not tqdm's bar redrawn with carriage returns; a terminal
    gets the bar."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    pytest.importorskip("tqdm", reason="the bar needs tqdm, a dependency of torch's and transformers' tools")
    terminal = Terminal()
    with logs.ExportProgress(("capture", "translation"), delay=0.0, file=terminal) as progress:
        progress.step("translation")
    assert "\r" in terminal.getvalue() and "to_onnx: done 2/2" in terminal.getvalue()
    out = io.StringIO()
    with logs.ExportProgress(("capture", "translation"), delay=0.0, file=out) as progress:
        progress.step("translation")
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == ["to_onnx: capture (1/2)", "to_onnx: translation (2/2)",
                                           out.getvalue().splitlines()[-1]]
    assert out.getvalue().splitlines()[-1].startswith("to_onnx: done after ")


def test_a_long_export_that_fails_says_where_and_ends_its_line(capfd, monkeypatch):
    monkeypatch.setattr(logs, "PROGRESS_DELAY", 0.0)

    class Fixed(torch.nn.Module):
        def forward(self, x):
            return x.reshape(3, 2)

    with pytest.raises(DynamicShapeError):
        to_onnx(Fixed(), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"},))
    err = capfd.readouterr().err
    assert "to_onnx: capture failed" in err and err.endswith("\n"), err
