"""How ``to_onnx`` scales: export time against depth, peak memory on a model of more than 2 GB of weights.

* depth: random-weight Llama (hidden 512), 8 and 32 layers, ``to_onnx`` (default optimization) timed
  ``--repeat`` times each, the medians compared (linear growth gives a ratio near 4);
* memory: random-weight Llama (hidden 2048, ``--big-layers`` layers, float32, more than 2 GB), exported with
  ``to_onnx(..., filename=...)`` (weights in one external data file) while a thread samples the resident
  memory of the process; the peak during the call is compared with the size of the weights, then the saved
  model is loaded and run by onnxruntime and compared with eager PyTorch::

    python benchmarks/bench_export_scale.py --repeat 2 --big-layers 9

* ``--meta GB``: a random bfloat16 Llama checkpoint of about ``GB`` gigabytes (sharded safetensors and their index,
  as transformers writes them) written to ``--root`` one tensor at a time; the model built on the meta device
  (``empty_weights()``) and exported with ``weights=`` twice while the resident memory is sampled: in place (the
  model saved in the checkpoint's folder, pointing into its shards) and as a float16 copy (each tensor converted
  and written in another folder); a small model through the same path is checked against eager PyTorch; what was
  written is removed::

    python benchmarks/bench_export_scale.py --skip depth,memory --meta 32
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import threading
import time

import numpy as np
import onnxruntime as ort
import torch
import transformers

from experimental.torch_interpreter import empty_weights, to_onnx

logger = logging.getLogger("bench_export_scale")
DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _llama(hidden: int, layers: int, vocab: int) -> torch.nn.Module:
    cfg = transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=layers,
        num_attention_heads=hidden // 64, num_key_value_heads=hidden // 128, vocab_size=vocab,
        max_position_embeddings=1024, use_cache=False,
    )
    with torch.no_grad():
        return transformers.LlamaForCausalLM(cfg).eval()


def _inputs(vocab: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, vocab, (2, 16), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones(2, 16, dtype=torch.int64)}


def _rss() -> int:
    """Resident memory of this process in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Samples the resident memory every ``interval`` seconds while the ``with`` block runs."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(self.interval)

    def __enter__(self) -> PeakMemory:
        self.before = _rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def depth(repeat: int) -> dict[int, float]:
    """Median export seconds of a Llama of 8 and of 32 layers."""
    times = {}
    for layers in (8, 32):
        torch.manual_seed(0)
        model = _llama(512, layers, 8000)
        runs = []
        for _ in range(repeat):
            begin = time.perf_counter()
            to_onnx(model, (), _inputs(8000), dynamic_shapes=DYNAMIC)
            runs.append(time.perf_counter() - begin)
        times[layers] = statistics.median(runs)
        logger.info("%d layers: export %s s", layers, [round(t, 2) for t in runs])
    return times


def memory(layers: int) -> dict[str, float]:
    """Peak resident memory during ``to_onnx(..., filename=...)`` of a model over 2 GB, and a check of the
    saved model in onnxruntime."""
    torch.manual_seed(0)
    vocab = 32000
    model = _llama(2048, layers, vocab)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    inputs = _inputs(vocab)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.onnx")
        begin = time.perf_counter()
        with PeakMemory() as mem:
            to_onnx(model, (), inputs, dynamic_shapes=DYNAMIC, filename=path)
        seconds = time.perf_counter() - begin
        sizes = {f: os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp)}
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0]
    with torch.no_grad():
        expected = model(**inputs).logits.numpy()
    result = {
        "weights_gb": weights / 2**30,
        "rss_before_gb": mem.before / 2**30,
        "peak_gb": mem.peak / 2**30,
        "peak_over_weights": mem.peak / weights,
        "added_over_weights": (mem.peak - mem.before) / weights,
        "export_s": seconds,
        "max_abs_err": float(np.abs(got - expected).max()),
    }
    logger.info("files %s", sizes)
    return result


#: the shape of the large checkpoint's layers (a 13 B-class Llama); the layer count gives the size
META_SHAPE = dict(hidden_size=5120, intermediate_size=13824, num_attention_heads=40, num_key_value_heads=8,
                  vocab_size=32000)
SHARD_BYTES = 4 * 2**30


def _meta_llama(config: transformers.LlamaConfig, dtype: torch.dtype) -> torch.nn.Module:
    with empty_weights():
        return transformers.LlamaForCausalLM._from_config(config, dtype=dtype).eval()


