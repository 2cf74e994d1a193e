"""Gradients through outputs the loss never used: ``None`` with the backend, as eager PyTorch leaves them.

AOTAutograd gives an unused output of a compiled region a gradient of zeros, so the parameters only that output
depends on got zeros where eager has ``None``, and AdamW's weight decay moved them (BigBird's pooler, found by the
training zoo; inductor does the same)."""

from __future__ import annotations

import copy

import pytest
import torch

from experimental.torch_interpreter.training import OrtBackend


class TwoHeads(torch.nn.Module):
    """Two outputs; the second is a ``tanh`` (its result is also saved for the backward, as a pooler's is)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 8)
        self.first = torch.nn.Linear(8, 3)
        self.pooler = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.first(h), torch.tanh(self.pooler(h[:, 0] if h.dim() == 3 else h))


def _grads(model):
    return {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}


def _step(model, run, loss_of, steps=2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    grads = None
    for i in range(steps):
        optimizer.zero_grad()
        loss_of(run(torch.randn(5, 4, generator=torch.Generator().manual_seed(i)))).backward()
        grads = grads or _grads(model)
        optimizer.step()
    return grads


@pytest.mark.parametrize(
    "loss_of",
    [lambda out: out[0].square().mean(), lambda out: out[0].square().mean() + 0.0 * out[1].sum()],
    ids=["second-unused", "second-times-zero"],
)
def test_unused_output_leaves_gradients_none_as_eager(loss_of):
    torch.manual_seed(0)
    model = TwoHeads()
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model)
    backend = OrtBackend(providers="cpu", fallback="raise")
    expected = _step(eager, eager, loss_of)
    got = _step(compiled, torch.compile(compiled, backend=backend), loss_of)
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"]
    for name, e in expected.items():
        assert (got[name] is None) == (e is None), f"{name}: eager {e is None and 'None'}, backend {got[name]}"
        if e is not None:
            torch.testing.assert_close(got[name], e, rtol=1e-4, atol=1e-6)
    # the weight decay skipped the pooler in both: its parameters equal eager's after the steps
    for (name, p), (_, q) in zip(compiled.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)


def test_second_backward_through_the_other_output():
    """``retain_graph``: the first backward reaches one output, the second the other; gradients accumulate as
    eagerly."""
    torch.manual_seed(1)
    model = TwoHeads()
    eager, compiled = copy.deepcopy(model), copy.deepcopy(model)
    run = torch.compile(compiled, backend=OrtBackend(providers="cpu", fallback="raise"))
    x = torch.randn(5, 4)
    seen = []
    for m, r in ((eager, eager), (compiled, run)):
        a, b = r(x)
        a.sum().backward(retain_graph=True)
        first = _grads(m)
        b.sum().backward()
        seen.append((first, _grads(m)))
    (e_first, e_second), (g_first, g_second) = seen
    for name in e_first:
        assert (g_first[name] is None) == (e_first[name] is None), name
        if e_first[name] is not None:
            torch.testing.assert_close(g_first[name], e_first[name], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(g_second[name], e_second[name], rtol=1e-4, atol=1e-6)
