"""
.. _l-llm-cache:

2c. An LLM with a cache
=======================

Generation runs a decoder with the keys and values of the past tokens, a ``transformers.DynamicCache``.
``torch.export`` does not know that class: it must be registered as a pytree node, which
:func:`bypass_export_some_errors <experimental.torch_interpreter.bypass_export_some_errors>` does, among the
other patches the installed versions need (see :doc:`/patches`). Everything is undone when the ``with`` block
ends.

The model is a Llama built from a small config with random weights.
"""

import numpy as np
import torch
import transformers
from torch.utils._pytree import tree_leaves

from experimental.torch_interpreter import (
    ExportCaptureError,
    InferenceSession,
    bypass_export_some_errors,
    to_onnx,
)

torch.manual_seed(0)
config = transformers.LlamaConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=1000, max_position_embeddings=256, use_cache=True,
)
model = transformers.LlamaForCausalLM(config).eval()


def make_inputs(batch, seq, past, seed=0):
    """input_ids for ``seq`` new tokens, the mask over past and new tokens, a cache of ``past`` tokens."""
    gen = torch.Generator().manual_seed(seed)
    cache = transformers.DynamicCache(config=config)
    for layer in range(config.num_hidden_layers):
        shape = (batch, config.num_key_value_heads, past, config.hidden_size // config.num_attention_heads)
        cache.update(torch.randn(shape, generator=gen), torch.randn(shape, generator=gen), layer)
    return {
        "input_ids": torch.randint(0, 1000, (batch, seq), generator=gen),
        "attention_mask": torch.ones(batch, past + seq, dtype=torch.int64),
        "past_key_values": cache,
    }


inputs = make_inputs(batch=2, seq=3, past=4)

# %%
# Without the patches
# -------------------
# The cache is not a pytree node: torch.export refuses the input.

try:
    to_onnx(model, (), inputs)
except ExportCaptureError as e:
    print(str(e).splitlines()[0][:300])

# %%
# With the patches
# ----------------
# The cache flattens into one tensor per layer and kind (``0.key``, ``0.value``, ...), so its dynamic shapes
# are one entry per tensor. Strings name the dynamic axes; ``total`` is the mask length (past + new tokens).
# ``adapt`` copies the caches in the inputs, so that exporting leaves the user's objects alone.

layer_axes = {0: "batch", 2: "past"}
dynamic_shapes = {
    "input_ids": {0: "batch", 1: "seq"},
    "attention_mask": {0: "batch", 1: "total"},
    "past_key_values": [layer_axes] * (2 * config.num_hidden_layers),
}
with bypass_export_some_errors(patch_transformers=True, verbose=1) as adapt:
    onx = to_onnx(model, (), adapt(inputs), dynamic_shapes=dynamic_shapes)


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


for value in onx.graph.input:
    print("input ", value.name, dims(value))
for value in onx.graph.output:
    print("output", value.name, dims(value))

# %%
# The new cache length is ``past + seq``, a symbolic expression of the input dimensions.
#
# Running it on other shapes
# --------------------------
# onnxruntime receives the flattened cache; the outputs are the logits and the new cache (``present.*``).

sess = InferenceSession(onx)
other = make_inputs(batch=3, seq=5, past=7, seed=1)
with bypass_export_some_errors(patch_transformers=True):
    feeds = dict(zip([i.name for i in onx.graph.input], tree_leaves(other)))
    with torch.no_grad():
        expected = [t.numpy() for t in tree_leaves(model(**adapt(other)))]
got = sess.run(None, feeds)
for name, e, g in zip([o.name for o in onx.graph.output], expected, got):
    print(f"{name:18} shape {g.shape}  max |onnx - torch| = {np.abs(e - g).max():.2e}")

# %%
# The differences per output, on a log scale:

import matplotlib.pyplot as plt  # noqa: E402

names = [o.name for o in onx.graph.output]
diffs = [max(float(np.abs(e - g).max()), 1e-12) for e, g in zip(expected, got)]
fig, ax = plt.subplots(figsize=(5, 2.8))
ax.bar(range(len(names)), diffs)
ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("max |onnx - torch|")
ax.set_title("logits and present cache")
fig.tight_layout()

# %%
# Dynamic shapes written for you
# ------------------------------
# Writing the spec above takes knowing the model's inputs. ``inputs=`` takes real input sets instead: the axes
# whose size differs between them become dynamic, named as a transformers model's usual axes (``batch``,
# ``seq``, ``total``, ``past``); the spec is shown in a :class:`DynamicShapeWarning
# <experimental.torch_interpreter.DynamicShapeWarning>` and kept in the model's ``metadata_props``; the set with
# the largest sizes is exported, and every set is run by onnxruntime and by the model (a set the graph does not
# hold for raises a ``VerificationError`` naming it).

import warnings  # noqa: E402

sets = [make_inputs(batch=2, seq=3, past=4), make_inputs(batch=3, seq=5, past=7, seed=1)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    onx = to_onnx(model, inputs=sets)
print([str(w.message) for w in caught if "inferred" in str(w.message)][0])
for value in onx.graph.input:
    print("input ", value.name, dims(value))
