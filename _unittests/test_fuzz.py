"""Random small programs (``testing/random_programs.py``) exported and compared with eager PyTorch, drawn by hypothesis.

The run is derandomized (the same programs at every run) and bounded (400 programs, about a minute); the long run is
``python benchmarks/fuzz.py --n 10000``. A failure prints the program's source; hypothesis prints how to
reproduce it. Outcomes that are bugs: a numeric/shape/dtype mismatch, a raw (non-project) exception, a
project error that is not an unsupported op or option (a converter that crashed).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model
from experimental.torch_interpreter.testing.program_runs import BUGS, compare, run_program
from experimental.torch_interpreter.testing.random_programs import (
    HypothesisChooser,
    RandomChooser,
    drawn_programs,
    generate,
)

hypothesis = pytest.importorskip("hypothesis")


@drawn_programs(400)
def test_random_programs(data):
    prog = generate(HypothesisChooser(data), half_jumps=0.15)  # fewer than the long run's third: the same time
    outcome = run_program(prog)
    assert outcome.kind not in BUGS, f"{outcome.kind}: {outcome.detail}\n{prog.describe()}"


@pytest.mark.parametrize("seed", [9, 528, 1234])
def test_seeded_programs(seed):
    """Programs of ``benchmarks/fuzz.py --seed``: 528 is the float32 + float16 product of the issue."""
    prog = generate(RandomChooser(seed))
    outcome = run_program(prog)
    assert outcome.kind not in BUGS, f"{outcome.kind}: {outcome.detail}\n{prog.describe()}"


@pytest.mark.parametrize("seed", [12, 34, 130, 200, 261])
def test_half_precision_jumps(seed):
    """float16 arithmetic whose result jumps (``fuzz_programs.half_jump``): a ``scatter_add`` index, ``.long()``,
    a flat index of a variable, ``!=``, ``ceil``. onnxruntime's CPU computed the float16 product in float32 and
    dropped its rounding: each of these programs was a mismatch (28 of the first 300 seeds)."""
    prog = generate(RandomChooser(seed))
    assert prog.ops[-1] == "half_jump" and prog.out_strict[-1]
    outcome = run_program(prog)
    assert outcome.kind == "match", f"{outcome.kind}: {outcome.detail}\n{prog.describe()}"


class _NoJump(RandomChooser):
    """The seed's program as it was before ``half_jump``: its chooser of the chains never draws one."""

    def fork(self):
        never = RandomChooser(0)
        never.integer = lambda low, high: high  # coin() is False
        return never


def _statements(prog) -> list[str]:
    return [line for line in prog.source.splitlines() if "def forward" not in line and "return " not in line]


def test_half_jumps_leave_the_seeded_statements():
    """The chains come from a chooser of their own: a seed's program keeps its statements, inputs and dynamic
    shapes (the seeds of the tests, the docs and the issues stay the same programs), a chain and an input more
    at the end of about a third of them."""
    jumps = 0
    for seed in [*range(30), 528, 1376, 1869, 9362]:
        prog, before = generate(RandomChooser(seed)), generate(_NoJump(seed))
        assert _statements(prog)[: len(_statements(before))] == _statements(before)
        assert all(torch.equal(a, b) for a, b in zip(prog.inputs, before.inputs))
        assert (prog.dynamic_shapes is None) == (before.dynamic_shapes is None)
        jumps += prog.ops == [*before.ops, "half_jump"]
        assert prog.ops in (before.ops, [*before.ops, "half_jump"])
    assert 6 <= jumps <= 20


def test_generator_is_deterministic():
    assert generate(RandomChooser(7)).source == generate(RandomChooser(7)).source
    assert generate(RandomChooser(7)).source != generate(RandomChooser(8)).source


