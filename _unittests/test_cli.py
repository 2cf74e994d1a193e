"""``python -m experimental.torch_interpreter``: export and compare a factory file in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
import torch

from experimental.torch_interpreter.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FACTORY = '''
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 8)

    def forward(self, x, scale=None):
        return torch.nn.functional.softplus(self.lin(x), beta=2.0) * scale


def factory():
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(2, 4),), {"scale": torch.rand(8)}, ({0: "batch"}, {})
'''


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    return subprocess.run([sys.executable, "-m", "experimental.torch_interpreter", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_export_verify_report_dump(tmp_path):
    (tmp_path / "model_factory.py").write_text(FACTORY)
    out = _run("export", "model_factory.py:factory", "-o", "m.onnx", "--verify", "--report", "r.md",
               "--dump", "dump", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "saved m.onnx" in out.stdout and "passed" in out.stdout
    assert "## Verification" in (tmp_path / "r.md").read_text()
    dumped = sorted(os.listdir(tmp_path / "dump"))
    assert dumped == ["exported_program.pt2", "graph.txt", "inputs.pt", "m.onnx", "report.md"], dumped
    assert "aten.softplus.default" in (tmp_path / "dump" / "graph.txt").read_text()
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["x", "scale"]
    x = np.random.rand(5, 4).astype(np.float32)
    assert sess.run(None, {"x": x, "scale": np.ones(8, dtype=np.float32)})[0].shape == (5, 8)
    torch.export.load(str(tmp_path / "dump" / "exported_program.pt2"))


def test_cli_dump_holds_the_model_by_default(tmp_path, monkeypatch):
    (tmp_path / "f.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    assert main(["export", "f.py", "--dump", "d"]) == 0  # the function name defaults to factory
    assert "model.onnx" in os.listdir(tmp_path / "d")


def test_cli_dump_keeps_no_program_torch_cannot_read_back(tmp_path, monkeypatch, caplog):
    """A program that saves but does not load (transformers' caches are not registered for serialization) is
    not left in the dump: graph.txt holds it, the log says why."""

    def refuse(path, *args, **kwargs):
        raise RuntimeError("DynamicCache is not registered for serialization")

    (tmp_path / "f.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.export, "load", refuse)
    assert main(["export", "f.py", "--dump", "d"]) == 0
    assert sorted(os.listdir(tmp_path / "d")) == ["graph.txt", "inputs.pt", "model.onnx", "report.md"]
    assert "not kept in the dump" in caplog.text and "DynamicCache is not registered" in caplog.text


def test_cli_compare(tmp_path):
    (tmp_path / "f.py").write_text(FACTORY)
    out = _run("compare", "f.py:factory", "--markdown", "c.md", "--plot", "c.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no discrepancy" in out.stdout and "3/3 FX nodes" in out.stdout
    assert "| softplus |" in (tmp_path / "c.md").read_text()
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_cli_errors_name_the_problem(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "missing.py:factory"]) == 1
    err = capsys.readouterr().err
    assert "missing.py" in err and "not found" in err
    (tmp_path / "f.py").write_text(FACTORY)
    assert main(["export", "f.py:nope"]) == 1
    assert "no function 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["export"])
    assert info.value.code == 2 and "factory" in capsys.readouterr().err


def test_cli_compare_plot_without_matplotlib_says_so_first(tmp_path, monkeypatch, capsys):
    """``--plot`` where matplotlib is missing: the project's error naming the package, before the comparison."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.py").write_text(FACTORY)
    assert main(["compare", "f.py:factory", "--plot", "c.png"]) == 1
    err = capsys.readouterr().err
    assert "matplotlib" in err and "pip install matplotlib" in err, err
    assert not (tmp_path / "c.png").exists()


def test_cli_genai_takes_the_builders_spelling(monkeypatch, capsys):
    """``-i MODEL -o OUT -p int4 -e cpu``, as ``onnxruntime_genai.models.builder`` takes them; a folder given twice
    or missing is refused by the parser."""
    import experimental.torch_interpreter.cli as cli

    seen = {}

    def fake_genai(ns):
        seen.update(model=ns.model_folder, out=ns.out_folder, precision=ns.precision, provider=ns.provider)
        return 0

    monkeypatch.setattr(cli, "_genai", fake_genai)
    assert main(["genai", "-i", "m", "-o", "p", "-p", "int4", "-e", "cpu"]) == 0
    assert seen == {"model": "m", "out": "p", "precision": "int4", "provider": "cpu"}
    assert main(["genai", "m2", "p2"]) == 0 and seen["model"] == "m2" and seen["out"] == "p2"
    for argv in (["genai", "m", "-i", "m", "-o", "p"], ["genai", "-i", "m"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "given twice" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_cli_export_transformers_folder(tmp_path, family):
    """``export FOLDER -o model.onnx`` for a folder save_pretrained wrote (what ``optimum-cli export onnx`` users
    expect): a causal LM without cache and a BERT classifier, batch and sequence dynamic, equal to eager through
    onnxruntime at another batch and sequence."""
    import transformers

    folder = tmp_path / family
    if family == "llama":
        from experimental.torch_interpreter.genai.tiny import write_random_causal_lm

        write_random_causal_lm("llama", str(folder))
    else:
        torch.manual_seed(0)
        config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, num_labels=3)
        transformers.BertForSequenceClassification(config).save_pretrained(str(folder))
    out = tmp_path / "model.onnx"
    assert main(["export", str(folder), "-o", str(out)]) == 0
    model = getattr(transformers, transformers.AutoConfig.from_pretrained(str(folder)).architectures[0])
    model = model.from_pretrained(str(folder)).eval()
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    assert {"input_ids", "attention_mask"} <= names
    ids = torch.randint(0, 100, (3, 5), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(3, 5, dtype=torch.int64)
    feeds = {k: v.numpy() for k, v in {"input_ids": ids, "attention_mask": mask}.items() if k in names}
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits.numpy()
    np.testing.assert_allclose(sess.run(None, feeds)[0], expected, atol=1e-4, rtol=1e-4)


def test_cli_export_folder_without_config(tmp_path, capsys):
    assert main(["export", str(tmp_path)]) == 1
    assert "has no config.json" in capsys.readouterr().err
