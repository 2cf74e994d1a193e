"""Architecture sweep: every transformers architecture of a few auto mappings, built from its own config class
shrunk to a tiny size (random weights), exported by ``to_onnx`` and by ``torch.onnx.export(..., dynamo=True)``
with dynamic batch and sequence, run with onnxruntime and compared with eager PyTorch on two input sets.

Each (architecture, exporter) runs in a subprocess of its own with a timeout. Outcomes are merged into
``benchmarks/zoo_results.json`` (so that ``--only`` re-runs a few architectures) and rendered as the docs page
``_doc/zoo.rst`` with the plot ``_doc/zoo.png``. The docs build does not run this script: both files are
generated here and committed::

    python benchmarks/transformers_zoo.py --tasks causal-lm --limit 40 --jobs 1
    python benchmarks/transformers_zoo.py --only "qwen|llama" --jobs 1
    python benchmarks/transformers_zoo.py --render-only          # the page from the stored results

Statuses: ``ok`` (both input sets match), ``mismatch`` (runs, numbers differ), ``export`` (torch.export or
the exporter failed), ``ort`` (onnxruntime cannot load or run the model), ``timeout``; architectures that
cannot be built from their shrunk config or fail eagerly are ``skip`` and count for neither exporter.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import inspect
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Iterable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "zoo_results.json")
RST = os.path.join(ROOT, "_doc", "zoo.rst")
PNG = os.path.join(ROOT, "_doc", "zoo.png")

logger = logging.getLogger("transformers_zoo")

#: task -> name of the auto mapping in ``transformers.models.auto.modeling_auto``
TASKS = {
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    # the causal LMs again, one decode step after a prefill: past keys and values as inputs (use_cache=True)
    "causal-lm-cache": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
}

#: the cache layers flattened into plain key/value tensors (patches/transformers_caches.py); a model whose
#: cache holds other layers (Mamba states, ...) is not exported with a cache here
CACHE_LAYERS = ("DynamicLayer", "DynamicSlidingWindowLayer")

#: the generic shrink: set wherever the config class takes the argument
GENERIC = {
    # decoder / encoder stacks
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2, "encoder_layers": 2, "decoder_layers": 2,
    "num_decoder_layers": 2, "hidden_size": 64, "d_model": 64, "n_embd": 64, "dim": 64, "embed_dim": 64,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "d_kv": 16,
    "intermediate_size": 128, "ffn_dim": 128, "n_inner": 128, "d_ff": 128, "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128, "hidden_dim": 128,
    "vocab_size": 1000, "max_position_embeddings": 256, "n_positions": 256, "use_cache": False,
    # mixtures of experts: few small experts
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_k": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "n_shared_experts": 1,
    # vision
    "image_size": 32, "patch_size": 8, "num_channels": 3,
}

#: where the generic shrink breaks: task:architecture -> config arguments (sub-configs as dicts)
OVERRIDES: dict[str, dict[str, Any]] = {
    # multi-head latent attention: the LoRA ranks and rope/nope split must fit the 64-wide model
    "causal-lm:deepseek_v2": {"kv_lora_rank": 16, "q_lora_rank": None, "qk_rope_head_dim": 8,
                              "qk_nope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4,
                              "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1},
    "causal-lm:deepseek_v3": {"kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8,
                              "qk_nope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4,
                              "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1},
    # partial rotary: the rotated width must fit a 16-wide head
    "causal-lm:codegen": {"rotary_dim": 8},
    "causal-lm:gptj": {"rotary_dim": 8},
    # Mamba-2 hybrids: heads x head_dim = 2 x hidden, a chunk shorter than the second input set
    "causal-lm:bamba": {"mamba_n_heads": 4, "mamba_d_head": 32, "mamba_d_state": 16, "mamba_chunk_size": 8,
                        "attn_layer_indices": [1]},
    "causal-lm:falcon_h1": {"mamba_n_heads": 4, "mamba_d_head": 32, "mamba_d_ssm": 128, "mamba_d_state": 16,
                            "mamba_chunk_size": 8},
}

DIM_NAMES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
             "decoder_input_ids": {0: "batch", 1: "dseq"}, "pixel_values": {0: "batch"}}


# -- building -----------------------------------------------------------------------------------------------
def architectures(tasks: Iterable[str]) -> list[tuple[str, str, str]]:
    """``(task, model_type, model class name)`` of every entry of the auto mappings of ``tasks``."""
    from transformers.models.auto import modeling_auto

    out = []
    for task in tasks:
        for model_type, cls in getattr(modeling_auto, TASKS[task]).items():
            out.append((task, model_type, cls if isinstance(cls, str) else cls[0]))
    return out


def shrink(config_class: type, overrides: dict[str, Any] | None = None) -> Any:
    """An instance of ``config_class`` with the generic tiny sizes wherever it takes them (sub-configs too)."""
    overrides = dict(overrides or {})
    params = inspect.signature(config_class.__init__).parameters
    kwargs = {k: v for k, v in GENERIC.items() if k in params}
    for name, sub in (getattr(config_class, "sub_configs", None) or {}).items():
        if name in params and isinstance(sub, type):
            kwargs[name] = shrink(sub, overrides.pop(name, None)).to_dict()
    vocab = kwargs.get("vocab_size")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        default = params[name].default if name in params else None
        if vocab and isinstance(default, int) and default >= vocab:  # special tokens past the small vocabulary
            kwargs[name] = 0
    kwargs.update(overrides)
    return config_class(**kwargs)


def build(task: str, model_type: str, class_name: str) -> Any:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    overrides = dict(OVERRIDES.get(f"{task.replace('-cache', '')}:{model_type}", {}))
    if task == "causal-lm-cache":
        overrides["use_cache"] = True
    config = shrink(type(CONFIG_MAPPING[model_type]()), overrides)
    model = getattr(transformers, class_name)(config).eval()
    _break_ties(model)
    return model


def _break_ties(model: Any) -> None:
    """Random values for the matrices initialized to a constant (MoE routers start at zero): equal router
    scores make ``topk`` pick among ties, an order no exporter is bound to reproduce."""
    import torch

    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            constant = bool((param == param.flatten()[0]).all())
            if param.dim() >= 2 and param.is_floating_point() and constant:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.02)


def inputs(task: str, model: Any, batch: int, seq: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(batch * 100 + seq)
    if task == "image-classification":
        cfg = getattr(model.config, "vision_config", model.config)
        size = getattr(cfg, "image_size", 32)
        size = size if isinstance(size, int) else size[0]
        return {"pixel_values": torch.randn(batch, getattr(cfg, "num_channels", 3), size, size, generator=gen)}
    vocab = min(getattr(model.config.get_text_config(), "vocab_size", 1000) or 1000, 1000)
    feeds = {"input_ids": torch.randint(3, vocab, (batch, seq), generator=gen),
             "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
    feeds["attention_mask"][0, : seq // 3] = 0  # left padding on the first row
    if task == "seq2seq":
        feeds["decoder_input_ids"] = torch.randint(3, vocab, (batch, seq - 2), generator=gen)
    if task == "causal-lm-cache":  # the prefill of ``seq`` tokens gives the cache, then ``new`` tokens
        new = 2 if batch == 2 else 1  # the export example needs 2 (sdpa branches on a length of 1)
        with torch.no_grad():
            cache = model(**feeds, use_cache=True).past_key_values
        layers = [type(layer).__name__ for layer in getattr(cache, "layers", [None])]
        if type(cache).__name__ != "DynamicCache" or any(name not in CACHE_LAYERS for name in layers):
            raise NotImplementedError(f"cache {type(cache).__name__} of {sorted(set(layers))}: not a key/value cache")
        mask = torch.cat([feeds["attention_mask"], torch.ones(batch, new, dtype=torch.int64)], dim=1)
        return {"input_ids": torch.randint(3, vocab, (batch, new), generator=gen), "attention_mask": mask,
                _cache_name(model): cache}
    return feeds


def _cache_name(model: Any) -> str:
    """``cache`` (transformers >= 5.x) or ``past_key_values``, as ``forward`` names it."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_dims(feeds: dict[str, Any]) -> dict[str, Any]:
    """Dynamic batch, new tokens, total length and past length for the cache task."""
    dims: dict[str, Any] = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}}
    for name in ("cache", "past_key_values"):
        if name in feeds:
            dims[name] = [{0: "batch", 2: "past"} for layer in feeds[name].layers for _ in (0, 1)]
    return dims


