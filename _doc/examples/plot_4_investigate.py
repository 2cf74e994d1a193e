"""
.. _l-investigate:

4. Investigating an export
==========================

Every ONNX node ``to_onnx`` creates records the FX node, the module and the source line it came from. This
page uses that to answer the three questions of an investigation, each in one call:

* the model converts but its results differ from PyTorch: **which node is wrong?**
  (:func:`~experimental.torch_interpreter.find_discrepancies`, ``to_onnx(..., verify=True)``);
* what happened during the export, and how long did each step take? (``to_onnx(..., report=...)``,
  ``verbose=1``);
* what does a bug report need? (a standalone repro of the node, the CLI's ``--dump``).

The first node at fault in a tiny Llama
---------------------------------------

A converter of our own replaces the project's ``silu``, and forgets the product: ``sigmoid(x)`` instead of
``x * sigmoid(x)``. A private :class:`~experimental.torch_interpreter.Registry`, a copy of the default one
with that converter swapped in (``default_registry.with_converter``), is given to the export; the default registry
is left alone.
"""

import os
import tempfile

import matplotlib.pyplot as plt
import onnx_ir as ir
import torch
import transformers

from experimental.torch_interpreter import (
    ConversionError,
    ExportReport,
    VerificationError,
    default_registry,
    find_discrepancies,
    to_onnx,
)
from experimental.torch_interpreter.translation.context import NodeContext


def silu_without_product(ctx: NodeContext, self: ir.Value) -> ir.Value:
    """silu(Tensor self) -> Tensor (wrong: returns sigmoid(x))"""
    return ctx.op("Sigmoid", self)


buggy = default_registry.with_converter("aten::silu.default", silu_without_product)

config = transformers.LlamaConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256, use_cache=False,
)
torch.manual_seed(0)
llama = transformers.LlamaForCausalLM(config).eval()
inputs = {"input_ids": torch.randint(0, 1000, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.int64)}
dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}

# %%
# :func:`~experimental.torch_interpreter.find_discrepancies` exports the model, runs the exported program
# node by node in PyTorch and the ONNX model in onnxruntime with every value named after an FX node made an
# output (graph optimizations off, so that none is fused away), and compares them in graph order. Keyword
# inputs, booleans, integers and nodes with several outputs are compared too.

report = find_discrepancies(llama, (), inputs, dynamic, registry=buggy)
print(report)

# %%
# ``report.first`` is the first FX node that differs, with its registry key, module, source line, the
# largest absolute and relative differences, and shapes and types on both sides. Every node after it
# inherits the error; the plot of the error per node (log scale) shows where it starts.

first = report.first
print(first.fx_node, first.target, "|", first.module)
print(first.source)
print(first.max_abs, first.torch_shape, first.onnx_shape, first.torch_dtype, first.onnx_dtype)

ax = report.plot(title="tiny Llama, silu without the product")
plt.tight_layout()

# %%
# ``to_markdown()`` gives the table, here only the rows that differ (``report.rows`` holds one row per
# compared node); the nodes that could not be compared are listed at the end with the reason (here a chain
# of ``unsqueeze`` whose result nothing uses: the ONNX graph does not keep it).

print(report.to_markdown(only_differing=True)[:2500])

# %%
# A repro for a bug report
# ------------------------
#
# ``save_repro`` writes the diverging node alone: ``model.onnx`` holds only the ONNX nodes made for it, with
# the values they read as inputs (``inputs.npz``, computed by PyTorch), and ``repro.py`` calls the same aten
# op on the same values and compares it with onnxruntime. It runs alone, from the folder:
#
# .. code-block:: bash
#
#     python repro.py
#
# Below: the files, the script, and what it prints.

folder = tempfile.mkdtemp()
for path in first.save_repro(folder):
    print(os.path.basename(path), os.path.getsize(path), "bytes")
with open(os.path.join(folder, "repro.py")) as f:
    print(f.read())
# sphinx_gallery_start_ignore
# the shell command above, run for this page
import subprocess  # noqa: E402
import sys  # noqa: E402

import experimental  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(experimental.__file__)),
                                                    os.environ.get("PYTHONPATH", "")]))
out = subprocess.run([sys.executable, "repro.py"], cwd=folder, env=ENV, capture_output=True, text=True)
print("$ python repro.py")
print(out.stdout + out.stderr)
# sphinx_gallery_end_ignore

# %%
# With the project's converters, nothing differs, and the share of compared nodes says how much of the
# graph the check covered:

report = find_discrepancies(llama, (), inputs, dynamic)
print(report)

