"""ONNX Runtime CPU latency and node counts: to_onnx (optimize=True and "onnxruntime") against
``torch.onnx.export(..., dynamo=True)`` and the same model after onnxscript's ``optimize_for_ort``.

Medium random-weight models (hidden 512, 4 layers, batch 2, sequence 128), all exported in one process;
the variants of one model run interleaved (one call each, in turn, ``--repeat`` times) and the median is
reported, so a machine shared with other work slows every variant alike. Three cases per decoder: no cache
(``use_cache=False``), and the model exported with its cache (``DynamicCache`` as inputs and outputs) run
as a prefill (an empty past, 128 new tokens) and as one decoding step (a past of 128 tokens, 1 new token).
Writes the reST tables included by ``_doc/performance.rst`` (a short one, every measurement in another) and
a plot next to them::

    python benchmarks/bench_ort_latency.py --models llama,gpt2 --repeat 30
    python benchmarks/bench_ort_latency.py --models gpt2 --repeat 30 --merge  # one model again, the others kept

``--device cuda`` measures on the GPU instead (``ort_device_latency.py``): fp32, fp16 and bf16, two shapes and a
decoding step, with I/O binding, against the official exporter's models and eager PyTorch on the same GPU.

onnxruntime runs with one intra-op thread by default (``--threads``): on a machine other jobs share, its
threads spinning against them made the timings swing by tens of percent.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import re
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import torch
import transformers

from experimental.torch_interpreter import to_onnx

logger = logging.getLogger("bench_ort_latency")

HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, BATCH, SEQ = 512, 4, 8, 4, 8000, 2, 128
#: the cases of a model exported with its cache: (name, past length, new tokens)
CACHE_CASES = (("prefill", 0, SEQ), ("decode", SEQ, 1))
#: why a model has no cache rows
NO_CACHE = {
    "bert": "an encoder: no cache",
    "t5": "not measured with a cache: torch.onnx.export already fails on it without one",
}
DOC = os.path.join(os.path.dirname(__file__), "..", "_doc")
#: the rows of the last run (``--render-only`` writes the table and the plot from them)
RESULTS = os.path.join(os.path.dirname(__file__), "ort_latency_results.json")
BATCH_SEQ = {0: "batch", 1: "seq"}


def _decoder(cls: type, config: type, use_cache: bool = False, **extra: Any) -> torch.nn.Module:
    return cls(
        config(
            hidden_size=HIDDEN, intermediate_size=4 * HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS, vocab_size=VOCAB, max_position_embeddings=1024, use_cache=use_cache,
            **extra,
        )
    )


class WithCache(torch.nn.Module):
    """``model(input_ids, attention_mask, past_key_values)`` with these three named parameters (the forward of
    transformers' models takes the cache through ``**kwargs``, which ``torch.onnx.export`` cannot name)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, past_key_values: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=past_key_values)


def cache_inputs(
    model: torch.nn.Module, seq: int, past: int, seed: int, batch: int = BATCH, dtype: torch.dtype = torch.float32
) -> dict:
    """input_ids ``(batch, seq)``, attention_mask ``(batch, past + seq)``, a DynamicCache of ``past`` tokens in
    ``dtype``, for a :class:`WithCache` model."""
    cfg = model.model.config
    gen = torch.Generator().manual_seed(seed)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    shape = (batch, heads, past, cfg.hidden_size // cfg.num_attention_heads)
    cache = transformers.DynamicCache(config=cfg)
    for layer in range(cfg.num_hidden_layers):
        cache.update(torch.randn(shape, generator=gen).to(dtype), torch.randn(shape, generator=gen).to(dtype), layer)
    return {
        "input_ids": torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen),
        "attention_mask": torch.ones(batch, past + seq, dtype=torch.int64),
        "past_key_values": cache,
    }


def cache_dynamic(model: torch.nn.Module) -> dict:
    return {
        "input_ids": BATCH_SEQ,
        "attention_mask": {0: "batch", 1: "total"},
        "past_key_values": [{0: "batch", 2: "past"}] * (2 * model.model.config.num_hidden_layers),
    }


def _ids(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


def _mask() -> torch.Tensor:
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[0, : SEQ // 4] = 0
    return mask


def _decoder_case(model: torch.nn.Module) -> tuple[torch.nn.Module, dict, dict]:
    return model, {"input_ids": _ids(0), "attention_mask": _mask()}, {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}


def _gpt2_model(use_cache: bool = False) -> torch.nn.Module:
    cfg = transformers.GPT2Config(
        n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB, n_positions=1024, use_cache=use_cache,
        bos_token_id=0, eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(cfg)


def _gpt2() -> tuple[torch.nn.Module, dict, dict]:
    return _decoder_case(_gpt2_model())


def _bert() -> tuple[torch.nn.Module, dict, dict]:
    cfg = transformers.BertConfig(
        hidden_size=HIDDEN, intermediate_size=4 * HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        vocab_size=VOCAB, max_position_embeddings=512, type_vocab_size=2,
    )
    types = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    types[:, SEQ // 2 :] = 1
    inputs = {"input_ids": _ids(1), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.int64), "token_type_ids": types}
    return transformers.BertModel(cfg), inputs, {k: BATCH_SEQ for k in inputs}


def _t5() -> tuple[torch.nn.Module, dict, dict]:
    cfg = transformers.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=4 * HIDDEN, num_layers=LAYERS,
        num_decoder_layers=LAYERS, num_heads=HEADS, use_cache=False, decoder_start_token_id=0, pad_token_id=0,
    )
    inputs = {
        "input_ids": _ids(2), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.int64),
        "decoder_input_ids": _ids(3)[:, : SEQ // 4],
    }
    dynamic = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ, "decoder_input_ids": {0: "batch", 1: "dec_seq"}}
    return transformers.T5ForConditionalGeneration(cfg), inputs, dynamic


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, dict, dict]]] = {
    "llama": lambda: _decoder_case(_decoder(transformers.LlamaForCausalLM, transformers.LlamaConfig)),
    "mistral": lambda: _decoder_case(_decoder(transformers.MistralForCausalLM, transformers.MistralConfig)),
    "qwen2": lambda: _decoder_case(_decoder(transformers.Qwen2ForCausalLM, transformers.Qwen2Config)),
    "phi3": lambda: _decoder_case(_decoder(transformers.Phi3ForCausalLM, transformers.Phi3Config, pad_token_id=0)),
    "gpt2": _gpt2,
    "bert": _bert,
    "t5": _t5,
}

