"""
.. _l-compare-dynamo:

5. Compared with the official exporter
======================================

The official exporter, ``torch.onnx.export(..., dynamo=True)``, also starts from ``torch.export.export``, then runs
``run_decompositions`` (aten ops are broken down into a smaller core set), translates the result with
onnxscript and optimizes the ONNX graph (constant folding, fusions, removal of unused nodes). ``to_onnx``
translates the graph as exported, one converter per overload, without any rewriting afterwards.

This page exports the same four models both ways: an MLP, a small CNN, a tiny Llama and a tiny GPT-2 (random
weights from small configurations), on opset 20 (the default of ``torch.onnx.export``), and compares the
number of nodes, the export time, the op types each one produces and the results.
"""

import collections
import logging
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers

from experimental.torch_interpreter import InferenceSession, to_onnx

OPSET = 20
REPEAT, BUDGET = 3, 2.0  # each export runs up to REPEAT times within BUDGET seconds, the best time is kept
logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # torch.onnx logs that torchvision is absent

# %%
# The models
# ----------


def mlp():
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)
    )
    return model.eval(), (torch.randn(4, 16),), {}, ({0: "batch"},)


def cnn():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )
    return model.eval(), (torch.randn(2, 3, 16, 16),), {}, ({0: "batch"},)


def text_inputs():
    inputs = {"input_ids": torch.randint(0, 1000, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.int64)}
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    return inputs, dynamic


def tiny_llama():
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=1000, max_position_embeddings=256, use_cache=False,
    )
    return (transformers.LlamaForCausalLM(config).eval(), (), *text_inputs())


def tiny_gpt2():
    config = transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=256, use_cache=False, bos_token_id=0,
        eos_token_id=0,
    )
    return (transformers.GPT2LMHeadModel(config).eval(), (), *text_inputs())


MODELS = {"MLP": mlp, "CNN": cnn, "tiny Llama": tiny_llama, "tiny GPT-2": tiny_gpt2}

# %%
# Both exporters take the same ``dynamic_shapes``; ``torch.onnx.export`` wants ``torch.export.Dim`` where
# ``to_onnx`` also accepts names.


def as_dims(spec):
    """{0: "batch"} -> {0: Dim("batch")}, in tuples and dicts."""
    dims = {}

    def convert(axes):
        return {axis: dims.setdefault(name, torch.export.Dim(name)) for axis, name in axes.items()}

    if isinstance(spec, dict):
        return {key: convert(axes) for key, axes in spec.items()}
    return tuple(convert(axes) for axes in spec)


def best_time(fn):
    times, result = [], None
    while len(times) < REPEAT and sum(times) < BUDGET:
        begin = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - begin)
    return min(times), result