# %%
# verify=True
# -----------
#
# ``to_onnx(..., verify=True)`` runs onnxruntime on the export inputs and compares every node with PyTorch;
# a mismatch raises :class:`~experimental.torch_interpreter.VerificationError` naming the first node, its
# ``report`` attribute being the same report as above.

try:
    to_onnx(llama, (), inputs, dynamic_shapes=dynamic, registry=buggy, verify=True)
except VerificationError as e:
    print(e)

# %%
# The export report
# -----------------
#
# ``report=`` takes a path (the markdown is written there, also when the export fails) or an
# :class:`~experimental.torch_interpreter.ExportReport` to fill: the steps and their timings, the capture
# strategies, the dynamic axes and the ranges torch inferred for them, the missing converters if any, the
# verification, and the op histograms, FX in and ONNX out. ``verbose=1`` logs the same content; ``verbose=2``
# adds one line per FX node with its translation time.

export_report = ExportReport()
onx = to_onnx(llama, (), inputs, dynamic_shapes=dynamic, verify=True, report=export_report)
print(export_report.to_markdown()[:3000])

# %%
# Reading an error
# ----------------
#
# When the export itself fails, the message names the FX node, its registry key, the module and the user's
# line, the converter and the inputs as PyTorch saw them. A CNN ending with ``AdaptiveAvgPool2d((2, 2))``
# exported with a dynamic image size (ONNX has no adaptive pooling over an unknown size):


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
        self.pool = torch.nn.AdaptiveAvgPool2d((2, 2))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = self.pool(self.features(x))
        return self.head(y.flatten(1))


cnn = CNN().eval()
image = torch.randn(2, 3, 16, 16)
try:
    to_onnx(cnn, (image,), dynamic_shapes=({0: "batch", 2: "height", 3: "width"},))
except ConversionError as e:
    print(e)

# %%
# Keeping the spatial size static (only the batch dynamic) is one way out:

onx = to_onnx(cnn, (image,), dynamic_shapes=({0: "batch"},))
print([n.op_type for n in onx.graph.node])

# %%
# The node metadata
# -----------------
#
# The tools above read ``metadata_props`` of each ONNX node: ``pkg.torch.fx_node`` (the FX node, also the
# name of the value it produces), ``pkg.torch.target`` (the registry key), ``pkg.torch.module_scope`` (the
# module path and class) and ``pkg.torch.source`` (the user's line). Constants, shared between nodes, have
# none.

for node in onx.graph.node:
    meta = {p.key: p.value for p in node.metadata_props}
    print(f"{node.name:28} {meta.get('pkg.torch.target', ''):34} {meta.get('pkg.torch.module_scope', '')}")

# %%
# The command line
# ----------------
#
# ``python -m experimental.torch_interpreter`` (or the ``aten2onnx`` script) runs the same tools on a file
# whose function returns the model and its inputs: ``export FILE.py:factory`` with ``--verify``,
# ``--report R.md`` and ``--dump DIR`` (the ExportedProgram, its FX graph as text, the ONNX model, the
# inputs and the report: what a bug report needs), and ``compare FILE.py:factory`` for
# ``find_discrepancies`` (``--repro DIR``, ``--plot P.png``, ``--markdown R.md``). With the file
# ``cnn_factory.py`` written below:
#
# .. code-block:: bash
#
#     python -m experimental.torch_interpreter export cnn_factory.py:factory \
#         -o cnn.onnx --verify --dump dump
#     python -m experimental.torch_interpreter compare cnn_factory.py:factory
#     ls dump
#
# What the three commands print follows the file.

with open(os.path.join(folder, "cnn_factory.py"), "w") as f:
    f.write(
        "import torch\n\n\n"
        "def factory():\n"
        "    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())\n"
        "    return model.eval(), (torch.randn(2, 3, 8, 8),), {}, ({0: 'batch'},)\n"
    )
# sphinx_gallery_start_ignore
# the shell commands above, run for this page
for command in ("export cnn_factory.py:factory -o cnn.onnx --verify --dump dump", "compare cnn_factory.py:factory"):
    out = subprocess.run([sys.executable, "-m", "experimental.torch_interpreter", *command.split()], cwd=folder,
                         env=ENV, capture_output=True, text=True)
    print("$ python -m experimental.torch_interpreter", command)
    print(out.stdout)
    assert out.returncode == 0, out.stderr
print("$ ls dump")
print("  ".join(sorted(os.listdir(os.path.join(folder, "dump")))))
# sphinx_gallery_end_ignore