_DECODERS: dict[str, tuple[type, type, dict]] = {
    "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig, {}),
    "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig, {}),
    "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, {}),
    "phi3": (transformers.Phi3ForCausalLM, transformers.Phi3Config, {"pad_token_id": 0}),
}

#: the decoders exported with their cache (``use_cache=True``), wrapped in :class:`WithCache`
CACHE_MODELS: dict[str, Callable[[], torch.nn.Module]] = {
    **{
        name: (lambda cls=cls, config=config, extra=extra: WithCache(_decoder(cls, config, True, **extra)))
        for name, (cls, config, extra) in _DECODERS.items()
    },
    "gpt2": lambda: WithCache(_gpt2_model(use_cache=True)),
}

#: the variants, in table order; the onnxruntime level is compared with the faster official model that runs
VARIANTS = ("to_onnx", "to_onnx ort", "official", "official+ort")


def reason(e: BaseException) -> str:
    """First line of the innermost cause, without terminal colors."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(e).__name__}: {e}")
    return text.splitlines()[0][:200]


def export_variants(
    model: torch.nn.Module, inputs: Callable[[], dict], dynamic: dict, failed: dict[str, str]
) -> dict[str, tuple[bytes, int, float]]:
    """(serialized model, node count, export seconds) of each variant; an official export that fails is
    recorded in ``failed``. ``inputs()`` gives fresh export inputs (a model with a cache updates it)."""
    from onnxscript.rewriter import ort_fusions

    out: dict[str, tuple[bytes, int, float]] = {}
    for name, level in (("to_onnx", True), ("to_onnx ort", "onnxruntime")):
        begin = time.perf_counter()
        m = to_onnx(model, (), inputs(), dynamic_shapes=dynamic, optimize=level, as_ir=True)
        out[name] = (ir.to_proto(m).SerializeToString(), len(m.graph), time.perf_counter() - begin)
    begin = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, (), kwargs=inputs(), dynamic_shapes=dynamic, dynamo=True, verbose=False)
    except Exception as e:  # noqa: BLE001  (the official exporter's failure is a result, not a crash)
        failed["official"] = failed["official+ort"] = "torch.onnx.export fails: " + reason(e)
        logger.warning("%s", failed["official"])
        return out
    seconds = time.perf_counter() - begin
    official = program.model
    out["official"] = (ir.to_proto(official).SerializeToString(), len(official.graph), seconds)
    fused = ir.from_proto(ir.to_proto(official))
    begin = time.perf_counter()
    fused, counts = ort_fusions.optimize_for_ort(fused)
    logger.info("official fusions %s", {k: v for k, v in counts.items() if v})
    out["official+ort"] = (ir.to_proto(fused).SerializeToString(), len(fused.graph), seconds + time.perf_counter() - begin)
    return out


def interleaved_latency(
    sessions: dict[str, ort.InferenceSession], feeds: dict[str, dict], repeat: int, warmup: int = 3
) -> dict:
    """Median seconds of one run per session, the sessions called in turn; ``feeds[name]`` feeds session
    ``name``."""
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(warmup):
        for name, sess in sessions.items():
            sess.run(None, feeds[name])
    for _ in range(repeat):
        for name, sess in sessions.items():
            begin = time.perf_counter()
            sess.run(None, feeds[name])
            times[name].append(time.perf_counter() - begin)
    return {k: statistics.median(v) for k, v in times.items()}


#: onnxruntime's intra-op threads (``--threads``); 1 keeps the timings steady on a machine shared with other work
THREADS = {"intra_op": 1}


def _sessions(name: str, variants: dict, failed: dict[str, str]) -> dict[str, ort.InferenceSession]:
    sessions = {}
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS["intra_op"]
    for k, v in variants.items():
        try:
            sessions[k] = ort.InferenceSession(v[0], options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  (a variant onnxruntime refuses is reported, not fatal)
            failed[k] = "onnxruntime refuses the model: " + reason(e)
            logger.warning("%s %s: %s", name, k, failed[k])
    return sessions


def _measure(
    label: str, sessions: dict, flat: list[np.ndarray], expected: np.ndarray, failed: dict[str, str], repeat: int
) -> dict[str, float]:
    """Checks every session's first output against eager, then times them interleaved (ms); the inputs are
    given in the models' order (both exporters flatten them the same way), a session that fails is left out."""
    feeds, ok = {}, {}
    for k, sess in sessions.items():
        feeds[k] = {i.name: a for i, a in zip(sess.get_inputs(), flat)}
        try:
            got = sess.run(None, feeds[k])[0]
        except Exception as e:  # noqa: BLE001  (reported in the table)
            failed[k] = "onnxruntime fails: " + reason(e)
            logger.warning("%s %s: %s", label, k, failed[k])
            continue
        # padded query rows: the official exporter's attention returns NaN or another value where eager returns 0
        finite = np.isfinite(got)
        err = float(np.abs(np.where(finite, got, expected) - expected).max())
        logger.info("%s %s: max abs error vs eager %.2e, non-finite %d", label, k, err, int((~finite).sum()))
        ok[k] = sess
    latency = interleaved_latency(ok, feeds, repeat)
    return {k: 1000 * v for k, v in latency.items()}


