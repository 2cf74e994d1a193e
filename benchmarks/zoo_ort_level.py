"""The zoo's architectures exported at ``optimize="onnxruntime"`` and compared with eager PyTorch.

Checks the rewrites of the onnxruntime level (fusions, rotary embedding, attention on ``[batch, seq, hidden]``
with the cache as past inputs) over many families: each architecture ``to_onnx`` converted in the sweep
(``benchmarks/zoo_results.json``, status ``ok``) is built, exported and compared as
``benchmarks/transformers_zoo.py`` does, in this process; prints one line per architecture (status, nodes at
this level and at the default one, max abs difference)::

    python benchmarks/zoo_ort_level.py --tasks causal-lm,causal-lm-cache --archs llama,gpt2,qwen2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import transformers_zoo as zoo  # noqa: E402

import experimental.torch_interpreter as interpreter  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="causal-lm,causal-lm-cache")
    parser.add_argument("--archs", default="", help="comma separated (empty: every one to_onnx converted)")
    args = parser.parse_args(argv)
    with open(os.path.join(os.path.dirname(__file__), "zoo_results.json")) as f:
        rows = json.load(f)["rows"]
    export = interpreter.to_onnx
    # run_one imports to_onnx from the package when it runs: the level is set there
    interpreter.to_onnx = lambda *a, **k: export(*a, **{**k, "optimize": "onnxruntime"})
    failures = 0
    try:
        for task in args.tasks.split(","):
            archs = args.archs.split(",") if args.archs else sorted(r["arch"] for r in rows.values() if r["task"] == task)
            for arch in dict.fromkeys(archs):
                stored = rows.get(f"{task}:{arch}:to_onnx")
                if not stored or stored["status"] != "ok":
                    continue
                begin = time.perf_counter()
                row = zoo.run_one(task, arch, stored["class"], "to_onnx")
                failures += row["status"] != "ok"
                print(f"{task:16s} {arch:24s} {row['status']:8s} nodes {row.get('nodes')} (default level "
                      f"{stored.get('nodes')}) max diff {row.get('max_diff', float('nan')):.2g} "
                      f"{time.perf_counter() - begin:.0f}s {row.get('error', '')[:120]}", flush=True)
    finally:
        interpreter.to_onnx = export
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
