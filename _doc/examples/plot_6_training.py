"""
.. _l-training:

6. Training through onnxruntime
===============================

The converters that export a model for inference also run its training. ``torch.compile`` with the
:class:`~experimental.torch_interpreter.training.OrtBackend` backend hands each graph dynamo captures to
AOTAutograd, which splits it into a **forward** and a **backward** graph; both are translated op by op and run by
onnxruntime. The parameters stay torch tensors and the optimizer stays PyTorch's: nothing changes in the training
loop but the ``torch.compile`` line.

This page trains a tiny Llama both ways and compares the losses, follows a custom ``torch.autograd.Function``
into the two graphs, draws them, and goes through the options of the backend. :doc:`/training` explains what runs
where.

A tiny Llama, trained twice
---------------------------

A Llama with two layers, a hidden size of 32 and 64 tokens (random weights, no download) learns one batch by
heart: 30 AdamW steps, once in eager PyTorch and once compiled with the backend, each from a copy of the same
initial weights.
"""

import collections
import copy
import logging
import os
import sys
import tempfile
import warnings

import matplotlib.pyplot as plt
import torch
import transformers

from experimental.torch_interpreter import (
    EagerFallbackWarning,
    VerificationError,
    default_registry,
    plot_graph,
)
from experimental.torch_interpreter.training import OrtBackend

STEPS = 30

torch.manual_seed(0)
config = transformers.LlamaConfig(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=64, max_position_embeddings=64,
)
llama = transformers.LlamaForCausalLM(config).train()
input_ids = torch.randint(0, 64, (2, 12))


