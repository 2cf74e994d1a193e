"""
.. _l-torch-export:

1. What torch.export sees
=========================

:func:`experimental.torch_interpreter.to_onnx` does not trace the model itself: it calls
``torch.export.export`` and translates the FX graph it returns, node by node. Knowing what that graph looks
like explains most of what follows (the ONNX graph mirrors it) and most failures (they happen there).

A first graph
-------------
"""

import torch

from experimental.torch_interpreter import to_onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 8)

    def forward(self, x, bias):
        y = torch.relu(self.lin(x))
        return y + bias


x, bias = torch.randn(3, 4), torch.randn(8)
ep = torch.export.export(Model(), (x, bias))
print(ep)

# %%
# An ``ExportedProgram`` holds a ``torch.fx.GraphModule`` with one node per operation:
#
# * ``placeholder`` nodes for the weights (``p_lin_weight``, ``p_lin_bias``, *lifted* from the module) and the
#   inputs, the graph signature telling which is which;
# * ``call_function`` nodes whose target is an **aten overload**: ``torch.ops.aten.linear.default``,
#   ``aten.relu.default``, ``aten.add.Tensor``. ``torch.export`` records the ops the code called, before any
#   decomposition: ``F.linear`` stays ``aten.linear``;
# * every node knows the Python line that created it (``# File: ...``) and, in ``node.meta``, its output as a
#   FakeTensor (shape and dtype) and the module that called it.
#
# This is the information ``to_onnx`` turns into ONNX nodes and their metadata.

for node in ep.graph.nodes:
    if node.op == "call_function":
        val = node.meta["val"]
        module = list(node.meta.get("nn_module_stack", {}).values())[-1:]  # innermost module
        print(f"{node.name:8} {str(node.target):30} {str(val.dtype):14} {tuple(val.shape)} {module}")

# %%
# The ONNX graph has one group of nodes per FX node, named after it.

onx = to_onnx(Model(), (x, bias))
for node in onx.graph.node:
    print(f"{node.name:14} {node.op_type:6} {list(node.input)} -> {list(node.output)}")

# %%
# Dynamic shapes
# --------------
#
# Without ``dynamic_shapes``, every dimension is fixed to the value of the example input: the graph above
# only accepts ``x`` of shape ``(3, 4)``. ``torch.export.Dim`` marks an axis dynamic; the FakeTensors then
# carry symbols (``s35``) instead of integers, and the exporter checks the code never fixes them.

batch = torch.export.Dim("batch")
ep = torch.export.export(Model(), (x, bias), dynamic_shapes=({0: batch}, None))
print(ep.graph_module.code)
print(ep.range_constraints)
print([tuple(n.meta["val"].shape) for n in ep.graph.nodes if n.op == "call_function"])

# %%
# ``to_onnx`` takes the same ``dynamic_shapes`` and also accepts a **string** for an axis: it becomes
# ``Dim.DYNAMIC`` for torch and the name of the ONNX dimension. Reusing a name for two inputs says they are
# the same dimension.

onx = to_onnx(Model(), (x, bias), dynamic_shapes=({0: "batch"}, None))
print([(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in onx.graph.input])

# %%
# Sizes read in Python become nodes too when they are dynamic: ``x.shape[0]`` is a ``sym_size`` node and
# the arithmetic on it is recorded (``operator.mul``).


class Flatten(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0] * x.shape[1], -1)


ep = torch.export.export(Flatten(), (torch.randn(2, 3, 4),), dynamic_shapes=({0: batch},))
print(ep.graph_module.code)

# %%
# strict=True or strict=False
# ---------------------------
#
# ``torch.export.export`` has two ways of reading the Python code:
#
# * ``strict=False`` (the default of both ``torch.export`` and ``to_onnx``) **runs** ``forward`` with
#   FakeTensors: any Python executes, tensor operations are recorded;
# * ``strict=True`` **reads the bytecode** with dynamo, which refuses what it cannot analyse but can also
#   follow code that no longer works on FakeTensors.
#
# Most models give the same graph both ways. They differ when the code leaves torch. Here a lock and a call
# to ``time.time()``: non-strict simply runs them, dynamo refuses them.

import threading  # noqa: E402
import time  # noqa: E402


class WithLock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def forward(self, x):
        with self.lock:
            return x + 1


def try_export(model, args, strict):
    torch._dynamo.reset()
    try:
        ep = torch.export.export(model, args, strict=strict)
    except Exception as e:  # torch's own exceptions: print the first lines
        print(f"strict={strict}: {type(e).__name__}: {str(e).strip().splitlines()[0]}")
        return None
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    print(f"strict={strict}: OK {targets}")
    return ep


for strict in (False, True):
    try_export(WithLock(), (torch.randn(2),), strict)

# %%
# The other way round: numpy on a tensor. Non-strict calls ``x.numpy()`` on a FakeTensor, which has no
# data; dynamo understands numpy calls and records them as torch ops.

import numpy as np  # noqa: E402


class WithNumpy(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.cos(x.numpy())) + 1


for strict in (False, True):
    try_export(WithNumpy(), (torch.randn(2),), strict)

# %%
# Calls outside torch are the usual difference: non-strict runs ``time.time()`` once, while tracing, and
# the result becomes a constant of the graph; dynamo does not know what the builtin does and refuses it.


class Timestamp(torch.nn.Module):
    def forward(self, x):
        return x + (time.time() > 0)


for strict in (False, True):
    try_export(Timestamp(), (torch.randn(2),), strict)

