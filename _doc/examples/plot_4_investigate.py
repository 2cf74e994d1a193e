"""
.. _l-investigate:

4. Investigating an export failure
==================================

Every ONNX node ``to_onnx`` creates records where it came from, and every error names the FX node, the
module and the source line at fault. This page follows one failure from the message to the line, then shows
how to use the same information when the model converts but gives different results.

Reading the error
-----------------

A small CNN ends with ``AdaptiveAvgPool2d((2, 2))``, exported with a dynamic image size.
"""

import collections

import numpy as np
import onnx_ir as ir
import torch

from experimental.torch_interpreter import (
    ConversionError,
    InferenceSession,
    Registry,
    default_registry,
    to_onnx,
)
from experimental.torch_interpreter.context import NodeContext


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
        self.pool = torch.nn.AdaptiveAvgPool2d((2, 2))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = self.pool(self.features(x))
        return self.head(y.flatten(1))


model = CNN().eval()
x = torch.randn(2, 3, 16, 16)
try:
    to_onnx(model, (x,), dynamic_shapes=({0: "batch", 2: "height", 3: "width"},))
except ConversionError as e:
    error = e
    print(e)

# %%
# The message reads from left to right:
#
# * ``FX node 'adaptive_avg_pool2d' (aten::adaptive_avg_pool2d.default)``: the node of the exported graph
#   and its registry key (the aten overload);
# * ``in module pool: ...AdaptiveAvgPool2d``: the path of the module in the model (``model.pool``) and its
#   class;
# * ``from ...:NN in forward: y = self.pool(self.features(x))``: the user's line;
# * ``failed: NotImplementedError: ...``: what the converter could not do, here an adaptive pooling to 2x2
#   over a size unknown at export time (ONNX has no adaptive pooling);
# * the converter's name, to read its code, and the inputs as PyTorch saw them: ``(s77, 8, s53, s0)``, the
#   symbols being the dynamic dimensions.
#
# The converter's own exception is chained:

print(repr(error.__cause__))

# %%
# The same node in the exported program: ``torch.export.export`` with the same arguments gives the graph
# ``to_onnx`` was translating; the node's metadata holds the stack and the module path.

ep = torch.export.export(
    model, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC, 2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC},)
)
node = next(n for n in ep.graph.nodes if n.name == "adaptive_avg_pool2d")
print(node.format_node())
print(node.meta["val"].shape)
print(node.meta["nn_module_stack"])
print(node.meta["stack_trace"])

# %%
# The innermost frame of the stack is torch's own ``AdaptiveAvgPool2d.forward``; the error (and the node
# metadata below) skips the frames inside torch and names the user's line that called the module.

# %%
# Two ways out: keep the spatial size static (only the batch is dynamic), or pool to ``1x1``, which ONNX
# has (``GlobalAveragePool``).

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
print([n.op_type for n in onx.graph.node])

# %%
# verbose=1 and verbose=2
# -----------------------
#
# ``verbose=1`` logs the steps and their timings, ``verbose=2`` also one line per FX node with the number of
# ONNX nodes it became (through the ``logging`` module, logger ``experimental.torch_interpreter``).

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), verbose=1)

# %%
onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), verbose=2)

# %%
# The node metadata
# -----------------
#
# Each ONNX node carries ``metadata_props``:
#
# * ``pkg.torch.fx_node``: the FX node it was made for (its output value has the same name);
# * ``pkg.torch.target``: the registry key of the FX node's target;
# * ``pkg.torch.module_scope``: the module path and class;
# * ``pkg.torch.source``: the user's source line.
#
# Constants, shared between nodes, have none.


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.lin = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.nn.functional.softplus(self.lin(self.norm(x)), beta=2.0)


class Net(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.blocks = torch.nn.Sequential(Block(dim), Block(dim))
        self.head = torch.nn.Linear(dim, 2)

    def forward(self, x):
        return self.head(self.blocks(x))


torch.manual_seed(0)
net = Net().eval()
x = torch.randn(4, 8)
onx = to_onnx(net, (x,), dynamic_shapes=({0: "batch"},))


def meta(node):
    return {p.key: p.value for p in node.metadata_props}


for node in onx.graph.node:
    m = meta(node)
    print(f"{node.name:32} {m.get('pkg.torch.target', ''):28} {m.get('pkg.torch.module_scope', '')}")

# %%
# and the source line, for one node:

print(meta(onx.graph.node[0]))

# %%
# Questions the metadata answers. Which ONNX nodes does ``blocks.1`` own?

print([n.name for n in onx.graph.node if meta(n).get("pkg.torch.module_scope", "").startswith("blocks.1")])

# %%
# Which lines of the model produced which op types?

per_line = collections.defaultdict(collections.Counter)
for node in onx.graph.node:
    source = meta(node).get("pkg.torch.source")
    if source:
        per_line[source.split("/")[-1]][node.op_type] += 1
for line, ops in per_line.items():
    print(f"{dict(ops)}  <-  {line}")

# %%
# When results differ: find the first node at fault
# -------------------------------------------------
#
# The model converts, runs, but the output is not PyTorch's. Here the culprit is a converter of our own: a
# replacement for ``softplus`` that forgets ``beta``.

buggy = Registry()
for key in default_registry.supported():
    if key != "aten::softplus.default":
        buggy.register(key)(default_registry.get(key))


@buggy.register("aten::softplus.default")
def softplus_without_beta(ctx: NodeContext, self: ir.Value, beta: float = 1, threshold: float = 20) -> ir.Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor (wrong: beta is ignored)"""
    return ctx.op("Softplus", self)


ep = torch.export.export(net, (x,))
model_ir = to_onnx(ep, registry=buggy, as_ir=True)
got = InferenceSession(model_ir).run(None, {"x": x})[0]
print("max difference:", np.abs(got - net(x).detach().numpy()).max())

# %%
# Every value named after an FX node holds that node's result. Making them all outputs of the ONNX model,
# and recording the same nodes in PyTorch with ``torch.fx.Interpreter`` on the exported program, gives two
# dictionaries to compare in graph order: the first node that differs is the one at fault.

fx_names = [n.name for n in ep.graph.nodes if n.op == "call_function"]
values = {v.name: v for node in model_ir.graph for v in node.outputs}
for name in fx_names:
    if name in values and values[name] not in model_ir.graph.outputs:
        model_ir.graph.outputs.append(values[name])
onnx_results = dict(zip([o.name for o in model_ir.graph.outputs], InferenceSession(model_ir).run(None, {"x": x})))


class Recorder(torch.fx.Interpreter):
    def run_node(self, n):
        result = super().run_node(n)
        self.results[n.name] = result
        return result


recorder = Recorder(ep.module())
recorder.results = {}
recorder.run(x)

for name in fx_names:
    if name in onnx_results:
        diff = np.abs(onnx_results[name] - recorder.results[name].detach().numpy()).max()
        print(f"{name:14} {diff:.2e}")

# %%
# ``softplus`` is the first to differ, everything after it inherits the error. Its ONNX nodes say which
# converter, module and line:

first = next(name for name in fx_names if name in onnx_results and not np.allclose(
    onnx_results[name], recorder.results[name].detach().numpy(), atol=1e-5))
for node in model_ir.graph:
    if node.metadata_props.get("pkg.torch.fx_node") == first:
        print(node.op_type, dict(node.metadata_props))

# %%
# With the project's converter, every intermediate result matches:

onx = to_onnx(ep)
got = InferenceSession(onx).run(None, {"x": x})[0]
print("max difference:", np.abs(got - net(x).detach().numpy()).max())
