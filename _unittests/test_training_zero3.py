"""ZeRO stage 3's way of training on several processes, through onnxruntime (two gloo processes, CPU).

A faithful stand-in of DeepSpeed's parameter partitioning (no DeepSpeed needed): each rank keeps one shard of every
parameter; a module's forward pre-hook gathers its parameters with ``all_gather`` inside a custom
``torch.autograd.Function`` whose backward reduce-scatters the gradient back to the shards (averaged over ranks),
and a forward hook releases them — the shape ORTModule gave DeepSpeed's hooks. Through the backend, each gather
is a ``PythonOp`` node of the forward graph and each reduce-scatter a ``PythonOpGrad`` node of the backward graph,
both called back on every rank; losses and the trained shards equal eager's."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.distributed as dist

from experimental.torch_interpreter.testing.processes import finish, join_gloo, left_on_error, read_results
from experimental.torch_interpreter.training import OrtBackend

WORLD = 2
STEPS = 3


class GatherParameter(torch.autograd.Function):
    """ZeRO-3's gather: the whole parameter from every rank's shard of it; the gradient reduce-scattered back."""

    calls = {"forward": 0, "backward": 0}

    @staticmethod
    def forward(ctx, shard: torch.Tensor, numel: int, *shape: int) -> torch.Tensor:
        GatherParameter.calls["forward"] += 1
        full = torch.empty(shard.numel() * dist.get_world_size(), dtype=shard.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch 2.13 renames it all_gather_single
            dist.all_gather_into_tensor(full, shard.contiguous())
        ctx.count = len(shape)
        return full[:numel].view(shape).clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        GatherParameter.calls["backward"] += 1
        world = dist.get_world_size()
        flat = grad.reshape(-1)
        size = -(-flat.numel() // world)
        flat = torch.nn.functional.pad(flat, (0, size * world - flat.numel())).contiguous()
        shard = torch.empty(size, dtype=grad.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            dist.reduce_scatter_tensor(shard, flat, op=dist.ReduceOp.SUM)
        return (shard / world, None) + (None,) * ctx.count


def partition(model: torch.nn.Module) -> torch.nn.Module:
    """Replaces every parameter by this rank's shard of it (flattened, padded to a multiple of the world size);
    hooks gather the parameters before each module's forward and release them after it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    for module in model.modules():
        shapes = {name: tuple(p.shape) for name, p in module.named_parameters(recurse=False)}
        if not shapes:
            continue
        for name in shapes:
            flat = getattr(module, name).detach().reshape(-1)
            size = -(-flat.numel() // world)
            flat = torch.nn.functional.pad(flat, (0, size * world - flat.numel()))
            delattr(module, name)
            module.register_parameter(f"{name}_shard", torch.nn.Parameter(flat[rank * size : (rank + 1) * size].clone()))

        def gather(mod, args, shapes=shapes):
            for name, shape in shapes.items():
                numel = int(torch.Size(shape).numel())
                setattr(mod, name, GatherParameter.apply(getattr(mod, f"{name}_shard"), numel, *shape))

        def release(mod, args, output, shapes=shapes):
            for name in shapes:
                setattr(mod, name, None)

        module.register_forward_pre_hook(gather)
        module.register_forward_hook(release)
    return model


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.ReLU(), torch.nn.Linear(32, 7), torch.nn.Tanh(),
        torch.nn.Linear(7, 16),
    )


def _worker(rank: int, folder: str) -> None:
    join_gloo(rank, WORLD, folder)
    with left_on_error():
        base = _model()
        result: dict = {}
        for mode in ("eager", "backend"):
            model = partition(copy.deepcopy(base))
            backend = OrtBackend(providers="cpu", fallback="raise") if mode == "backend" else None
            net = torch.compile(model, backend=backend) if backend is not None else model
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
            losses, calls = [], []
            for step in range(STEPS):
                before = dict(GatherParameter.calls)
                optimizer.zero_grad()
                x = torch.randn(8, 16, generator=torch.Generator().manual_seed(100 * rank + step))
                loss = net(x).pow(2).mean()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                calls.append({k: v - before[k] for k, v in GatherParameter.calls.items()})
            result[mode] = {
                "losses": losses,
                "calls": calls,
                "shards": [p.detach().tolist() for p in model.parameters()],
            }
            if backend is not None:
                result["graphs"] = [[g.kind, g.runs_in] for g in backend.graphs]
                nodes = [n for g in backend.graphs for n in g.graph.model.graph.node]
                result["nodes"] = sorted(n.op_type for n in nodes if n.domain == "com.microsoft")
    finish(rank, folder, result)


def test_zero3_style_gathering_trains_through_python_ops(tmp_path):
    torch.multiprocessing.spawn(_worker, args=(str(tmp_path),), nprocs=WORLD)
    parameters = 2 * 3 + 2  # three Linear and one LayerNorm, weight and bias each
    for result in read_results(str(tmp_path), WORLD):
        assert result["graphs"] == [["forward", "onnxruntime"], ["backward", "onnxruntime"]], result["graphs"]
        assert result["nodes"] == ["PythonOp"] * parameters + ["PythonOpGrad"] * parameters, result["nodes"]
        # every gather and every reduce-scatter was called back by onnxruntime, once a step, as eagerly (the first
        # step is left out: compiling runs the forward on fake tensors too)
        each_step = [{"forward": parameters, "backward": parameters}] * (STEPS - 1)
        assert result["backend"]["calls"][1:] == result["eager"]["calls"][1:] == each_step, result["backend"]["calls"]
        assert result["backend"]["losses"] == pytest.approx(result["eager"]["losses"], rel=1e-5, abs=1e-6)
        for got, expected in zip(result["backend"]["shards"], result["eager"]["shards"]):
            torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), atol=1e-5, rtol=1e-5)
