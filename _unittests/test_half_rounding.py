"""float16 results turned into integers, booleans or indices keep PyTorch's float16 rounding on onnxruntime's CPU.

PyTorch rounds every float16 result; onnxruntime's CPU computes float16 arithmetic in float32 and removes the
``Cast`` pair around it, so a ``Cast`` to an integer type, a comparison, ``floor``/``ceil``/``round`` or an index
(``argmax``, ``topk``, ``sort``...) read the unrounded float32 value: ``0.5713 * 7`` is 4.0 in float16 and 3.999
in float32, ``.long()`` gives 4 in PyTorch and 3 in onnxruntime (``optimize/half_precision.py``).

Each test runs the smallest program on values next to the integer boundaries (every float16 value of a range
whose product rounds across a boundary, and some that do not), first checking that the same program computed in
float32 gives another answer on them (else the test would prove nothing), then compares onnxruntime with eager
PyTorch exactly, at every optimization level.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.optimize import half_precision
from experimental.torch_interpreter.ort_kernels import CPU_FLOAT16
from experimental.torch_interpreter.testing.check import Fn

LEVELS = [False, True, "onnxruntime"]


def half_values(dtype: torch.dtype, low: float, high: float) -> torch.Tensor:
    """Every finite value of ``dtype`` in ``[low, high)``, sorted."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    keep = torch.isfinite(bits) & (bits >= low) & (bits < high)
    return bits[keep].unique()