def test_compare_tolerances():
    e = torch.tensor([1.0, 100.0])
    assert compare(e, np.array([1.0, 100.001], dtype=np.float32)) is None
    assert "differ" in compare(e, np.array([1.0, 100.1], dtype=np.float32))
    # a float32 value computed from float16 has float16's error
    assert compare(e, np.array([1.0, 100.1], dtype=np.float32), low=torch.float16) is None
    assert "dtype" in compare(e, np.array([1.0, 100.0]))
    assert compare(torch.tensor([float("nan")]), np.array([np.nan], dtype=np.float32)) is None
    assert "differ" in compare(torch.tensor([float("inf")]), np.array([np.nan], dtype=np.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_sum_accumulates_in_float32(dtype):
    """PyTorch CPU sums float16/bfloat16 in float32 and rounds once: 4096 x 0.1 is 409.5, a float16
    accumulator would stop near 256."""
    x = torch.full((4, 4096), 0.1, dtype=dtype)
    check_model(Fn(lambda x: x.sum(-1)), (x,), atol=0, rtol=0)
    check_model(Fn(lambda x: x.mean(-1) * 4096), (x,), atol=0, rtol=0)


@pytest.mark.parametrize("seed", [1376, 1869])
def test_float16_chains_are_as_accurate_as_eager(seed):
    """onnxruntime's CPU computes a chain of float16 ops in float32 (it removes the Cast pairs between
    them): ``layer_norm(log_softmax(cumsum(x)))``, ``1.5 / log(x * x + 1)`` then differ from eager by more
    than float16's tolerance, and are closer to the float64 result than eager is."""
    outcome = run_program(generate(RandomChooser(seed)))
    assert outcome.kind == "precision", f"{outcome.kind}: {outcome.detail}"


class _Scaled(torch.nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x0):
        return torch.log(x0 * x0 + 1) * self.factor


def test_a_less_accurate_result_stays_a_mismatch():
    """The float64 check only reclassifies in onnxruntime's favour: a model 1% off is a mismatch."""
    from experimental.torch_interpreter import InferenceSession, to_onnx
    from experimental.torch_interpreter.testing.program_runs import _eager, _mismatch_or_precision

    x = torch.linspace(-3, 3, 24).reshape(4, 6).to(torch.float16)
    sess = InferenceSession(to_onnx(_Scaled(1.01), (x,)))
    expected = _eager(_Scaled(1.0), (x,))
    assert _mismatch_or_precision(_Scaled(1.0), (x,), sess, ["x0"], expected, "d").kind == "mismatch"
    same = InferenceSession(to_onnx(_Scaled(1.0), (x,)))
    assert _mismatch_or_precision(_Scaled(1.0), (x,), same, ["x0"], expected, "d").kind == "precision"


def test_bfloat16_linear_rounds_once():
    """bfloat16 linear with a bias: PyTorch adds the bias to the float32 product and rounds once; rounding
    the product first gave 19.25 where eager gives 19.375, then a softmax 9% off (fuzz seed 9362)."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    weight = torch.randn((3, 3), generator=torch.Generator().manual_seed(3943)).to(torch.bfloat16)
    bias = torch.randn((3,), generator=torch.Generator().manual_seed(5938)).to(torch.bfloat16)
    row = torch.tensor([4.09375, -4.75, -10.0]).to(torch.bfloat16)
    x = torch.stack([row, row * 0.5, -row]).reshape(3, 1, 3)
    other = torch.cat([x, x * 2]).to(torch.bfloat16)
    check_dynamic(Fn(lambda x: torch.nn.functional.linear(x, weight, bias)), x, other=other, atol=0, rtol=0)
    assert run_program(generate(RandomChooser(9362))).kind == "match"


def test_gelu_of_infinity_is_float64s():
    """PyTorch's float32 CPU ``gelu(+inf)`` is NaN with AVX-512's vectorized erf, ``+inf`` with AVX2's and in
    float64: onnxruntime's ``+inf`` is float64's answer, ``precision`` where eager gives NaN (seed 70535 was a
    mismatch on an AVX-512 machine), a plain ``match`` where eager gives ``+inf``."""
    eager = torch.nn.functional.gelu(torch.full((64,), float("inf")))
    expected = "match" if bool(torch.isinf(eager).all()) else "precision"
    outcome = run_program(generate(RandomChooser(70535)))
    assert outcome.kind == expected, f"{outcome.kind} (eager's gelu(+inf): {eager[0].item()}): {outcome.detail}"
