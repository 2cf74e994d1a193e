"""find_discrepancies on a tiny random-weight Llama: share of FX nodes compared and time against to_onnx.

Run: ``python benchmarks/bench_find_discrepancies.py [--repeat 3] [--layers 2]``. Both are timed in the same
process after one warm-up call each; ``to_onnx`` runs with its defaults (``optimize=True``),
``find_discrepancies`` exports (``optimize=False``), runs the exported program node by node and onnxruntime
once with every FX-named value as an output. Prints one line per measure.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import torch
import transformers

from experimental.torch_interpreter import find_discrepancies, to_onnx

logger = logging.getLogger("bench_find_discrepancies")


def tiny_llama(layers: int) -> torch.nn.Module:
    cfg = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256, use_cache=False,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2)
    ns = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logger.setLevel(logging.INFO)
    model = tiny_llama(ns.layers)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[0, :2] = 0
    kwargs = {"input_ids": torch.randint(0, 1000, (2, 8)), "attention_mask": mask}
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}

    def export():
        return to_onnx(model, (), kwargs, dynamic)

    def compare():
        return find_discrepancies(model, (), kwargs, dynamic)

    export(), compare()  # warm-up
    times: dict[str, list[float]] = {"to_onnx": [], "find_discrepancies": []}
    for _ in range(ns.repeat):
        for name, fn in (("to_onnx", export), ("find_discrepancies", compare)):
            begin = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - begin)
    report = result
    median = {k: statistics.median(v) for k, v in times.items()}
    logger.info("tiny Llama, %d layers: %s", ns.layers, report)
    logger.info("compared %d of %d FX call_function nodes producing tensors (%.1f%%)",
                report.compared, report.total, 100 * report.share)
    logger.info("not compared: %s", report.skipped)
    checking = sum(v for k, v in report.seconds.items() if k != "export")
    logger.info("median to_onnx %.3fs, find_discrepancies %.3fs (ratio %.2f); find_discrepancies steps %s",
                median["to_onnx"], median["find_discrepancies"],
                median["find_discrepancies"] / median["to_onnx"],
                {k: round(v, 3) for k, v in report.seconds.items()})
    logger.info("the comparison alone (PyTorch node by node, onnxruntime, compare): %.3fs, %.2f x to_onnx",
                checking, checking / median["to_onnx"])


if __name__ == "__main__":
    main()
