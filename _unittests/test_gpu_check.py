"""benchmarks/gpu_check.py, the CUDA check of issue 25, where no GPU is: its ``--cpu`` mode runs the same cases on
the CPU provider (two small families here), and without a GPU the default mode checks nothing, says so, exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnxruntime as ort
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_cpu_quick_matches(tmp_path):
    """--cpu --quick on the CNN and the PythonOp model: levels True and "onnxruntime", float32 and float16, all
    matching eager PyTorch, the table printed, the run said to be on the CPU."""
    path = tmp_path / "results.json"
    proc = _run("--cpu", "--quick", "--families", "cnn,python_op", "--json", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "ran on the CPU" in out and "not a GPU check" in out
    assert "| family | level | dtype | result | max abs | max rel |" in out
    rows = [line for line in out.splitlines() if line.startswith(("| cnn |", "| python_op |"))]
    assert len(rows) == 8 and all("| ok |" in row for row in rows), out
    assert "8 cases: 8 ok" in out

    report = json.loads(path.read_text())
    assert report["device"] == "cpu" and report["providers"] == ["CPUExecutionProvider"]
    results = report["results"]
    assert {(r["family"], r["level"], r["dtype"]) for r in results} == {
        (family, level, dtype)
        for family in ("cnn", "python_op")
        for level in ("True", "onnxruntime")
        for dtype in ("float32", "float16")
    }
    for r in results:
        assert r["result"] == "ok" and r["max_rel"] <= (1e-3 if r["dtype"] == "float32" else 1e-2), r
        assert r["nan_onnx"] == r["nan_eager"] == 0
        # a CPU run: onnxruntime assigns every node to the CPU and copies nothing
        assert r["nodes"] > 0 and len(r["cpu_nodes"]) == r["nodes"] and r["memcpy"] == []
    python_op = [r for r in results if r["family"] == "python_op"]
    assert all("1 PythonOp node(s) run by PyTorch" in r["note"] for r in python_op)


@pytest.mark.skipif(
    torch.cuda.is_available() and "CUDAExecutionProvider" in ort.get_available_providers(),
    reason="a GPU and onnxruntime-gpu are here: the default mode would run the whole check",
)
def test_no_gpu_says_so():
    proc = _run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("no GPU: nothing checked (missing: ")
    if not torch.cuda.is_available():
        assert "a CUDA device for torch" in proc.stdout
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert "onnxruntime-gpu's CUDAExecutionProvider" in proc.stdout
    assert "|" not in proc.stdout  # no table
