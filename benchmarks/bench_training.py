"""Training-step time and peak memory: ``torch.compile(model, backend=OrtBackend())`` against eager PyTorch.

Run: ``python benchmarks/bench_training.py [--device cpu|cuda] [--sizes tiny,medium] [--steps 20] [--json out.json]``.
On a GPU (``--device cuda``) it is also the training check of the CUDA path: the losses of both modes are compared
at every step (``losses agree``), and the graphs that fell back to eager are listed in the JSON.

Each (model, size, mode) runs in a fresh process: a step is ``zero_grad``, forward, loss, backward, AdamW step;
the first ``--warmup`` steps (compilation included) are not timed, the median of the next ``--steps`` is. Peak
memory is the process's peak resident set on the CPU (``ru_maxrss``, minus the same figure measured once the model
and batch exist, so that the library and the weights do not count) and ``torch.cuda.max_memory_allocated`` plus
onnxruntime's arena on a GPU (onnxruntime allocates outside torch: its part is the device memory in use after the
steps, measured with ``torch.cuda.mem_get_info``). Ratios are backend / eager, in the same run on the same
machine; the losses of both modes are compared at the end (they must agree, else the row says so).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

MODELS = ("llama", "bert", "cnn", "function")
SIZES = {
    # hidden, layers, heads, vocab, batch, sequence (cnn: channels, blocks, -, classes, batch, image side)
    "tiny": (32, 2, 4, 64, 2, 16),
    "medium": (256, 4, 8, 2000, 4, 128),
}


def build(name: str, size: str, device: str):
    """The model (train mode), a batch and the loss function."""
    import torch
    import transformers

    hidden, layers, heads, vocab, batch, seq = SIZES[size]
    torch.manual_seed(0)
    if name == "llama":
        config = transformers.LlamaConfig(
            hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=heads // 2, vocab_size=vocab, max_position_embeddings=max(seq, 64),
        )
        model = transformers.LlamaForCausalLM(config)
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        return model.to(device).train(), ids, lambda m, x: m(input_ids=x, labels=x).loss
    if name == "bert":
        config = transformers.BertConfig(
            hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=heads,
            vocab_size=vocab, max_position_embeddings=max(seq, 64), hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, num_labels=3,
        )
        model = transformers.BertForSequenceClassification(config)
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        labels = torch.randint(0, 3, (batch,), device=device)
        return model.to(device).train(), ids, lambda m, x: m(input_ids=x, labels=labels).loss
    if name == "function":  # a custom autograd.Function: one PythonOp / PythonOpGrad pair in the graphs
        model = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), _Cube(), torch.nn.Linear(4 * hidden, 1))
        x = torch.randn(batch * seq, hidden, device=device)
        return model.to(device).train(), x, lambda m, v: m(v).pow(2).mean()
    channels = hidden // 4
    blocks = [torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU()]
    for _ in range(layers - 1):
        blocks += [torch.nn.Conv2d(channels, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
                   torch.nn.MaxPool2d(2)]
    side = seq // 2
    model = torch.nn.Sequential(*blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(channels, 10))
    images = torch.randn(batch * 4, 3, side, side, device=device)
    labels = torch.randint(0, 10, (batch * 4,), device=device)
    return model.to(device).train(), images, lambda m, x: torch.nn.functional.cross_entropy(m(x), labels)


def _cube_class():
    import torch

    class ScaledCube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.1 * x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 0.3 * grad * x**2

    return ScaledCube


def _Cube():  # noqa: N802  (a module factory)
    import torch

    cube = _cube_class()

    class Cube(torch.nn.Module):
        def forward(self, x):
            return cube.apply(x)

    return Cube()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def worker(name: str, size: str, mode: str, device: str, steps: int, warmup: int) -> dict:
    """One configuration, in this process: median step time, peak memory, losses."""
    import torch

    from experimental.torch_interpreter.training import OrtBackend

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, batch, loss_fn = build(name, size, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    backend = OrtBackend(fallback="raise") if mode == "aten2onnx" else None
    run = torch.compile(model, backend=backend) if backend is not None else model
    base = _peak_mb()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        free_before = torch.cuda.mem_get_info()[0]
    times, losses = [], []
    for i in range(warmup + steps):
        if device == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(run, batch)
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - begin)
        losses.append(loss.item())
    result = {"model": name, "size": size, "mode": mode, "device": device, "step_ms": 1e3 * statistics.median(times),
              "losses": losses}
    if device == "cuda":
        used_outside = max(0, free_before - torch.cuda.mem_get_info()[0] - torch.cuda.memory_allocated())
        result["peak_mb"] = (torch.cuda.max_memory_allocated() + used_outside) / 2**20
        result["gpu"] = torch.cuda.get_device_name()
    else:
        result["peak_mb"] = _peak_mb() - base
    if backend is not None:
        result["graphs"] = [(g.kind, g.runs_in, g.onnx_nodes) for g in backend.graphs]
    return result


def _run_worker(args: argparse.Namespace, name: str, size: str, mode: str) -> dict:
    command = [sys.executable, __file__, "--worker", f"{name},{size},{mode}", "--device", args.device,
               "--steps", str(args.steps), "--warmup", str(args.warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"model": name, "size": size, "mode": mode, "error": (done.stderr or done.stdout).strip()[-400:]}
    return json.loads(lines[-1])


def table(rows: list[dict]) -> str:
    """The markdown table of the results: one line per (model, size), ratios backend / eager."""
    out = ["| model | size | eager step (ms) | aten2onnx step (ms) | time ratio | eager peak (MB) | "
           "aten2onnx peak (MB) | memory ratio | losses agree |",
           "|---|---|---|---|---|---|---|---|---|"]
    keyed = {(r["model"], r["size"], r["mode"]): r for r in rows}
    for (name, size) in dict.fromkeys((r["model"], r["size"]) for r in rows):
        e, o = keyed.get((name, size, "eager"), {}), keyed.get((name, size, "aten2onnx"), {})
        if "error" in e or "error" in o or not e or not o:
            out.append(f"| {name} | {size} | failed: {(e.get('error') or o.get('error') or '')[-120:]} |")
            continue
        agree = all(abs(a - b) <= 1e-3 * max(1.0, abs(b)) for a, b in zip(o["losses"], e["losses"]))
        out.append(
            f"| {name} | {size} | {e['step_ms']:.1f} | {o['step_ms']:.1f} | {o['step_ms'] / e['step_ms']:.2f} | "
            f"{e['peak_mb']:.0f} | {o['peak_mb']:.0f} | {o['peak_mb'] / max(e['peak_mb'], 1e-9):.2f} | "
            f"{'yes' if agree else 'NO'} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", default="tiny,medium")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        name, size, mode = args.worker.split(",")
        print(json.dumps(worker(name, size, mode, args.device, args.steps, args.warmup)))
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("no GPU here: nothing measured on cuda")
            return 0
    rows = [
        _run_worker(args, name, size, mode)
        for size in args.sizes.split(",")
        for name in args.models.split(",")
        for mode in ("eager", "aten2onnx")
    ]
    print(f"device: {args.device}" + (f" ({rows[0].get('gpu')})" if args.device == "cuda" else ""))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