def boundary(values: torch.Tensor, eager: torch.Tensor, in_float32: torch.Tensor, others: int = 64) -> torch.Tensor:
    """The elements of ``values`` on which ``eager`` and ``in_float32`` (the same program on the same values,
    computed in float32) differ, with ``others`` on which they agree, in a fixed shuffled order."""
    differ = (eager.double() != in_float32.double()).reshape(len(values), -1).any(1)
    same = values[~differ]
    chosen = torch.cat([values[differ], same[:: max(1, len(same) // others)][:others]])
    return chosen[torch.randperm(len(chosen), generator=torch.Generator().manual_seed(len(chosen)))]


def run(onx: onnx.ModelProto, *args: torch.Tensor) -> list[np.ndarray]:
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args)})


def check_exact(fn, args: tuple[torch.Tensor, ...], optimize, in_float32=None) -> None:
    """onnxruntime gives eager's answer exactly on ``args``, which the program computed in float32 (``in_float32``,
    default ``fn`` on the inputs cast to float32) does not."""
    model = Fn(fn)
    expected = [torch.as_tensor(e) for e in torch.utils._pytree.tree_leaves(model(*args))]
    floats = tuple(a.float() if a.is_floating_point() else a for a in args)
    unrounded = torch.utils._pytree.tree_leaves((in_float32 or model)(*floats))
    assert any(not torch.equal(e.double(), u.double()) for e, u in zip(expected, unrounded)), (
        "the input has no element where float32 and float16 rounding disagree: the test proves nothing"
    )
    onx = to_onnx(model, args, optimize=optimize)
    got = run(onx, *args)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        want = e.float().numpy() if e.dtype == torch.bfloat16 else e.numpy()
        have = g.astype(np.float32) if e.dtype == torch.bfloat16 else g
        assert have.dtype == want.dtype
        bad = have != want
        assert not bad.any(), f"{int(bad.sum())} of {bad.size} differ from eager: {have[bad][:4]} != {want[bad][:4]}"


def unary_inputs(fn, dtype=torch.float16, low=-16.0, high=16.0):
    """Values of ``dtype`` on which ``fn`` (elementwise) differs computed in float32, and a few others."""
    v = half_values(dtype, low, high)
    return (boundary(v, fn(v), fn(v.float())).reshape(-1, 1),)


# -- a cast to an integer type ---------------------------------------------------------------------------------

INTEGER_CASTS = {
    "long_mod": lambda x: (x.abs() * 7).long() % 6,
    "int32": lambda x: (x * 7).to(torch.int32),
    "int16": lambda x: (x * 7).to(torch.int16),
    "int8": lambda x: (x * 3).to(torch.int8),
    "uint8": lambda x: (x.abs() * 7).to(torch.uint8),
    "bool": lambda x: (x * 1.8310546875e-4).bool(),  # 3 * 2**-14, exact in float16: products below its
    # smallest subnormal round to zero in float16, not in float32
    "neg_long": lambda x: (-(x * 7)).long(),
    "where_long": lambda x: torch.where(x > 0, x * 7, x * -3).long(),
    # chains of arithmetic: PyTorch rounds after each op, onnxruntime's CPU only at the end of the chain
    "add_long": lambda x: (x * 7 + 0.5).long(),
    "round_trip_long": lambda x: ((x * 7).round() / 7 * 7).long(),
}


@pytest.mark.parametrize("optimize", LEVELS)
@pytest.mark.parametrize("name", list(INTEGER_CASTS))
def test_integer_cast(name, optimize):
    fn = INTEGER_CASTS[name]
    low, high = (-1e-3, 1e-3) if name == "bool" else (-16.0, 16.0)
    check_exact(fn, unary_inputs(fn, low=low, high=high), optimize)


@pytest.mark.parametrize("optimize", LEVELS)
@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
def test_narrow_integer_cast_of_bfloat16(dtype, optimize):
    """bfloat16 arithmetic is computed in float32 by the converters, between explicit casts onnxruntime keeps,
    except the cast to bfloat16 before a cast to int8/uint8 (onnxruntime merges the two)."""

    def fn(x):
        return (x.abs() * 7).to(dtype)

    check_exact(fn, unary_inputs(fn, torch.bfloat16, -16.0, 16.0), optimize)


def test_the_issue_program_scatter_add():
    """The index of ``scatter_add`` computed from float16 arithmetic, in the style of the fuzzer's program."""

    def fn(x, src):
        idx = (x.abs() * 7).long() % 6
        return torch.zeros(6, 1, dtype=src.dtype).scatter_add(0, idx, src)

    (x,) = unary_inputs(lambda v: (v.abs() * 7).long(), low=-8.0, high=8.0)
    src = torch.arange(len(x), dtype=torch.float32).reshape(-1, 1).half() / 64
    for optimize in LEVELS:
        check_exact(fn, (x, src), optimize)


# -- comparisons -----------------------------------------------------------------------------------------------

COMPARISONS = {
    "lt": lambda x, t: x * 7 < t,
    "gt": lambda x, t: x * 7 > t,
    "le": lambda x, t: x * 7 <= t,
    "ge": lambda x, t: x * 7 >= t,
    "eq": lambda x, t: x * 7 == t,
    "ne": lambda x, t: x * 7 != t,
}


@pytest.mark.parametrize("optimize", LEVELS)
@pytest.mark.parametrize("name", list(COMPARISONS))
def test_comparison(name, optimize):
    """``x * 7`` compared with the integer next to its float16 rounding."""
    fn = COMPARISONS[name]
    v = half_values(torch.float16, -16.0, 16.0)
    t = (v * 7).round()
    x = boundary(v, fn(v, t), fn(v.float(), t.float()))
    check_exact(fn, (x, (x * 7).round()), optimize)


# -- floor, ceil, round ----------------------------------------------------------------------------------------

ROUNDING = {
    "floor": lambda x: torch.floor(x * 7),
    "ceil": lambda x: torch.ceil(x * 7),
    # an op with a float16 kernel: onnxruntime computes it in float32 too between two ops it computes so
    "round_then_scale": lambda x: torch.round(x * 7) * 2,
    "floor_of_abs_of_view": lambda x: torch.floor((x * 7).abs().reshape(-1)),
}


@pytest.mark.parametrize("optimize", LEVELS)
@pytest.mark.parametrize("name", list(ROUNDING))
def test_rounding(name, optimize):
    fn = ROUNDING[name]
    check_exact(fn, unary_inputs(fn), optimize)


def test_trunc_of_a_chain():
    """``trunc`` is computed in float32 after a cast (so are ``remainder``, ``sign``...): the chain before the
    cast is rounded after each op, as the jump in float32 needs."""

    def fn(x):
        return torch.trunc(x * 7 + 0.5)

    for optimize in LEVELS:
        check_exact(fn, unary_inputs(fn), optimize)


def test_trunc_of_a_cast_to_float16():
    """``x.half()`` of a float32 input, then arithmetic and a jump: the cast's rounding is kept too (onnxruntime
    removed it before ``Abs``, which it computes in float32)."""

    def fn(x):
        return torch.trunc(x.half().abs() * 7)

    v = half_values(torch.float16, -16.0, 16.0)
    # float32 values that round to v in float16, a little closer to zero: their product by 7 in float32 falls
    # under the integer the float16 product rounds to
    x = boundary(v, fn(v), torch.trunc(v.float().abs() * 7)).float() * (1 - 2**-14)
    for optimize in LEVELS:
        check_exact(fn, (x.reshape(-1, 1),), optimize, in_float32=lambda x: torch.trunc(x.abs() * 7))


# -- indices ---------------------------------------------------------------------------------------------------

INDICES = {
    "argmax": lambda x, w: (x * w).argmax(-1),
    "argmin": lambda x, w: (x * w).argmin(-1),
    "max_indices": lambda x, w: (x * w).max(-1).indices,
    "topk": lambda x, w: (x * w).topk(1, -1).indices,
    "sort": lambda x, w: torch.sort(x * w, dim=-1, stable=True).indices,
    "sort_descending": lambda x, w: torch.sort(x * w, dim=-1, descending=True, stable=True).indices,
    "argsort": lambda x, w: torch.argsort(x * w, dim=-1, stable=True),
}


@pytest.mark.parametrize("optimize", LEVELS)
@pytest.mark.parametrize("name", list(INDICES))
def test_indices(name, optimize):
    """Rows ``[v * 7, round16(v * 7)]``: a tie in float16 (the first index), not in float32."""
    fn = INDICES[name]
    v = half_values(torch.float16, 0.25, 32.0)
    w = torch.tensor([[7.0, 1.0]], dtype=torch.float16)

    def rows(v):
        return torch.stack([v, (v * 7).to(v.dtype)], 1)

    chosen = boundary(v, fn(rows(v), w), fn(rows(v).float(), w.float()))
    check_exact(fn, (torch.stack([chosen, chosen * 7], 1), w), optimize)


# -- where nothing is needed, and CUDA ---------------------------------------------------------------------------


def _op_types(onx: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in onx.graph.node]


@pytest.mark.parametrize(
    ("fn", "added"),
    [
        (lambda x: torch.floor(x), 0),  # an input: rounded already
        (lambda x: (x * 7).exp() + 1, 0),  # no integer, comparison nor index: float16's tolerance
        (lambda x: (x * 7).long(), 2),  # the product computed in float32 and rounded (onnxruntime's own casts)
        (lambda x: x * 7 < x, 3),  # and the comparison computed in float32 (x cast once for both)
        (lambda x: (x * 7 + x).long(), 4),  # each op of a chain rounded before the jump, as PyTorch does
        (lambda x: (x * 7 + x).float(), 3),  # read in float32: the last result rounded, no jump after it
    ],
    ids=["input", "arithmetic", "cast", "comparison", "chain_to_integer", "chain_to_float"],
)
def test_casts_only_where_a_rounding_is_read(fn, added):
    x = torch.randn(4, 5).half()
    count = _op_types(to_onnx(Fn(fn), (x,))).count("Cast")
    assert count - _op_types(to_onnx(Fn(fn), (x,), providers="cuda")).count("Cast") == added


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (INTEGER_CASTS["long_mod"], 1),
        (INTEGER_CASTS["uint8"], 1),
        (COMPARISONS["lt"], 2),
        (ROUNDING["floor"], 1),
        (INDICES["argmax"], 2),
        (INDICES["sort"], 2),
    ],
    ids=["long", "uint8", "lt", "floor", "argmax", "sort"],
)
def test_cuda_model_has_no_rounding_casts(fn, args, monkeypatch):
    """A model for CUDA only (float16 kernels there) is the graph the converters made, no cast added: the same
    as the default model with the rewrite turned off."""
    from experimental.torch_interpreter.optimize import pipeline

    inputs = (torch.randn(4, 2).half(), torch.randn(4, 2).half())[:args]
    cuda = _op_types(to_onnx(Fn(fn), inputs, providers="cuda"))
    assert _op_types(to_onnx(Fn(fn), inputs)).count("Cast") > cuda.count("Cast")
    off = tuple(
        dataclasses.replace(r, run=lambda model: 0) if r.name == "round_half_results" else r for r in pipeline.PIPELINE
    )
    monkeypatch.setattr(pipeline, "PIPELINE", off)
    assert _op_types(to_onnx(Fn(fn), inputs)) == cuda


def test_half_kernels_are_onnxruntime_s():
    """``ort_kernels.CPU_FLOAT16`` is what onnxruntime's CPU registers: an op listed without a float16 kernel would
    have its rounding dropped again, an op missing from it costs two casts."""
    capi = pytest.importorskip("onnxruntime.capi._pybind_state")
    half = set()
    for kernel in capi.get_all_opkernel_def():
        if kernel.provider != "CPUExecutionProvider" or kernel.domain not in ("", "ai.onnx"):
            continue
        if any("tensor(float16)" in types for types in kernel.type_constraints.values()):
            half.add(kernel.op_name)
    ops = half_precision.JUMPS | half_precision.SELECTIONS
    assert CPU_FLOAT16 == ops & half
