"""Training through onnxruntime with the torch.compile backend: 20 AdamW steps compared with eager PyTorch from the
same initial weights (losses at every step, parameters at the end, gradients of the first step tensor by tensor),
a custom autograd.Function kept as one PythonOp / PythonOpGrad pair, dropout statistics, new shapes, the eager
fallback and the verification option."""

from __future__ import annotations

import copy
import subprocess
import sys
import logging
import warnings

import pytest
import torch
import transformers

from experimental.torch_interpreter import EagerFallbackWarning, VerificationError, default_registry
from experimental.torch_interpreter.python_op import contexts
from experimental.torch_interpreter.training import BackendOptions, OrtBackend

STEPS = 20


def _train(model, batches, loss_fn, backend=None, lr=1e-3):
    """Losses of each step, the gradients of the first step, the model trained."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    run = torch.compile(model, backend=backend) if backend is not None else model
    losses, first_grads = [], None
    for batch in batches:
        optimizer.zero_grad()
        loss = loss_fn(run, batch)
        loss.backward()
        if first_grads is None:
            first_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
        losses.append(loss.item())
    return losses, first_grads, model


def _compare(model, batches, loss_fn, backend, rtol=1e-4, atol=1e-4):
    """Trains a copy of ``model`` eagerly and another with ``backend``; every comparison of the issue."""
    eager_losses, eager_grads, eager_model = _train(copy.deepcopy(model), batches, loss_fn)
    losses, grads, trained = _train(copy.deepcopy(model), batches, loss_fn, backend)
    for step, (got, expected) in enumerate(zip(losses, eager_losses)):
        assert got == pytest.approx(expected, rel=rtol, abs=1e-6), f"step {step}: loss {got} != {expected}"
    assert grads.keys() == eager_grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(g, eager_grads[name], rtol=1e-3, atol=1e-5, msg=f"gradient of {name}")
    for (name, p), (_, e) in zip(trained.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p, e, rtol=rtol, atol=atol, msg=f"parameter {name} after {len(batches)} steps")
    for (name, b), (_, e) in zip(trained.named_buffers(), eager_model.named_buffers()):
        torch.testing.assert_close(b, e, rtol=rtol, atol=atol, msg=f"buffer {name} after {len(batches)} steps")
    assert all(g.runs_in == "onnxruntime" for g in backend.graphs), backend.graphs
    kinds = [g.kind for g in backend.graphs]
    # one forward and one backward graph per compilation (BERT recompiles once: its first call sets
    # config.problem_type, which the first graph's guards read)
    assert kinds.count("forward") == kinds.count("backward") == backend.compilations >= 1, kinds
    return losses


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _backend(**kwargs):
    return OrtBackend(providers="cpu", fallback="raise", **kwargs)


def test_llama_causal_lm():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=64, max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config).train()
    batches = [torch.randint(0, 64, (2, 12))] * STEPS  # one batch learned by heart: the loss must fall
    losses = _compare(model, batches, lambda m, ids: m(input_ids=ids, labels=ids).loss, _backend())
    assert losses[-1] < losses[0] - 0.1


def test_bert_classification():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3,
    )
    model = transformers.BertForSequenceClassification(config).train()
    batches = [(torch.randint(0, 64, (4, 10)), torch.randint(0, 3, (4,))) for _ in range(STEPS)]

    def loss_fn(m, batch):
        ids, labels = batch
        return m(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss

    _compare(model, batches, loss_fn, _backend())


class _Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            # no bias before a batch norm: its gradient is zero up to rounding, and AdamW would turn the rounding
            # noise of either side into full-size steps of opposite signs
            torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def test_cnn_with_batch_norm():
    torch.manual_seed(0)
    batches = [(torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))) for _ in range(STEPS)]
    loss_fn = lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1])  # noqa: E731
    _compare(_Cnn().train(), batches, loss_fn, _backend())


class ScaledCube(torch.autograd.Function):
    """x ** 3 * alpha, with its own backward; counts its real (not fake) calls."""

    forward_calls = 0
    backward_calls = 0

    @staticmethod
    def forward(ctx, x, alpha):
        if not isinstance(x, torch._subclasses.FakeTensor):
            ScaledCube.forward_calls += 1
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return x**3 * alpha

    @staticmethod
    def backward(ctx, grad):
        ScaledCube.backward_calls += 1
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2 * ctx.alpha, None


class _WithFunction(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(6, 8)
        self.second = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.second(ScaledCube.apply(torch.tanh(self.first(x)), 0.5))


def test_custom_function_pythonop_pair():
    torch.manual_seed(0)
    batches = [torch.randn(5, 6) for _ in range(STEPS)]
    loss_fn = lambda m, x: m(x).pow(2).mean()  # noqa: E731
    backend = _backend()
    eager_losses, _, _ = _train(_WithFunction(), batches[:1], loss_fn)  # warms nothing up: eager
    ScaledCube.forward_calls = ScaledCube.backward_calls = 0
    torch.manual_seed(0)
    model = _WithFunction()
    _compare(model, batches, loss_fn, backend)
    # the eager copy ran forward and backward once per step too: the compiled one exactly once more per step
    assert ScaledCube.forward_calls == 2 * STEPS
    assert ScaledCube.backward_calls == 2 * STEPS
    forward = next(g.graph.model for g in backend.graphs if g.kind == "forward")
    backward = next(g.graph.model for g in backend.graphs if g.kind == "backward")
    assert [n.op_type for n in forward.graph.node].count("PythonOp") == 1
    assert [n.op_type for n in backward.graph.node].count("PythonOpGrad") == 1
    node = next(n for n in backward.graph.node if n.op_type == "PythonOpGrad")
    attrs = {a.name: a for a in node.attribute}
    assert attrs["func_name"].s.decode().endswith("ScaledCube")
    assert attrs["output_convention"].s == b"dc"
    assert list(attrs["output_tensor_requires_grads"].ints) == [1]
    assert contexts.live() == 0  # every context consumed by its backward
    assert eager_losses


def test_dropout_statistics():
    torch.manual_seed(0)
    p = 0.3
    model = torch.nn.Sequential(torch.nn.Dropout(p)).train()
    compiled = torch.compile(model, backend=_backend())
    x = (torch.rand(200, 100) + 0.5).requires_grad_()
    y = compiled(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.02
    torch.testing.assert_close(y[kept], (x / (1 - p))[kept])
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / (1 - p))  # the backward uses the forward's mask
    assert not torch.equal(compiled(x) != 0, kept)  # a new mask at each run


def test_new_shapes_recompile_once_and_match(caplog):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2))
    backend = _backend()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=backend)
    with caplog.at_level(logging.INFO, logger="experimental.torch_interpreter.training"):
        for batch in (4, 7, 9, 3):
            x = torch.randn(batch, 6)
            got, expected = compiled(x), eager(x)
            got.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
            for p, e in zip(model.parameters(), eager.parameters()):
                torch.testing.assert_close(p.grad, e.grad, rtol=1e-4, atol=1e-5)
    # the second shape recompiles with a dynamic batch, the others reuse that graph
    assert backend.compilations == 2
    assert sum("compiling dynamo graph" in r.message for r in caplog.records) == 2


class _Unconvertible(torch.nn.Module):
    """``matrix_exp`` has no converter (its forward graph falls back to eager)."""

    def forward(self, x):
        return torch.linalg.matrix_exp(x.reshape(-1, 3, 3)).sum()


def test_fallback_to_eager_names_the_op():
    model = torch.nn.Sequential(torch.nn.Linear(3, 9), _Unconvertible())
    x = torch.randn(2, 3)
    expected = model(x)
    backend = OrtBackend(providers="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(model, backend=backend)(x)
    torch.testing.assert_close(got, expected)
    messages = [str(w.message) for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert messages and "matrix_exp" in messages[0] and "test_training.py" in messages[0], messages
    assert backend.graphs[0].runs_in == "eager"
    got.backward()

    torch._dynamo.reset()
    strict = OrtBackend(providers="cpu", fallback="raise")
    with pytest.raises(Exception, match="matrix_exp"):
        torch.compile(model, backend=strict)(x)



@torch.library.custom_op("aten2onnx_test_training::log_tensor", mutates_args=())
def _log_tensor(x: torch.Tensor) -> None:
    """An op with side effects: AOTAutograd wraps its calls in ``higher_order::with_effects``."""


_log_tensor.register_fake(lambda x: None)
torch._higher_order_ops.effects._register_effectful_op(
    torch.ops.aten2onnx_test_training.log_tensor.default, torch._higher_order_ops.effects._EffectType.ORDERED
)


@torch.compiler.disable
def _logged(y):
    torch.ops.aten2onnx_test_training.log_tensor(y)


class _Logging(torch.nn.Module):
    def __init__(self, outside):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)
        self.outside = outside

    def forward(self, x):
        y = self.lin(x)
        if self.outside:
            _logged(y)
        else:
            torch.ops.aten2onnx_test_training.log_tensor(y)
        return y.relu()


def test_fallback_names_the_op_with_side_effects_not_its_wrapper():
    """The warning names the op inside ``with_effects`` and does not advise a converter for the wrapper; its
    advice (call the op outside the compiled code) makes every graph run in onnxruntime."""
    backend = OrtBackend(providers="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(_Logging(False), backend=backend)(torch.randn(3, 4)).sum().backward()
    messages = [str(w.message) for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert len(messages) == 1, messages
    assert "aten2onnx_test_training::log_tensor.default" in messages[0], messages
    assert "side effects" in messages[0] and "torch.compiler.disable" in messages[0], messages
    assert "Register a converter" not in messages[0], messages
    assert [g.runs_in for g in backend.graphs] == ["eager", "onnxruntime"], backend.graphs

    torch._dynamo.reset()
    backend = _backend()
    torch.compile(_Logging(True), backend=backend)(torch.randn(3, 4)).sum().backward()
    assert {g.runs_in for g in backend.graphs} == {"onnxruntime"}, backend.graphs


def test_verify_finds_a_wrong_converter():
    def wrong_tanh(ctx, x):
        return ctx.op("Sigmoid", x)

    registry = default_registry.with_converter("aten::tanh.default", wrong_tanh)

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())
    backend = OrtBackend(BackendOptions(providers="cpu", verify=True, registry=registry))
    with pytest.raises(Exception, match="forward_1: output 0 .*tanh"):
        torch.compile(model, backend=backend)(torch.randn(2, 3))


class _GeluMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(3, 4)
        self.down = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


def test_verify_names_the_first_wrong_node_of_the_backward_graph():
    def wrong_gelu_backward(ctx, grad, x, approximate="none"):
        return grad  # no ONNX node of its own: the gradient of the next layer handed back unchanged

    registry = default_registry.with_converter("aten::gelu_backward.default", wrong_gelu_backward)

    torch.manual_seed(0)
    backend = OrtBackend(BackendOptions(providers="cpu", verify=True, registry=registry))
    out = torch.compile(_GeluMlp(), backend=backend)(torch.randn(5, 3))  # the forward graph passes
    forward = next(g for g in backend.graphs if g.kind == "forward")
    assert forward.runs_in == "onnxruntime" and forward.graph.calls == 1
    with pytest.raises(VerificationError) as caught:
        out.sum().backward()
    message = str(caught.value)
    assert "backward_1: output" in message, message
    assert "the first FX node that differs from PyTorch is\nFX node 'gelu_backward' (aten::gelu_backward.default)" in (
        message
    ), message
    assert "test_training.py" in message and "torch.nn.functional.gelu(self.up(x))" in message, message
    assert f"{wrong_gelu_backward.__module__}.{wrong_gelu_backward.__qualname__}" in message, message
    first = caught.value.report.first
    assert first.fx_node == "gelu_backward" and first.max_abs > 1e-3


def test_options_are_checked():
    with pytest.raises(ValueError, match="fallback"):
        OrtBackend(fallback="maybe")
    from experimental.torch_interpreter import ProviderError

    with pytest.raises(ProviderError):
        OrtBackend(providers="tpu")
    assert issubclass(VerificationError, AssertionError)


def test_registered_backend_name():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    got = torch.compile(model, backend="aten2onnx", options={"providers": "cpu", "fallback": "raise"})(x)
    torch.testing.assert_close(got, model(x))


def test_backend_by_name_says_how_to_keep_functions_whole():
    """``backend="aten2onnx"`` is made at dynamo's first graph, after dynamo traced a Function defined before: the
    warning says to pass ``OrtBackend()`` (not to define the class before the backend, which the user did). The
    class is defined after the name was first looked up (which marks the classes defined then)."""
    torch.compile(torch.nn.Identity(), backend="aten2onnx")

    class Thrice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 3 * x

        @staticmethod
        def backward(ctx, g):
            return 3 * g

    class Model(torch.nn.Module):
        def forward(self, x):
            return Thrice.apply(x).sin()

    x = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(Model(), backend="aten2onnx", options={"providers": "cpu"})(x)
    said = [str(w.message) for w in caught if "traced through" in str(w.message)]
    assert said and "pass backend=OrtBackend()" in said[0] and "define the class before" not in said[0], said
    torch.testing.assert_close(got, (3 * x).sin())


def test_backend_by_name_keeps_functions_defined_before_the_first_compile(tmp_path):
    """In a new process, a Function defined before the first ``torch.compile(backend="aten2onnx")``: the lookup of
    the name marks it, dynamo leaves it whole, the graphs hold a PythonOp / PythonOpGrad pair (no warning)."""
    script = tmp_path / "by_name.py"
    script.write_text(
        "import warnings, torch\n"
        "from experimental.torch_interpreter.training.backend import _default\n"
        "class Twice(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return 2 * x\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return 2 * g\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return Twice.apply(x).sin()\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    y = torch.compile(M(), backend='aten2onnx')(x)\n"
        "    y.sum().backward()\n"
        "assert not [w for w in caught if 'traced through' in str(w.message)], [str(w.message) for w in caught]\n"
        "ops = sorted({n.op_type for g in _default().graphs for n in g.graph.model.graph.node})\n"
        "assert 'PythonOp' in ops and 'PythonOpGrad' in ops, ops\n"
        "torch.testing.assert_close(x.grad, 2 * torch.cos(2 * x.detach()))\n"
        "print('ok', ops)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


def test_a_graph_onnxruntime_refuses_runs_eagerly():
    def unknown_op(ctx, x):
        return ctx.op("NoSuchOp", x, domain="nowhere.example")

    registry = default_registry.with_converter("aten::tanh.default", unknown_op)

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())
    x = torch.randn(2, 3)
    backend = OrtBackend(providers="cpu", registry=registry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(model, backend=backend)(x)
    torch.testing.assert_close(got, model(x))
    messages = [str(w.message) for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert messages and "onnxruntime cannot load the translated forward_1 graph" in messages[0], messages


def test_evaluation_under_no_grad_keeps_no_context():
    """Under ``torch.no_grad`` AOTAutograd makes an inference graph: the Function is a plain PythonOp (no context
    kept); a later training call gets its forward/backward pair and consumes its context."""
    torch.manual_seed(0)
    model = _WithFunction()
    backend = _backend()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(4, 6)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert [(g.kind, g.runs_in) for g in backend.graphs] == [("inference", "onnxruntime")]
    assert contexts.live() == 0
    y = compiled(x)
    assert contexts.live() == 1  # the forward's context waits for its backward
    y.sum().backward()
    assert contexts.live() == 0
    del y


class _PassThroughGradient(torch.nn.Module):
    """index_add of constants: the backward graph hands the incoming gradient back as it is (no node to run)."""

    def forward(self, x):
        return x.index_add(0, torch.tensor([0, 2]), torch.ones(2, 3, dtype=x.dtype))


class _ConstantOutput(torch.nn.Module):
    """A graph whose only output is a constant: folded, the model has no node (onnxruntime loads it)."""

    def forward(self, x):
        return torch.arange(6.0).reshape(2, 3) * 2


def test_graphs_without_nodes_run_without_fallback(caplog):
    torch.manual_seed(0)
    x = torch.randn(3, 3)
    leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad((_PassThroughGradient()(leaf) ** 2).sum(), leaf)
    backend = _backend()
    leaf = x.clone().requires_grad_()
    (got,) = torch.autograd.grad((torch.compile(_PassThroughGradient(), backend=backend)(leaf) ** 2).sum(), leaf)
    torch.testing.assert_close(got, expected)
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"], backend.graphs
    torch._dynamo.reset()
    backend = _backend()
    compiled = torch.compile(_ConstantOutput(), backend=backend)
    with caplog.at_level(logging.WARNING):
        first = compiled(x)
    first.add_(1)  # each call gets its own tensor
    torch.testing.assert_close(compiled(x), _ConstantOutput()(x))
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime"], backend.graphs
    # onnx-ir's deduplication warns about a constant output: nothing the user can act on, not shown
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.records


class _PoolPad(torch.nn.Module):
    """The backward ops of pooling and padding: avg_pool2d (ceil mode, padding), adaptive_avg_pool2d to a size
    that does not divide, adaptive_max_pool2d, reflection and replication padding."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = torch.nn.functional.pad(x, (1, 2, 2, 1), mode="reflect")
        y = self.conv(y)
        y = torch.nn.functional.avg_pool2d(y, 3, 2, 1, ceil_mode=True, count_include_pad=False)
        y = torch.nn.functional.pad(y, (1, 1, 0, 2), mode="replicate")
        return torch.nn.functional.adaptive_avg_pool2d(y, (3, 2)) + torch.nn.functional.adaptive_max_pool2d(y, 2).mean()


