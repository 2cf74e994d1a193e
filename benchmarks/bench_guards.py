"""Cost of the exactness guards: each guarded op exported by ``to_onnx`` against the bare onnxruntime kernel.

Some converters add nodes so that onnxruntime gives PyTorch's answer on edge values (NaN, -inf, +inf): MaxPool
skips NaN on the CPU, ReduceMax and ArgMax skip NaN, CUDA's ReduceMax of a row of -inf is the lowest finite
float... (``_doc/supported_ops.rst``, "Exactness guards"). Each row runs the model ``to_onnx`` makes for one op
(``--providers``, default ``any``) and a hand-built ONNX model of the bare kernel (the same op without the
guard), on onnxruntime's CPU provider with one thread, interleaved (one run of each in turn, ``--repeat``
times), and prints the medians and their ratio, on a finite input and on one holding NaN and -inf (where a
guard takes its exact, slower path)::

    python benchmarks/bench_guards.py                      # markdown table
    python benchmarks/bench_guards.py --rows max_pool2d --repeat 50 --json guards.json
    python benchmarks/bench_guards.py --rst                # the table of the docs page

One intra-op thread: on a machine shared with other work, onnxruntime's spinning threads made timings swing.
The median of interleaved runs resists the noise left, not all of it: ratios move by about 0.1 between runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

from experimental.torch_interpreter import to_onnx

NAN, INF = math.nan, math.inf


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


@dataclass
class Row:
    """One guarded op: ``fn`` on ``inputs``, the bare kernel as ONNX nodes reading ``x0``, ``x1``..."""

    name: str
    fn: Callable
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    kernel: Callable[[tuple[torch.Tensor, ...]], tuple[list[onnx.NodeProto], list[onnx.TensorProto], int]]
    guard: str
    edges: Callable[[tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]] | None = None
    results: dict[str, Any] = field(default_factory=dict)


def _c(name: str, value: Any, dtype: Any = np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _one(op_type: str, outputs: int = 1, **attrs: Any):
    """The bare kernel ``op_type`` on ``x0``."""
    names = ["y"] if outputs == 1 else [f"y{i}" for i in range(outputs)]
    return lambda args: ([helper.make_node(op_type, ["x0"], names, **attrs)], [], outputs)


def _reduce(op_type: str, pre: str | None = None):
    """``op_type`` over the last axis (after ``pre``), as the guarded converters call it."""

    def build(args):
        nodes, src = [], "x0"
        if pre:
            nodes.append(helper.make_node(pre, [src], ["pre"]))
            src = "pre"
        nodes.append(helper.make_node(op_type, [src, "axis"], ["y"], keepdims=0))
        return nodes, [_c("axis", [-1])], 1

    return build


def _max_with_indices(args):
    (x,) = args
    nodes = [helper.make_node("MaxPool", ["x0"], ["v", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
             helper.make_node("Identity", ["v"], ["y0"]), helper.make_node("Mod", ["i", "plane"], ["y1"])]
    return nodes, [_c("plane", x.shape[-1] * x.shape[-2])], 2


def _max_dim(args):
    nodes = [helper.make_node("ReduceMax", ["x0", "axis"], ["y0"], keepdims=0),
             helper.make_node("ArgMax", ["x0"], ["y1"], axis=-1, keepdims=0)]
    return nodes, [_c("axis", [-1])], 2


def _adaptive_windows(args, out=(5, 7)):
    """Gather of each window's flat positions, ArgMax, the value and the position there (the guard: none)."""
    (x,) = args
    dims = list(x.shape[2:])
    windows = []
    for size, o in zip(dims, out):
        bounds = [((i * size) // o, -(-((i + 1) * size) // o)) for i in range(o)]
        k = max(e - s for s, e in bounds)
        windows.append(np.array([[min(s + j, e - 1) for j in range(k)] for s, e in bounds], dtype=np.int64))
    flat = (windows[0] * dims[1])[:, None, :, None] + windows[1][None, :, None, :]
    flat = flat.reshape(*out, -1)
    nodes = [
        helper.make_node("Reshape", ["x0", "planes"], ["p"]),
        helper.make_node("Gather", ["p", "flat"], ["g"], axis=2),
        helper.make_node("ArgMax", ["g"], ["a"], axis=-1, keepdims=1),
        helper.make_node("GatherElements", ["g", "a"], ["v"], axis=-1),
        helper.make_node("Squeeze", ["v", "last"], ["y0"]),
        helper.make_node("Shape", ["g"], ["gs"]),
        helper.make_node("Expand", ["flat", "gs"], ["t"]),
        helper.make_node("GatherElements", ["t", "a"], ["i"], axis=-1),
        helper.make_node("Squeeze", ["i", "last"], ["y1"]),
    ]
    return nodes, [_c("planes", [x.shape[0], x.shape[1], -1]), _c("flat", flat), _c("last", [-1])], 2


def _upsample(args):
    nodes = [helper.make_node("Resize", ["x0", "", "scales"], ["y"], mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    return nodes, [_c("scales", [1, 1, 2, 2], np.float32)], 1


def _sdpa(args):
    """softmax(Q K^T / sqrt(E) + bias) V, the bias 0 where the mask keeps, -inf elsewhere (no guard)."""
    q = args[0]
    scale = q.shape[-1] ** -0.25
    nodes = [
        helper.make_node("Where", ["x3", "zero", "ninf"], ["bias"]),
        helper.make_node("Mul", ["x0", "s"], ["qs"]),
        helper.make_node("Transpose", ["x1"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("Mul", ["kt", "s"], ["ks"]),
        helper.make_node("MatMul", ["qs", "ks"], ["scores"]),
        helper.make_node("Add", ["scores", "bias"], ["biased"]),
        helper.make_node("Softmax", ["biased"], ["w"], axis=-1),
        helper.make_node("MatMul", ["w", "x2"], ["y"]),
    ]
    inits = [_c("zero", 0.0, np.float32), _c("ninf", -INF, np.float32), _c("s", scale, np.float32)]
    return nodes, inits, 1


def _edges(args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The first input with NaN at a few places and a block of -inf (whole windows of it)."""
    x = args[0].clone()
    flat = x.view(-1)
    flat[:: max(1, flat.numel() // 7)] = NAN
    if x.dim() >= 4:
        x[..., :4, :4] = -INF
    else:
        x[..., :8] = -INF
    return (x, *args[1:])


def _masked(args):
    q, k, v, m = args
    m = m.clone()
    m[:, :, :3] = False  # rows the mask hides entirely
    return q, k, v, m


def _rows() -> list[Row]:
    torch.manual_seed(0)
    big = lambda: (torch.randn(8, 64, 112, 112),)  # noqa: E731
    mid = lambda: (torch.randn(8, 64, 56, 56),)  # noqa: E731
    rows2d = lambda: (torch.randn(4096, 1024),)  # noqa: E731
    return [
        Row("max_pool2d", lambda x: F.max_pool2d(x, 2), big, _one("MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
            "If(ReduceSum(x) > -inf): MaxPool, else MaxPool then, behind an If each, a pool of 0/1 flags for "
            "windows of -inf, one for NaN windows", _edges),
        Row("max_pool2d_with_indices", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), big,
            _max_with_indices, "If(no NaN, no -inf, no window at the lowest float): the kernel, else NaN read as "
            "-inf, a pool of a code (first -inf position), a pool of NaN positions (last NaN)", _edges),
        Row("adaptive_max_pool2d (1)", lambda x: F.adaptive_max_pool2d(x, 1), mid, _one("GlobalMaxPool"),
            "as max_pool2d, with GlobalMaxPool (kept for CUDA: not measured there)", _edges),
        Row("adaptive_max_pool2d (5, 7)", lambda x: F.adaptive_max_pool2d(x, (5, 7), return_indices=True),
            lambda: (torch.randn(8, 64, 28, 28),), _adaptive_windows,
            "the last NaN of a window holding one: IsNaN, ReduceMax and ArgMax of uint8 flags, Where", _edges),
        Row("amax", lambda x: torch.amax(x, -1), rows2d, _reduce("ReduceMax"),
            "ReduceMax of uint8 NaN flags; on CUDA, ReduceMin of uint8 -inf flags", _edges),
        Row("max.dim", lambda x: torch.max(x, -1), rows2d, _max_dim,
            "amax's, and argmax's for the indices", _edges),
        Row("argmax", lambda x: torch.argmax(x, -1), rows2d, _one("ArgMax", axis=-1, keepdims=0),
            "the first NaN where the row holds one: ArgMax and ReduceMax of uint8 NaN flags", _edges),
        Row("linalg.vector_norm (ord=inf)", lambda x: torch.linalg.vector_norm(x, INF, -1), rows2d,
            _reduce("ReduceMax", pre="Abs"), "ReduceMax of uint8 NaN flags", _edges),
        Row("sign", torch.sign, big, _one("Sign"), "Where(IsNaN(x), 0, Sign(x))", _edges),
        Row("sort", lambda x: torch.sort(x, -1, descending=True), lambda: (torch.randn(512, 1024),),
            lambda a: ([helper.make_node("TopK", ["x0", "k"], ["y0", "y1"], axis=-1)], [_c("k", [1024])], 2),
            "NaN read as +inf, a second TopK of the NaN flags", _edges),
        Row("upsample_bilinear2d", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), mid, _upsample,
            "If(ReduceSum(x) * 0 is NaN): PyTorch's formula (Gather, Mul, ReduceSum per axis), else Resize",
            _edges),
        Row("scaled_dot_product_attention (bool mask)",
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
            lambda: (*(torch.randn(4, 8, 256, 64) for _ in range(3)), torch.rand(4, 1, 256, 256) > 0.2),
            _sdpa, "0 on the rows the mask hides entirely: ReduceMax of the uint8 mask, Where", _masked),
    ]


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _kernel_model(row: Row, args: tuple[torch.Tensor, ...], like: onnx.ModelProto) -> onnx.ModelProto:
    """The bare kernel's model, its outputs typed as those of ``like`` (the guarded model)."""
    nodes, inits, n_out = row.kernel(args)
    inputs = [helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(a.numpy().dtype), list(a.shape))
              for i, a in enumerate(args)]
    names = ["y"] if n_out == 1 else [f"y{i}" for i in range(n_out)]
    types = [o.type.tensor_type.elem_type for o in like.graph.output]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types)]
    graph = helper.make_graph(nodes, row.name, inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def count_nodes(graph: onnx.GraphProto) -> int:
    """Nodes of ``graph`` and of its subgraphs, without Constant."""
    total = 0
    for node in graph.node:
        total += node.op_type != "Constant"
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                total += count_nodes(attr.g)
    return total


def measure(row: Row, providers: str, repeat: int, threads: int) -> dict[str, Any]:
    args = row.inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        guarded = to_onnx(Fn(row.fn), args, providers=providers)
    kernel = _kernel_model(row, args, guarded)
    runs = {"kernel": _session(kernel, threads), "guarded": _session(guarded, threads)}
    feeds = {"finite": args, "edges": row.edges(args) if row.edges else args}
    names = {k: [i.name for i in s.get_inputs()] for k, s in runs.items()}
    cases = [(k, f) for f in feeds for k in runs]
    feed_of = {(k, f): dict(zip(names[k], (t.numpy() for t in feeds[f]))) for k, f in cases}
    for case in cases:  # warm-up
        runs[case[0]].run(None, feed_of[case])
    times: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(repeat):
        for case in cases:
            begin = time.perf_counter()
            runs[case[0]].run(None, feed_of[case])
            times[case].append(time.perf_counter() - begin)
    med = {f"{k}_{f}_ms": 1e3 * statistics.median(v) for (k, f), v in times.items()}
    best = {f"{k}_{f}_min_ms": 1e3 * min(v) for (k, f), v in times.items()}
    top = [n.op_type for n in guarded.graph.node if n.op_type != "Constant"]
    return {
        "op": row.name,
        "input": " ".join("x".join(map(str, a.shape)) for a in args),
        "guard": row.guard,
        "nodes": len(top),
        "nodes_with_subgraphs": count_nodes(guarded.graph),
        "kernel_nodes": count_nodes(kernel.graph),
        **med,
        "ratio_finite": med["guarded_finite_ms"] / med["kernel_finite_ms"],
        "ratio_edges": med["guarded_edges_ms"] / med["kernel_edges_ms"],
        **best,
        "ratio_finite_min": best["guarded_finite_min_ms"] / best["kernel_finite_min_ms"],
    }


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| op | input | kernel ms | guarded ms | ratio | ratio of the fastest runs | with NaN/-inf: kernel ms "
        "| guarded ms | ratio | nodes (with subgraphs) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['op']} | {r['input']} | {r['kernel_finite_ms']:.2f} | {r['guarded_finite_ms']:.2f} | "
            f"{r['ratio_finite']:.2f}x | {r['ratio_finite_min']:.2f}x | {r['kernel_edges_ms']:.2f} | "
            f"{r['guarded_edges_ms']:.2f} | {r['ratio_edges']:.2f}x | {r['nodes']} ({r['nodes_with_subgraphs']}) |"
        )
    return "\n".join(lines)


def rst(results: list[dict[str, Any]]) -> str:
    head = ["op", "input", "kernel", "guarded", "ratio", "NaN, -inf: guarded", "ratio", "nodes"]
    lines = [".. list-table::", "   :header-rows: 1", ""]
    rows = [head] + [
        [f"``{r['op']}``", r["input"], f"{r['kernel_finite_ms']:.2f} ms", f"{r['guarded_finite_ms']:.2f} ms",
         f"{r['ratio_finite']:.2f}x", f"{r['guarded_edges_ms']:.2f} ms", f"{r['ratio_edges']:.2f}x",
         f"{r['nodes']} ({r['nodes_with_subgraphs']})"]
        for r in results
    ]
    for row in rows:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="", help="comma-separated names (a prefix is enough); default: all")
    parser.add_argument("--repeat", type=int, default=30, help="runs of each model (median)")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    parser.add_argument("--providers", default="any", help="to_onnx(providers=...): any, cpu or cuda")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--rst", action="store_true", help="print a reST list-table instead of markdown")
    options = parser.parse_args()
    wanted = [w for w in options.rows.split(",") if w]
    rows = [r for r in _rows() if not wanted or any(r.name.startswith(w) for w in wanted)]
    results = []
    for row in rows:
        results.append(measure(row, options.providers, options.repeat, options.threads))
        print(f"{row.name}: {results[-1]['ratio_finite']:.2f}x", flush=True)
    print()
    print(rst(results) if options.rst else markdown(results))
    if options.json:
        meta = {"onnxruntime": ort.__version__, "torch": torch.__version__, "threads": options.threads,
                "repeat": options.repeat, "providers": options.providers}
        with open(options.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
