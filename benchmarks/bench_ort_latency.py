"""ONNX Runtime CPU latency and node counts: to_onnx (optimize=True and "onnxruntime") against
``torch.onnx.export(..., dynamo=True)`` and the same model after onnxscript's ``optimize_for_ort``.

Medium random-weight models (hidden 512, 4 layers, batch 2, sequence 128, no cache), all exported in one
process; the variants of one model run interleaved (one call each, in turn, ``--repeat`` times) and the
median is reported, so a machine shared with other work slows every variant alike. Writes a reST
table included by ``_doc/performance.rst`` and a plot next to it::

    python benchmarks/bench_ort_latency.py --models llama,gpt2 --repeat 30
"""

from __future__ import annotations

import argparse
import copy
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
DOC = os.path.join(os.path.dirname(__file__), "..", "_doc")
BATCH_SEQ = {0: "batch", 1: "seq"}


def _decoder(cls: type, config: type, **extra: Any) -> torch.nn.Module:
    return cls(
        config(
            hidden_size=HIDDEN, intermediate_size=4 * HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS, vocab_size=VOCAB, max_position_embeddings=1024, use_cache=False, **extra,
        )
    )


def _ids(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


def _mask() -> torch.Tensor:
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[0, : SEQ // 4] = 0
    return mask


def _decoder_case(model: torch.nn.Module) -> tuple[torch.nn.Module, dict, dict]:
    return model, {"input_ids": _ids(0), "attention_mask": _mask()}, {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}


def _gpt2() -> tuple[torch.nn.Module, dict, dict]:
    cfg = transformers.GPT2Config(
        n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB, n_positions=1024, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )
    return _decoder_case(transformers.GPT2LMHeadModel(cfg))


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

#: the variants, in table order; the ratios are against ``official+ort``
VARIANTS = ("to_onnx", "to_onnx ort", "official", "official+ort")


def _reason(e: BaseException) -> str:
    """First line of the innermost cause, without terminal colors."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(e).__name__}: {e}")
    return text.splitlines()[0][:200]


def export_variants(
    model: torch.nn.Module, inputs: dict, dynamic: dict, failed: dict[str, str]
) -> dict[str, tuple[bytes, int, float]]:
    """(serialized model, node count, export seconds) of each variant; an official export that fails is
    recorded in ``failed``."""
    from onnxscript.rewriter import ort_fusions

    out: dict[str, tuple[bytes, int, float]] = {}
    for name, level in (("to_onnx", True), ("to_onnx ort", "onnxruntime")):
        begin = time.perf_counter()
        m = to_onnx(model, (), inputs, dynamic_shapes=dynamic, optimize=level, as_ir=True)
        out[name] = (ir.to_proto(m).SerializeToString(), len(m.graph), time.perf_counter() - begin)
    begin = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, (), kwargs=inputs, dynamic_shapes=dynamic, dynamo=True, verbose=False)
    except Exception as e:  # noqa: BLE001  (the official exporter's failure is a result, not a crash)
        failed["official"] = failed["official+ort"] = "torch.onnx.export fails: " + _reason(e)
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


def interleaved_latency(sessions: dict[str, ort.InferenceSession], feeds: dict, repeat: int, warmup: int = 3) -> dict:
    """Median seconds of one run per session, the sessions called in turn."""
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(warmup):
        for sess in sessions.values():
            sess.run(None, feeds)
    for _ in range(repeat):
        for name, sess in sessions.items():
            begin = time.perf_counter()
            sess.run(None, feeds)
            times[name].append(time.perf_counter() - begin)
    return {k: statistics.median(v) for k, v in times.items()}


def bench(name: str, repeat: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs, dynamic = MODELS[name]()
    model = model.eval()
    failed: dict[str, str] = {}
    variants = export_variants(model, inputs, dynamic, failed)
    sessions = {}
    for k, v in variants.items():
        try:
            sessions[k] = ort.InferenceSession(v[0], ort.SessionOptions(), providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  (a variant onnxruntime refuses is reported, not fatal)
            failed[k] = "onnxruntime refuses the model: " + _reason(e)
            logger.warning("%s %s: %s", name, k, failed[k])
    feeds = {k: v.numpy() for k, v in inputs.items()}
    with torch.no_grad():
        expected = model(**copy.deepcopy(inputs))[0].numpy()
    for k, sess in sessions.items():
        got = sess.run(None, feeds)[0]
        # padded query rows: the official exporter's attention returns NaN where eager returns 0
        finite = np.isfinite(got)
        err = float(np.abs(np.where(finite, got, expected) - expected).max())
        logger.info("%s %s: max abs error vs eager %.2e, non-finite %d", name, k, err, int((~finite).sum()))
    latency = interleaved_latency(sessions, feeds, repeat)
    return {
        "model": name,
        "nodes": {k: v[1] for k, v in variants.items()},
        "export_s": {k: v[2] for k, v in variants.items()},
        "latency_ms": {k: 1000 * v for k, v in latency.items()},
        "failed": failed,
    }


def write_table(rows: list[dict], path: str, command: str) -> None:
    lines = [
        ".. list-table:: ONNX Runtime CPU latency (median ms, interleaved runs) and node counts",
        "   :header-rows: 1",
        "",
        "   * - model",
        *[f"     - {v} ms" for v in VARIANTS],
        *[f"     - {v} nodes" for v in VARIANTS],
        "     - latency ratio to_onnx ort / official+ort",
        "     - latency ratio to_onnx / official",
    ]
    notes = []
    for r in rows:
        lat, nodes = r["latency_ms"], r["nodes"]
        lines.append(f"   * - {r['model']}")
        lines += [f"     - {lat[v]:.1f}" if v in lat else "     - fails" for v in VARIANTS]
        lines += [f"     - {nodes[v]}" if v in nodes else "     - fails" for v in VARIANTS]
        for a, b in (("to_onnx ort", "official+ort"), ("to_onnx", "official")):
            lines.append(f"     - {lat[a] / lat[b]:.2f}" if a in lat and b in lat else "     - n/a")
        notes += [f"* {r['model']}, {k}: ``{e.replace(chr(96), chr(39))}``" for k, e in r["failed"].items()]
    lines += ["", *notes, "" if notes else "", f"Command: ``{command}``", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
    x = np.arange(len(rows))
    width = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        ax[0].bar(x + i * width, [r["latency_ms"].get(v, 0.0) for r in rows], width, label=v)
        ax[1].bar(x + i * width, [r["nodes"].get(v, 0) for r in rows], width, label=v)
    for a, title in zip(ax, ["ORT CPU latency (ms, median)", "nodes"]):
        a.set_xticks(x + width * (len(VARIANTS) - 1) / 2, [r["model"] for r in rows])
        a.set_title(title)
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="llama,gpt2", help=f"comma separated, among {','.join(MODELS)}")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", default=os.path.join(DOC, "performance_table.inc"), help="the .rst table")
    parser.add_argument("--plot", default=os.path.join(DOC, "performance_latency.png"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)
    rows = []
    for name in args.models.split(","):
        row = bench(name, args.repeat)
        lat, nodes = row["latency_ms"], row["nodes"]
        logger.info(
            "%s: latency %s ms, nodes %s, export %s s",
            name,
            {k: round(v, 2) for k, v in lat.items()},
            nodes,
            {k: round(v, 2) for k, v in row["export_s"].items()},
        )
        rows.append(row)
    command = f"python benchmarks/bench_ort_latency.py --models {args.models} --repeat {args.repeat}"
    write_table(rows, args.out, command)
    write_plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