def test_pooling_and_padding_train_in_onnxruntime():
    torch.manual_seed(0)
    batches = [torch.randn(2, 3, 9, 8) for _ in range(3)]
    _compare(_PoolPad(), batches, lambda m, x: m(x).square().mean(), _backend())


class _InputViews(torch.nn.Module):
    """Outputs that are views of the input (training fuzz seed 629): a slice with an offset, a transposed slice."""

    def forward(self, x):
        return torch.tensor_split(x, 2, 2)[1], x * 2, x.transpose(0, 1)[1:]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_outputs_viewing_inputs_have_eager_strides(dynamic):
    """AOTAutograd rebuilds such an output from the compiled graph's strides and offset: onnxruntime's contiguous
    copy made it read other elements of the input (with dynamic sizes). The views are replayed by PyTorch."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 3)
    expected_leaf, leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = _InputViews()(expected_leaf.clone())
    backend = _backend()
    got = torch.compile(_InputViews(), backend=backend, dynamic=dynamic)(leaf.clone())
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
        assert (g.stride(), g.storage_offset()) == (e.stride(), e.storage_offset())
    sum((o * (i + 1)).sum() for i, o in enumerate(got)).backward()
    sum((o * (i + 1)).sum() for i, o in enumerate(expected)).backward()
    torch.testing.assert_close(leaf.grad, expected_leaf.grad)
    assert all(g.runs_in == "onnxruntime" for g in backend.graphs), backend.graphs


class _GradOfOneInput(torch.autograd.Function):
    """``x * 2`` that also takes ``y`` (requiring grad) and returns None as its gradient (Phi-MoE's router does)."""

    @staticmethod
    def forward(ctx, x, y):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2, None


class _NoneGradient(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))
        self.v = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        out = _GradOfOneInput.apply(x * self.w, self.v)
        return out.sum() + (self.v * 0).sum(), torch.arange(4.0) * 2  # a constant output beside the PythonOp


def test_function_returning_none_gradient_and_constant_output():
    """The PythonOpGrad of a Function whose backward returns None for a tensor input gives zeros (the backward graph
    reads a tensor there: KeyError before), and a graph with PythonOp nodes returns a folded constant output."""
    torch.manual_seed(0)
    model = _NoneGradient()
    x = torch.randn(3, 4)
    backend = _backend()
    compiled = torch.compile(copy.deepcopy(model), backend=backend)
    loss, constant = compiled(x)
    loss.backward()
    expected_model = copy.deepcopy(model)
    expected_loss, expected_constant = expected_model(x)
    expected_loss.backward()
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(constant, expected_constant)
    for (name, p), (_, e) in zip(compiled.named_parameters(), expected_model.named_parameters()):
        torch.testing.assert_close(p.grad, e.grad, msg=name)
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"], backend.graphs