def _flat(feeds: dict[str, Any]) -> list[Any]:
    """The feeds as onnxruntime takes them, in order: tensors, then each cache's keys and values."""
    out = []
    for value in feeds.values():
        if hasattr(value, "layers"):
            out += [t for layer in value.layers for t in (layer.keys, layer.values)]
        else:
            out.append(value)
    return out


# -- one (architecture, exporter), in a subprocess ---------------------------------------------------------------
def _first_line(e: BaseException) -> str:
    """The first line of the innermost cause (the exporters wrap the error that tells what failed)."""
    root = e
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(root)).strip()
    line = next((t for t in text.splitlines() if t.strip()), "")
    name = type(root).__name__ if root is e else f"{type(e).__name__} <- {type(root).__name__}"
    return f"{name}: {line}"[:300]


def _attended(feeds: dict[str, Any], values: Any) -> Any:
    """The logits of attended tokens: outputs at left-padding positions are not defined (fully masked rows)."""
    mask = feeds.get("attention_mask")
    if mask is None or "decoder_input_ids" in feeds or tuple(values.shape[:2]) != tuple(mask.shape):
        return values
    return values[mask.numpy().astype(bool)]


def _logits(out: Any) -> Any:
    if hasattr(out, "logits"):
        return out.logits
    return out[0] if isinstance(out, (tuple, list)) else out