def write_random_checkpoint(config: transformers.LlamaConfig, folder: str, seed: int = 0) -> int:
    """Writes a random bfloat16 checkpoint of ``config`` to ``folder`` (shards of at most :data:`SHARD_BYTES`, the
    index), one tensor at a time; returns its size in bytes."""
    import json
    import struct

    os.makedirs(folder, exist_ok=True)
    model = _meta_llama(config, torch.bfloat16)
    tensors = [(n, tuple(p.shape)) for n, p in model.state_dict().items() if p.device.type == "meta"]
    shards, current, size = [], [], 0
    for name, shape in tensors:
        nbytes = int(np.prod(shape)) * 2
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape, nbytes))
        size += nbytes
    shards.append(current)
    generator = torch.Generator().manual_seed(seed)
    block = (torch.randn(2**20, generator=generator) * 0.02).to(torch.bfloat16)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {}, 0
        for name, shape, nbytes in shard:
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = file
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(folder, file), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for name, shape, nbytes in shard:
                count = nbytes // 2
                start = int(torch.randint(0, 2**20, (1,), generator=generator))
                values = block.roll(start).repeat(count // 2**20 + 1)[:count]
                f.write(values.view(torch.int16).numpy().tobytes())
        total += offset
    with open(os.path.join(folder, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    config.save_pretrained(folder)
    return total


def meta_checkpoint(gigabytes: float, root: str) -> dict[str, float]:
    """The ``--meta`` measurement (see the module's docstring)."""
    import shutil

    per_layer = 2 * (META_SHAPE["hidden_size"] * (2 * META_SHAPE["hidden_size"] + 2 * 1024)
                     + 3 * META_SHAPE["hidden_size"] * META_SHAPE["intermediate_size"])
    layers = max(1, round((gigabytes * 1e9 - 4 * META_SHAPE["hidden_size"] * META_SHAPE["vocab_size"]) / per_layer))
    config = transformers.LlamaConfig(num_hidden_layers=layers, use_cache=False, max_position_embeddings=4096,
                                      **META_SHAPE)
    result: dict[str, float] = {"layers": layers}
    work = tempfile.mkdtemp(prefix="bench_meta_", dir=root)
    try:
        result.update(_check_small(os.path.join(work, "small")))
        folder = os.path.join(work, "checkpoint")
        begin = time.perf_counter()
        result["checkpoint_gb"] = write_random_checkpoint(config, folder) / 1e9
        result["write_s"] = time.perf_counter() - begin
        free = shutil.disk_usage(work).free / 1e9
        logger.info("checkpoint: %d layers, %.1f GB written in %.0f s (%.0f GB free)", layers,
                    result["checkpoint_gb"], result["write_s"], free)
        inputs = _inputs(META_SHAPE["vocab_size"])
        for name, dtype, target in (("in_place", torch.bfloat16, folder),
                                    ("fp16_copy", torch.float16, os.path.join(work, "fp16"))):
            if name == "fp16_copy" and free < result["checkpoint_gb"] * 1.05:
                logger.info("fp16 copy skipped: %.0f GB free for a %.0f GB copy", free, result["checkpoint_gb"])
                continue
            model = _meta_llama(config, dtype)
            begin = time.perf_counter()
            with PeakMemory() as mem:
                to_onnx(model, (), inputs, dynamic_shapes=DYNAMIC, filename=os.path.join(target, "model.onnx"),
                        weights=folder)
            result[f"{name}_s"] = time.perf_counter() - begin
            result[f"{name}_peak_gb"] = mem.peak / 1e9
            written = sum(os.path.getsize(os.path.join(target, f)) for f in os.listdir(target)
                          if f.startswith("model.onnx"))
            result[f"{name}_written_gb"] = written / 1e9
            logger.info("%s: %.0f s, peak RSS %.2f GB, model files %.2f GB", name, result[f"{name}_s"],
                        result[f"{name}_peak_gb"], result[f"{name}_written_gb"])
            if name == "fp16_copy":
                shutil.rmtree(target, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _check_small(folder: str) -> dict[str, float]:
    """A small model through the same path: a random bfloat16 checkpoint, the float32 meta model exported in place
    and as a copy, onnxruntime against eager PyTorch on the same (bfloat16-rounded) weights."""
    from safetensors.torch import load_file

    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=1000, use_cache=False)
    write_random_checkpoint(config, folder, seed=1)
    eager = transformers.LlamaForCausalLM(config).eval()
    state = {}
    for file in sorted(f for f in os.listdir(folder) if f.endswith(".safetensors")):
        state.update({k: v.float() for k, v in load_file(os.path.join(folder, file)).items()})
    eager.load_state_dict(state, strict=False)
    inputs = _inputs(1000)
    with torch.no_grad():
        expected = eager(**inputs).logits.numpy()
    errors = {}
    for name, target in (("in_place", folder), ("copy", os.path.join(folder, "copy"))):
        path = os.path.join(target, "model.onnx")
        to_onnx(_meta_llama(config, torch.float32), (), inputs, dynamic_shapes=DYNAMIC, filename=path, weights=folder)
        got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, {k: v.numpy() for k, v in inputs.items()})[0]
        errors[f"small_{name}_max_abs_err"] = float(np.abs(got - expected).max())
    logger.info("small model through the meta path: %s", errors)
    return errors


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--big-layers", type=int, default=9, help="layers of the >2 GB model")
    parser.add_argument("--skip", default="", help="'depth' or 'memory' to skip one part")
    parser.add_argument("--meta", type=float, default=0,
                        help="also export a random bfloat16 checkpoint of this many GB on the meta device")
    parser.add_argument("--root", default=tempfile.gettempdir(), help="where --meta writes (then removes)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)
    if "depth" not in args.skip:
        t = depth(args.repeat)
        logger.info("depth: 8 layers %.2f s, 32 layers %.2f s, ratio %.2f (target <= 4.5)", t[8], t[32], t[32] / t[8])
    if "memory" not in args.skip:
        r = memory(args.big_layers)
        logger.info(
            "memory: weights %.2f GB, RSS before %.2f GB, peak during to_onnx %.2f GB = %.2fx the weights "
            "(%.2fx added), export %.1f s, onnxruntime vs eager max abs error %.2e",
            r["weights_gb"], r["rss_before_gb"], r["peak_gb"], r["peak_over_weights"], r["added_over_weights"],
            r["export_s"], r["max_abs_err"],
        )
    if args.meta:
        logger.info("meta: %s", {k: round(v, 4) for k, v in meta_checkpoint(args.meta, args.root).items()})


if __name__ == "__main__":
    main()
