"""Training sweep: transformers architectures built tiny (random weights, dropout and drop-path off), trained 4 AdamW
steps with ``torch.compile(model, backend=OrtBackend())`` and with eager PyTorch from the same weights and batches.

Each (architecture, mode) runs in a subprocess of its own with a timeout. Per architecture: the status (``ok``: every
graph in onnxruntime and the first step's loss and gradients equal to eager's; ``fallback``: a graph ran eagerly, the op
named; ``precision``: the gradients differ, but eager float32 is itself as far from the same step in float64 (the
backend within 3 times the relative L2 error of eager runs, one with the weights as they are and 3 with them moved by
one ulp, per parameter); ``mismatch``; ``error``: the backend raised where eager runs; ``timeout``; ``skip``: the model
cannot be built or fails eagerly), the first step's time, the time the backend spent translating graphs and creating
sessions over the 4 steps, and the median time of the next steps and the peak memory (resident set growth) as ratios to
eager's::

    python benchmarks/train_zoo.py                                # the sample below (about 25 minutes)
    python benchmarks/train_zoo.py --all --limit 40               # the first 40 architectures of the sweep
    python benchmarks/train_zoo.py --only "llama|efficientnet"     # a few, merged into the stored results
    python benchmarks/train_zoo.py --render-only                  # the docs table from the stored results

Results go to ``benchmarks/train_zoo_results.json`` and the table to ``_doc/train_zoo.inc`` (included by the
training page).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from transformers_zoo import OVERRIDES, TASKS, architectures, inputs, shrink  # noqa: E402

RESULTS = os.path.join(HERE, "train_zoo_results.json")
TABLE = os.path.join(ROOT, "_doc", "train_zoo.inc")
STEPS = 4
TRAIN_TASKS = ("causal-lm", "masked-lm", "image-classification")
#: where the tiny shapes of the export sweep do not train well: vision models get 64 x 64 images (at 32 x 32 the
#: last batch norms see one position: float32 eager itself is far from float64), and list-valued sizes
TRAIN_OVERRIDES: dict[str, dict[str, Any]] = {
    "image-classification:*": {"image_size": 64},
    "image-classification:efficientnet": {"width_coefficient": 0.5, "depth_coefficient": 0.5, "hidden_dim": 640},
    "image-classification:swin": {"embed_dim": 32, "depths": [1, 1], "num_heads": [2, 4], "window_size": 4,
                                  "patch_size": 4},
    "image-classification:convnext": {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]},
}
#: the default sample: common decoders, the mixtures of experts, a Mamba hybrid, encoders and vision models
SAMPLE = (
    "llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_5_moe_text", "mixtral", "olmoe", "phimoe",
    "granitemoe", "deepseek_v3", "gpt2", "gpt_neox", "phi", "phi3", "gemma", "gemma2", "gemma3_text", "falcon",
    "bloom", "opt", "gptj", "codegen", "stablelm", "cohere", "granite", "olmo2", "starcoder2", "bamba", "mamba",
    "bert", "roberta", "funnel", "distilbert", "albert", "electra", "deberta-v2",
    "efficientnet", "resnet", "convnext", "vit", "mobilenet_v2", "swin", "regnet",
)


def build(task: str, model_type: str, class_name: str) -> Any:
    """The tiny model in train mode, every dropout, drop-path and layer-drop probability of its config set to 0."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers_zoo import _break_ties

    overrides = {**OVERRIDES.get(f"{task}:{model_type}", {}), **TRAIN_OVERRIDES.get(f"{task}:*", {}),
                 **TRAIN_OVERRIDES.get(f"{task}:{model_type}", {})}
    config = shrink(type(CONFIG_MAPPING[model_type]()), overrides)
    for cfg in [config, *(getattr(config, name) for name in getattr(config, "sub_configs", {}) or {})]:
        for name, value in list(vars(cfg).items()):
            if "drop" in name and isinstance(value, float):  # dropout, attn_pdrop, drop_path_rate, layerdrop
                setattr(cfg, name, 0.0)
    torch.manual_seed(0)
    model = getattr(transformers, class_name)(config)
    _break_ties(model)
    return model.train()


