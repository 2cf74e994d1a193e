"""Overhead of one PythonOp node: a model made of one custom ``torch.autograd.Function`` exported as
``com.microsoft::PythonOp`` and run by ``experimental.torch_interpreter.InferenceSession``, against calling
the function directly, on a tensor of 1M float32 (``--size``).

Run: ``python benchmarks/bench_python_op.py [--size 1000000] [--repeat 300] [--threads N]``. Prints one
table: median and minimum time of each case, and its overhead against the reference case. Rows:

* ``direct``: ``Scale.apply(x)`` under ``torch.no_grad()``;
* ``PythonOp, run_torch``: the exported model, torch tensors in and out (DLPack, no copy);
* ``PythonOp, run``: the same, numpy in and out, as onnxruntime's ``run``;
* ``relu -> PythonOp -> sigmoid``: the function between two ONNX ops, so two onnxruntime segments around
  it, against ``... inline``, the same model exported with ``autograd_functions="inline"`` (one session);
* ``custom op``: the same computation as a ``torch.library.custom_op`` (``bench::scale``) without converter,
  exported as a PythonOp node calling ``torch.ops.bench.scale.default``, against calling the op directly;
* ``create``: creating the session of a model whose 16 MB weight is read between 4 levels of PythonOp nodes
  (every check a session makes of a model file included, the weight held once for the 5 segments), and one run
  of it (``--levels``, ``--features``).

``python benchmarks/bench_python_op.py --memory 40 1448`` instead prints the peak memory (RSS) that creating the
session of such a model (40 levels, an 8 MB weight) and one run of it add, measured in a fresh process that loads
the saved model file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import onnx

import onnxruntime as ort
import torch

from experimental.torch_interpreter import InferenceSession, PythonOpWarning, to_onnx


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        return x * alpha

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0, None


@torch.library.custom_op("bench::scale", mutates_args=())
def scale_op(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha


@scale_op.register_fake
def _(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.empty_like(x)


class OneCustomOp(torch.nn.Module):
    def forward(self, x):
        return scale_op(x, 2.0)


class One(torch.nn.Module):
    def forward(self, x):
        return Scale.apply(x, 2.0)


class Sandwich(torch.nn.Module):
    def forward(self, x):
        return Scale.apply(x.relu(), 2.0).sigmoid()


class Levels(torch.nn.Module):
    """One weight read between ``levels`` PythonOp nodes: ``levels + 1`` onnxruntime segments read it."""

    def __init__(self, levels: int, features: int):
        super().__init__()
        self.levels = levels
        self.weight = torch.nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x):
        for _ in range(self.levels):
            x = Scale.apply(x @ self.weight, 0.5)
        return x @ self.weight


def _median(fn, repeat: int, warmup: int = 10) -> tuple[float, float]:
    """(median, minimum) of ``repeat`` timed calls, in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
    return statistics.median(times), min(times)


# the child's peak from /proc (VmHWM, reset by exec), not ru_maxrss, which keeps the forking parent's
_PEAK = """
import sys
import numpy as np
sys.path.insert(0, {folder!r})
import bench_python_op  # the Function the model calls, imported before measuring
from experimental.torch_interpreter import InferenceSession
def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
before = peak()
sess = InferenceSession({path!r}, trusted_modules=["bench_python_op"])
sess.run(None, {{"x": np.ones((2, {features}), np.float32)}})
print((peak() - before) / 1024)
"""


