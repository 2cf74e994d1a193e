"""Training across processes: step time and peak memory per rank of ``OrtBackend`` against eager PyTorch, under DDP
and FSDP2, on 2 and 4 gloo processes (CPU).

Run: ``python benchmarks/bench_distributed.py [--worlds 2,4] [--models mlp,llama] [--wraps ddp,fsdp] [--steps 10]
[--warmup 3] [--json out.json]``.

Each (world size, model, wrapper, mode) runs in fresh processes (``torch.multiprocessing.spawn``): a step is
``zero_grad``, forward, loss, backward (gradients all-reduced by DDP, reduce-scattered by FSDP2), AdamW step; the
first ``--warmup`` steps (compilation included) are not timed, the median of the next ``--steps`` is, on each rank.
Peak memory is each rank's peak resident set (``ru_maxrss``) minus the same figure once the model is wrapped and the
batch exists. A row gives the slowest rank's median and the largest rank's peak; ratios are backend / eager in the
same run on the same machine, and the losses of both modes are compared on every rank at every step. With more
processes than cores, the ranks share the cores: the figures then measure the machine as much as the backend.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

MODELS = ("mlp", "llama")
WRAPS = ("ddp", "fsdp")
WIDTH = 256  # 1.3 MB of parameters: DDP splits them in two buckets (its first holds 1 MB)


def build(name: str):
    """The model (train mode) and a function giving rank ``rank``'s batch of step ``step``."""
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        layers: list = []
        for _ in range(5):
            layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers)
        return model, lambda rank, step: torch.randn(64, WIDTH, generator=torch.Generator().manual_seed(100 * rank + step))
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config)
    return model, lambda rank, step: torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(100 * rank + step))


def _loss(name: str, net, batch):
    return net(input_ids=batch, labels=batch).loss if name == "llama" else net(batch).pow(2).mean()


def _wrap(model, how: str):
    import torch

    if how == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard

    return fully_shard(model)


def _worker(rank: int, world: int, name: str, how: str, mode: str, steps: int, warmup: int, folder: str) -> None:
    import torch
    import torch.distributed as dist

    from experimental.torch_interpreter.testing.processes import finish, join_gloo, left_on_error

    join_gloo(rank, world, folder, timeout_s=300)
    with left_on_error():
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        model, batch = build(name)
        net = _wrap(model, how)
        backend = None
        if mode == "aten2onnx":
            from experimental.torch_interpreter.training import OrtBackend

            backend = OrtBackend(providers="cpu")
            net = backend.compile(net)
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times, losses = [], []
        for step in range(warmup + steps):
            x = batch(rank, step)
            dist.barrier()
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = _loss(name, net, x)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step >= warmup:
                times.append(time.perf_counter() - start)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        row = {
            "rank": rank, "step_ms": 1000 * statistics.median(times), "peak_mb": max(peak - base, 0) / 1024,
            "losses": losses,
            "graphs": [[g.kind, g.runs_in] for g in backend.graphs] if backend is not None else [],
        }
    finish(rank, folder, row)


def run(world: int, name: str, how: str, mode: str, steps: int, warmup: int) -> list[dict]:
    """One configuration in ``world`` fresh processes: each rank's figures."""
    import torch

    from experimental.torch_interpreter.testing.processes import read_results

    with tempfile.TemporaryDirectory() as folder:
        torch.multiprocessing.spawn(_worker, args=(world, name, how, mode, steps, warmup, folder), nprocs=world)
        return read_results(folder, world)


def _agree(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-4 * max(1.0, abs(y)) for x, y in zip(a, b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--wraps", default=",".join(WRAPS))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    print("| processes | model | wrapper | eager (ms) | backend (ms) | time ratio | eager peak (MB) | "
          "backend peak (MB) | memory ratio | losses agree | graphs in onnxruntime |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for world in (int(w) for w in args.worlds.split(",")):
        for name in args.models.split(","):
            for how in args.wraps.split(","):
                eager = run(world, name, how, "eager", args.steps, args.warmup)
                compiled = run(world, name, how, "aten2onnx", args.steps, args.warmup)
                e_ms, c_ms = max(r["step_ms"] for r in eager), max(r["step_ms"] for r in compiled)
                e_mb, c_mb = max(r["peak_mb"] for r in eager), max(r["peak_mb"] for r in compiled)
                agree = all(_agree(c["losses"], e["losses"]) for c, e in zip(compiled, eager))
                graphs = [g for r in compiled for g in r["graphs"]]
                in_ort = sum(g[1] == "onnxruntime" for g in graphs)
                print(f"| {world} | {name} | {how} | {e_ms:.1f} | {c_ms:.1f} | {c_ms / e_ms:.2f} | {e_mb:.0f} | "
                      f"{c_mb:.0f} | {c_mb / max(e_mb, 1):.2f} | {'yes' if agree else 'NO'} | "
                      f"{in_ort}/{len(graphs)} |", flush=True)
                rows.append({"world": world, "model": name, "wrap": how, "eager": eager, "aten2onnx": compiled,
                             "losses_agree": agree})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["losses_agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
