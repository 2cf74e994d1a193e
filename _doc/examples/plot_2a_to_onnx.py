"""
.. _l-to-onnx:

2a. Converting and running a model
==================================

:func:`experimental.torch_interpreter.to_onnx` takes the model, its example inputs and optionally the
dynamic axes, and returns an ``onnx.ModelProto``. :class:`experimental.torch_interpreter.InferenceSession`
runs it with onnxruntime, on CUDA when onnxruntime-gpu and a GPU are present, on the CPU otherwise.
This page goes from a simple model to dynamic shapes, saving, submodules and control flow, and draws the
graphs with :func:`~experimental.torch_interpreter.plot_graph`.

A simple model
--------------
"""

import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import onnx
import torch

from experimental.torch_interpreter import InferenceSession, plot_graph, to_onnx

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(4, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2)
).eval()
x = torch.randn(3, 4)
onx = to_onnx(model, (x,))


def print_graph(onx: onnx.ModelProto) -> None:
    """One line per node: outputs = op_type(inputs), the weights marked with a star."""
    weights = {i.name for i in onx.graph.initializer}
    shape = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    print("inputs: ", ", ".join(f"{i.name}{shape(i)}" for i in onx.graph.input))
    for node in onx.graph.node:
        args = ", ".join("*" + n if n in weights else n for n in node.input)
        print(f"  {', '.join(node.output):12} = {node.op_type}({args})")
    print("outputs:", ", ".join(f"{o.name}{shape(o)}" for o in onx.graph.output))


print_graph(onx)

# %%
# ``Linear`` is one ``Gemm``, ``LayerNorm`` one ``LayerNormalization``. ``GELU`` is written with ``Erf``
# because the default opset is 18; ONNX has a ``Gelu`` operator from opset 20 on:

onx20 = to_onnx(model, (x,), target_opset=20)
print([n.op_type for n in onx20.graph.node])

# %%
# The graph as a picture
# ----------------------
#
# :func:`~experimental.torch_interpreter.plot_graph` draws an ONNX graph with matplotlib (no graphviz needed):
# one box per node, the inputs in green, the outputs in orange, weights and constants written inside the box
# of the node that reads them. It takes a ``ModelProto``, an ``onnx_ir.Model`` or the path of a file, and an
# ``ax`` to draw in.

fig, axes = plt.subplots(1, 2, figsize=(8, 9))
plot_graph(onx, axes[0], title="opset 18")
plot_graph(onx20, axes[1], title="opset 20")
plt.show()

# %%
# Dynamic shapes
# --------------
#
# ``dynamic_shapes`` has one entry per input of ``forward`` (a tuple, or a dict by argument name). An axis
# named with a string becomes a dynamic dimension of that name in ONNX.

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
print_graph(onx)

sess = InferenceSession(onx)
print("providers:", sess.get_providers())
for n in (1, 3, 17):
    feed = torch.randn(n, 4)
    got = sess.run(None, {"input": feed})[0]
    np.testing.assert_allclose(got, model(feed).detach().numpy(), atol=1e-5)
    print(n, got.shape)

# %%
# Inputs are named after the parameters of ``forward`` (``Sequential.forward(input)``), outputs after the
# returned structure (``output``, ``output_0``, a dict's keys). One name shared by two inputs is one
# dimension; a name per axis lets several dimensions vary.


class Attention(torch.nn.Module):
    def forward(self, query, keys):
        scores = query @ keys.transpose(-1, -2)
        return {"weights": scores.softmax(-1), "best": scores.argmax(-1)}


query, keys = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
onx = to_onnx(
    Attention(), (query, keys), dynamic_shapes={"query": {0: "batch", 1: "q"}, "keys": {0: "batch", 1: "k"}}
)
for value in list(onx.graph.input) + list(onx.graph.output):
    print(value.name, [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim])

# %%
# ``InferenceSession.run_torch`` returns torch tensors (no copy; they stay on the GPU with CUDA).

sess = InferenceSession(onx)
weights, best = sess.run_torch(None, {"query": torch.randn(3, 4, 8), "keys": torch.randn(3, 6, 8)})
print(type(weights), weights.shape, best.dtype)

# %%
# Saving
# ------
#
# ``filename=`` writes the model; when weights total more than 1 MB they go to one file beside it,
# ``<filename>.data``. ``InferenceSession`` takes the path.

big = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).eval()
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "big.onnx")
    to_onnx(big, (torch.randn(2, 512),), dynamic_shapes=({0: "batch"},), filename=path)
    print({name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))})
    print(InferenceSession(path).run(None, {"input": torch.randn(4, 512)})[0].shape)

# %%
# Submodules
# ----------
#
# The module hierarchy does not survive as ONNX functions: the graph is flat. Each node remembers the module
# that created it in its metadata, and the weights keep their ``state_dict`` names.


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 2 * dim)
        self.down = torch.nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self, dim=8, n=2):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(dim) for _ in range(n)])
        self.head = torch.nn.Linear(dim, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


net = Net().eval()
onx = to_onnx(net, (torch.randn(2, 8),), dynamic_shapes=({0: "batch"},))
print([i.name for i in onx.graph.initializer])
for node in onx.graph.node:
    meta = {p.key: p.value for p in node.metadata_props}
    print(f"{node.op_type:20} {meta.get('pkg.torch.module_scope', '')}")

# %%
# The two blocks and their residual connections:

plot_graph(onx, title="Net: two residual blocks and a head")
plt.show()

# %%
# Control flow: torch.cond becomes If
# -----------------------------------
#
# Both branches become subgraphs of an ``If`` node; the condition is computed at run time.


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos(), (x,))


onx = to_onnx(Cond(), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"},))
print(onnx.printer.to_text(onx.graph))  # the ONNX text format, subgraphs included

# %%
# ``plot_graph`` draws the ``If`` node as one box; each branch is a graph it can draw too.

# sphinx_gallery_thumbnail_number = 3
branch = next(n for n in onx.graph.node if n.op_type == "If")
fig, axes = plt.subplots(1, 3, figsize=(10, 5.5))
plot_graph(onx, axes[0], title="the model")
for ax, attribute in zip(axes[1:], branch.attribute):
    plot_graph(attribute.g, ax, title=attribute.name)
plt.show()

# %%
# onnxruntime runs the branch the condition picks:

sess = InferenceSession(onx)
for sign in (1, -1):
    feed = sign * torch.rand(4, 2)
    np.testing.assert_allclose(sess.run(None, {"x": feed})[0], Cond()(feed).numpy(), atol=1e-6)

# %%
# Control flow: scan becomes Scan
# -------------------------------
#
# ``torch.ops.higher_order.scan`` becomes an ONNX ``Scan``: the carry is a state variable, the stacked
# outputs are scan outputs, and the number of steps follows the (dynamic) first axis.

from torch._higher_order_ops.scan import scan  # noqa: E402


class RunningMax(torch.nn.Module):
    def forward(self, x):
        def combine_fn(carry, xi):
            carry = torch.maximum(carry, xi)
            return carry, carry.clone()

        return scan(combine_fn, torch.full_like(x[0], -torch.inf), x)[1]


onx = to_onnx(RunningMax(), (torch.randn(5, 3),), dynamic_shapes=({0: "steps"},))
print([n.op_type for n in onx.graph.node])
scan_node = next(n for n in onx.graph.node if n.op_type == "Scan")
print("body:", [n.op_type for n in scan_node.attribute[0].g.node])
feed = torch.randn(9, 3)
np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": feed})[0], feed.cummax(0).values.numpy())
