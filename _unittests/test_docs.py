"""The documentation builds: sphinx runs every example of ``_doc/examples`` and treats warnings as errors.

The build takes a few minutes on two cores (the comparison with ``torch.onnx.export(dynamo=True)``
dominates); it runs in a subprocess so that the examples' registrations do not leak into other tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "_doc")

PAGES = [
    "index.html",
    "design.html",
    "api.html",
    "supported_ops.html",
    "python_op.html",
    "auto_examples/index.html",
    "auto_examples/plot_1_torch_export.html",
    "auto_examples/plot_2a_to_onnx.html",
    "auto_examples/plot_2b_custom_code.html",
    "auto_examples/plot_2c_llm_cache.html",
    "patches.html",
    "auto_examples/plot_3_errors.html",
    "auto_examples/plot_4_investigate.html",
    "auto_examples/plot_5_compare_dynamo.html",
    "auto_examples/plot_6_training.html",
    "training.html",
]


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_docs_build(tmp_path):
    html = tmp_path / "html"
    command = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
        "-d", str(tmp_path / "doctrees"), DOC, str(html),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    begin = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    elapsed = time.perf_counter() - begin
    assert proc.returncode == 0, f"sphinx-build failed ({elapsed:.0f}s):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"

    missing = [page for page in PAGES if not (html / page).exists()]
    assert not missing, f"pages not built: {missing}"

    # every example ran and its output is on its page
    examples = _read(str(html / "auto_examples" / "plot_3_errors.html"))
    assert "sphx-glr-script-out" in examples
    # every section of the errors tutorial raises what it shows: no output block says "no error"
    blocks = re.findall(r'<div class="sphx-glr-script-out.*?</pre>', examples, flags=re.S)
    outputs = [re.sub(r"<[^>]+>", "", block) for block in blocks]
    assert outputs and not [o for o in outputs if "no error" in o.splitlines()]
    assert any("aten::special_airy_ai.default, used by 2 node(s)" in o for o in outputs)
    assert "UnsupportedOpError" in examples and "have no converter" in examples
    compare = _read(str(html / "auto_examples" / "plot_5_compare_dynamo.html"))
    assert "nodes dynamo" in compare
    images = os.listdir(html / "_images")
    assert any(name.startswith("sphx_glr_plot_5_compare_dynamo_001") for name in images), images
    assert any(name.startswith("sphx_glr_plot_2a_to_onnx_001") for name in images), images
    # every gallery page has a figure, so every card has a real thumbnail
    for page in ("plot_1_torch_export", "plot_2b_custom_code", "plot_2c_llm_cache", "plot_2d_custom_kernels",
                 "plot_3_errors", "plot_4_investigate"):
        assert any(name.startswith(f"sphx_glr_{page}_001") for name in images), (page, images)
    training = _read(str(html / "auto_examples" / "plot_6_training.html"))
    assert "PythonOpGrad" in training and "EagerFallbackWarning" in training
    assert any(name.startswith("sphx_glr_plot_6_training_001") for name in images), images
    investigate = _read(str(html / "auto_examples" / "plot_4_investigate.html"))
    assert "aten::silu.default" in investigate and "VerificationError" in investigate
    assert "custom.css" in investigate  # code and printed errors wrap

    # the generated pages: the registry listing and the API reference from docstrings
    supported = _read(str(html / "supported_ops.html"))
    assert "aten::linear.default" in supported and "higher_order::scan" in supported
    assert "demo::scaled_tanh" not in supported  # registered by an example, not by the project
    api = _read(str(html / "api.html"))
    for name in ("to_onnx", "InferenceSession", "UnsupportedOpError", "Registry", "NodeContext", "OrtBackend"):
        assert name in api, name

    # a quiet build: Sphinx's progress and warnings, not the INFO records of the libraries the examples use
    # (a dependency of the theme configures the root logger at import)
    output = proc.stdout + proc.stderr
    info = [line for line in output.splitlines() if re.match(r"^# \d{4}-\d\d-\d\d .* INFO ", line)]
    assert not info, f"{len(info)} INFO records printed by the build, e.g. {info[:3]}"

    # the home page leads to the tutorial and lists the reference pages without their sections
    index = _read(str(html / "index.html"))
    assert 'href="auto_examples/index.html"' in index and "auto_examples/plot_2a_to_onnx.html" in index
    assert "ops/activation.py" not in index
    # the graph viewer is in the API and draws the tutorial's first graph picture
    assert "plot_graph" in api
    to_onnx_page = _read(str(html / "auto_examples" / "plot_2a_to_onnx.html"))
    assert "plot_graph" in to_onnx_page and "def plot_onnx" not in to_onnx_page
    # the command line is shown as shell commands, not as Python running them
    assert "highlight-bash" in investigate and "subprocess" not in investigate
    assert "$ python -m experimental.torch_interpreter export" in investigate  # their real output
    # the performance and sweep pages open with their figure, then a short table
    for page, figure in (("performance.html", "performance_latency.png"), ("zoo.html", "zoo.png")):
        text = _read(str(html / page))
        assert text.index(figure) < text.index("<table"), page
        assert not re.search(r"\bissues? #?\d+|the issue asks", text.lower()), page  # the product, not its making

    # the patch table is generated from the patches; the LLM with a cache ran and matched
    patches = _read(str(html / "patches.html"))
    assert "DynamicCache as pytree" in patches and "torch.jit.isinstance" in patches
    llm = _read(str(html / "auto_examples" / "plot_2c_llm_cache.html"))
    assert "present.0.key" in llm and "max |onnx - torch|" in llm
