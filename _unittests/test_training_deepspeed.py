"""DeepSpeed ZeRO stage 3 through onnxruntime (two gloo processes, DeepSpeed's CPU accelerator): the engine compiled
with ``engine.compile(backend=OrtBackend())``; DeepSpeed's own autograd Functions (the ZeRO-3 linear, the
pre-backward function its module hooks put around outputs) become PythonOp / PythonOpGrad nodes called back on every
rank, every graph runs in onnxruntime, and the losses equal DeepSpeed's eager ones. Skipped without DeepSpeed (an
optional dependency, not installed by the README; ``test_training_zero3.py`` covers the same mechanics without it)."""

from __future__ import annotations

import datetime
import os
import warnings

import pytest
import torch

from experimental.torch_interpreter.testing.processes import finish, left_on_error, read_results, store

deepspeed = pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (pip install deepspeed)")

WORLD = 2
STEPS = 3


def _worker(rank: int, folder: str) -> None:
    # DeepSpeed reads these (else it looks for MPI); the rendezvous itself goes through a file store, no port
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT="29500")
    warnings.simplefilter("ignore", FutureWarning)  # torch 2.13 renames the collectives DeepSpeed calls
    from experimental.torch_interpreter.training import OrtBackend

    deepspeed.init_distributed(dist_backend="gloo", init_method=store(folder), rank=rank, world_size=WORLD,
                               timeout=datetime.timedelta(seconds=120))
    with left_on_error():
        config = {
            "train_micro_batch_size_per_gpu": 8,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}},
            "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
        }
        result: dict = {}
        for mode in ("eager", "backend"):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
            engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
            backend = OrtBackend(providers="cpu", fallback="raise") if mode == "backend" else None
            if backend is not None:
                engine.compile(backend=backend)
            losses = []
            for step in range(STEPS):
                x = torch.randn(8, 16, generator=torch.Generator().manual_seed(100 * rank + step))
                loss = engine(x).pow(2).mean()
                engine.backward(loss)
                engine.step()
                losses.append(loss.item())
            result[mode] = losses
            if backend is not None:
                result["graphs"] = [[g.kind, g.runs_in] for g in backend.graphs]
                nodes = [n for g in backend.graphs for n in g.graph.model.graph.node if n.domain == "com.microsoft"]
                result["nodes"] = sorted({n.op_type for n in nodes})
                result["functions"] = sorted(
                    {a.s.decode().rsplit(".", 1)[-1] for n in nodes for a in n.attribute if a.name == "func_name"}
                )
    finish(rank, folder, result)


def test_deepspeed_zero3_trains_in_onnxruntime(tmp_path):
    torch.multiprocessing.spawn(_worker, args=(str(tmp_path),), nprocs=WORLD)
    for rank, result in enumerate(read_results(str(tmp_path), WORLD)):
        kinds = {kind for kind, _ in result["graphs"]}
        assert kinds == {"forward", "backward"}, result["graphs"]
        assert all(runs_in == "onnxruntime" for _, runs_in in result["graphs"]), result["graphs"]
        assert result["nodes"] == ["PythonOp", "PythonOpGrad"], result["nodes"]
        assert result["functions"] == ["LinearFunctionForZeroStage3", "PreBackwardFunctionForModule"]
        assert result["backend"] == pytest.approx(result["eager"], rel=1e-6, abs=1e-7), f"rank {rank}"
