"""
.. _l-genai:

7. Generating text with onnxruntime-genai
=========================================

`onnxruntime-genai <https://github.com/microsoft/onnxruntime-genai>`_ runs the generation loop of a language model
(the key-value cache, sampling, the tokenizer) around an ONNX decoder.
:func:`~experimental.torch_interpreter.export_genai` writes the folder it loads from a transformers causal
language model: the decoder exported op by op, ``genai_config.json`` and the tokenizer files. :doc:`/genai`
describes the package.

This page writes a small random-weight checkpoint, exports it, generates text with onnxruntime-genai, checks the
tokens against transformers' ``generate``, makes an int4 package, and shows how fast the packages decode next to
those of onnxruntime-genai's own model builder.

A checkpoint
------------

:func:`~experimental.torch_interpreter.genai.tiny.write_random_causal_lm` writes what ``save_pretrained`` writes
(config, safetensors weights, a byte-level BPE tokenizer), here for a Qwen2 model with two layers: the folder
people download from a model hub, without the download.
"""

import json
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime_genai as og
import transformers

import experimental
from experimental.torch_interpreter import export_genai
from experimental.torch_interpreter.genai.generate import genai_greedy, transformers_greedy
from experimental.torch_interpreter.genai.tiny import write_random_causal_lm

transformers.utils.logging.disable_progress_bar()  # no loading bars in the outputs below
root = tempfile.mkdtemp()
checkpoint = write_random_causal_lm("qwen2", os.path.join(root, "qwen2"), hidden=64, layers=2)
print(sorted(os.listdir(checkpoint)))

# %%
# The package
# -----------
# One call; the same from a shell is
# ``python -m experimental.torch_interpreter genai qwen2/ qwen2-genai/ --precision fp32 --provider cpu``.

package = export_genai(checkpoint, os.path.join(root, "qwen2-genai"))
print(f"{package.seconds:.1f} s:", package.files)
print("attention:", package.attention)
print(json.dumps(package.config["model"]["decoder"]["inputs"], indent=1))

# %%
# Generating text
# ---------------
# onnxruntime-genai loads the folder; its tokenizer reads the tokenizer files. The weights are random, so is
# the text: what matters is that it runs, and gives the tokens PyTorch gives.

model = og.Model(package.folder)
tokenizer = og.Tokenizer(model)
params = og.GeneratorParams(model)
params.set_search_options(max_length=24, do_sample=False)
generator = og.Generator(model, params)
generator.append_tokens(tokenizer.encode("Beautiful is better than"))
while not generator.is_done():
    generator.generate_next_token()
print(repr(tokenizer.decode(generator.get_sequence(0))))

# %%
# The tokens transformers gives
# -----------------------------
# Two prompts of different lengths in one batch, greedy: onnxruntime-genai takes the batch padded on the right,
# transformers' ``generate`` on the left; each helper pads the prompts the way its runtime reads them.

prompts = [[1, 5, 17, 33, 8, 99, 4], [1, 44, 7]]
hf_model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
ours = genai_greedy(package.folder, prompts, max_new_tokens=16)
theirs = transformers_greedy(hf_model, prompts, max_new_tokens=16, pad_token_id=0)
for a, b in zip(ours, theirs):
    print("same tokens" if a == b else "DIFFERENT", a[len(a) - 16:])

# %%
# int4
# ----
# ``precision="int4"`` quantizes the weight of every product with onnxruntime's own quantizer
# (``MatMulNBits``, blocks of 32). The numbers change a little: the logits of the last prompt token, fp32 against
# int4.

int4 = export_genai(checkpoint, os.path.join(root, "qwen2-int4"), precision="int4")
print({op: n for op, n in int4.op_counts.items() if op.startswith("MatMul")})


def last_logits(folder):
    m = og.Model(folder)
    p = og.GeneratorParams(m)
    p.set_search_options(max_length=16)
    g = og.Generator(m, p)
    g.append_tokens(np.array([prompts[0]], dtype=np.int32))
    return np.asarray(g.get_output("logits"))[0, -1]


a, b = last_logits(package.folder), last_logits(int4.folder)
print(f"cosine {a @ b / np.linalg.norm(a) / np.linalg.norm(b):.4f}, same next token: {a.argmax() == b.argmax()}")

# %%
# Speed against the model builder
# -------------------------------
# ``benchmarks/bench_genai.py`` measures tokens per second on the same checkpoint for our package and the one
# onnxruntime-genai's model builder writes, in the same run (random-weight models of hidden size 512 and 6 layers,
# a prompt of 128 tokens then 128 generated, the median of 5 rounds, on a 2-core CPU without SMT). The figures
# below are the recorded ones; the builder refuses some families. Each package runs as it is written, then both
# with the same threads (``--threads 2``). Ours asks onnxruntime for one thread per physical core; the builder's
# leaves onnxruntime-genai's default, half the hardware threads, which is one core of two on this machine. With the
# same threads, both decode at the same speed (the same onnxruntime kernels read the same weights), and the prompt
# still runs 1.35 to 1.85 times as fast, its vocabulary projection computed for the last token only.

results = os.path.join(os.path.dirname(os.path.dirname(experimental.__file__)), "benchmarks", "genai_results.json")
with open(results, encoding="utf-8") as f:
    rows = json.load(f)
written = [r for r in rows if r["threads"] == "as written"]
equal = {(r["family"], r["precision"]): r for r in rows if r["threads"] != "as written"}
for r in written:
    same = equal[r["family"], r["precision"]]
    print(f"{r['family']:8} {r['precision']:5} decoding: ours {r['ours_decode_tps']:6.1f} tok/s, builder "
          f"{r.get('builder_decode_tps', 'refused'):>7}, ratio {r.get('decode_ratio', '-'):>4}, with the same "
          f"threads {same.get('decode_ratio', '-'):>4}   prompt ratio {r.get('prompt_ratio', '-')}")

# %%
# Each ratio compares the two packages within one round, back to back, which this machine's noise (10 % and more
# from one round to the next) touches less than the tokens/s of separate runs.

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, precision in zip(axes, ("fp32", "int4")):
    chosen = [r for r in written if r["precision"] == precision]
    x = np.arange(len(chosen))
    ax.bar(x - 0.2, [r.get("decode_ratio", 0) for r in chosen], 0.4, label="as written")
    ax.bar(x + 0.2, [equal[r["family"], precision].get("decode_ratio", 0) for r in chosen], 0.4,
           label="both on 2 threads")
    ax.axhline(1.0, color="black", linewidth=0.8)
    for i, r in enumerate(chosen):
        if "decode_ratio" not in r:
            ax.text(i, 0.05, "builder refused", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [r["family"] for r in chosen], fontsize=8, rotation=30)
    ax.set_title(f"{precision}, decoding", fontsize=10)
    ax.set_ylim(0, 2.2)
axes[0].set_ylabel("ours / builder, tokens/s")
axes[1].legend(fontsize=7, loc="upper right", ncol=2)
fig.suptitle("onnxruntime-genai on a 2-core CPU, hidden 512, 6 layers", fontsize=10)
fig.tight_layout()
