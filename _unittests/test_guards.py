"""The exactness guards: converters' extra nodes giving PyTorch's answer on edge values (NaN, -inf, +inf, the lowest
finite float) where an onnxruntime kernel gives another (``experimental/torch_interpreter/providers.py``).

1. numerics: each guarded op, on inputs full of edge values, for ``providers="any"`` and ``"cpu"``, run on the CPU
   provider against eager PyTorch, NaN for NaN and every other value (indices included) equal;
2. graphs: the nodes each guard adds, and what a model for CUDA leaves out;
3. cost: the guarded MaxPool within a generous bound of a plain MaxPool (``benchmarks/bench_guards.py`` measures
   the real figure on a large input).
"""

from __future__ import annotations

import math
import statistics
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import helper

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.testing.check import Fn

INF, NAN = math.inf, math.nan
PROVIDERS = ["any", "cpu"]


def edge_values(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0, nan: bool = True):
    """Random values with NaN (8 %), -inf (27 %), the lowest finite value (7 %), +inf (4 %): windows of -inf only,
    of -inf and the lowest value, of several NaN, of NaN and +inf all occur."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen).to(dtype)
    r = torch.rand(*shape, generator=gen)
    fill = lambda cond, v: torch.where(cond, torch.tensor(v, dtype=dtype), x)  # noqa: E731
    if nan:
        x = fill(r < 0.08, NAN)
    x = fill((r >= 0.08) & (r < 0.35), -INF)
    x = fill((r >= 0.35) & (r < 0.42), torch.finfo(dtype).min)
    return fill((r >= 0.42) & (r < 0.46), INF)


def lowest_windows(shape: tuple[int, ...]) -> torch.Tensor:
    """Finite values, a block of the lowest finite float32: no NaN, no -inf (the kernel's path), windows whose
    maximum is the lowest value."""
    x = torch.randn(*shape)
    x[..., :4] = torch.finfo(torch.float32).min
    return x


def _numpy(t: torch.Tensor) -> np.ndarray:
    return (t.float() if t.dtype == torch.bfloat16 else t).detach().numpy()


def _assert_same(got: np.ndarray, expected: np.ndarray, what: str, atol: float = 0.0) -> None:
    if got.dtype.name == "bfloat16":
        got = got.astype(np.float32)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=f"{what}: NaN")
    if atol:
        np.testing.assert_allclose(got, expected, atol=atol, rtol=atol, err_msg=what)
    else:  # exact, infinities included
        np.testing.assert_array_equal(got, expected, err_msg=what)


def check(fn, args: tuple, providers: str = "any", atol: float = 0.0, **export) -> onnx.ModelProto:
    """Exports ``fn``, runs it on the CPU provider, compares with eager PyTorch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = to_onnx(Fn(fn), args, providers=providers, **export)
    with torch.no_grad():
        out = fn(*args)
    expected = [_numpy(t) for t in (out if isinstance(out, tuple) else (out,))]
    got = InferenceSession(onx, providers=["CPUExecutionProvider"]).run(
        None, {i.name: a for i, a in zip(onx.graph.input, args)}
    )
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        _assert_same(g, e, f"output {i} ({providers})", atol)
    return onx


def ops(onx: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in onx.graph.node if n.op_type != "Constant"]


def all_ops(graph: onnx.GraphProto) -> list[str]:
    """Op types of ``graph`` and of its subgraphs, without Constant."""
    found = []
    for node in graph.node:
        if node.op_type != "Constant":
            found.append(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found.extend(all_ops(attr.g))
    return found


# -- 1. numerics on edge values -----------------------------------------------------------------------------
#: name: (the pools of one input, its shape); each window kind (NaN, -inf only, the lowest value...) occurs
POOLS = {
    "max_pool1d": (lambda x: (F.max_pool1d(x, 3, 2, 1), *F.max_pool1d(x, 3, 2, 1, ceil_mode=True,
                                                                      return_indices=True)), (2, 3, 13)),
    "max_pool2d": (lambda x: (F.max_pool2d(x, 2), F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                              F.max_pool2d(x, 2, 1, 1, dilation=2), F.max_pool2d(x[0], 2, 1),
                              *F.max_pool2d(x, 3, 2, 1, return_indices=True),
                              *F.max_pool2d(x, 2, 1, 1, 2, return_indices=True)), (2, 3, 8, 9)),
    "max_pool3d": (lambda x: (F.max_pool3d(x, 2, 1, 1), *F.max_pool3d(x, 2, return_indices=True)), (1, 2, 4, 4, 6)),
    "adaptive_max_pool2d": (lambda x: (F.adaptive_max_pool2d(x, 1), *F.adaptive_max_pool2d(x, 1, True),
                                       *F.adaptive_max_pool2d(x, (3, 3), True),
                                       *F.adaptive_max_pool2d(x, (4, 5), True)), (2, 6, 6, 9)),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), (1, 2, 3, 5, 4)),
}


