"""Random programs (``testing/random_programs.py``) trained one step through the ``torch.compile`` backend
(``testing/random_training.py``): outputs, loss and every input gradient against eager PyTorch.

A bounded derandomized run (30 programs drawn by hypothesis, about 20 s) and the seeds of the long run
(``python benchmarks/fuzz.py --training --n 2000``) that showed a difference or a fallback, each fixed.
"""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter import default_registry
from experimental.torch_interpreter.testing.random_programs import (
    HypothesisChooser,
    Program,
    RandomChooser,
    drawn_programs,
    generate,
)
from experimental.torch_interpreter.testing.random_training import TRAINING_BUGS, run_training_program
from experimental.torch_interpreter.training import OrtBackend

hypothesis = pytest.importorskip("hypothesis")


@drawn_programs(30)
def test_random_programs_train_as_eager(data):
    prog = generate(HypothesisChooser(data), half_jumps=0.15)
    outcome = run_training_program(prog)
    assert outcome.kind not in TRAINING_BUGS and outcome.kind != "fallback", f"{outcome}\n{prog.describe()}"


@pytest.mark.parametrize(
    "seed, why",
    [
        (48, "max_pool2d_with_indices_backward over dynamic sizes"),
        (122, "aten::sym_stride and prims::convert_element_type in a graph with dynamic sizes"),
        (1820, "torch::sym_sum in a graph with dynamic sizes"),
        (239, "a backward graph that hands its incoming gradient back (no output to compute): onnxruntime refused it"),
        (996, "float64 native_layer_norm with its statistics: onnxruntime has no such kernel"),
        (1376, "float16 gradients through log_softmax, cumsum and layer_norm: as far from float64 as eager's"),
        (60276, "layer_norm over an empty normalized shape with its statistics: onnxruntime refused the run"),
        (60852, "a bfloat16 log_softmax eager rounds to 0, then divided by: -inf in eager, float64's value here"),
    ],
)
def test_seeds_of_the_long_run(seed, why):
    prog = generate(RandomChooser(seed))
    outcome = run_training_program(prog)
    assert outcome.kind in ("match", "precision"), f"{why}: {outcome}\n{prog.describe()}"


def _program(body: str, *inputs: torch.Tensor) -> Program:
    source = (
        "import torch\nimport torch.nn.functional as F\n\n\nclass Program(torch.nn.Module):\n"
        f"    def forward(self, x):\n        {body}\n"
    )
    return Program(None, source, inputs, None, None, [], [], [])


def test_topk_of_tied_values_is_told_apart():
    """PyTorch's CPU topk does not keep the first of equal values (seed 226): the gradient lands on another of the
    tied elements than onnxruntime's TopK picks. That is ``ties``, not a mismatch; without ties it matches."""
    tied = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 0.5]).reshape(1, 6, 1)
    outcome = run_training_program(_program("return x.topk(2, 1)[0]", tied))
    assert outcome.kind == "ties" and outcome.detail.startswith("topk of tied values"), outcome
    distinct = torch.tensor([1.0, 3.0, 3.5, 2.0, 4.0, 0.5]).reshape(1, 6, 1)
    assert run_training_program(_program("return x.topk(2, 1)[0]", distinct)).kind == "match"


def test_a_wrong_gradient_is_a_mismatch():
    """The comparison itself: a backward converter that gives another gradient is caught."""
    def doubled(ctx, grad_output, output):
        return ctx.op("Mul", ctx.op("Mul", grad_output, ctx.const(2.0, grad_output.dtype)),
                      ctx.op("Sub", ctx.const(1.0, output.dtype), ctx.op("Mul", output, output)))

    registry = default_registry.with_converter("aten::tanh_backward.default", doubled)
    prog = _program("return torch.tanh(x) * 3", torch.randn(4, 5))
    outcome = run_training_program(prog, lambda: OrtBackend(registry=registry))
    assert outcome.kind == "mismatch" and "gradient of input 0" in outcome.detail, outcome


@pytest.mark.parametrize(
    "body, x",
    [
        ("return torch.zeros(4, 5, dtype=x.dtype).scatter_reduce(0, torch.tensor([[0, 1, 2, 3, 0], [1, 1, 0, 3, 2]]), "
         "x, reduce='sum')", torch.randn(2, 5).half()),
        ("return torch.zeros(4, 5, dtype=x.dtype).scatter_reduce(0, torch.tensor([[0, 1, 2, 3, 0], [1, 1, 0, 3, 2]]), "
         "x, reduce='amax')", torch.randn(2, 5).half()),
        ("y = x.abs() + 0.5\n        y[x > 0.3] = x[x > 0.3] * 2 + 1\n        return torch.log(y) + torch.erf(y)",
         torch.randn(4, 5)),
        ("y = x.abs() + 0.5\n        y[torch.tensor([0, 2]), torch.tensor([1, 3])] = x[0, :2] + 3\n"
         "        return torch.log(y) * torch.erf(y)", torch.randn(4, 5)),
    ],
    ids=["scatter_reduce_sum_float16", "scatter_reduce_amax_float16", "masked_setitem_log_erf", "index_put_log_erf"],
)
def test_programs_another_run_found_different(body, x):
    """The shapes of the silent gradient differences another fuzzer run reported (a float16 scatter_reduce, a
    masked or indexed setitem feeding log and erf): they train as eagerly."""
    outcome = run_training_program(_program(body, x.requires_grad_()))
    assert outcome.kind == "match", f"{outcome}\n{body}"