def loss_of(task: str, model: Any, batch: dict[str, Any]) -> Any:
    """The model's own loss (labels = the inputs, or classes), else the mean square of its first output."""
    import torch

    out = model(**batch)
    loss = getattr(out, "loss", None)
    if loss is None:
        first = out[0] if isinstance(out, tuple) else next(v for v in out.values() if isinstance(v, torch.Tensor))
        loss = first.float().square().mean()
    return loss


def batches(task: str, model: Any) -> list[dict[str, Any]]:
    import torch

    out = []
    for i in range(STEPS):
        feeds = inputs(task, model, 2, 8)  # one shape: no recompilation inside the 4 steps
        gen = torch.Generator().manual_seed(i)
        if task in ("causal-lm", "masked-lm"):
            feeds["input_ids"] = torch.randint(3, min(model.config.get_text_config().vocab_size, 1000), (2, 8),
                                               generator=gen)
            feeds["labels"] = feeds["input_ids"].clone()
        else:
            labels = getattr(model.config, "num_labels", 2)
            feeds["labels"] = torch.randint(0, labels, (2,), generator=gen)
        out.append(feeds)
    return out


def worker(task: str, model_type: str, class_name: str, mode: str, out_path: str) -> dict[str, Any]:
    """One mode's 4 steps: losses, step times, peak memory growth, the first step's gradients (saved)."""
    import warnings

    import torch

    from experimental.torch_interpreter.errors import EagerFallbackWarning
    from experimental.torch_interpreter.training import OrtBackend

    try:
        model = build(task, model_type, class_name)
        data = batches(task, model)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "detail": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    if mode == "float64":  # the reference of a difference: the first step in float64, eagerly
        model = model.double()
        data = [{k: v.double() if v.is_floating_point() else v for k, v in b.items()} for b in data[:1]]
    if mode == "threads1":  # float32's own noise: eager on one thread (another summation order in every kernel)
        torch.set_num_threads(1)
        data = data[:1]
    if mode.startswith("nudged"):  # float32's own noise: eager, every weight moved by one unit in the last place
        gen = torch.Generator().manual_seed(int(mode[len("nudged"):]))
        with torch.no_grad():
            for p in model.parameters():
                up = torch.rand(p.shape, generator=gen) < 0.5
                p.copy_(torch.nextafter(p, torch.where(up, torch.inf, -torch.inf).to(p.dtype)))
        data = data[:1]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    backend = OrtBackend(providers="cpu") if mode == "backend" else None  # eager, float64, nudged<seed>: eagerly
    run = torch.compile(model, backend=backend) if backend is not None else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, times, fallbacks = [], [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, batch in enumerate(data):
            begin = time.perf_counter()
            optimizer.zero_grad()
            loss = loss_of(task, run, batch)
            loss.backward()
            saved = time.perf_counter()
            if i == 0:  # the gradients written for the comparison: not part of the step's time
                torch.save({n: p.grad for n, p in model.named_parameters() if p.grad is not None}, out_path)
            saved = time.perf_counter() - saved
            optimizer.step()
            times.append(time.perf_counter() - begin - saved)
            losses.append(loss.item())
    fallbacks = [" ".join(str(w.message).splitlines()[:2])[:300] for w in caught
                 if issubclass(w.category, EagerFallbackWarning)]
    graphs = backend.graphs if backend is not None else []
    return {
        "status": "done",
        "losses": losses,
        "first_step_s": times[0],
        "step_s": statistics.median(times[1:]) if len(times) > 1 else times[0],
        "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
        "fallbacks": fallbacks,
        "ours_s": sum(g.translate_s + g.session_s for g in graphs),
        "graphs": len(graphs),
    }


def _subprocess(task: str, arch: str, cls: str, mode: str, grads: str, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", task, arch, cls, mode, grads]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "detail": f"more than {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"status": "error", "detail": tail[:300]}
    return json.loads(lines[-1])


def compare_grads(eager_path: str, backend_path: str) -> str | None:
    """None when the first step's gradients agree (rtol 1e-3, atol 1e-5), else the first that differs."""
    import torch

    eager, got = torch.load(eager_path), torch.load(backend_path)
    if eager.keys() != got.keys():
        return f"gradients of {sorted(set(eager) ^ set(got))[:3]}: present in one mode only"
    for name, e in eager.items():
        if not torch.allclose(got[name], e, rtol=1e-3, atol=1e-5, equal_nan=True):
            diff = (got[name] - e).abs().max().item()
            return f"gradient of {name}: max difference {diff:.3g}"
    return None


#: how much farther from float64 than eager's the backend's gradients may be where the two differ (summation
#: orders differ; a batch norm over few values amplifies both runs' roundings alike)
FLOAT64_FACTOR = 3.0
#: eager runs with every weight moved by one unit in the last place: float32's own noise on the gradients
NUDGES = 3


def closer_to_float64(eager_paths: list[str], backend_path: str, float64_path: str) -> str:
    """Where the gradients differ: a text starting with ``against float64`` when, for every parameter, the
    backend's error against the float64 step is at most :data:`FLOAT64_FACTOR` times the largest of eager
    float32's runs (``eager_paths``: the run itself, on one thread, and with the weights moved by one ulp),
    else the first parameter that is not.

    The error of a gradient is its relative L2 distance to float64's, not its largest difference: in a deep ReLU
    network a pre-activation within rounding of 0 takes the other side in one float32 run and not in another, and
    that position of the gradient changes by its full size; which positions do depends on every kernel's rounding.
    Eager float32 whose first convolution's output is moved by one unit in the last place fails a largest-difference
    test against its own run in 3 seeds of 6 (ResNet) and 6 of 6 (RegNet, up to 1187x), measured."""
    import torch

    eagers, got, ref = [torch.load(p) for p in eager_paths], torch.load(backend_path), torch.load(float64_path)
    if got.keys() != ref.keys():  # a gradient None in one mode only is no rounding
        return f"gradients of {sorted(set(got) ^ set(ref))[:3]}: present in one mode only"
    worst = 0.0
    for name, r in ref.items():
        norm = r.norm().item()
        err_e = max((eager[name].double() - r).norm().item() for eager in eagers)
        err_g = (got[name].double() - r).norm().item()
        if err_g > FLOAT64_FACTOR * err_e + 1e-6 * norm:
            return (f"gradient of {name}: {err_g / max(norm, 1e-30):.3g} from float64 (relative L2), eager float32 "
                    f"{err_e / max(norm, 1e-30):.3g}")
        if norm > 1e-6:
            worst = max(worst, err_e / norm)
    return (f"against float64, the backend's gradients are within 3x eager float32's relative L2 error ({len(eagers)} "
            f"eager runs: the run, one thread, the weights moved by one ulp; eager's worst: {worst:.2%})")


def loss_closer_to_float64(eager_losses: list[float], got: float, reference: float) -> str:
    """Where the first losses differ: a text starting with ``against float64`` when the backend's first loss is at
    most :data:`FLOAT64_FACTOR` times as far from the float64 step's as the farthest of eager float32's runs (the run
    itself, one thread, the weights moved by one ulp), else the figures."""
    err_e = max(abs(e - reference) for e in eager_losses)
    spread = max(eager_losses) - min(eager_losses)
    err_g = abs(got - reference)
    if err_g > FLOAT64_FACTOR * err_e + 1e-7 * abs(reference):
        return (f"first loss {got!r}: {err_g:.3g} from float64's {reference!r}, eager float32 {err_e:.3g} (spread of "
                f"{len(eager_losses)} eager runs {spread:.3g})")
    return (f"against float64, the backend's first loss is within 3x eager float32's error ({err_g:.3g} vs {err_e:.3g};"
            f" {len(eager_losses)} eager runs: the run, one thread, weights moved by one ulp; their spread {spread:.3g})")


def run_one(task: str, arch: str, cls: str, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = {m: os.path.join(tmp, f"{m}.pt") for m in ("eager", "backend")}
        eager = _subprocess(task, arch, cls, "eager", paths["eager"], timeout)
        row: dict[str, Any] = {"task": task, "arch": arch, "class": cls}
        if eager["status"] != "done":
            return {**row, "status": "skip", "detail": f"eager: {eager.get('detail', eager['status'])}"}
        got = _subprocess(task, arch, cls, "backend", paths["backend"], timeout)
        if got["status"] != "done":
            return {**row, "status": got["status"], "detail": got.get("detail", "")}
        row.update(
            first_step_s=round(got["first_step_s"], 2), ours_s=round(got["ours_s"], 2),
            step_ratio=round(got["step_s"] / eager["step_s"], 2),
            memory_ratio=round(got["peak_mb"] / eager["peak_mb"], 2) if eager["peak_mb"] > 1 else None,
        )
        if got["fallbacks"]:
            return {**row, "status": "fallback", "detail": got["fallbacks"][0]}
        first = abs(got["losses"][0] - eager["losses"][0]) <= 1e-4 * max(1.0, abs(eager["losses"][0]))
        diff = compare_grads(paths["eager"], paths["backend"]) if first else (
            f"first loss {got['losses'][0]!r}, eager {eager['losses'][0]!r}")
        if not diff:
            return {**row, "status": "ok", "detail": ""}
        paths["float64"] = os.path.join(tmp, "float64.pt")
        reference = _subprocess(task, arch, cls, "float64", paths["float64"], timeout)
        if reference["status"] == "done":
            eagers, first_losses = [paths["eager"]], [eager["losses"][0]]
            for mode in ["threads1", *(f"nudged{seed}" for seed in range(NUDGES))]:
                eagers.append(os.path.join(tmp, f"{mode}.pt"))
                noisy = _subprocess(task, arch, cls, mode, eagers[-1], timeout)
                if noisy["status"] != "done":
                    eagers.pop()
                else:
                    first_losses.append(noisy["losses"][0])
            verdict = (closer_to_float64(eagers, paths["backend"], paths["float64"]) if first else
                       loss_closer_to_float64(first_losses, got["losses"][0], reference["losses"][0]))
            if verdict.startswith("against float64"):
                return {**row, "status": "precision", "detail": f"{diff}; {verdict}"}
            diff = verdict
        return {**row, "status": "mismatch", "detail": diff}


def render(results: dict[str, Any]) -> str:
    """The reST table of the stored results, with the counts."""
    rows = sorted(results.values(), key=lambda r: (r["task"], r["arch"]))
    rows = [r for r in rows if r["status"] != "skip"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    firsts = sorted(r["first_step_s"] for r in rows if "first_step_s" in r)
    ours = sorted(r["ours_s"] for r in rows if "ours_s" in r)
    out = [
        f"{len(rows)} architectures: " + ", ".join(f"{n} ``{k}``" for k, n in sorted(counts.items())) + ".",
        f"First step: median {statistics.median(firsts):.1f} s (dynamo, AOTAutograd, the translation and the "
        f"sessions); the translation and the sessions of all the graphs of the 4 steps: median "
        f"{statistics.median(ours):.1f} s." if firsts else "",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - task",
        "     - architecture",
        "     - status",
        "     - first step (s)",
        "     - translation and sessions, 4 steps (s)",
        "     - step time / eager",
        "     - peak memory / eager",
        "     - detail",
    ]
    for r in rows:
        out += [
            f"   * - {r['task']}",
            f"     - {r['arch']}",
            f"     - {r['status']}",
            f"     - {r.get('first_step_s', '')}",
            f"     - {r.get('ours_s', '')}",
            f"     - {r.get('step_ratio', '')}",
            f"     - {r.get('memory_ratio') or ''}",
            f"     - {r.get('detail', '')[:240].replace('*', '')}",
        ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", nargs=5, metavar=("TASK", "ARCH", "CLASS", "MODE", "GRADS"), help=argparse.SUPPRESS)
    parser.add_argument("--tasks", default=",".join(TRAIN_TASKS), help=f"among {sorted(TASKS)}")
    parser.add_argument("--only", default=None, help="regular expression on the architecture names")
    parser.add_argument("--all", action="store_true", help="every architecture of the tasks, not the sample")
    parser.add_argument("--limit", type=int, default=None, help="the first N architectures")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed to one mode of one model")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    results = json.load(open(RESULTS)) if os.path.exists(RESULTS) else {}
    if not args.render_only:
        todo = [a for a in architectures(args.tasks.split(","))
                if (re.search(args.only, a[1]) if args.only else args.all or a[1] in SAMPLE)]
        for task, arch, cls in todo[: args.limit]:
            begin = time.perf_counter()
            row = run_one(task, arch, cls, args.timeout)
            results[f"{task}:{arch}"] = row
            print(f"{task:22s} {arch:24s} {row['status']:9s} {time.perf_counter() - begin:6.1f}s "
                  f"{row.get('detail', '')[:100]}", flush=True)
            with open(RESULTS, "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
    with open(TABLE, "w") as f:
        f.write(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
