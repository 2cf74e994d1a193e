"""``benchmarks/bench_training.py``, the training benchmark, at its smallest: the model with a custom
autograd.Function, two steps in each mode, each in its own process; the table says both modes agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_training.py")


def test_tiny_function_model(tmp_path):
    path = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--models", "function", "--sizes", "tiny", "--steps", "2", "--warmup", "1",
         "--json", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| function | tiny |"))
    assert row.endswith("| yes |"), proc.stdout
    rows = json.loads(path.read_text())
    assert {r["mode"] for r in rows} == {"eager", "aten2onnx"}
    compiled = next(r for r in rows if r["mode"] == "aten2onnx")
    assert [g[:2] for g in compiled["graphs"]] == [["forward", "onnxruntime"], ["backward", "onnxruntime"]]
    assert all(r["step_ms"] > 0 and len(r["losses"]) == 3 for r in rows)
