"""Latency on a device (``bench_ort_latency.py --device cuda``): the models of ``bench_ort_latency.py`` exported by
``to_onnx(..., optimize="onnxruntime", providers=<device>)``, by ``torch.onnx.export(..., dynamo=True)`` (as
exported, and after onnxscript's ``optimize_for_ort``), and eager PyTorch, all run on the same device in one
process.

Cases: float32, float16 and bfloat16 (``model.to(dtype)``); batch x sequence 2 x 128 and 8 x 512 (the first row of
a decoder's batch left-padded on a quarter of its tokens); for the decoders, one decoding step (a past of 128
tokens, 1 new, a model exported with its cache). Every ONNX model runs through the project's
``InferenceSession`` with I/O binding (torch tensors on the device in and out, no copy), ``run_torch``;
the variants and eager are called in turn, ``--repeat`` times, and the median is reported. Each ONNX model's first
output is compared with eager's on the same device (the largest difference over the largest value, the finite
values of both; float32 within 1e-3, float16 and bfloat16 within 1e-2) before anything is timed: a model over
the tolerance is reported and not timed.

Without a GPU and onnxruntime-gpu, ``--device cuda`` says what is missing and measures nothing;
``--device cpu --quick`` runs the same cases on the CPU at tiny sizes (a check of the script)::

    python benchmarks/bench_ort_latency.py --device cuda --models llama,gpt2,bert --repeat 50
    python benchmarks/bench_ort_latency.py --device cpu --quick --models llama
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import onnxruntime as ort
import torch
import transformers
from torch.utils import _pytree

from bench_ort_latency import WithCache, cache_dynamic, cache_inputs, reason
from experimental.torch_interpreter import InferenceSession, bypass_export_some_errors, to_onnx

logger = logging.getLogger("bench_ort_latency")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: the tolerance of each dtype: the largest |onnx - eager| over the largest |eager|
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 1e-2}
VARIANTS = ("to_onnx ort", "official", "official+ort", "eager")
DECODERS = ("llama", "mistral", "qwen2", "phi3", "gpt2")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The model and input sizes: the medium models of the CPU benchmark, or tiny ones (``--quick``)."""

    hidden: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    vocab: int = 8000
    shapes: tuple[tuple[int, int], ...] = ((2, 128), (8, 512))
    past: int = 128


QUICK = Sizes(hidden=32, layers=1, heads=2, kv_heads=1, vocab=100, shapes=((2, 8),), past=4)


def available(device: str) -> str | None:
    """Why ``device`` cannot be measured here (None when it can)."""
    if device == "cpu":
        return None
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (install onnxruntime-gpu)"
    return None


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return "CPU"


# -- models and inputs --------------------------------------------------------------------------------------------
def build(name: str, sizes: Sizes, use_cache: bool = False) -> torch.nn.Module:
    """A random-weight transformers model of ``sizes``."""
    common = dict(vocab_size=sizes.vocab, num_hidden_layers=sizes.layers, num_attention_heads=sizes.heads)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_embd=sizes.hidden, n_layer=sizes.layers, n_head=sizes.heads,
                                      vocab_size=sizes.vocab, n_positions=1024, use_cache=use_cache,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg)
    if name == "bert":
        cfg = transformers.BertConfig(hidden_size=sizes.hidden, intermediate_size=4 * sizes.hidden,
                                      max_position_embeddings=1024, type_vocab_size=2, **common)
        return transformers.BertModel(cfg)
    classes = {
        "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig, {}),
        "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig, {}),
        "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, {}),
        "phi3": (transformers.Phi3ForCausalLM, transformers.Phi3Config, {"pad_token_id": 0}),
    }
    cls, config, extra = classes[name]
    cfg = config(hidden_size=sizes.hidden, intermediate_size=4 * sizes.hidden, num_key_value_heads=sizes.kv_heads,
                 max_position_embeddings=1024, use_cache=use_cache, **common, **extra)
    return cls(cfg)