@pytest.mark.parametrize("providers", PROVIDERS)
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_edge_values(name, providers):
    fn, shape = POOLS[name]
    check(fn, (edge_values(shape, seed=len(name)),), providers)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("indices", [False, True])
def test_max_pool_dtypes_edge_values(dtype, indices):
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=indices), (edge_values((2, 3, 8, 9), dtype),))


@pytest.mark.parametrize("indices", [False, True])
def test_max_pool_lowest_windows_without_nan_or_inf(indices):
    """No NaN, no -inf: the kernel's path, where a window's maximum is the lowest finite value."""
    check(lambda x: F.max_pool2d(x, 2, 2, 1, return_indices=indices), (lowest_windows((2, 3, 6, 8)),))


def test_max_pool_dynamic_shape_edge_values():
    x = edge_values((2, 3, 8, 9), seed=3)
    dims = ({0: torch.export.Dim("batch"), 2: torch.export.Dim("h", min=4), 3: torch.export.Dim("w", min=4)},)
    fn = lambda x: F.max_pool2d(x, 2, return_indices=True)  # noqa: E731
    check(fn, (x,), dynamic_shapes=dims)
    check(fn, (x,), dynamic_shapes=({2: torch.export.Dim("length", min=3)},))


def test_adaptive_max_pool_dynamic_edge_values():
    x = edge_values((2, 3, 9), seed=4)
    check(lambda x: F.adaptive_max_pool1d(x, 3), (x,), dynamic_shapes=({2: torch.export.Dim("length", min=3)},))


ROWS = torch.tensor([[-INF, -INF, -INF], [1.0, NAN, 2.0], [INF, -INF, 0.0], [3.0, 1.0, NAN], [NAN, 1.0, 2.0]])
OTHERS = {
    "amax": (lambda x: torch.amax(x, 1), (ROWS,)),
    "amin": (lambda x: torch.amin(-x, 1, keepdim=True), (ROWS,)),
    "max_dim": (lambda x: torch.max(x, 1), (ROWS,)),
    "min_dim": (lambda x: torch.min(-x, 1), (ROWS,)),
    "aminmax": (lambda x: torch.aminmax(x, dim=1), (ROWS,)),
    "max_all": (lambda x: (torch.max(x), torch.min(-x)), (torch.full((2, 3), -INF),)),
    "argmax": (lambda x: (torch.argmax(x, 1), torch.argmin(x, 1)), (ROWS,)),
    "vector_norm_inf": (lambda x: (torch.linalg.vector_norm(x, INF, 1), torch.linalg.vector_norm(x, -INF, 1)),
                        (ROWS,)),
    "matrix_norm": (lambda x: (torch.linalg.matrix_norm(x, 1), torch.linalg.matrix_norm(x, -INF)),
                    (torch.stack([torch.full((2, 2), -INF), torch.eye(2), torch.tensor([[1.0, NAN], [2, 3]])]),)),
    "sign": (torch.sign, (torch.tensor([NAN, -0.0, 0.0, -2.0, INF, -INF]),)),
    "slogdet": (torch.linalg.slogdet, (torch.stack([torch.full((2, 2), NAN), -torch.eye(2)]),)),
    "cummax": (lambda x: torch.cummax(x, 1), (torch.tensor([[-INF, -INF, 1.0, -INF], [2.0, -INF, NAN, 3.0],
                                                            [NAN, NAN, -INF, 5.0]]),)),
    "cummin": (lambda x: torch.cummin(x, 0), (torch.tensor([[INF, 1.0], [INF, INF], [-1.0, INF], [NAN, 0.0]]),)),
    "embedding_bag_max": (
        lambda i, o, w: F.embedding_bag(i, w, o, mode="max"),
        (torch.tensor([0, 0, 1, 2, 1, 3, 3, 1]), torch.tensor([0, 2, 2, 4, 6]),
         torch.tensor([[-INF, -INF], [1.0, 2.0], [-INF, 5.0], [NAN, 1.0]]))),
    "sort": (lambda x: torch.sort(x, 1, descending=True), (ROWS,)),
    "topk": (lambda x: torch.topk(x, 2), (ROWS,)),
}


