"""
.. _l-custom-code:

2b. Custom ops and a tiny Llama
===============================

Real models call more than aten ops: custom operators (``torch.library``), ``torch.autograd.Function``
wrapping a kernel, and large stacks of modules from ``transformers``. This page exports one of each.

A custom op and its converter
-----------------------------

A custom op declared with ``torch.library.custom_op`` stays **one** node in the exported graph
(``demo::scaled_tanh.default``): ``torch.export`` does not look inside. ``to_onnx`` has no converter for it
and says so before building anything.
"""

import numpy as np
import onnx
import onnx_ir as ir
import torch
import transformers

from experimental.torch_interpreter import (
    InferenceSession,
    Registry,
    UnsupportedOpError,
    default_registry,
    register,
    to_onnx,
)
from experimental.torch_interpreter.translation.context import NodeContext


@torch.library.custom_op("demo::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.tanh(x) * alpha


@scaled_tanh.register_fake
def _(x, alpha):
    return torch.empty_like(x)


class WithCustomOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return scaled_tanh(self.lin(x), 0.5)


model = WithCustomOp().eval()
x = torch.randn(3, 4)
try:
    to_onnx(model, (x,))
except UnsupportedOpError as e:
    print(e)

# %%
# The converter receives a :class:`~experimental.torch_interpreter.translation.context.NodeContext` and the node's
# arguments: ``x`` as an ``onnx_ir.Value``, ``alpha`` as a Python float. ``register`` adds it to the
# default registry, for every later export in this process.


@register("demo::scaled_tanh.default")
def demo_scaled_tanh_default(ctx: NodeContext, x: ir.Value, alpha: float) -> ir.Value:
    """scaled_tanh(Tensor x, float alpha) -> Tensor"""
    return ctx.op("Mul", ctx.op("Tanh", x), ctx.const(alpha, x.dtype))


onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
print([(n.op_type, n.name) for n in onx.graph.node])
feed = torch.randn(6, 4)
np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": feed})[0], model(feed).detach().numpy(), atol=1e-6)

# %%
# To change the translation of one export only (replace a converter of the project, try a variant), give
# ``to_onnx`` a registry of your own: a copy of the default one, modified.

mine = Registry()
for key in default_registry.supported():
    if key != "demo::scaled_tanh.default":
        mine.register(key)(default_registry.get(key))


@mine.register("demo::scaled_tanh.default")
def scaled_tanh_as_function_of_exp(ctx: NodeContext, x: ir.Value, alpha: float) -> ir.Value:
    """scaled_tanh(Tensor x, float alpha) -> Tensor: ``alpha * (1 - 2 / (exp(2x) + 1))``."""
    two = ctx.const(2.0, x.dtype)
    e = ctx.op("Exp", ctx.op("Mul", x, two))
    t = ctx.op("Sub", ctx.const(1.0, x.dtype), ctx.op("Div", two, ctx.op("Add", e, ctx.const(1.0, x.dtype))))
    return ctx.op("Mul", t, ctx.const(alpha, x.dtype))


onx = to_onnx(model, (x,), registry=mine)
print([n.op_type for n in onx.graph.node])

# %%
# A custom autograd.Function as PythonOp
# --------------------------------------
#
# A ``torch.autograd.Function`` usually wraps a kernel of its own (Triton, CUDA extension) that
# ``torch.export`` cannot trace. ``to_onnx`` exports each call as one ``com.microsoft::PythonOp`` node
# carrying the class name and the constant arguments, and ``InferenceSession`` runs such a model by calling
# the function back (see :doc:`/python_op`).


class ScaledClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return alpha * x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.alpha * (x > 0), None


class WithFunction(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.sigmoid(ScaledClamp.apply(self.lin(x), 2.0))


model = WithFunction().eval()
onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
print([(n.domain, n.op_type) for n in onx.graph.node])
node = next(n for n in onx.graph.node if n.op_type == "PythonOp")
for att in node.attribute:
    print(f"{att.name:28} {onnx.helper.get_attribute_value(att)}")

# %%
# ``InferenceSession`` runs ``Gemm`` in onnxruntime, ``ScaledClamp.apply`` in torch, then ``Sigmoid`` in
# onnxruntime.

sess = InferenceSession(onx)
np.testing.assert_allclose(sess.run(None, {"x": feed})[0], model(feed).detach().numpy(), atol=1e-6)
print("same results as PyTorch")

# %%
# ``autograd_functions="inline"`` exports the ops of ``forward`` instead: a plain ONNX graph, when forward is
# made of torch ops. A dict chooses per class.

onx = to_onnx(model, (x,), autograd_functions="inline")
print([n.op_type for n in onx.graph.node])
onx = to_onnx(model, (x,), autograd_functions={ScaledClamp: "python_op"})
print([n.op_type for n in onx.graph.node])

# %%
# A tiny Llama
# ------------
#
# ``transformers`` models export from a configuration with random weights: no download. This one has two
# layers of width 64 and no cache (``use_cache=False``); ``input_ids`` and ``attention_mask`` share the
# ``batch`` and ``seq`` dimensions.

config = transformers.LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1000,
    max_position_embeddings=256,
    use_cache=False,
)
torch.manual_seed(0)
llama = transformers.LlamaForCausalLM(config).eval()
inputs = {"input_ids": torch.randint(0, 1000, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.int64)}
dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
onx = to_onnx(llama, (), inputs, dynamic_shapes=dynamic)
print("inputs:", [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in onx.graph.input])
print("outputs:", [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]) for o in onx.graph.output])
print(len(onx.graph.node), "nodes")

# %%
# Which module produced how many nodes, from the metadata of each node (module paths cut after the layer
# number). Constants carry no metadata; the few nodes that torch itself inserted while exporting (checks on
# dynamic sizes) carry torch's placeholder scope ``_empty_nn_module_stack_from_metadata_hook``.

import collections  # noqa: E402

per_module = collections.Counter()
for node in onx.graph.node:
    meta = {p.key: p.value for p in node.metadata_props}
    scope = meta.get("pkg.torch.module_scope", "(constants)").split(":")[0]
    per_module[".".join(scope.split(".")[:3])] += 1
for scope, count in sorted(per_module.items()):
    print(f"{count:4}  {scope}")

# %%
# Attention stays one family: the ``Softmax`` of each layer comes from its ``scaled_dot_product_attention``.

for node in onx.graph.node:
    if node.op_type == "Softmax":
        meta = {p.key: p.value for p in node.metadata_props}
        print(node.name, meta["pkg.torch.target"], "|", meta["pkg.torch.module_scope"])

# %%
# The same results as ``transformers`` on other shapes, on CUDA when available:

sess = InferenceSession(onx)
print(sess.get_providers())
for batch, seq in [(1, 5), (3, 11)]:
    feeds = {"input_ids": torch.randint(0, 1000, (batch, seq)), "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
    expected = llama(**feeds).logits.detach().numpy()
    got = sess.run(None, feeds)[0]
    print(batch, seq, got.shape, "max difference", float(np.abs(got - expected).max()))

# %%
# The nodes per module of the tiny Llama as a figure:

import matplotlib.pyplot as plt  # noqa: E402

scopes = sorted(per_module)
fig, ax = plt.subplots(figsize=(5, 3))
ax.barh(scopes, [per_module[s] for s in scopes])
ax.set_xlabel("ONNX nodes")
ax.set_title("tiny Llama: ONNX nodes per module")
fig.tight_layout()
