"""The benchmark pages of the documentation, rendered from stored results: the performance figure draws no bar
for a missing value (it writes "n/a"), the tables have short headers, the sweep page opens with its figure and
a short table, its commands are quoted as a shell needs them."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def latency():
    return _load("bench_ort_latency")


@pytest.fixture(scope="module")
def zoo():
    return _load("transformers_zoo")


LAT = {"to_onnx": 10.0, "to_onnx ort": 8.0, "official": 10.0, "official+ort": 9.0}
NODES = {"to_onnx": 100, "to_onnx ort": 40, "official": 120, "official+ort": 60}
ROWS = [
    {"model": "llama", "case": "no cache", "latency_ms": LAT, "nodes": NODES, "failed": {}},
    {"model": "llama", "case": "prefill (past 0, 128 new)", "latency_ms": LAT, "nodes": NODES, "failed": {}},
    {"model": "llama", "case": "decode (past 128, 1 new)", "latency_ms": LAT, "nodes": NODES, "failed": {}},
    {"model": "t5", "case": "no cache", "latency_ms": {"to_onnx": 10.0, "to_onnx ort": 9.0},
     "nodes": {"to_onnx": 90, "to_onnx ort": 50}, "failed": {"official": "torch.onnx.export fails: ValueError"}},
]


def test_missing_values_are_no_bars_but_na(latency, tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    latency.write_plot(ROWS, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").exists()
    top, bottom = figures[0].axes
    # llama: three cases; t5: none (no official model to divide by, no cache rows): three bars in all
    heights = [p.get_height() for p in top.patches]
    assert len(heights) == 3 and all(h == pytest.approx(8.0 / 9.0) for h in heights)
    assert [t.get_text() for t in top.texts] == ["n/a"]  # one n/a over t5's three missing bars
    # nodes: four bars for llama, two for t5 (the official exports failed)
    assert len(bottom.patches) == 6 and min(p.get_height() for p in bottom.patches) > 0
    assert [t.get_text() for t in bottom.texts] == ["n/a"]
    assert top.get_title() == "latency (lower is better)"
    plt.close("all")


def test_short_table_then_details(latency, tmp_path):
    latency.write_table(ROWS, str(tmp_path / "t.inc"), "python bench", str(tmp_path / "d.inc"))
    short = (tmp_path / "t.inc").read_text()
    headers = re.findall(r"^     - (.*)$", short.split("   * - llama")[0], re.MULTILINE)
    assert headers == ["nodes, to_onnx", "nodes, official", "latency, no cache", "latency, prefill", "latency, decode"]
    assert "   * - t5\n     - 50\n     - n/a\n     - n/a\n     - n/a\n     - n/a" in short
    assert "     - 0.89" in short  # 8 / min(10, 9)
    details = (tmp_path / "d.inc").read_text()
    assert "ONNX nodes per model and export" in details and "Command: ``python bench``" in details
    assert "torch.onnx.export fails: ValueError" in details


def test_sweep_page_opens_with_figure_and_short_table(zoo, tmp_path):
    rows = {}
    for task, arch, statuses in (("causal-lm", "llama", ("ok", "ok")), ("causal-lm", "odd", ("ok", "export")),
                                 ("masked-lm", "bert", ("ok", "ok")), ("masked-lm", "broken", ("skip", "skip"))):
        for exporter, status in zip(("to_onnx", "dynamo"), statuses):
            rows[f"{task}:{arch}:{exporter}"] = {"task": task, "arch": arch, "exporter": exporter, "status": status,
                                                 "nodes": 10, "time": 1.5, "error": "" if status == "ok" else "Boom"}
    results = {"rows": rows, "commands": ["python benchmarks/transformers_zoo.py --only causal-lm:(llama|odd)$"]}
    rst, png = tmp_path / "zoo.rst", tmp_path / "zoo.png"
    summary = zoo.render(results, str(rst), str(png))
    page = rst.read_text()
    assert png.exists()
    assert page.index(".. image:: zoo.png") < page.index(".. list-table::") < page.index(".. code-block:: bash")
    assert "   * - all\n     - 4\n     - 3\n     - 3 (100.0 %)\n     - 2 (66.7 %)" in page
    command = next(line.strip() for line in page.splitlines() if "--only" in line)
    assert shlex.split(command)[-1] == "causal-lm:(llama|odd)$"  # quoted: a shell passes it as one argument
    assert "ok, 10 nodes, 1.5 s" in page and "\ncausal-lm\n~~~~~~~~~\n" in page
    assert "to_onnx: 3 ok / 3" in summary
    plt.close("all")


def test_vision_zoo_page():
    """The vision zoo page from stored results: totals, ratios on the models both convert, one row per model,
    failures as literals (a message with ``*`` or a trailing ``_`` would be markup), the command."""
    vision = _load("vision_zoo")
    results = [
        {"model": "resnet18", "params_m": 11.7, "ours": {"ok": True, "nodes": 58, "export_s": 2.0, "latency_ms": 10.0},
         "official": {"ok": True, "nodes": 49, "export_s": 6.0, "latency_ms": 10.0}},
        {"model": "raft_small", "params_m": 1.0, "ours": {"ok": True, "nodes": 2317, "export_s": 30.0,
                                                          "latency_ms": 500.0},
         "official": {"ok": False, "error": "GuardOnDataDependentSymNode: Eq(4*u1, 0) in foo_", "export_s": 3.0}},
        {"model": "vit_h_14", "params_m": 632.0, "skipped": "above 100 M parameters"},
    ]
    page = vision.render_rst(results, "python benchmarks/vision_zoo.py --max-params 100")
    assert "* ok: ours 2, official 1 of the 2 run (1 skipped)" in page
    assert "nodes ours / official on the 1 both convert: geometric mean 1.18" in page
    assert "``official: GuardOnDataDependentSymNode: Eq(4*u1, 0) in foo_``" in page
    assert "     - 58 / 49" in page and "above 100 M parameters" in page
    assert page.rstrip().endswith("python benchmarks/vision_zoo.py --max-params 100")
    timm = vision.render_rst([dict(results[0], model="timm:test_vit")], "python benchmarks/vision_zoo.py --source timm")
    assert timm.startswith(".. generated by benchmarks/vision_zoo.py, do not edit\n\nVision zoo: timm\n====")
    assert "One model per timm family" in timm and "   * - timm:test_vit" in timm
