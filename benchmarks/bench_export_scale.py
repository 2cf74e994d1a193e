"""How ``to_onnx`` scales: export time against depth, peak memory on a model of more than 2 GB of weights.

* depth: random-weight Llama (hidden 512), 8 and 32 layers, ``to_onnx`` (default optimization) timed
  ``--repeat`` times each, the medians compared (linear growth gives a ratio near 4);
* memory: random-weight Llama (hidden 2048, ``--big-layers`` layers, float32, more than 2 GB), exported with
  ``to_onnx(..., filename=...)`` (weights in one external data file) while a thread samples the resident
  memory of the process; the peak during the call is compared with the size of the weights, then the saved
  model is loaded and run by onnxruntime and compared with eager PyTorch::

    python benchmarks/bench_export_scale.py --repeat 2 --big-layers 9
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

from experimental.torch_interpreter import to_onnx

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--big-layers", type=int, default=9, help="layers of the >2 GB model")
    parser.add_argument("--skip", default="", help="'depth' or 'memory' to skip one part")
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


if __name__ == "__main__":
    main()