@pytest.mark.parametrize("providers", PROVIDERS)
@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_guards_edge_values(name, providers):
    fn, args = OTHERS[name]
    check(fn, args, providers)


@pytest.mark.parametrize("providers", PROVIDERS)
def test_attention_hidden_rows(providers):
    q = torch.randn(2, 2, 5, 4)
    keep = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    keep[0, 0, :2] = False  # rows that see no key: 0 in PyTorch, NaN from Softmax
    check(lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m), (q, keep), providers, atol=1e-5)


@pytest.mark.parametrize("providers", PROVIDERS)
def test_upsample_edge_values(providers):
    x = torch.randn(1, 2, 4, 4)
    x[0, 0, 1, 1], x[0, 0, 2, 3], x[0, 1, 0, 0] = INF, -INF, NAN
    check(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (x,), providers, atol=1e-5)
    check(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (torch.randn(1, 2, 4, 4),), providers,
          atol=1e-5)


# -- 2. graphs ----------------------------------------------------------------------------------------------
def _export(fn, x, providers="any"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(Fn(fn), (x,), providers=providers)


@pytest.mark.parametrize("providers", PROVIDERS)
def test_max_pool_graph(providers):
    """The plain pool behind one reduction of the input; the exact branch pools flags only when needed."""
    onx = _export(lambda x: F.max_pool2d(x, 2), torch.randn(1, 2, 4, 4), providers)
    assert ops(onx) == ["ReduceSum", "Greater", "If"]
    (node,) = [n for n in onx.graph.node if n.op_type == "If"]
    branches = {a.name: all_ops(a.g) for a in node.attribute}
    assert branches["then_branch"] == ["MaxPool"]
    assert branches["else_branch"].count("MaxPool") == 3  # the pool, the pool of -inf flags, of NaN flags
    assert len(all_ops(onx.graph)) <= 23


def test_max_pool_with_indices_graph():
    onx = _export(lambda x: F.max_pool2d(x, 2, return_indices=True), torch.randn(1, 2, 4, 4))
    assert ops(onx) == ["MaxPool", "ReduceSum", "Greater", "ReduceMin", "Greater", "And", "If", "Mod"]
    assert len(all_ops(onx.graph)) <= 32


def test_max_pool_for_cuda_keeps_the_floor_only():
    """CUDA's MaxPool propagates NaN: a model for CUDA keeps the -inf windows' fix alone, without If (whose
    condition CUDA copies to the host)."""
    onx = _export(lambda x: F.max_pool2d(x, 2), torch.randn(1, 2, 4, 4), "cuda")
    assert ops(onx) == ["MaxPool", "Greater", "Cast", "MaxPool", "Less", "Where"]
    # GlobalMaxPool and MaxPool with indices: their NaN was not measured on CUDA, the whole guard stays
    glob = _export(lambda x: F.adaptive_max_pool2d(x, 1), torch.randn(1, 2, 4, 4), "cuda")
    assert ops(glob) == ["ReduceSum", "Greater", "If"]


def test_max_pool_integers_have_no_guard():
    onx = _export(lambda x: F.max_pool2d(x, 2), torch.randint(0, 9, (1, 2, 4, 4), dtype=torch.uint8))
    assert "If" not in ops(onx) and "IsNaN" not in all_ops(onx.graph)


def test_adaptive_max_pool_overlap_graph():
    """The values are read at the ArgMax (no float ReduceMax, whose CUDA kernel gives the lowest float for -inf),
    the last NaN of a window from uint8 flags."""
    onx = _export(lambda x: F.adaptive_max_pool2d(x, (4, 3), True), torch.randn(1, 2, 7, 8))
    types = ops(onx)
    assert types.count("ArgMax") == 2 and types.count("ReduceMax") == 1 and "Min" not in types


@pytest.mark.parametrize(
    "name, fn, x, cpu, cuda",
    [
        # CUDA's ReduceMax/ReduceMin of a row of the infinity is the lowest (largest) finite float32: the flag
        # "all values are the infinity" is for CUDA only
        ("amax", lambda x: torch.amax(x, 1), ROWS, 0, 1),
        ("cummax", lambda x: torch.cummax(x, 1), ROWS, 0, 1),
    ],
)
def test_infinity_flags_for_cuda_only(name, fn, x, cpu, cuda):
    counts = {p: ops(_export(fn, x, p)) for p in ("cpu", "cuda", "any")}
    marker = "ReduceMin" if name == "amax" else "Less"
    assert counts["cpu"].count(marker) == cpu
    assert counts["cuda"].count(marker) == cuda and counts["any"].count(marker) == cuda


def test_embedding_bag_for_cpu_has_no_infinity_flag():
    args = OTHERS["embedding_bag_max"][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu, cuda = (ops(to_onnx(Fn(OTHERS["embedding_bag_max"][0]), args, providers=p)) for p in ("cpu", "cuda"))
    assert "MatMul" not in cpu and "MatMul" in cuda  # the count of the members above -inf


# -- guards left out where their answer is known --------------------------------------------------------------
#: pools of values without -inf (a Relu's, a Sigmoid's, a Clip's above the lowest float, a Concat or a pool of
#: them), without dilation (no window of padding only): the floor guard is left out; onnxruntime's CPU MaxPool
#: still skips NaN (a Relu keeps NaN), so the NaN guard stays for the CPU. The configurations of ResNet,
#: SqueezeNet and GoogLeNet (ceil mode, stride 1 and padding 1)
KNOWN_FLOOR = {
    "resnet": lambda x: F.max_pool2d(x.relu(), 3, 2, 1),
    "squeezenet_ceil": lambda x: F.max_pool2d(torch.relu(x), 3, 2, ceil_mode=True),
    "googlenet_branch": lambda x: F.max_pool2d(F.relu(x), 3, 1, 1, ceil_mode=True),
    "relu6": lambda x: F.max_pool2d(F.relu6(x), 2, 2, 1, ceil_mode=True),
    "pool_of_concat_of_pool": lambda x: F.max_pool2d(
        torch.cat([F.max_pool2d(x.relu(), 2, 1, 1), F.max_pool2d(x.sigmoid(), 2, 1, 1)], 1), 3, 2, 1,
        ceil_mode=True),
}
IMAGE_AXES = ({0: torch.export.Dim.DYNAMIC, 2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC},)


def _pools(onx: onnx.ModelProto) -> list[str]:
    """The op types of every graph, the activations and the Concat left out."""
    return [t for t in all_ops(onx.graph) if t not in ("Relu", "Clip", "Sigmoid", "Concat")]


@pytest.mark.parametrize("providers", PROVIDERS)
@pytest.mark.parametrize("name", sorted(KNOWN_FLOOR))
def test_max_pool_of_relu_keeps_the_nan_guard_only(name, providers):
    """NaN, -inf (0 after the Relu), +inf, the lowest float: as eager on the CPU provider, static and dynamic
    sizes (the ceil mode's last window is computed otherwise for each); the graph has no floor fix (no ReduceMin,
    no Less) and pools NaN flags in its exact branch only."""
    fn = KNOWN_FLOOR[name]
    atol = 1e-6  # onnxruntime's Sigmoid rounds otherwise; NaN and infinities are still compared exactly
    onx = check(fn, (edge_values((2, 3, 9, 11), seed=5),), providers, atol)
    for shape in [(2, 3, 9, 11), (1, 3, 12, 8)]:
        check(fn, (edge_values(shape, seed=6),), providers, atol, dynamic_shapes=IMAGE_AXES)
    pools = _pools(onx)
    assert "ReduceMin" not in pools and "Less" not in pools, pools
    per_pool = ["ReduceSum", "Greater", "If", "MaxPool", "MaxPool", "IsNaN", "Cast", "MaxPool", "Greater", "Where"]
    assert sorted(pools) == sorted(per_pool * pools.count("If")), pools


@pytest.mark.parametrize("name", sorted(KNOWN_FLOOR))
def test_max_pool_of_relu_for_cuda_is_one_max_pool(name):
    """A model for CUDA (whose MaxPool propagates NaN) needs neither guard: MaxPool alone, as the official
    exporter. The CUDA imitation's numbers: test_cuda_edge_values.py::test_max_pool_of_relu_as_on_cuda."""
    x = edge_values((2, 3, 9, 11), seed=5)
    assert set(_pools(_export(KNOWN_FLOOR[name], x, "cuda"))) == {"MaxPool"}


#: pools whose floor guard stays: a dilation (a window of padding only over a short input: -inf in PyTorch, the
#: lowest float from onnxruntime), a Clip whose lower bound is the lowest float or -inf, a Relu's output written
#: to in place before the pool, an input of the graph
KEPT_FLOOR = {
    "dilated_relu": (lambda x: F.max_pool1d(x.relu(), 2, 1, 1, dilation=2), (2, 3, 1)),
    "clamp_lowest": (lambda x: F.max_pool2d(x.clamp(min=torch.finfo(torch.float32).min), 2), (2, 3, 6, 8)),
    "clamp_minus_inf": (lambda x: F.max_pool2d(x.clamp(min=-INF, max=1.0), 2), (2, 3, 6, 8)),
    "relu_written_to": (lambda x: F.max_pool2d(x.relu().index_fill_(2, torch.tensor([0, 1]), -INF), 2),
                        (2, 3, 6, 8)),
    "input": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 6, 8)),
}