def _row(name: str, case: str, variants: dict, latency: dict, failed: dict) -> dict[str, Any]:
    return {
        "model": name,
        "case": case,
        "nodes": {k: v[1] for k, v in variants.items()},
        "export_s": {k: v[2] for k, v in variants.items()},
        "latency_ms": latency,
        "failed": dict(failed),
    }


def bench(name: str, repeat: int) -> list[dict[str, Any]]:
    """The rows of model ``name``: no cache, then (decoders) prefill and decode with a cache."""
    torch.manual_seed(0)
    model, inputs, dynamic = MODELS[name]()
    model = model.eval()
    failed: dict[str, str] = {}
    variants = export_variants(model, lambda: inputs, dynamic, failed)
    sessions = _sessions(name, variants, failed)
    with torch.no_grad():
        expected = model(**copy.deepcopy(inputs))[0].numpy()
    flat = [v.numpy() for v in inputs.values()]
    rows = [_row(name, "no cache", variants, _measure(name, sessions, flat, expected, failed, repeat), failed)]
    if name not in CACHE_MODELS:
        return rows
    from torch.utils import _pytree

    from experimental.torch_interpreter import bypass_export_some_errors

    torch.manual_seed(0)
    model = CACHE_MODELS[name]().eval()
    failed = {}
    with bypass_export_some_errors(patch_transformers=True) as adapt:  # caches as pytree nodes, for both exporters
        variants = export_variants(model, lambda: adapt(cache_inputs(model, 8, 16, 0)), cache_dynamic(model), failed)
        sessions = _sessions(name, variants, failed)
        for case, past, seq in CACHE_CASES:
            case_inputs = cache_inputs(model, seq, past, 1)
            flat = [t.numpy() for t in _pytree.tree_flatten(adapt(case_inputs))[0]]
            with torch.no_grad():
                expected = model(**adapt(case_inputs))[0].numpy()
            label = f"{name} {case} (past {past}, {seq} new)"
            latency = _measure(label, sessions, flat, expected, failed, repeat)
            rows.append(_row(name, f"{case} (past {past}, {seq} new)", variants, latency, failed))
    return rows


