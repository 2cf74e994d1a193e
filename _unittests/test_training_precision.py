"""Precision of the training backend against float64: on the same float32 weights and inputs, the backend's outputs
and gradients must be about as close to a float64 eager run as eager float32's are (batch norm in training mode,
convolutions, ReLU: the layers of the ResNet and RegNet of benchmarks/train_zoo.py).

Errors are compared as relative L2 norms over whole tensors, not largest differences: in a deep ReLU network a
pre-activation within rounding of 0 takes the other side in one float32 run and not in another, and the gradient
at that position changes by its full size; which positions do so depends on the rounding of every kernel, eager's
as much as onnxruntime's (eager float32 whose first convolution's output is moved by one unit in the last place
misses its own reference by as much; benchmarks/train_zoo.py compares with such runs).
"""

from __future__ import annotations

import copy
import warnings

import torch

from experimental.torch_interpreter.training import OrtBackend

#: the backend may be this many times farther from float64 than eager float32 (summation orders differ)
FACTOR = 2.0


def _rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _run(model: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor, mode: str) -> dict[str, torch.Tensor]:
    """The output and the gradients (input and parameters) of one forward/backward in ``mode``: ``float64``
    (eager), ``eager`` (float32) or ``backend`` (float32 through onnxruntime)."""
    model, x = copy.deepcopy(model), x.clone()
    if mode == "float64":
        model, x, grad = model.double(), x.double(), grad.double()
    x.requires_grad_(True)
    backend = OrtBackend(providers="cpu", fallback="raise")
    run = torch.compile(model, backend=backend, fullgraph=True) if mode == "backend" else model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = run(x)
        y.backward(grad)
    if mode == "backend":
        assert [g.runs_in for g in backend.graphs] == ["onnxruntime"] * 2, backend.graphs
    out = {"output": y.detach().double(), "grad input": x.grad.double()}
    out.update({f"grad {n}": p.grad.double() for n, p in model.named_parameters()})
    torch._dynamo.reset()
    return out


def _check(model: torch.nn.Module, x: torch.Tensor) -> dict[str, tuple[float, float]]:
    """Asserts that every result of the backend is within :data:`FACTOR` times eager float32's relative error
    against float64; returns ``{name: (eager's error, the backend's)}``."""
    model.train()
    with torch.no_grad():
        grad = torch.randn(model(x).shape, generator=torch.Generator().manual_seed(1))
    ref, eager, got = (_run(model, x, grad, m) for m in ("float64", "eager", "backend"))
    errors = {k: (_rel(eager[k], r), _rel(got[k], r)) for k, r in ref.items()}
    for name, (e, g) in errors.items():
        assert g <= FACTOR * e + 1e-7, f"{name}: the backend is {g:.3g} from float64, eager float32 {e:.3g}"
    return errors


def test_conv_batch_norm_relu_block():
    """A residual block of the ResNets, 2 x 2 positions per image at the end (8 values per channel for the last
    batch norms), a linear head: the backend's output and every gradient within 2 times eager float32's distance
    to float64."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, c: int):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(c)
            self.conv2 = torch.nn.Conv2d(c, 2 * c, 3, stride=2, padding=1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(2 * c)
            self.shortcut = torch.nn.Conv2d(c, 2 * c, 1, stride=2, bias=False)
            self.bn3 = torch.nn.BatchNorm2d(2 * c)
            self.head = torch.nn.Linear(2 * c, 10)

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = torch.relu(self.bn2(self.conv2(h)) + self.bn3(self.shortcut(x)))
            return self.head(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))

    _check(Block(32), torch.randn(2, 32, 4, 4))



def _amp_steps(model, dtype, backend, init_scale, steps=3):
    """Losses and the scaler's scale after each AdamW step under ``torch.autocast`` with a ``GradScaler``."""
    run = backend.compile(model) if backend is not None else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    gen = torch.Generator().manual_seed(3)
    losses, scales = [], []
    for _ in range(steps):
        x, y = torch.randn(8, 16, generator=gen), torch.randint(0, 4, (8,), generator=gen)
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = torch.nn.functional.cross_entropy(run(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales


def test_autocast_and_grad_scaler_as_eager():
    """Mixed precision through the backend: autocast's float16 and bfloat16 graphs in onnxruntime, the losses of
    eager within the type's rounding, the scaler's scale after each step the same, a step whose scaled gradients
    overflow float16 (scale 2**40) skipped and the scale lowered as eagerly."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    for dtype, rel, init_scale in ((torch.bfloat16, 2e-3, 2.0**8), (torch.float16, 2e-4, 2.0**8),
                                   (torch.float16, 2e-4, 2.0**40)):
        backend = OrtBackend(providers="cpu", fallback="raise")
        expected = _amp_steps(copy.deepcopy(model), dtype, None, init_scale)
        got = _amp_steps(copy.deepcopy(model), dtype, backend, init_scale)
        assert {g.runs_in for g in backend.graphs} == {"onnxruntime"}, backend.graphs
        assert got[1] == expected[1], (dtype, init_scale, got[1], expected[1])
        if init_scale == 2.0**40:  # the overflow happened: the scale went down
            assert got[1][0] < init_scale
        for g, e in zip(got[0], expected[0]):
            assert abs(g - e) <= rel * abs(e), (dtype, got[0], expected[0])