@pytest.mark.parametrize("providers", ["any", "cuda"])
@pytest.mark.parametrize("name", sorted(KEPT_FLOOR))
def test_max_pool_floor_guard_kept_where_unknown(name, providers):
    fn, shape = KEPT_FLOOR[name]
    x = edge_values(shape, seed=7)
    if providers == "any":
        check(fn, (x,))
        check(fn, (lowest_windows(shape),))
    pools = _pools(_export(fn, x, providers))
    fix = ["Greater", "Cast", "MaxPool", "Less", "Where"]  # the floor fix: pooled flags of x > -inf
    assert all(pools.count(op) >= fix.count(op) for op in fix), pools


def test_max_pool_floor_guard_catches_padding_only_windows():
    """Length 1, kernel 2, dilation 2, padding 1: the only window is [-1, 1], padding only: PyTorch gives -inf,
    onnxruntime's MaxPool alone the lowest float."""
    x = torch.rand(1, 2, 1)
    expected = F.max_pool1d(x.relu(), 2, 1, 1, dilation=2)
    assert torch.isneginf(expected).all()
    check(lambda x: F.max_pool1d(x.relu(), 2, 1, 1, dilation=2), (x,))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_max_pool_of_integers_computed_in_double_has_no_guard(dtype):
    """No integer MaxPool kernel: the pool runs on a Cast to double, which holds neither NaN nor -inf."""
    x = torch.randint(-2**20, 2**20, (2, 3, 7, 9), dtype=dtype)
    x[0, 0, :2, :2] = torch.iinfo(dtype).min
    onx = check(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), (x,))
    assert _pools(onx) == ["Cast", "MaxPool", "Cast"]