# %%
# In short: start with ``strict=False`` (the default); try ``strict=True`` when the model calls code that
# does not run on FakeTensors (numpy, ``.item()`` used in Python, ``.tolist()``), or to catch Python side
# effects that would be silently frozen into the graph.
#
# %%
# Control flow: torch.cond and torch.ops.higher_order.scan
# --------------------------------------------------------
#
# A Python ``if`` on a tensor value cannot be captured: it would be decided once, on the example input
# (page 3 shows the error). ``torch.cond`` records both branches as subgraphs.


class Cond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))


ep = torch.export.export(Cond(), (torch.randn(3, 2),))
print(ep.graph_module.code)
print(ep.graph_module.true_graph_0.code)

# %%
# Loops over a dynamic number of steps are ``torch.ops.higher_order.scan`` (or ``while_loop``). ``scan``
# calls ``combine_fn(carry, x_i)`` for each slice ``x_i`` along the first axis; the function returns the
# next carry and the output of the step, stacked along a new first axis. The body may not return the same
# tensor twice (hence the ``clone()``).

from torch._higher_order_ops.scan import scan  # noqa: E402


class CumulativeSum(torch.nn.Module):
    def forward(self, x):
        def combine_fn(carry, xi):
            carry = carry + xi
            return carry, carry.clone()

        final, steps = scan(combine_fn, torch.zeros_like(x[0]), x)
        return steps


torch._dynamo.reset()
x = torch.randn(5, 3)
ep = torch.export.export(CumulativeSum(), (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
print(ep)
torch.testing.assert_close(ep.module()(x), x.cumsum(0))

# %%
# The node is ``torch.ops.higher_order.scan(combine_graph, init, xs, additional_inputs)`` and the body is a
# graph module of its own: ``to_onnx`` translates it into the body of an ONNX ``Scan``.
#
# In-place updates: ``x[..., i] = y``
# -----------------------------------
#
# Assigning into a slice is an in-place operation. ``torch.export`` keeps it as a ``select`` (a view) and a
# ``copy_`` into that view: the graph mutates ``clone`` through ``select``.


class SetColumns(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        for i in range(2):
            x[..., i] = y * (i + 1)
        return x


x, y = torch.randn(2, 3, 4), torch.randn(2, 3)
ep = torch.export.export(SetColumns(), (x, y))
print(ep.graph_module.code)

# %%
# A converter cannot translate ``copy_`` alone since ONNX has no views: the pair has to become a functional
# update of ``clone``. ``to_onnx`` writes the new values back into the base tensor (one ``ScatterElements``
# per assignment):

from experimental.torch_interpreter import InferenceSession  # noqa: E402

onx = to_onnx(SetColumns(), (x, y), dynamic_shapes=({0: "batch"}, {0: "batch"}))
print([n.op_type for n in onx.graph.node])
x2, y2 = torch.randn(5, 3, 4), torch.randn(5, 3)
np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": x2, "y": y2})[0], SetColumns()(x2, y2).numpy())

# %%
# When the mutated tensor is an **input** of the model (no ``clone``), the exported graph still mutates it
# in place through a view, and the signature says nothing of it:


class SetInput(torch.nn.Module):
    def forward(self, x, y):
        x[..., 0] = y
        return x * 2


ep = torch.export.export(SetInput(), (x.clone(), y))
print(ep.graph_module.code)
print(ep.graph_signature)

# %%
# ``run_decompositions()``, which ``torch.onnx.export(..., dynamo=True)`` applies and ``to_onnx`` does not,
# *functionalizes* the graph: ``copy_`` becomes an out-of-place ``copy`` followed by a masked ``where``
# over the whole tensor, and the new value of ``x`` becomes an extra output of kind
# ``USER_INPUT_MUTATION``. ``to_onnx`` keeps the graph as exported, so the in-place pair is what its
# converters see.

decomposed = ep.run_decompositions()
print(decomposed.graph_module.code)
print(decomposed.graph_signature)

# %%
# ``to_onnx`` computes ``x * 2`` on the updated ``x``, as PyTorch does; the caller's ``x`` is of course not
# modified by onnxruntime (ONNX has no in-place update of an input).

onx = to_onnx(SetInput(), (x.clone(), y))
x2 = torch.randn(2, 3, 4)
np.testing.assert_allclose(InferenceSession(onx).run(None, {"x": x2, "y": y})[0], SetInput()(x2.clone(), y).numpy())
print([n.op_type for n in onx.graph.node])

# %%
# FX nodes and ONNX nodes
# -----------------------
#
# The size of the graphs of this page, before and after the translation: one group of ONNX nodes per FX
# node, most groups one node long.

import matplotlib.pyplot as plt  # noqa: E402

examples = {
    "Model": (Model(), (x, bias)),
    "Flatten": (Flatten(), (torch.randn(2, 3, 4),)),
    "Cond": (Cond(), (torch.randn(3, 2),)),
}
fx_counts, onnx_counts = [], []
for model, inputs in examples.values():
    program = torch.export.export(model, inputs)
    fx_counts.append(sum(n.op == "call_function" for n in program.graph.nodes))
    onnx_counts.append(len(to_onnx(model, inputs).graph.node))
fig, ax = plt.subplots(figsize=(4.5, 2.8))
positions = range(len(examples))
ax.bar([p - 0.2 for p in positions], fx_counts, width=0.4, label="FX call_function nodes")
ax.bar([p + 0.2 for p in positions], onnx_counts, width=0.4, label="ONNX nodes (top level)")
ax.set_xticks(list(positions), list(examples))
ax.legend(fontsize=8)
ax.set_title("graph sizes")
fig.tight_layout()
