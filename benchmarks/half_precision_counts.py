"""Nodes and Casts of float16 and bfloat16 models at the onnxruntime level, for any provider and for CUDA only,
against the official exporter's fused model (``torch.onnx.export(..., dynamo=True)`` then onnxscript's
``optimize_for_ort``): the medium random-weight models of ``bench_ort_latency.py`` (hidden 512, 4 layers, batch 2,
sequence 128). Prints one JSON line per model and dtype, then a markdown table::

    python benchmarks/half_precision_counts.py --models llama,gpt2,bert --dtypes float16,bfloat16
"""

from __future__ import annotations

import argparse
import collections
import json
import warnings

import onnx_ir as ir
import torch
from onnxscript.rewriter import ort_fusions

import bench_ort_latency as bench
from experimental.torch_interpreter import to_onnx


def counts(model: ir.Model) -> tuple[int, int]:
    """(nodes, Casts) of the main graph."""
    ops = collections.Counter(n.op_type for n in model.graph)
    return len(model.graph), ops["Cast"]


def measure(name: str, dtype: str) -> dict:
    model, inputs, dynamic = bench.MODELS[name]()
    model = model.eval().to(getattr(torch, dtype))
    row: dict = {"model": name, "dtype": dtype}
    for providers in ("any", "cuda"):
        onx = to_onnx(model, (), inputs, dynamic_shapes=dynamic, optimize="onnxruntime", as_ir=True,
                      providers=providers)
        row[f"to_onnx {providers}"] = counts(onx)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, (), kwargs=inputs, dynamic_shapes=dynamic, dynamo=True, verbose=False)
        fused, _ = ort_fusions.optimize_for_ort(ir.from_proto(ir.to_proto(program.model)))
        row["official fused"] = counts(fused)
    except Exception as e:  # noqa: BLE001  (the official exporter's failure is a result)
        row["official fused"] = f"fails: {type(e).__name__}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="llama,gpt2,bert")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            rows.append(measure(name, dtype))
            print(json.dumps(rows[-1]), flush=True)
    columns = ("to_onnx any", "to_onnx cuda", "official fused")
    print("\n| model | dtype | " + " | ".join(f"{c} (nodes, Casts)" for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for r in rows:
        print(f"| {r['model']} | {r['dtype']} | " + " | ".join(str(r[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