# -- 3. cost ------------------------------------------------------------------------------------------------
def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def test_max_pool_guard_costs_little():
    """The guarded MaxPool2d(2) against one plain MaxPool, one thread, interleaved runs, the fastest of each
    (other work on the machine only slows runs down). The bound is generous (2.5x) for a loaded machine;
    ``benchmarks/bench_guards.py`` gives the figure (1.3 to 1.45x)."""
    x = torch.randn(4, 32, 96, 96)
    guarded = _export(lambda x: F.max_pool2d(x, 2), x)
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], "plain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    plain = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    runs = [(_session(guarded), {guarded.graph.input[0].name: x.numpy()}), (_session(plain), {"x": x.numpy()})]
    times: list[list[float]] = [[], []]
    for _ in range(3):
        for sess, feed in runs:
            sess.run(None, feed)
    for _ in range(25):
        for i, (sess, feed) in enumerate(runs):
            begin = time.perf_counter()
            sess.run(None, feed)
            times[i].append(time.perf_counter() - begin)
    ratio = min(times[0]) / min(times[1])
    assert ratio < 2.5, (
        f"the guarded MaxPool takes {ratio:.2f}x a plain MaxPool (medians: "
        f"{statistics.median(times[0]) * 1e3:.2f} ms, {statistics.median(times[1]) * 1e3:.2f} ms)"
    )