#: the official model the onnxruntime level is compared with: the faster of the two that onnxruntime runs
BEST_OFFICIAL = "best official"


def _ratio(lat: dict, a: str, b: str) -> float | None:
    if b == BEST_OFFICIAL:
        official = [lat[k] for k in ("official", "official+ort") if k in lat]
        return lat[a] / min(official) if a in lat and official else None
    return lat[a] / lat[b] if a in lat and b in lat else None


#: the cases of the figure and of the short table, as the rows name them before " ("
CASES = ("no cache", "prefill", "decode")


def _case(row: dict) -> str:
    return row["case"].split(" (")[0]


def _models(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in rows))


def _official_nodes(nodes: dict) -> int | None:
    """The node count of the official model after ``optimize_for_ort`` (before it when that one is missing)."""
    return nodes.get("official+ort", nodes.get("official"))


def _notes(rows: list[dict]) -> list[str]:
    notes: list[str] = []
    for r in rows:
        for k, e in r["failed"].items():
            note = f"* {r['model']}, {k}: ``{e.replace(chr(96), chr(39))}``"
            if note not in notes:
                notes.append(note)
    models = {r["model"] for r in rows}
    return notes + [f"* {m}: {why}" for m, why in NO_CACHE.items() if m in models]


def write_table(rows: list[dict], path: str, command: str, details: str | None = None) -> None:
    """The short reST table the page opens with (one row per model: node counts, latency ratio per case) in
    ``path``; every measurement (latencies in ms, node counts, failures) in ``details``. Narrow columns whose
    headers are short words, so that no header breaks inside a word."""
    lines = [
        ".. list-table:: ``to_onnx`` at the onnxruntime level against the official exporter: node counts, and "
        "latency divided by the faster official model's (lower is better)",
        "   :header-rows: 1",
        "   :class: perf-table",
        "",
        "   * - model",
        "     - nodes, to_onnx",
        "     - nodes, official",
        *[f"     - latency, {case}" for case in CASES],
    ]
    for model in _models(rows):
        by_case = {_case(r): r for r in rows if r["model"] == model}
        plain = by_case.get("no cache") or next(iter(by_case.values()))
        official = _official_nodes(plain["nodes"])
        lines += [
            f"   * - {model}",
            f"     - {plain['nodes'].get('to_onnx ort', 'n/a')}",
            f"     - {official if official is not None else 'n/a'}",
        ]
        for case in CASES:
            ratio = _ratio(by_case[case]["latency_ms"], "to_onnx ort", BEST_OFFICIAL) if case in by_case else None
            lines.append(f"     - {ratio:.2f}" if ratio is not None else "     - n/a")
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    if details:
        write_details(rows, details, command)