def run_one(task: str, model_type: str, class_name: str, exporter: str) -> dict[str, Any]:
    """Builds, runs eagerly, exports with ``exporter`` (``to_onnx`` or ``dynamo``) and compares."""
    import numpy as np
    import onnxruntime
    import torch

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    row: dict[str, Any] = {"task": task, "arch": model_type, "class": class_name, "exporter": exporter}
    try:
        model = build(task, model_type, class_name)
        sets = [inputs(task, model, 2, 8), inputs(task, model, 3, 13)]
        with torch.no_grad():  # on copies: the eager run appends to the cache
            expected = [_logits(model(**copy.deepcopy(s))).detach().float().numpy() for s in sets]
    except Exception as e:  # the architecture itself: not counted for either exporter
        return {**row, "status": "skip", "error": _first_line(e)}
    dims = _cache_dims(sets[0]) if task == "causal-lm-cache" else {k: DIM_NAMES[k] for k in sets[0]}
    begin = time.perf_counter()
    try:
        if exporter == "to_onnx":
            from experimental.torch_interpreter import to_onnx

            # custom autograd.Function (Bloom's GeLU) inlined: standard ONNX that plain onnxruntime runs
            onx = to_onnx(model, (), copy.deepcopy(sets[0]), dynamic_shapes=dims, autograd_functions="inline")
        else:
            with _cache_pytree(task):  # the cache classes as pytree nodes, as to_onnx registers them
                program = torch.onnx.export(model, (), kwargs=copy.deepcopy(sets[0]), dynamic_shapes=dims,
                                            dynamo=True, verbose=False)
            onx = program.model_proto
    except Exception as e:
        return {**row, "status": "export", "error": _first_line(e), "time": time.perf_counter() - begin}
    row["time"] = time.perf_counter() - begin
    row["nodes"] = len(onx.graph.node)
    try:
        sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        outputs = [o.name for o in sess.get_outputs()]
        index = outputs.index("logits") if "logits" in outputs else 0
        diffs = []
        for feeds, exp in zip(sets, expected):
            if task == "causal-lm-cache":  # by position: the exporters name the cache tensors differently
                ort_feeds = {n: t.numpy() for n, t in zip(names, _flat(feeds))}
            else:
                ort_feeds = {n: feeds[n].numpy() for n in names if n in feeds}
            got = sess.run(None, ort_feeds)[index]
            if got.shape != exp.shape:
                return {**row, "status": "mismatch", "error": f"shape {got.shape} != {exp.shape}"}
            diffs.append(float(np.abs(_attended(feeds, got).astype(np.float64) - _attended(feeds, exp)).max()))
    except Exception as e:
        return {**row, "status": "ort", "error": _first_line(e)}
    row["max_diff"] = max(diffs)
    ok = all(d <= 1e-3 for d in diffs)  # float32, random weights, two layers
    return {**row, "status": "ok" if ok else "mismatch", "error": "" if ok else f"max abs diff {max(diffs):.3g}"}