def inputs(name: str, sizes: Sizes, batch: int, seq: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """The inputs of a forward without cache; a decoder's first row is left-padded on a quarter of its tokens."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, sizes.vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if name == "bert":
        types = torch.zeros(batch, seq, dtype=torch.int64)
        types[:, seq // 2 :] = 1
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    mask[0, : seq // 4] = 0
    return {"input_ids": ids, "attention_mask": mask}


def dynamic_shapes(feeds: dict[str, Any]) -> dict[str, Any]:
    return {k: {0: "batch", 1: "seq"} for k in feeds}


# -- exports ------------------------------------------------------------------------------------------------------
def export_variants(model: torch.nn.Module, feeds: dict, dynamic: dict, device: str,
                    failed: dict[str, str]) -> dict[str, tuple[bytes, int]]:
    """(serialized model, node count) of each ONNX variant, exported on the CPU; failures go to ``failed``."""
    from onnxscript.rewriter import ort_fusions

    out: dict[str, tuple[bytes, int]] = {}
    try:
        m = to_onnx(model, (), feeds, dynamic_shapes=dynamic, optimize="onnxruntime", as_ir=True, providers=device)
        out["to_onnx ort"] = (ir.to_proto(m).SerializeToString(), len(m.graph))
    except Exception as e:  # noqa: BLE001  (a result of the benchmark)
        failed["to_onnx ort"] = "to_onnx fails: " + reason(e)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, (), kwargs=feeds, dynamic_shapes=dynamic, dynamo=True, verbose=False)
    except Exception as e:  # noqa: BLE001
        failed["official"] = failed["official+ort"] = "torch.onnx.export fails: " + reason(e)
        return out
    out["official"] = (ir.to_proto(program.model).SerializeToString(), len(program.model.graph))
    fused, _ = ort_fusions.optimize_for_ort(ir.from_proto(ir.to_proto(program.model)))
    out["official+ort"] = (ir.to_proto(fused).SerializeToString(), len(fused.graph))
    return out


# -- running ------------------------------------------------------------------------------------------------------
def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def sessions(variants: dict[str, tuple[bytes, int]], device: str, failed: dict[str, str]) -> dict[str, Any]:
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    out = {}
    for k, (content, _) in variants.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a model for CUDA warns when it runs on the CPU (--device cpu)
                out[k] = InferenceSession(content, providers=providers)
        except Exception as e:  # noqa: BLE001
            failed[k] = "onnxruntime refuses the model: " + reason(e)
    return out


def relative_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """max |got - expected| / max |expected| over the entries finite on both sides (inf: nothing comparable)."""
    got, expected = got.float(), expected.float()
    both = torch.isfinite(got) & torch.isfinite(expected)
    if not bool(both.any()):
        return float("inf")
    scale = float(expected[both].abs().max()) or 1.0
    return float((got[both] - expected[both]).abs().max()) / scale


def measure(label: str, dtype: str, device: str, runners: dict[str, Any], flat: list[torch.Tensor],
            eager: Callable[[], torch.Tensor], failed: dict[str, str], repeat: int,
            tokens: torch.Tensor | None = None) -> tuple[dict, dict]:
    """(median ms, relative error) per variant: each ONNX model checked against eager, then all timed in turn.
    ``tokens``: the positions compared (the attention mask: the official exporter's attention gives other values
    than eager on the rows of padding tokens, which no one reads; a difference there is noted, not refused)."""
    with torch.no_grad():
        expected = eager()
    keep = tokens.bool() if tokens is not None and tokens.shape == expected.shape[:2] else None
    calls: dict[str, Callable[[], Any]] = {}
    errors: dict[str, float] = {}
    for k, sess in runners.items():
        feeds = {i.name: t for i, t in zip(sess.get_inputs(), flat)}
        try:
            got = sess.run_torch(None, feeds)[0]
        except Exception as e:  # noqa: BLE001
            failed[k] = "onnxruntime fails: " + reason(e)
            continue
        got = got.to(expected.device)
        errors[k] = relative_error(got[keep], expected[keep]) if keep is not None else relative_error(got, expected)
        if keep is not None and relative_error(got, expected) > TOLERANCE[dtype]:
            failed.setdefault(k, f"differs from eager on the padding tokens only ({relative_error(got, expected):.2e})")
        if errors[k] > TOLERANCE[dtype]:
            failed[k] = f"differs from eager: {errors[k]:.2e} > {TOLERANCE[dtype]}"
            logger.warning("%s %s: %s", label, k, failed[k])
            continue
        calls[k] = lambda sess=sess, feeds=feeds: sess.run_torch(None, feeds)
    calls["eager"] = eager
    times: dict[str, list[float]] = {k: [] for k in calls}
    with torch.no_grad():
        for i in range(repeat + 3):
            for k, call in calls.items():
                _sync(device)
                begin = time.perf_counter()
                call()
                _sync(device)
                if i >= 3:  # warm-up runs
                    times[k].append(time.perf_counter() - begin)
    return {k: 1000 * statistics.median(v) for k, v in times.items()}, errors


def _on(device: str, value: Any) -> Any:
    return _pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, value)


def bench_model(name: str, dtype: str, sizes: Sizes, device: str, repeat: int) -> list[dict[str, Any]]:
    """The rows of one model in one dtype: each shape without cache, then a decoding step (decoders)."""
    rows = []
    torch.manual_seed(0)
    model = build(name, sizes).eval().to(DTYPES[dtype])
    first = inputs(name, sizes, *sizes.shapes[0])
    failed: dict[str, str] = {}
    variants = export_variants(model, first, dynamic_shapes(first), device, failed)
    runners = sessions(variants, device, failed)
    model = model.to(device)
    for batch, seq in sizes.shapes:
        feeds = _on(device, inputs(name, sizes, batch, seq, seed=1))
        case_failed = dict(failed)
        latency, errors = measure(f"{name} {dtype} {batch}x{seq}", dtype, device, runners, list(feeds.values()),
                                  lambda feeds=feeds: model(**feeds)[0], case_failed, repeat, feeds["attention_mask"])
        rows.append(_row(name, f"{batch} x {seq}", dtype, variants, latency, errors, case_failed))
    if name not in DECODERS:
        return rows
    torch.manual_seed(0)
    cached = WithCache(build(name, sizes, use_cache=True)).eval().to(DTYPES[dtype])
    failed = {}
    batch = sizes.shapes[0][0]
    with bypass_export_some_errors(patch_transformers=True) as adapt:  # caches as pytree nodes, for both exporters
        example = adapt(cache_inputs(cached, 8, sizes.past, 0, batch, DTYPES[dtype]))
        variants = export_variants(cached, example, cache_dynamic(cached), device, failed)
        runners = sessions(variants, device, failed)
        step = _on(device, adapt(cache_inputs(cached, 1, sizes.past, 1, batch, DTYPES[dtype])))
        flat = _pytree.tree_flatten(step)[0]
        cached = cached.to(device)
        latency, errors = measure(f"{name} {dtype} decode", dtype, device, runners, flat,
                                  lambda: cached(**step)[0], failed, repeat)
    rows.append(_row(name, f"decode (batch {batch}, past {sizes.past})", dtype, variants, latency, errors, failed))
    return rows


def _row(name: str, case: str, dtype: str, variants: dict, latency: dict, errors: dict, failed: dict) -> dict:
    return {
        "model": name, "case": case, "dtype": dtype,
        "nodes": {k: v[1] for k, v in variants.items()},
        "latency_ms": latency, "error": errors, "failed": failed,
    }


def ratio(row: dict[str, Any], against: str) -> float | None:
    """The onnxruntime level's latency over the faster official model's (``against="official"``) or eager's."""
    lat = row["latency_ms"]
    if "to_onnx ort" not in lat:
        return None
    if against == "official":
        official = [lat[k] for k in ("official", "official+ort") if k in lat]
        return lat["to_onnx ort"] / min(official) if official else None
    return lat["to_onnx ort"] / lat["eager"] if "eager" in lat else None


def write_table(rows: list[dict[str, Any]], path: str, device: str, command: str) -> None:
    """The reST table of the rows: latency (ms) of each variant, the two ratios, the errors left out."""
    lines = [
        f".. list-table:: ONNX Runtime on {device}: median ms with I/O binding, interleaved runs",
        "   :header-rows: 1",
        "",
        "   * - model, case, dtype",
        *[f"     - {v}" for v in VARIANTS],
        "     - ort / best official",
        "     - ort / eager",
    ]
    notes = []
    for r in rows:
        lat = r["latency_ms"]
        lines.append(f"   * - {r['model']}, {r['case']}, {r['dtype']}")
        lines += [f"     - {lat[v]:.2f}" if v in lat else "     - fails" for v in VARIANTS]
        for against in ("official", "eager"):
            value = ratio(r, against)
            lines.append(f"     - {value:.2f}" if value is not None else "     - n/a")
        notes += [f"* {r['model']} {r['dtype']} {r['case']}, {k}: {e}" for k, e in r["failed"].items()]
    lines += ["", *sorted(set(notes)), "", f"Command: ``{command}``", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(args: Any) -> list[dict[str, Any]]:
    """``bench_ort_latency.py --device ...``: the rows measured (none when the device is missing)."""
    missing = available(args.device)
    if missing:
        print(f"--device {args.device}: {missing}; nothing measured")
        return []
    sizes = QUICK if args.quick else Sizes()
    rows = []
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            try:
                rows += bench_model(name, dtype, sizes, args.device, args.repeat)
            except Exception as e:  # noqa: BLE001  (one model failing is a row, the others still run)
                logger.exception("%s %s fails", name, dtype)
                rows.append(_row(name, "all", dtype, {}, {}, {}, {"benchmark": reason(e)}))
            for r in rows[-3:]:
                logger.info("%s %s %s: %s", r["model"], r["dtype"], r["case"],
                            {k: round(v, 3) for k, v in r["latency_ms"].items()})
    device = device_name(args.device)
    command = (f"python benchmarks/bench_ort_latency.py --device {args.device} --models {args.models} "
               f"--dtypes {args.dtypes} --repeat {args.repeat}{' --quick' if args.quick else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "command": command, "onnxruntime": ort.__version__,
                       "torch": torch.__version__, "rows": rows}, f, indent=1)
    if args.table:
        write_table(rows, args.table, device, command)
    for r in rows:
        print(f"{r['model']:8s} {r['case']:28s} {r['dtype']:9s} "
              + " ".join(f"{k}={v:.3f}ms" for k, v in r["latency_ms"].items())
              + f"  ort/official={ratio(r, 'official')}  ort/eager={ratio(r, 'eager')}")
    return rows