def write_details(rows: list[dict], path: str, command: str) -> None:
    """Every measurement: the latencies (ms) and both ratios per model and case, the node counts per model and
    export, the failures, the command."""
    lines = [
        ".. list-table:: ONNX Runtime CPU latency, median ms of interleaved runs (prefill: an empty past and "
        f"{SEQ} new tokens; decode: a past of {SEQ} tokens and 1 new)",
        "   :header-rows: 1",
        "   :class: perf-table",
        "",
        "   * - model",
        "     - case",
        *[f"     - {v}" for v in VARIANTS],
        "     - to_onnx ort / best official",
        "     - to_onnx / official",
    ]
    for r in rows:
        lat = r["latency_ms"]
        lines += [f"   * - {r['model']}", f"     - {_case(r)}"]
        lines += [f"     - {lat[v]:.1f}" if v in lat else "     - fails" for v in VARIANTS]
        for a, b in (("to_onnx ort", BEST_OFFICIAL), ("to_onnx", "official")):
            ratio = _ratio(lat, a, b)
            lines.append(f"     - {ratio:.2f}" if ratio is not None else "     - n/a")
    lines += [
        "",
        ".. list-table:: ONNX nodes per model and export",
        "   :header-rows: 1",
        "   :class: perf-table",
        "",
        "   * - model",
        "     - exported",
        *[f"     - {v}" for v in VARIANTS],
    ]
    seen = set()
    for r in rows:
        kind = "without a cache" if _case(r) == "no cache" else "with its cache"
        if (r["model"], kind) in seen:
            continue
        seen.add((r["model"], kind))
        lines += [f"   * - {r['model']}", f"     - {kind}"]
        lines += [f"     - {r['nodes'][v]}" if v in r["nodes"] else "     - fails" for v in VARIANTS]
    notes = _notes(rows)
    lines += ["", *notes, "" if notes else "", f"Command: ``{command}``", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_plot(rows: list[dict], path: str) -> None:
    """Top: the latency of the onnxruntime level divided by the faster official model's, per model and case;
    bottom: the node counts of the four models (without a cache). A value that does not exist (the official
    exporter fails, an encoder has no cache) is no bar: "n/a" is written in its place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = _models(rows)
    by = {(r["model"], _case(r)): r for r in rows}
    x = np.arange(len(models))

    def not_available(ax: Any, slots: dict[int, list[float]], height: float) -> None:
        """One "n/a" over the missing bars of each model."""
        for xs in slots.values():
            ax.text(float(np.mean(xs)), height, "n/a", ha="center", va="bottom", fontsize=11, color="dimgray")

    with plt.rc_context({"font.size": 12, "legend.fontsize": 11}):
        fig, (left, right) = plt.subplots(2, 1, figsize=(9, 7.2))
        width = 0.8 / len(CASES)
        missing: dict[int, list[float]] = {}
        for j, case in enumerate(CASES):
            shift = (j - (len(CASES) - 1) / 2) * width
            values = [_ratio(by[(m, case)]["latency_ms"], "to_onnx ort", BEST_OFFICIAL) if (m, case) in by else None
                      for m in models]
            shown = [(i, v) for i, v in enumerate(values) if v is not None]
            left.bar([x[i] + shift for i, _ in shown], [v for _, v in shown], width, label=case, color=f"C{j}")
            for i, v in enumerate(values):
                if v is None:
                    missing.setdefault(i, []).append(x[i] + shift)
        not_available(left, missing, 0.02)
        left.axhline(1.0, color="black", linewidth=0.8)
        left.set_xticks(x, models)
        left.set_xlim(-0.6, len(models) - 0.4)
        left.set_ylim(0, 1.3)
        left.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        left.set_ylabel("to_onnx ort / faster official")
        left.set_title("latency (lower is better)")
        left.legend(ncol=len(CASES), loc="upper center", frameon=False)
        width = 0.8 / len(VARIANTS)
        missing = {}
        for j, variant in enumerate(VARIANTS):
            shift = (j - (len(VARIANTS) - 1) / 2) * width
            values = [by[(m, "no cache")]["nodes"].get(variant) if (m, "no cache") in by else None for m in models]
            shown = [(i, v) for i, v in enumerate(values) if v is not None]
            right.bar([x[i] + shift for i, _ in shown], [v for _, v in shown], width, label=variant, color=f"C{j + 3}")
            for i, v in enumerate(values):
                if v is None:
                    missing.setdefault(i, []).append(x[i] + shift)
        top = max(v for r in rows for v in r["nodes"].values())
        not_available(right, missing, 0.02 * top)
        right.set_xticks(x, models)
        right.set_xlim(-0.6, len(models) - 0.4)
        right.set_ylabel("ONNX nodes")
        right.set_title("nodes, without a cache")
        right.legend(ncol=len(VARIANTS), loc="upper center", frameon=False)
        right.set_ylim(0, 1.3 * top)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _merge(stored: list[dict], new: list[dict]) -> list[dict]:
    """``stored`` with the rows of each model ``new`` has replaced by those, in place of the first one."""
    fresh: dict[str, list[dict]] = {}
    for row in new:
        fresh.setdefault(row["model"], []).append(row)
    merged: list[dict] = []
    for row in stored:
        if row["model"] not in fresh:
            merged.append(row)
        elif not any(r["model"] == row["model"] for r in merged):
            merged.extend(fresh[row["model"]])
    return merged + [r for name, rows in fresh.items() if not any(m["model"] == name for m in stored) for r in rows]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="llama,gpt2", help=f"comma separated, among {','.join(MODELS)}")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (0: its default)")
    parser.add_argument("--out", default=os.path.join(DOC, "performance_table.inc"), help="the short .rst table")
    parser.add_argument("--details", default=os.path.join(DOC, "performance_details.inc"),
                        help="the .rst tables of every measurement")
    parser.add_argument("--plot", default=os.path.join(DOC, "performance_latency.png"))
    parser.add_argument("--render-only", action="store_true", help=f"table and plot from {os.path.basename(RESULTS)}")
    parser.add_argument("--merge", action="store_true",
                        help=f"keep the rows of {os.path.basename(RESULTS)} for the models not in --models")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="measure on this device with I/O binding, fp32/fp16/bf16, against eager PyTorch there "
                             "(ort_device_latency.py); without it, the CPU table of the documentation")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16", help="with --device")
    parser.add_argument("--quick", action="store_true", help="with --device: tiny models and inputs")
    parser.add_argument("--json", default=None, help="with --device: write the rows there")
    parser.add_argument("--table", default=None, help="with --device: write the reST table there")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)
    if args.device is not None:
        import ort_device_latency

        return ort_device_latency.main(args)
    if args.render_only:
        with open(RESULTS) as f:
            stored = json.load(f)
        write_table(stored["rows"], args.out, stored["command"], args.details)
        write_plot(stored["rows"], args.plot)
        return stored["rows"]
    THREADS["intra_op"] = args.threads
    rows = []
    for name in args.models.split(","):
        try:
            model_rows = bench(name, args.repeat)
        except Exception as e:  # noqa: BLE001  (one model failing is a row of the table, the others still run)
            logger.exception("%s fails", name)
            model_rows = [_row(name, "no cache", {}, {}, {"to_onnx": "the benchmark fails: " + reason(e)})]
        for row in model_rows:
            logger.info(
                "%s, %s: latency %s ms, nodes %s, export %s s",
                name,
                row["case"],
                {k: round(v, 2) for k, v in row["latency_ms"].items()},
                row["nodes"],
                {k: round(v, 2) for k, v in row["export_s"].items()},
            )
            rows.append(row)
    command = (
        f"python benchmarks/bench_ort_latency.py --models {args.models} --repeat {args.repeat} --threads {args.threads}"
    )
    if args.merge and os.path.exists(RESULTS):
        with open(RESULTS) as f:
            stored = json.load(f)
        rows = _merge(stored["rows"], rows)
        command = f"{stored['command']}; then {command} --merge"
    with open(RESULTS, "w") as f:
        json.dump({"command": command, "onnxruntime": ort.__version__, "torch": torch.__version__, "rows": rows}, f, indent=1)
    write_table(rows, args.out, command, args.details)
    write_plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