def _cache_pytree(task: str) -> Any:
    """For ``torch.onnx.export`` on the cache task: the transformers cache classes registered as pytree nodes
    (``bypass_export_some_errors(patch_transformers=True)`` minus the loop rewrites, which are to_onnx's)."""
    import contextlib

    if task != "causal-lm-cache":
        return contextlib.nullcontext()
    from experimental.torch_interpreter.patches import ALL_PATCHES

    @contextlib.contextmanager
    def registered() -> Any:
        undo = [p.apply() for p in ALL_PATCHES if p.name.endswith("Cache as pytree") and p.needed()]
        try:
            yield
        finally:
            for u in reversed(undo):
                u()

    return registered()


def _subprocess(task: str, arch: str, cls: str, exporter: str, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", f"{task}:{arch}:{cls}:{exporter}"]
    begin = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"task": task, "arch": arch, "class": cls, "exporter": exporter, "status": "timeout",
                "error": f"more than {timeout:.0f}s", "time": time.perf_counter() - begin}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("ZOO_RESULT "):
            return json.loads(line[len("ZOO_RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"task": task, "arch": arch, "class": cls, "exporter": exporter, "status": "crash",
            "error": f"exit {proc.returncode}: {tail[:300]}"}


# -- results and page --------------------------------------------------------------------------------------------
def load_results(path: str = RESULTS) -> dict[str, Any]:
    if not os.path.exists(path):
        return {"rows": {}}
    with open(path) as f:
        results = json.load(f)
    if "command" in results:  # the one command of an older file
        results.setdefault("commands", []).insert(0, results.pop("command"))
    return results


def save_results(results: dict[str, Any], path: str = RESULTS) -> None:
    with open(path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def _cell(text: Any) -> str:
    text = str(text if text is not None else "").replace("\n", " ").replace("|", "/")
    text = re.sub(r"([`*_\\])", r"\\\1", text)
    return text[:160]


def _counts(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for r in rows:
        counts.setdefault(r["exporter"], {}).setdefault(r["status"], 0)
        counts[r["exporter"]][r["status"]] += 1
    return counts


#: the statuses, in the order of the figure and of its legend, with their colors
STATUSES = {"ok": "tab:green", "mismatch": "tab:orange", "export": "tab:red", "ort": "tab:purple",
            "timeout": "tab:gray", "crash": "black"}
EXPORTERS = ("to_onnx", "dynamo")


def _per_task(by: dict, built: list[tuple[str, str]]) -> dict[str, dict[str, dict[str, int]]]:
    """task -> exporter -> status -> count, over the architectures that build and run eagerly."""
    table: dict[str, dict[str, dict[str, int]]] = {}
    for task, arch in built:
        for exporter in EXPORTERS:
            status = by[(task, arch, exporter)]["status"]
            counts = table.setdefault(task, {}).setdefault(exporter, {})
            counts[status] = counts.get(status, 0) + 1
    return table


def _shell(command: str) -> str:
    """A stored command as a shell runs it: the arguments quoted where needed (``--only 'causal-lm:(a|b)$'``),
    a trailing comment kept."""
    code, sep, comment = command.partition("   # ")
    return shlex.join(shlex.split(code)) + (f"   # {comment}" if sep else "")


def _share(ok: int, n: int) -> str:
    return f"{ok} ({100 * ok / max(n, 1):.1f} %)"


def _outcome(r: dict[str, Any]) -> str:
    """One cell: the status, the node count and the time (export + translation)."""
    parts = [r.get("status", "not run")]
    if r.get("nodes"):
        parts.append(f"{r['nodes']} nodes")
    if isinstance(r.get("time"), float):
        parts.append(f"{r['time']:.1f} s")
    return ", ".join(parts)


def render(results: dict[str, Any], rst: str = RST, png: str | None = PNG) -> str:
    """Writes the docs page (and the figure) from the stored results; returns the summary text.

    The page opens with the figure and a short table per task, then the commands that produced the results,
    how the sweep runs, and one table per task with every architecture."""
    rows = list(results["rows"].values())
    archs = sorted({(r["task"], r["arch"]) for r in rows})
    by = {(r["task"], r["arch"], r["exporter"]): r for r in rows}
    built = [a for a in archs if all(by.get((*a, e), {}).get("status") not in (None, "skip") for e in EXPORTERS)]
    counted = [r for r in rows if (r["task"], r["arch"]) in built]
    counts = _counts(counted)
    per_task = _per_task(by, built)
    tasks = [t for t in TASKS if any(a[0] == t for a in archs)]
    summary = []
    for exporter in EXPORTERS:
        c = counts.get(exporter, {})
        total = sum(c.values())
        summary.append(f"{exporter}: {c.get('ok', 0)} ok / {total} built and run eagerly "
                       f"({', '.join(f'{k} {v}' for k, v in sorted(c.items()) if k != 'ok') or 'no failure'})")
    lines = [
        ".. generated by benchmarks/transformers_zoo.py, do not edit",
        "",
        "Transformers architecture sweep",
        "===============================",
        "",
        "Every architecture of transformers' auto mappings, built from its own config class shrunk to a tiny size",
        "with random weights, exported by :func:`~experimental.torch_interpreter.to_onnx` and by the official",
        "exporter, ``torch.onnx.export(..., dynamo=True)``, run by onnxruntime and compared with eager PyTorch. Of",
        f"the {len(built)} architectures that build and run eagerly, ``to_onnx`` converts "
        f"{counts.get('to_onnx', {}).get('ok', 0)} with matching results, the official exporter "
        f"{counts.get('dynamo', {}).get('ok', 0)}.",
        "",
    ]
    if png:
        lines += [
            ".. image:: zoo.png",
            "   :width: 100%",
            "   :alt: the outcome of each exporter per task, as a share of the architectures that build and run "
            "eagerly",
            "",
        ]
    lines += [
        ".. list-table:: Architectures per task, and those each exporter converts with matching results",
        "   :header-rows: 1",
        "   :class: perf-table",
        "",
        "   * - task", "     - tried", "     - built", "     - to_onnx ok", "     - dynamo ok",
    ]
    for task in tasks:
        n = sum(a[0] == task for a in built)
        ok = {e: per_task.get(task, {}).get(e, {}).get("ok", 0) for e in EXPORTERS}
        lines += [f"   * - {task}", f"     - {sum(a[0] == task for a in archs)}", f"     - {n}",
                  f"     - {_share(ok['to_onnx'], n)}", f"     - {_share(ok['dynamo'], n)}"]
    lines += [
        "   * - all", f"     - {len(archs)}", f"     - {len(built)}",
        f"     - {_share(counts.get('to_onnx', {}).get('ok', 0), len(built))}",
        f"     - {_share(counts.get('dynamo', {}).get('ok', 0), len(built))}",
        "",
        "*built*: the architectures that build from the shrunk config and run eagerly; the others are listed below",
        "as ``skip``. "
        f"transformers {results.get('transformers', '?')}, torch {results.get('torch', '?')}, "
        f"onnxruntime {results.get('onnxruntime', '?')}, {results.get('date', '?')}. Failures among them: "
        + "; ".join(f"{e}: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.get(e, {}).items()) if k != "ok")
                                or "none") for e in EXPORTERS) + ".",
        "",
        "Generated by (each run replaces the rows of the architectures it covers; ``--render-only`` writes this",
        "page and its figure from the stored results):",
        "",
        ".. code-block:: bash",
        "",
        *[f"    {_shell(c)}" for c in results.get("commands", ["python benchmarks/transformers_zoo.py"])],
        "    python benchmarks/transformers_zoo.py --render-only",
        "",
        "How the sweep runs",
        "------------------",
        "",
        "Each architecture is built from its own config class shrunk to 2 layers, hidden size 64, 4 heads, a",
        "vocabulary of 1000 and 4 experts (a short override table in the script where that breaks), exported with",
        "dynamic batch and sequence, and compared with eager PyTorch on two input sets (batch 2 x 8 tokens, batch",
        "3 x 13 tokens; images: batch 2 and 3), ``use_cache=False``; ``to_onnx`` with",
        "``autograd_functions=\"inline\"`` (standard ONNX, no ``PythonOp``), both models run by plain onnxruntime.",
        "``ok`` means both sets match within 1e-3 (logits of attended tokens: the first row is left-padded, and",
        "outputs at padding positions are not defined).",
        "",
        "Task ``causal-lm-cache``: the causal LMs with ``use_cache=True``, one decode step after a prefill: eager",
        "PyTorch fills the cache from the 8 (13) tokens, the exported model takes 2 (then 1) new tokens, the",
        "attention mask over past and new tokens and the cache's keys and values (dynamic batch, new tokens, past",
        "length), its logits compared; models whose cache holds other layers than keys and values (Mamba states)",
        "are ``skip``; ``torch.onnx.export`` gets the cache classes registered as pytree nodes as ``to_onnx`` does.",
        "Architectures that do not appear in a task were not swept.",
        "",
        "Statuses: ``ok`` (both input sets match), ``mismatch`` (runs, numbers differ), ``export`` (the capture or",
        "the exporter failed), ``ort`` (onnxruntime cannot load or run the model), ``timeout``, ``skip`` (the",
        "architecture does not build from the shrunk config or fails eagerly). Times are export + translation, in",
        "seconds, on a shared 2-core machine.",
        "",
        "Every architecture",
        "------------------",
        "",
    ]
    for task in tasks:
        lines += [
            task,
            "~" * len(task),
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 17 15 15 26 27",
            "   :class: wide-table",
            "",
            "   * - architecture", "     - to_onnx", "     - dynamo", "     - to_onnx error", "     - dynamo error",
        ]
        for _, arch in (a for a in archs if a[0] == task):
            cells = [by.get((task, arch, e), {}) for e in EXPORTERS]
            lines += [f"   * - {_cell(arch)}", *[f"     - {_outcome(r)}" for r in cells],
                      *[f"     - {_cell(r.get('error', '')) if r.get('status') != 'skip' or i == 0 else ''}"
                        for i, r in enumerate(cells)]]
        lines.append("")
    with open(rst, "w") as f:
        f.write("\n".join(lines))
    if png:
        _plot(per_task, tasks, png)
    text = list(summary)
    for task in tasks:
        n = sum(a[0] == task for a in built)
        ok = {e: per_task.get(task, {}).get(e, {}).get("ok", 0) for e in EXPORTERS}
        text.append(f"{task}: {sum(a[0] == task for a in archs)} tried, {n} build and run eagerly; to_onnx "
                    f"{_share(ok['to_onnx'], n)} ok, dynamo {_share(ok['dynamo'], n)} ok")
    return "\n".join(text)


def _plot(per_task: dict[str, dict[str, dict[str, int]]], tasks: list[str], png: str) -> None:
    """The outcome of each exporter per task, as shares of the architectures that build and run eagerly (one
    stacked bar per task and exporter, the count of ``ok`` written at its end)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.size": 12}):
        fig, ax = plt.subplots(figsize=(9, 0.9 * len(tasks) + 1.7))
        labels, y = [], 0.0
        ticks = []
        for task in tasks:
            for exporter in EXPORTERS:
                counts = per_task.get(task, {}).get(exporter, {})
                total = sum(counts.values())
                left = 0.0
                for status, color in STATUSES.items():
                    share = 100 * counts.get(status, 0) / max(total, 1)
                    if share:
                        ax.barh(y, share, left=left, color=color, height=0.8)
                    left += share
                ax.text(101, y, f"{counts.get('ok', 0)}/{total}", va="center", fontsize=11)
                labels.append(f"{task}  {exporter}" if exporter == EXPORTERS[0] else exporter)
                ticks.append(y)
                y += 1
            y += 0.6
        ax.set_yticks(ticks, labels)
        ax.invert_yaxis()
        ax.set_xlim(0, 114)
        ax.set_xticks(range(0, 101, 20))
        ax.set_xlabel("% of the architectures that build and run eagerly (ok / built at the right)")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        present = {s for t in per_task.values() for counts in t.values() for s in counts}
        handles = [matplotlib.patches.Patch(color=c, label=s) for s, c in STATUSES.items() if s in present]
        ax.legend(handles=handles, ncol=len(handles), loc="lower center", bbox_to_anchor=(0.45, 1.0), frameon=False,
                  fontsize=11)
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        plt.close(fig)


# -- main --------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated among " + ", ".join(TASKS))
    parser.add_argument("--only", default=None, help="regular expression on 'task:architecture'")
    parser.add_argument("--limit", type=int, default=0, help="at most this many architectures (0: all)")
    parser.add_argument("--jobs", type=int, default=1, help="architectures run at the same time")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per architecture and exporter")
    parser.add_argument("--exporters", default="to_onnx,dynamo")
    parser.add_argument("--resume", action="store_true", help="skip the architectures already in the results")
    parser.add_argument("--render-only", action="store_true", help="write the page from the stored results")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # child process: one architecture, one exporter
        sys.path.insert(0, ROOT)
        task, arch, cls, exporter = args.one.split(":")
        try:
            row = run_one(task, arch, cls, exporter)
        except Exception as e:  # a bug of this script: still one line of result
            row = {"task": task, "arch": arch, "class": cls, "exporter": exporter, "status": "crash",
                   "error": _first_line(e), "trace": traceback.format_exc()[-2000:]}
        print("ZOO_RESULT " + json.dumps(row), flush=True)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    results = load_results()
    if not args.render_only:
        import onnxruntime
        import torch
        import transformers

        todo = architectures([t for t in args.tasks.split(",") if t])
        if args.only:
            todo = [a for a in todo if re.search(args.only, f"{a[0]}:{a[1]}")]
        if args.resume:
            done = {k.rsplit(":", 1)[0] for k in results["rows"]}
            todo = [a for a in todo if f"{a[0]}:{a[1]}" not in done]
        if args.limit:
            todo = todo[: args.limit]
        jobs = [(*a, e) for a in todo for e in args.exporters.split(",")]
        logger.info("%d architectures, %d runs", len(todo), len(jobs))
        from concurrent.futures import ThreadPoolExecutor

        def one(job: tuple[str, str, str, str]) -> dict[str, Any]:
            row = _subprocess(*job, timeout=args.timeout)
            logger.info("%-9s %-28s %-8s %-8s %s", job[0], job[1], job[3], row["status"], row.get("error", "")[:100])
            return row

        results.update(
            transformers=transformers.__version__, torch=torch.__version__, onnxruntime=onnxruntime.__version__,
            date=datetime.date.today().isoformat(),
        )
        command = "python benchmarks/transformers_zoo.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        results["commands"] = [c for c in results.get("commands", []) if c != command] + [command]
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for row in pool.map(one, jobs):
                results["rows"][f"{row['task']}:{row['arch']}:{row['exporter']}"] = row
                save_results(results)  # after each run: an interrupted sweep keeps what it did
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