def peak_memory(levels: int, features: int) -> tuple[float, float]:
    """(peak RSS in MB that creating and running the session of :class:`Levels` adds in a fresh process, the
    model's size in MB)."""
    import bench_python_op as module  # this file as a module: the Function is then bench_python_op.Scale

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore", PythonOpWarning)  # known: the child process allows the module
        path = os.path.join(folder, "levels.onnx")
        onnx.save(to_onnx(module.Levels(levels, features).eval(), (torch.randn(2, features),)), path)
        script = _PEAK.format(folder=os.path.dirname(os.path.abspath(__file__)), path=path, features=features)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        return float(done.stdout.split()[-1]), os.path.getsize(path) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--threads", type=int, default=0, help="torch and onnxruntime threads (0: their default)")
    parser.add_argument("--levels", type=int, default=4, help="levels of PythonOp nodes of the 'create' rows")
    parser.add_argument("--features", type=int, default=2048, help="the weight of the 'create' rows is features²")
    parser.add_argument("--memory", type=int, nargs=2, metavar=("LEVELS", "FEATURES"),
                        help="print the peak memory of a session on such a model instead")
    args = parser.parse_args()
    if args.memory:
        added, size = peak_memory(*args.memory)
        print(f"{args.memory[0]} levels, a {size:.0f} MB model: the session and one run add {added:.0f} MB of peak RSS")
        return
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if args.threads:
        torch.set_num_threads(args.threads)
        options.intra_op_num_threads = args.threads
    x, n = torch.randn(args.size), args.repeat
    xn = x.numpy()

    rows = []
    with torch.no_grad():
        direct = _median(lambda: Scale.apply(x, 2.0), args.repeat)
    rows.append(("direct Scale.apply(x)", direct))

    sess = InferenceSession(to_onnx(One(), (x,)), sess_options=options)
    feed = sess.get_inputs()[0].name
    torch.testing.assert_close(sess.run_torch(None, {feed: x})[0], x * 2.0)
    rows.append(("PythonOp, run_torch", _median(lambda: sess.run_torch(None, {feed: x}), args.repeat)))
    rows.append(("PythonOp, run (numpy)", _median(lambda: sess.run(None, {feed: xn}), args.repeat)))

    inline = InferenceSession(to_onnx(Sandwich(), (x,), autograd_functions="inline"), sess_options=options)
    cut = InferenceSession(to_onnx(Sandwich(), (x,)), sess_options=options)
    torch.testing.assert_close(cut.run_torch(None, {feed: x})[0], inline.run_torch(None, {feed: x})[0])
    rows.append(("relu -> mul -> sigmoid, inline (1 session)", _median(lambda: inline.run_torch(None, {feed: x}), n)))
    rows.append(("relu -> PythonOp -> sigmoid (2 sessions)", _median(lambda: cut.run_torch(None, {feed: x}), n)))

    op = torch.ops.bench.scale.default
    with torch.no_grad():
        rows.append(("direct torch.ops.bench.scale(x)", _median(lambda: op(x, 2.0), n)))
    custom = InferenceSession(to_onnx(OneCustomOp(), (x,), custom_ops="python_op"), sess_options=options)
    torch.testing.assert_close(custom.run_torch(None, {feed: x})[0], x * 2.0)
    rows.append(("custom op PythonOp, run_torch", _median(lambda: custom.run_torch(None, {feed: x}), n)))

    levels = Levels(args.levels, args.features).eval()
    xl = torch.randn(8, args.features)
    model = to_onnx(levels, (xl,)).SerializeToString()
    made = InferenceSession(model)
    with torch.no_grad():
        torch.testing.assert_close(made.run_torch(None, {"x": xl})[0], levels(xl), rtol=1e-4, atol=1e-4)
    rows.append((f"create: {args.levels} levels, {args.features}² weight", _median(lambda: InferenceSession(model), 10, 1)))
    rows.append(("  one run of it", _median(lambda: made.run_torch(None, {"x": xl}), n)))

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, providers {sess.get_providers()}, "
        f"{args.size} float32, {args.repeat} runs"
    )
    print(f"{'case':<44} {'median ms':>10} {'overhead':>9} {'min ms':>8} {'overhead':>9}")
    reference = {1: 0, 2: 0, 4: 3, 6: 5}
    for i, (name, (median, low)) in enumerate(rows):
        line = f"{name:<44} {median * 1e3:10.3f} "
        if i in reference:
            ref_median, ref_low = rows[reference[i]][1]
            line += f"{(median - ref_median) * 1e3:9.3f} {low * 1e3:8.3f} {(low - ref_low) * 1e3:9.3f}"
        else:
            line += f"{'':9} {low * 1e3:8.3f}"
        print(line)


if __name__ == "__main__":
    main()
