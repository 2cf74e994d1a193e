"""``bench_ort_latency.py --device``: the GPU latency benchmark, checked here on the CPU at tiny sizes (the same
code path but the provider), and without a GPU ``--device cuda`` measures nothing and says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_ort_latency.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: --device cuda would measure for minutes")
def test_cuda_without_gpu_measures_nothing():
    proc = _run("--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    assert "--device cuda: torch sees no CUDA device; nothing measured" in proc.stdout


@pytest.mark.heavy  # 24 s; test_cuda_without_gpu_measures_nothing runs the script by default
def test_cpu_quick_rows(tmp_path):
    """BERT in float32 and float16: every variant checked against eager and timed, the table written."""
    path, table = tmp_path / "rows.json", tmp_path / "table.rst"
    proc = _run("--device", "cpu", "--quick", "--models", "bert", "--dtypes", "float32,float16", "--repeat", "2",
                "--json", str(path), "--table", str(table))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(path.read_text())
    assert report["device"] == "CPU" and "--device cpu" in report["command"]
    rows = report["rows"]
    assert [(r["model"], r["case"], r["dtype"]) for r in rows] == [("bert", "2 x 8", "float32"),
                                                                   ("bert", "2 x 8", "float16")]
    for r in rows:
        assert set(r["latency_ms"]) == {"to_onnx ort", "official", "official+ort", "eager"}, r
        assert r["error"]["to_onnx ort"] < (1e-3 if r["dtype"] == "float32" else 1e-2), r
        assert r["nodes"]["to_onnx ort"] > 0
    text = table.read_text()
    assert text.startswith(".. list-table:: ONNX Runtime on CPU: median ms with I/O binding")
    assert "   * - bert, 2 x 8, float16" in text
