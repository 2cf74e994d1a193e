"""ultralytics YOLO through ``to_onnx`` and through ultralytics' own ``export(format="onnx", dynamic=True)``, side by
side in the same run.

For each configuration (random weights, no download): the model runs once in eager mode at 2x3x256x320, then
``to_onnx`` exports it with the batch, height and width dynamic, and ultralytics exports the same weights with
``dynamic=True`` (its TorchScript-based exporter, after fusing each batch normalization into its convolution).
Each ONNX model runs in onnxruntime's CPU provider at 2x3x256x320, 1x3x320x224 and 3x3x160x160 and its first output
(the decoded predictions) is compared with eager PyTorch (the unfused model): ok within 1e-3 of the largest eager
value at the three sizes. Columns: ok, nodes, export seconds, latency (median of 10 runs at 1x3x320x320)::

    python benchmarks/yolo_zoo.py
    python benchmarks/yolo_zoo.py --configs yolo11n.yaml,yolo11n-seg.yaml --json yolo.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import tempfile
import time
import warnings

CONFIGS = ["yolov8n.yaml", "yolov8n-seg.yaml", "yolov8n-pose.yaml", "yolo11n.yaml", "yolo11n-seg.yaml",
           "yolo11n-pose.yaml", "yolo11n-obb.yaml", "yolo26n.yaml"]
SIZES = [(2, 3, 256, 320), (1, 3, 320, 224), (3, 3, 160, 160)]
TOL = 1e-3


def _measure(path_or_proto, reference, torch) -> dict:
    import numpy as np
    import onnxruntime as ort
    from torch.utils._pytree import tree_leaves

    data = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    errors = []
    g = torch.Generator().manual_seed(1)
    for shape in SIZES:
        x = torch.rand(*shape, generator=g)
        with torch.no_grad():
            want = reference(x)
        want = next(t for t in tree_leaves(want) if isinstance(t, torch.Tensor)).numpy()  # the predictions
        got = sess.run(None, {name: x.numpy()})[0]
        errors.append(float(np.abs(got - want).max()) / float(np.abs(want).max()) if got.shape == want.shape
                      else math.inf)
    feed = {name: torch.rand(1, 3, 320, 320, generator=g).numpy()}
    times = []
    for _ in range(11):
        begin = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - begin)
    return {"ok": all(e <= TOL for e in errors), "errors": errors, "latency_ms": 1000 * statistics.median(times[1:])}


def one(config: str, folder: str) -> dict:
    import onnx
    import torch
    from ultralytics import YOLO

    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter.testing.check import count_nodes

    torch.manual_seed(0)
    yolo = YOLO(config)
    model = yolo.model.eval()
    reference = copy.deepcopy(model)
    with torch.no_grad():
        model(torch.rand(*SIZES[0]))
    result: dict = {"config": config}
    dyn = torch.export.Dim.DYNAMIC
    begin = time.perf_counter()
    try:
        with torch.no_grad():
            onx = to_onnx(model, (torch.rand(*SIZES[0]),), dynamic_shapes=({0: dyn, 2: dyn, 3: dyn},))
        result["ours"] = {"export_s": time.perf_counter() - begin, "nodes": count_nodes(onx.graph),
                          **_measure(onx, reference, torch)}
    except Exception as e:  # noqa: BLE001  (the failure is the result)
        result["ours"] = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    begin = time.perf_counter()
    try:
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            path = yolo.export(format="onnx", dynamic=True, imgsz=(256, 320), simplify=False, verbose=False)
        finally:
            os.chdir(cwd)
        path = os.path.join(folder, path) if not os.path.isabs(path) else path
        result["ultralytics"] = {"export_s": time.perf_counter() - begin,
                                 "nodes": count_nodes(onnx.load(path).graph), **_measure(path, reference, torch)}
    except Exception as e:  # noqa: BLE001
        result["ultralytics"] = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    return result


def table(results: list[dict]) -> str:
    rows = ["| config | ok ours / ultralytics | nodes | export s | latency ms (1x3x320x320) |", "|---|---|---|---|---|"]
    for r in results:
        o, u = r["ours"], r["ultralytics"]

        def pair(key: str, fmt: str) -> str:
            a, b = o.get(key), u.get(key)
            text = " / ".join("-" if v is None else format(v, fmt) for v in (a, b))
            return text + (f" ({a / b:.2f}x)" if a is not None and b else "")

        rows.append(f"| {r['config']} | {'yes' if o.get('ok') else 'no'} / {'yes' if u.get('ok') else 'no'} | "
                    f"{pair('nodes', 'd')} | {pair('export_s', '.1f')} | {pair('latency_ms', '.1f')} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated ultralytics configurations")
    parser.add_argument("--json", default="", help="write the results there too")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for config in args.configs.split(","):
            results.append(one(config, folder))
            print(table(results[-1:]).splitlines()[-1], flush=True)
    print(table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
