"""The vision zoo: every torchvision builder through ``to_onnx`` and ``torch.onnx.export(..., dynamo=True)``, side
by side in the same run.

For each model of ``torchvision.models.list_models()`` (classification, segmentation, video, optical flow;
detection goes through ``bypass_export_some_errors(patch_torchvision=True)`` for ``to_onnx`` and as is for the
official exporter): random weights, eval mode, exported on a batch of 2 with the batch, height and width dynamic
(the batch only for models that take one image size, found by running eager at the second size first). Each
ONNX model is then run by onnxruntime's CPU provider on the example and on a second size, and compared with
eager (max abs difference, relative to the largest eager value). A model is ``ok`` when it exports and matches
eager within 1e-3 relative at both sizes. Columns: ok, nodes (every graph, If branches included), export seconds,
onnxruntime latency (median of 5 runs at the example's size) for each exporter, and the ratios ours / official.

``--source timm`` takes one model per timm family instead (a module of ``timm.models``, its smallest; height and
width 32 pixels fewer at the second size). ``--source transformers`` takes transformers' vision and audio models
(DETR, RT-DETR, OWL-ViT, SAM, ViT, DINOv2, Swin, ConvNeXt, SegFormer, MobileViT, Whisper's encoder, Wav2Vec2) from
the small random configs of ``experimental/torch_interpreter/testing/transformers_vision.py``, with the axes each
model allows declared dynamic.

Each model runs in its own process (a crash or a hang costs that model only)::

    python benchmarks/vision_zoo.py                                   # every builder up to 100 M parameters
    python benchmarks/vision_zoo.py --models resnet18,vit_b_16 --json zoo.json
    python benchmarks/vision_zoo.py --max-params 30 --timeout 600     # the smaller ones
    python benchmarks/vision_zoo.py --json zoo.json --rst _doc/vision_zoo.rst --render-only   # the docs page
    python benchmarks/vision_zoo.py --source timm --max-params 30 --json timm.json --rst _doc/vision_zoo_timm.rst
    python benchmarks/vision_zoo.py --source transformers --json hf.json --rst _doc/vision_zoo_transformers.rst

Needs torchvision (README: on a CPU build of torch, ``bash ../shared/vision/torchvision_cpu.sh``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

#: builders needing arguments of their own (GoogLeNet and Inception without auxiliary heads, Inception at 299)
EXTRA = {"googlenet": {"aux_logits": False, "init_weights": True}, "inception_v3": {"aux_logits": False,
                                                                                    "init_weights": True}}
SIZES = {"inception_v3": (299, 299)}
TOL = 1e-3


def _kwargs(name: str) -> dict:
    """Random weights everywhere: ``weights_backbone=None`` too where the builder has it (else it downloads)."""
    import inspect

    from torchvision.models import get_model_builder

    extra = dict(EXTRA.get(name, {}), weights=None)
    if "weights_backbone" in inspect.signature(get_model_builder(name)).parameters:
        extra["weights_backbone"] = None
    return extra


def _inputs(name: str, kind: str, torch: Any) -> tuple[list, list, Any]:
    """The example and the second input of a model, and its dynamic shapes (None: decided by the caller)."""
    g = torch.Generator().manual_seed(0)
    h, w = SIZES.get(name, (224, 224))
    if kind == "video":
        return [torch.randn(2, 3, 8, 112, 112, generator=g)], [torch.randn(1, 3, 8, 96, 128, generator=g)], None
    if kind == "optical_flow":
        a, b = torch.randn(2, 3, 128, 160, generator=g), torch.randn(2, 3, 128, 160, generator=g)
        return [a, b], [torch.randn(1, 3, 160, 128, generator=g), torch.randn(1, 3, 160, 128, generator=g)], None
    if kind == "detection":
        return [[torch.rand(3, 160, 200, generator=g)]], [[torch.rand(3, 200, 150, generator=g)]], None
    return [torch.randn(2, 3, h, w, generator=g)], [torch.randn(1, 3, h - 64, w - 32, generator=g)], None


def _flat(value: Any, torch: Any) -> list:
    from torch.utils._pytree import tree_leaves

    return [t.detach().numpy() for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _feeds(sess: Any, inputs: list, torch: Any) -> dict:
    return dict(zip([i.name for i in sess.get_inputs()], _flat(inputs, torch)))


def _run(onx: Any, model: Any, sets: list[list], torch: Any) -> dict:
    """Errors relative to the largest eager value at each input set, the latency on the first."""
    import numpy as np
    import onnxruntime as ort

    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    errors = []
    for inputs in sets:
        with torch.no_grad():
            expected = _flat(model(*inputs), torch)
        got = sess.run(None, _feeds(sess, inputs, torch))
        if len(got) != len(expected) or any(a.shape != b.shape for a, b in zip(got, expected)):
            errors.append(float("inf"))
            continue
        scale = max([float(np.abs(e).max()) for e in expected if e.size and e.dtype.kind == "f"] + [1e-6])
        errors.append(max([float(np.abs(a.astype(np.float64) - b).max()) / scale for a, b in zip(got, expected)
                           if a.size] + [0.0]))
    feeds = _feeds(sess, sets[0], torch)
    times = []
    for _ in range(6):
        begin = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - begin)
    return {"errors": errors, "latency_ms": 1000 * statistics.median(times[1:])}


def _dims(kind: str, inputs: list, torch: Any, fixed: bool) -> Any:
    dyn = torch.export.Dim.DYNAMIC
    if kind == "detection":
        return ([{1: dyn, 2: dyn}],)
    axes = {0: dyn} if fixed else ({0: dyn, 2: dyn, 3: dyn} if kind != "video" else {0: dyn, 3: dyn, 4: dyn})
    return tuple(dict(axes) for _ in inputs)


def _timm_model(name: str, torch: Any) -> tuple[Any, list, list]:
    """A timm model (``timm:<name>``) with random weights, its example (batch 2 at its default input size) and a
    second input (batch 1, 32 pixels fewer in height and width)."""
    import timm

    model = timm.create_model(name, pretrained=False).eval()
    _, h, w = model.pretrained_cfg.get("input_size", (3, 224, 224))
    g = torch.Generator().manual_seed(0)
    return model, [torch.randn(2, 3, h, w, generator=g)], [torch.randn(1, 3, h - 32, w - 32, generator=g)]


def one(name: str) -> dict:
    """Exports ``name`` (a torchvision builder, or ``timm:<name>``) both ways and runs both graphs; one dict of
    results."""
    import torch

    from experimental.torch_interpreter import bypass_export_some_errors, to_onnx
    from experimental.torch_interpreter.testing.check import count_nodes

    logging.getLogger("torch.fx.experimental.symbolic_shapes").setLevel(logging.ERROR)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    hf_dims = None
    if name.startswith("timm:"):
        import timm as library

        kind = "classification"
        model, example, second = _timm_model(name[5:], torch)
    elif name.startswith("hf:"):
        import transformers as library

        from experimental.torch_interpreter.testing.transformers_vision import ZOO

        kind = "transformers"
        model, example, second, hf_dims = ZOO[name[3:]]()
    else:
        import torchvision as library
        from torchvision.models import get_model, get_model_builder

        module = get_model_builder(name).__module__
        kind = next((k for k in ("detection", "segmentation", "video", "optical_flow") if f".{k}" in module),
                    "classification")
        model = get_model(name, **_kwargs(name)).eval()
        example, second, _ = _inputs(name, kind, torch)
    params = sum(p.numel() for p in model.parameters())
    fixed = False
    try:
        with torch.no_grad():
            model(*second)
    except Exception:  # noqa: BLE001  (a model of one image size: the batch only is dynamic)
        fixed = True
        second = [torch.randn(1, *x.shape[1:]) for x in example]
    dims = hf_dims if hf_dims is not None else _dims(kind, example, torch, fixed)
    # the official exporter takes torch.export's Dim objects, not names; forward(*args): one tuple of them
    official_dims = dims if hf_dims is None else (tuple({a: torch.export.Dim.DYNAMIC for a in d} for d in hf_dims),)
    result: dict[str, Any] = {"model": name, "kind": kind, "params_m": params / 1e6, "fixed_size": fixed}
    for exporter in ("ours", "official"):
        begin = time.perf_counter()
        try:
            with torch.no_grad():
                if exporter == "ours":
                    with bypass_export_some_errors(patch_torchvision=kind == "detection"):
                        onx = to_onnx(model, tuple(example), dynamic_shapes=dims)
                else:
                    onx = torch.onnx.export(model, tuple(example), dynamic_shapes=official_dims,
                                            dynamo=True, verbose=False).model_proto
            seconds = time.perf_counter() - begin
            run = _run(onx, model, [example, second], torch)
            ok = all(e <= TOL for e in run["errors"])
            result[exporter] = {"ok": ok, "nodes": count_nodes(onx.graph), "export_s": seconds, **run}
            if not ok:
                result[exporter]["error"] = f"differs from eager: {run['errors']}"
        except Exception as e:  # noqa: BLE001  (the failure is the result)
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
            message = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:200]
            result[exporter] = {"ok": False, "error": message, "export_s": time.perf_counter() - begin}
    result[library.__name__] = library.__version__
    return result


def _names(args: argparse.Namespace) -> list[str]:
    if args.models:
        return args.models.split(",")
    if args.source == "timm":
        return _timm_families(args.max_params)
    if args.source == "transformers":
        from experimental.torch_interpreter.testing.transformers_vision import ZOO

        return [f"hf:{name}" for name in ZOO]
    import torchvision
    from torchvision.models import get_model_builder

    names = []
    for name in torchvision.models.list_models():
        module = get_model_builder(name).__module__
        if ".quantization" in module:
            continue
        names.append(name)
    return names


def _table(results: list[dict]) -> str:
    rows = ["| model | params (M) | ours ok | official ok | nodes ours / official | export s ours / official | "
            "latency ms ours / official | note |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "skipped" in r:
            rows.append(f"| {r['model']} | {r.get('params_m', 0):.0f} | | | | | | {r['skipped']} |")
            continue
        o, f = r.get("ours", {}), r.get("official", {})

        def pair(key: str, fmt: str) -> str:
            a, b = o.get(key), f.get(key)
            text = " / ".join("-" if v is None else format(v, fmt) for v in (a, b))
            if a is not None and b:
                text += f" ({a / b:.2f}x)"
            return text

        note = "; ".join(f"{k}: {v['error']}" for k, v in (("ours", o), ("official", f)) if v.get("error"))
        rows.append(f"| {r['model']} | {r['params_m']:.1f} | {'yes' if o.get('ok') else 'no'} | "
                    f"{'yes' if f.get('ok') else 'no'} | {pair('nodes', 'd')} | {pair('export_s', '.1f')} | "
                    f"{pair('latency_ms', '.1f')} | {note.replace('|', '/')} |")
    both = [r for r in results if r.get("ours", {}).get("ok") and r.get("official", {}).get("ok")]
    ours = sum(bool(r.get("ours", {}).get("ok")) for r in results)
    official = sum(bool(r.get("official", {}).get("ok")) for r in results)
    rows.append("")
    run = sum("skipped" not in r for r in results)
    behind = [r["model"] for r in results if r.get("official", {}).get("ok") and not r.get("ours", {}).get("ok")]
    rows.append(f"ok: ours {ours}, official {official} of the {run} run ({len(results) - run} skipped); "
                f"official ok and ours not: {', '.join(behind) if behind else 'none'}")
    if both:
        import math

        for key in ("nodes", "export_s", "latency_ms"):
            ratios = [r["ours"][key] / r["official"][key] for r in both if r["official"][key]]
            mean = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
            rows.append(f"{key} ours / official on the {len(both)} both convert: geometric mean {mean:.2f}, "
                        f"max {max(ratios):.2f}")
    return "\n".join(rows)


def render_rst(results: list[dict], command: str, note: str = "") -> str:
    """The docs page of the zoo: a sentence of totals, one row per model (ok both ways, nodes, export seconds,
    latency, the failure), the command that made it."""
    summary = _table(results).split("\n\n", 1)[1].splitlines()
    timm = any(r["model"].startswith("timm:") for r in results)
    hf = any(r["model"].startswith("hf:") for r in results)
    title = "Vision zoo: timm" if timm else "Vision zoo: transformers" if hf else "Vision zoo"
    lines = [".. generated by benchmarks/vision_zoo.py, do not edit", "", title, "=" * len(title), ""]
    if hf:
        lines += ["transformers' vision and audio models (detection, segmentation, classification, speech encoders) "
                  "from small random configs (``testing/transformers_vision.py``: no model hub; noise on every weight "
                  "so that DETR-like queries do not all score the same), exported by "
                  ":func:`~experimental.torch_interpreter.to_onnx` and by ``torch.onnx.export(..., dynamo=True)`` in "
                  "the same run with the axes each model allows declared dynamic (batch, height and width; numbers of "
                  "texts and images for OWL-ViT, of points for SAM, of samples for Wav2Vec2), run by onnxruntime's CPU "
                  "provider at the example's sizes and at other ones and compared with eager PyTorch (ok: within 1e-3 "
                  "of the largest eager value at both). RT-DETR's row compares its logits and the scores of every "
                  "anchor: with random weights its anchors score within ~1e-6 of each other, so the queries its "
                  "top-k keeps depend on float32 noise. Nodes count every graph, ``If`` branches included.", ""]
    if timm:
        lines += ["One model per timm family (a module of ``timm.models``), its smallest, with random weights, exported "
                  "by :func:`~experimental.torch_interpreter.to_onnx` and by ``torch.onnx.export(..., dynamo=True)`` in "
                  "the same run (batch, height and width dynamic; the batch only for models of one image size), run "
                  "by onnxruntime's CPU provider at the example's size (batch 2, the model's default input size) and "
                  "at a second one (batch 1, 32 pixels fewer each way) and compared with eager PyTorch (ok: within "
                  "1e-3 of the largest eager value at both). Nodes count every graph, ``If`` branches included. "
                  "Latency was measured while other work ran on the same 2 cores: read it as indicative only.", ""]
    lines += [] if timm or hf else [
             "torchvision's builders with random weights, exported by :func:`~experimental.torch_interpreter.to_onnx` "
             "and by ``torch.onnx.export(..., dynamo=True)`` in the same run (batch, height and width dynamic; the "
             "batch only for models of one image size; detection models under "
             "``bypass_export_some_errors(patch_torchvision=True)`` for ``to_onnx``), run by onnxruntime's CPU "
             "provider at the example's size and at a second one and compared with eager PyTorch (ok: within 1e-3 "
             "of the largest eager value at both). Nodes count every graph, ``If`` branches included.", ""]
    lines += [f"* {line}" for line in summary] + ["", ".. list-table::", "   :header-rows: 1", "   :class: perf-table", "",
              "   * - model", "     - params (M)", "     - to_onnx", "     - official", "     - nodes",
              "     - export s", "     - latency ms", "     - failure"]
    for r in results:
        if "skipped" in r:
            cells = [r["model"], f"{r.get('params_m', 0):.0f}", "", "", "", "", "", r["skipped"]]
        else:
            o, f = r.get("ours", {}), r.get("official", {})

            def pair(key: str, fmt: str) -> str:  # "n/a", not "-": a cell starting with "- " is a bullet list
                return " / ".join("n/a" if d.get(key) is None else format(d[key], fmt) for d in (o, f))

            failure = "; ".join(f"{k}: {v['error']}" for k, v in (("to_onnx", o), ("official", f)) if v.get("error"))
            cells = [r["model"], f"{r['params_m']:.1f}", "ok" if o.get("ok") else "no", "ok" if f.get("ok") else "no",
                     pair("nodes", "d"), pair("export_s", ".1f"), pair("latency_ms", ".1f"), failure]
        lines.append(f"   * - {cells[0]}")
        cells[-1] = f"``{cells[-1].replace('`', '')}``" if cells[-1] else ""  # literal: no markup in messages
        lines += [f"     - {c}" if c else "     -" for c in cells[1:]]
    lines += ["", "Nodes, export time and latency read ``to_onnx / official``." + (f" {note}" if note else ""),
              "Made by::", "", f"    {command}", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="", help="comma-separated builders: torchvision's names, timm:<name> "
                        "for timm's (default: every one of --source)")
    parser.add_argument("--source", default="torchvision", choices=("torchvision", "timm", "transformers"),
                        help="torchvision: every builder; timm: one model per family, its smallest; transformers: "
                             "the vision and audio models of testing/transformers_vision.py")
    parser.add_argument("--max-params", type=float, default=100, help="skip models above, in millions (100)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per model (900)")
    parser.add_argument("--json", default="", help="write the results there too")
    parser.add_argument("--rst", default="", help="write the docs page (reStructuredText) there")
    parser.add_argument("--render-only", action="store_true", help="only render --json's stored results as --rst")
    parser.add_argument("--command", default="", help="with --render-only: the command that made the results")
    parser.add_argument("--note", default="", help="a sentence added under the table")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    command = "python benchmarks/vision_zoo.py " + " ".join(sys.argv[1:])
    if args.render_only:
        with open(args.json, encoding="utf-8") as f:
            results = json.load(f)
        with open(args.rst, "w", encoding="utf-8") as f:
            f.write(render_rst(results, args.command or command, args.note))
        return
    results = []
    for name in _names(args):
        params = _params(name)
        if params > args.max_params:
            results.append({"model": name, "params_m": params, "skipped": f"above {args.max_params:g} M parameters"})
            continue
        try:
            done = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True,
                                  timeout=args.timeout)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            results.append(json.loads(lines[-1]) if lines else
                           {"model": name, "params_m": params, "skipped": f"crashed: {done.stderr[-200:]}"})
        except subprocess.TimeoutExpired:
            results.append({"model": name, "params_m": params, "skipped": f"over {args.timeout} s"})
        print(_table(results[-1:]).splitlines()[2], flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    print(_table(results))
    if args.rst:
        with open(args.rst, "w", encoding="utf-8") as f:
            f.write(render_rst(results, command, args.note))


def _timm_families(max_params: float) -> list[str]:
    """One model per timm family (a module of ``timm.models``): its smallest, counted on the meta device, as
    ``timm:<name>``; a family whose models are all above ``max_params`` millions gives its smallest anyway (the
    run skips it and says so)."""
    import timm
    import torch

    names = []
    for family in timm.list_modules():
        sizes = []
        for name in timm.list_models(module=family):
            try:
                with torch.device("meta"):
                    model = timm.create_model(name, pretrained=False)
                sizes.append((sum(p.numel() for p in model.parameters()), name))
            except Exception:  # noqa: BLE001  (a builder that cannot be made on the meta device is left out)
                continue
        if sizes:
            names.append("timm:" + min(sizes)[1])
    return names


def _params(name: str) -> float:
    """Parameters of a builder in millions, from a model on the meta device (no memory; on the CPU for the
    builders that initialise weights from a tensor's data, RegNet-Y)."""
    import torch

    if name.startswith("hf:"):
        return 0.0  # small random configs
    if name.startswith("timm:"):
        import timm

        with torch.device("meta"):
            model = timm.create_model(name[5:], pretrained=False)
        return sum(p.numel() for p in model.parameters()) / 1e6
    from torchvision.models import get_model

    try:
        with torch.device("meta"):
            model = get_model(name, **_kwargs(name))
    except NotImplementedError:
        model = get_model(name, **_kwargs(name))
    return sum(p.numel() for p in model.parameters()) / 1e6


if __name__ == "__main__":
    os.environ.setdefault("TMPDIR", tempfile.gettempdir())
    main()