def train(model, loss_fn, backend=None, lr=1e-2):
    """STEPS AdamW steps, eagerly or compiled with ``backend``; returns the losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    run = model if backend is None else torch.compile(model, backend=backend)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(run)
        loss.backward()  # with the backend, the backward graph runs in onnxruntime
        optimizer.step()  # PyTorch's optimizer, on the same parameters
        losses.append(loss.item())
    return losses


def llama_loss(model):
    return model(input_ids=input_ids, labels=input_ids).loss


eager_llama = copy.deepcopy(llama)
eager_losses = train(eager_llama, llama_loss)

backend = OrtBackend(providers="cpu")
ort_llama = copy.deepcopy(llama)
ort_losses = train(ort_llama, llama_loss, backend)

# %%
# ``backend.graphs`` lists what was compiled: one forward and one backward graph, both run by onnxruntime, with
# the number of nodes before (FX) and after (ONNX) the translation.

for g in backend.graphs:
    print(f"{g.kind:9} #{g.number}  runs in {g.runs_in}: "
          f"{g.fx_nodes} FX nodes -> {g.onnx_nodes} ONNX nodes")

# %%
# The losses agree to float32 rounding (the kernels of onnxruntime and PyTorch sum in different
# orders), and so do the parameters after the last step:

relative = [abs(o - e) / abs(e) for o, e in zip(ort_losses, eager_losses)]
print(f"eager loss: {eager_losses[0]:.4f} at step 1, {eager_losses[-1]:.4f} at the last")
print(f"largest relative difference between the losses: {max(relative):.1e}")
pairs = zip(ort_llama.parameters(), eager_llama.parameters())
param_diff = max((p - e).abs().max().item() for p, e in pairs)
print(f"largest difference between the parameters: {param_diff:.1e} "
      "(AdamW moves a parameter by about lr = 1e-2 per step)")

# %%
# The two loss curves overlap: the left plot cannot tell them apart; the right one shows how far apart
# they are, step by step (at step 1 both sides compute the same number: nothing to draw on a log scale).

steps = range(1, STEPS + 1)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(steps, eager_losses, "o-", markersize=7, label="eager PyTorch")
ax1.plot(steps, ort_losses, "x--", markersize=7, label="onnxruntime (OrtBackend)")
ax1.set_yscale("log")
ax1.set_xlabel("step")
ax1.set_ylabel("loss")
ax1.set_title("tiny Llama, AdamW, one batch")
ax1.legend()
ax2.semilogy(steps, relative, "s-", color="C2", markersize=4)
ax2.set_xlabel("step")
ax2.set_title("|loss onnxruntime - loss eager| / loss eager")
fig.tight_layout()
plt.show()

# %%
# ``torch.compile(model, backend="aten2onnx")`` does the same with the default options (onnxruntime's CUDA
# provider for a model on a GPU, the CPU provider otherwise); ``options={"providers": "cpu", ...}`` passes
# options to it. ``OrtBackend(...)`` takes the same options and keeps the record of what it compiled.
#
# A custom autograd.Function: PythonOp and PythonOpGrad
# -----------------------------------------------------
#
# A ``torch.autograd.Function`` with a backward of its own stays **one node in each graph**, calling the Python
# code back: a ``com.microsoft::PythonOp`` node in the forward graph runs ``forward``, a
# ``com.microsoft::PythonOpGrad`` node in the backward graph runs ``backward``. ``ScaledCube`` computes
# ``alpha * x ** 3`` and counts its calls (dynamo and AOTAutograd also call ``forward`` on fake tensors, which
# carry shapes and no data, while they trace the model: those calls are not counted).


class ScaledCube(torch.autograd.Function):
    forward_calls = 0
    backward_calls = 0

    @staticmethod
    def forward(ctx, x, alpha):
        if not isinstance(x, torch._subclasses.FakeTensor):
            ScaledCube.forward_calls += 1
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return alpha * x**3

    @staticmethod
    def backward(ctx, grad):
        ScaledCube.backward_calls += 1
        (x,) = ctx.saved_tensors
        return grad * 3 * ctx.alpha * x**2, None  # no gradient for alpha


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(6, 8)
        self.second = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.second(ScaledCube.apply(torch.tanh(self.first(x)), 0.5))


torch.manual_seed(0)
net = Net()
x, y = torch.randn(16, 6), torch.randn(16, 1)


def net_loss(model):
    return torch.nn.functional.mse_loss(model(x), y)


def calls():
    return f"forward called {ScaledCube.forward_calls} times, backward {ScaledCube.backward_calls}"


eager_net_losses = train(copy.deepcopy(net), net_loss)
print("eager:      ", calls())
ScaledCube.forward_calls = ScaledCube.backward_calls = 0
net_backend = OrtBackend(providers="cpu")
ort_net_losses = train(copy.deepcopy(net), net_loss, net_backend)
print("onnxruntime:", calls())
relative = [abs(o - e) / abs(e) for o, e in zip(ort_net_losses, eager_net_losses)]
print(f"largest relative difference between the losses: {max(relative):.1e}")

# %%
# Once per step each, as in eager PyTorch. The two graphs:

forward = next(g.graph.model for g in net_backend.graphs if g.kind == "forward")
backward = next(g.graph.model for g in net_backend.graphs if g.kind == "backward")
print("forward: ", [n.op_type for n in forward.graph.node])
print("backward:", [n.op_type for n in backward.graph.node])

# %%
# The PythonOp's output 0 is a handle on the context ``forward`` filled (its saved tensors, ``ctx.alpha``): an
# int64 tensor the forward graph returns like any activation kept for the backward. The PythonOpGrad node
# receives it as its input 0, calls ``backward`` once and frees the context. Its attributes follow ONNX Runtime's
# gradient builder: ``output_convention`` has one letter per argument of ``forward`` (``d`` a tensor, ``c`` a
# constant: ``alpha``), ``output_tensor_requires_grads`` one flag per tensor argument.

grad_node = next(n for n in backward.graph.node if n.op_type == "PythonOpGrad")
attributes = {a.name: a for a in grad_node.attribute}
print("domain:", grad_node.domain)
print("func_name:", attributes["func_name"].s.decode())
print("output_convention:", attributes["output_convention"].s.decode())
print("output_tensor_requires_grads:", attributes["output_tensor_requires_grads"].ints)

# %%
# The graphs as pictures
# ----------------------
#
# Each graph is an ``onnx.ModelProto`` (``backend.graphs[i].graph.model``), which
# :func:`~experimental.torch_interpreter.plot_graph` draws. The inputs of the forward graph (``primals_*``) are
# the parameters and the batch; it returns the model's output (``output_0``) and the activations the backward
# needs, among them the PythonOp's handle (``INT64 [1]``). The backward graph reads those and ``tangents_1``, the
# gradient of the loss with respect to the output, and returns one gradient per parameter. Nodes of the
# ``com.microsoft`` domain are yellow.

fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 10))
plot_graph(forward, ax1, title="forward graph")
plot_graph(backward, ax2, title="backward graph")
plt.show()

# %%
# The Llama's graphs are too large for a picture; the op types of its backward graph tell what the gradients
# cost (the most frequent first):

llama_backward = next(g.graph.model for g in backend.graphs if g.kind == "backward")
counts = collections.Counter(n.op_type for n in llama_backward.graph.node)
print(len(llama_backward.graph.node), "nodes:")
print(", ".join(f"{op} {n}" for op, n in counts.most_common()))

# %%
# Options
# -------
#
# Eager fallback
# ++++++++++++++
#
# A graph holding an op no converter translates runs eagerly instead, with an ``EagerFallbackWarning`` naming the
# op and the model line (``fallback="raise"`` raises the error instead). ``torch.linalg.matrix_exp`` has no
# converter:


class WithMatrixExp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 9)

    def forward(self, x):
        return torch.linalg.matrix_exp(self.linear(x).reshape(-1, 3, 3)).sum()


fallback_backend = OrtBackend(providers="cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss = torch.compile(WithMatrixExp(), backend=fallback_backend)(torch.randn(2, 3))
    loss.backward()
print([w.category.__name__ for w in caught])
print(next(w.message for w in caught if issubclass(w.category, EagerFallbackWarning)))
print([(g.kind, g.runs_in) for g in fallback_backend.graphs])

# %%
# verify=True
# +++++++++++
#
# ``verify=True`` runs every graph, forward and backward, eagerly in PyTorch on its first inputs and compares each
# output with onnxruntime's; a difference raises a ``VerificationError`` naming the output, the FX node behind
# it and its converter. A converter of our own for ``tanh``, wrong on purpose (a sigmoid), in a copy of the
# registry given to the backend:


def tanh_as_sigmoid(ctx, x):
    return ctx.op("Sigmoid", x)


wrong = default_registry.with_converter("aten::tanh.default", tanh_as_sigmoid)

model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())
checked = OrtBackend(providers="cpu", verify=True, registry=wrong)
try:
    torch.compile(model, backend=checked)(torch.randn(2, 3))
except VerificationError as e:
    print(f"{type(e).__name__}: {e}")

# %%
# New shapes, logs and dump_folder
# ++++++++++++++++++++++++++++++++
#
# Dynamo guards on the shapes of the inputs: a new batch size does not reuse a graph made for another one.
# Its second compilation marks the batch dynamic, so a third batch size runs without compiling again. The logger
# ``experimental.torch_interpreter.training`` says at INFO when dynamo hands a graph over, what each translation
# gives and what ``verify=True`` found; ``dump_folder`` saves every translated graph there.

logger = logging.getLogger("experimental.torch_interpreter.training")
logger.setLevel(logging.INFO)
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logger.addHandler(handler)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
            torch.nn.Linear(16, 2),
        )

    def forward(self, x):
        return self.layers(x)


folder = tempfile.mkdtemp()
mlp_backend = OrtBackend(providers="cpu", verify=True, dump_folder=folder)
compiled = torch.compile(Mlp(), backend=mlp_backend)
for batch in (4, 7, 9):
    print(f"--- batch {batch}")
    compiled(torch.randn(batch, 6)).sum().backward()
print("compilations:", mlp_backend.compilations)
print("saved:", sorted(os.listdir(folder)))
# sphinx_gallery_start_ignore
logger.removeHandler(handler)
logger.setLevel(logging.NOTSET)
# sphinx_gallery_end_ignore

# %%
# The parameters are inputs of the graphs too (the ``(16, 6)``, ``(16,)``... at the front of the list). The
# second compilation replaced the batch size by a symbol (the ``s...`` in the log, an int64 input of the new
# graphs): batch 9 ran the graphs of batch 7, and ``verify=True`` checked each graph on its first run.

# %%
# Random ops
# ----------
#
# Dropout draws its masks from onnxruntime's random generator, not PyTorch's. The statistics are PyTorch's (the
# probability, the scaling by ``1 / (1 - p)``) and the backward uses the forward's mask, but ``torch.manual_seed``
# does not reproduce the masks: two runs after the same seed give the same masks in eager PyTorch, not through
# the backend. To compare a training run with eager PyTorch step by step, set the dropout probabilities to 0
# (the tiny Llama above has none: ``attention_dropout`` is 0 by default).

dropout = torch.nn.Dropout(0.3).train()
compiled_dropout = torch.compile(dropout, backend=OrtBackend(providers="cpu"))
ones = torch.ones(100, 100)
for name, run in (("eager", dropout), ("onnxruntime", compiled_dropout)):
    torch.manual_seed(0)
    first = run(ones) != 0
    torch.manual_seed(0)
    second = run(ones) != 0
    kept = first.float().mean().item()
    print(f"{name:12} same masks after the same seed: {torch.equal(first, second)}, "
          f"70% kept (within 3%): {abs(kept - 0.7) < 0.03}")