def max_difference(onx, model, args, kwargs):
    names = [i.name for i in onx.graph.input]
    feeds = dict(zip(names, args)) | kwargs
    got = InferenceSession(onx, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    expected = model(*args, **kwargs)
    expected = expected.logits if hasattr(expected, "logits") else expected
    return float(np.abs(got - expected.detach().numpy()).max())


# %%
# Both exporters pay a one-time cost on their first call (imports, dynamo and onnxscript caches): one warm-up
# export each on a tiny model, then the measures.

warm = torch.nn.Linear(2, 2).eval()
to_onnx(warm, (torch.randn(2, 2),))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(warm, (torch.randn(2, 2),), dynamo=True, verbose=False)

results = {}
for name, make in MODELS.items():
    torch.manual_seed(0)
    model, args, kwargs, dynamic = make()
    model(*args, **kwargs)  # transformers initializes a few things on the first call
    t_export, _ = best_time(lambda: torch.export.export(model, args, kwargs, dynamic_shapes=as_dims(dynamic)))
    t_ours, ours = best_time(lambda: to_onnx(model, args, kwargs, dynamic_shapes=dynamic, target_opset=OPSET))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_dynamo, program = best_time(
            lambda: torch.onnx.export(
                model, args, kwargs=kwargs, dynamic_shapes=as_dims(dynamic), dynamo=True, verbose=False,
                opset_version=OPSET,
            )
        )
    dynamo = program.model_proto
    results[name] = {
        "torch.export": t_export,
        "to_onnx": t_ours,
        "dynamo": t_dynamo,
        "nodes to_onnx": len(ours.graph.node),
        "nodes dynamo": len(dynamo.graph.node),
        "diff to_onnx": max_difference(ours, model, args, kwargs),
        "diff dynamo": max_difference(dynamo, model, args, kwargs),
        "ops to_onnx": collections.Counter(n.op_type for n in ours.graph.node),
        "ops dynamo": collections.Counter(n.op_type for n in dynamo.graph.node),
        "model to_onnx": ours,
    }

# %%
# The table
# ---------
#
# Times in seconds (best of up to three runs, on the machine that built this page), the number of nodes of the main
# graph and the largest absolute difference with PyTorch on the example inputs (onnxruntime, CPU).

header = ["model", "torch.export", "to_onnx", "dynamo", "nodes to_onnx", "nodes dynamo", "diff to_onnx",
          "diff dynamo"]
print(" | ".join(f"{h:>13}" for h in header))
for name, r in results.items():
    cells = [name] + [f"{r[h]:.3f}" if h in ("torch.export", "to_onnx", "dynamo") else
                      f"{r[h]:.1e}" if h.startswith("diff") else str(r[h]) for h in header[1:]]
    print(" | ".join(f"{c:>13}" for c in cells))

# %%
# ``to_onnx`` costs ``torch.export.export`` plus a translation that is a small part of it; ``torch.onnx.export``
# adds the decompositions, the onnxscript translation and the optimization passes. ``dynamo`` has fewer
# nodes on the transformers because its optimizer folds the computations on shapes and constants that
# ``to_onnx`` keeps as they are in the FX graph.
#
# The timings
# -----------

names = list(results)
columns = ["torch.export", "to_onnx", "dynamo"]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
width = 0.27
for i, column in enumerate(columns):
    bars = ax1.bar(np.arange(len(names)) + (i - 1) * width, [results[n][column] for n in names], width, label=column)
    ax1.bar_label(bars, fmt="%.2f", fontsize=7)
ax1.set_xticks(np.arange(len(names)), names)
ax1.set_ylabel("seconds")
ax1.set_title("export time (best of up to %d runs)" % REPEAT)
ax1.legend()
for i, column in enumerate(["nodes to_onnx", "nodes dynamo"]):
    bars = ax2.bar(np.arange(len(names)) + (i - 0.5) * width, [results[n][column] for n in names], width,
                   label=column.split()[1], color=["C1", "C2"][i])
    ax2.bar_label(bars, fontsize=7)
ax2.set_xticks(np.arange(len(names)), names)
ax2.set_title("number of nodes")
ax2.legend()
fig.tight_layout()
plt.show()

# %%
# What each keeps or decomposes
# -----------------------------
#
# The op types whose counts differ, per model: ``to_onnx`` first, ``dynamo`` second.

for name, r in results.items():
    ours, theirs = r["ops to_onnx"], r["ops dynamo"]
    diff = {op: (ours[op], theirs[op]) for op in sorted(set(ours) | set(theirs)) if ours[op] != theirs[op]}
    print(f"{name}:")
    for op, (a, b) in diff.items():
        print(f"    {op:20} {a:4} {b:4}")

# %%
# Where the nodes of ``to_onnx`` come from
# ----------------------------------------
#
# The metadata of each node gives the aten op it was made for: the tiny Llama's nodes grouped by op.

per_target = collections.defaultdict(collections.Counter)
for node in results["tiny Llama"]["model to_onnx"].graph.node:
    target = next((p.value for p in node.metadata_props if p.key == "pkg.torch.target"), "(constants)")
    per_target[target][node.op_type] += 1
for target, ops in sorted(per_target.items(), key=lambda kv: -sum(kv[1].values()))[:12]:
    print(f"{sum(ops.values()):4}  {target:45} {dict(ops)}")

# %%
# Reading the differences (as measured when this page was built):
#
# * **MLP**: the same four nodes, ``Gemm``, ``Gelu``, ``LayerNormalization``, ``Gemm``: each module is one
#   ONNX op in both.
# * **CNN**: ``to_onnx`` keeps ``BatchNormalization`` as one node and ``AdaptiveAvgPool2d(1)`` as
#   ``GlobalAveragePool``; ``dynamo`` folds the batch norm into the convolution's weights (constant folding
#   of an inference graph) and writes the pooling as ``ReduceMean``.
# * **transformers**: both compute attention with ``MatMul``, ``Softmax``, ``MatMul`` (no fused attention
#   op at opset 20) and the norms with one node. The extra nodes of ``to_onnx`` are those the FX graph
#   asks for and an optimizer would remove: constants stay ``Constant`` nodes (``dynamo`` stores them as
#   initializers), ``aten.linear`` without bias on 3-D inputs is a ``Transpose`` of the weight then a
#   ``MatMul`` (``dynamo`` folds the transposition into the stored weight), and every ``view`` or
#   ``reshape`` to a dynamic shape builds its shape with ``Concat``. ``dynamo`` on the other hand adds
#   ``IsNaN`` nodes that ``to_onnx`` does not need.
#
# Every ``to_onnx`` node points back to its FX node, module and source line (page 4); the translation adds
# little to the time of ``torch.export.export`` itself, where ``dynamo``'s decompositions and optimization
# passes cost several times more.
