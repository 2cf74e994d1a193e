"""
.. _l-custom-kernels:

2d. Your own kernels
====================

Models call kernels of their own: a ``torch.library.custom_op`` around a Triton or CUDA kernel, a
``torch.library.triton_op``, an op registered by a C++ extension (``torch.ops.mylib.*``). ``torch.export`` keeps
each call as **one** node of the graph, and no converter knows it. This page shows the two ways out:

1. export the op as a ``com.microsoft::PythonOp`` node that
   :class:`~experimental.torch_interpreter.InferenceSession` runs by calling the op back through ``torch.ops``
   (no ONNX to write, but the model then needs Python, torch and the library at run time);
2. write a converter: the graph becomes pure ONNX and runs anywhere.

The kernel
----------

The kernel leaves torch (numpy here, standing for Triton or CUDA), so nothing could trace through it. The fake
kernel (``register_fake``) tells ``torch.export`` the shape and dtype of the outputs, symbolic shapes included.
"""

import numpy as np
import onnx
import onnx_ir as ir
import torch

from experimental.torch_interpreter import InferenceSession, UnsupportedOpError, to_onnx
from experimental.torch_interpreter.translation.context import NodeContext


@torch.library.custom_op("kernels::gelu_scale", mutates_args=())
def gelu_scale(x: torch.Tensor, alpha: float, approximate: str = "tanh") -> torch.Tensor:
    """``alpha * gelu(x)``, computed outside torch."""
    a = x.detach().cpu().numpy().astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))
    else:
        from math import erf

        y = 0.5 * a * (1 + np.vectorize(erf)(a / np.sqrt(2)))
    return torch.from_numpy((alpha * y).astype(np.float32)).to(x.device)


@gelu_scale.register_fake
def _(x, alpha, approximate="tanh"):
    return torch.empty_like(x)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(gelu_scale(self.up(x), 2.0, "none")) + x


model = Block().eval()
x = torch.randn(4, 8)

# %%
# By default the export stops
# ---------------------------
#
# Every op without a converter is listed, with the line that calls it; for a custom op the message names the
# option that exports it anyway. Stopping is the default because a PythonOp node ties the model to Python:
# onnxruntime alone cannot load it.

try:
    to_onnx(model, (x,))
except UnsupportedOpError as e:
    print(e)

# %%
# Way 1: one PythonOp node per call
# ---------------------------------
#
# ``custom_ops="python_op"`` (or ``custom_ops={gelu_scale: "python_op"}`` for this op only) exports the call
# as one node. Its attributes follow onnxruntime's ``PythonOp`` schema: ``func_name`` is the op's qualified
# name, ``input_convention`` says which arguments are tensors (``d``) and which constants (``c``), the
# constants are stored by kind, output types and ranks come from the fake kernel. What the schema cannot hold
# (the string ``approximate``, full-precision floats, the module defining the op) goes to ``comment`` as JSON.

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), custom_ops="python_op")
print([n.op_type for n in onx.graph.node])
node = next(n for n in onx.graph.node if n.op_type == "PythonOp")
for attr in node.attribute:
    value = onnx.helper.get_attribute_value(attr)
    print(f"{attr.name:32} {value.decode() if isinstance(value, bytes) else value}")

# %%
# :class:`~experimental.torch_interpreter.InferenceSession` cuts the graph at the PythonOp node: onnxruntime
# runs the ``Gemm`` before it and the ops after it, the node calls ``torch.ops.kernels.gelu_scale.default``,
# tensors cross through DLPack without copies. The outputs match eager PyTorch on any batch size.

sess = InferenceSession(onx)
for batch in (4, 7):
    feed = torch.randn(batch, 8)
    got = sess.run(None, {"x": feed})[0]
    np.testing.assert_allclose(got, model(feed).detach().numpy(), atol=1e-5)
    print(f"batch {batch}: max difference with eager {np.abs(got - model(feed).detach().numpy()).max():.2e}")

# %%
# In another process, the model runs once the library defining the op is imported (``import mylib``, or
# ``torch.ops.load_library(...)`` for a C++ extension); otherwise ``InferenceSession`` raises
# :class:`~experimental.torch_interpreter.MissingCustomOpError` naming the op and the module to import. An op
# defined in a script (``__main__``, as here) must move into a module to be found elsewhere.
#
# The same holds for ``torch.library.triton_op`` (a Triton kernel run on the GPU, CUDA tensors exchanged
# through DLPack) and for ops inside ``torch.cond``, ``while_loop`` or ``scan`` bodies (the control-flow node
# then runs node by node on the CPU). :doc:`/python_op` has the details and the overhead: about 30
# microseconds per call.
#
# Way 2: a converter
# ------------------
#
# A converter translates the op into ONNX nodes. It receives a
# :class:`~experimental.torch_interpreter.translation.context.NodeContext` and the node's arguments as the op's schema
# orders them: tensors as ``onnx_ir.Value``, constants as Python values (an argument left to its default is
# not passed, hence the default value in the signature). A converter given in ``custom_ops`` is used for this export only; one registered with
# ``register("kernels::gelu_scale.default")`` serves every export of the process, and always wins over the
# PythonOp fallback.


def kernels_gelu_scale(ctx: NodeContext, x: ir.Value, alpha: float, approximate: str = "tanh") -> ir.Value:
    """gelu_scale(Tensor x, float alpha, str approximate="tanh") -> Tensor: ONNX Gelu (opset 20) times alpha;
    before opset 20 the formula with Tanh or Erf."""
    if ctx.opset >= 20:
        y = ctx.op("Gelu", x, approximate=approximate)
    elif approximate == "tanh":
        inner = ctx.op("Add", x, ctx.op("Mul", ctx.const(0.044715, x.dtype), ctx.op("Pow", x, ctx.const(3.0, x.dtype))))
        t = ctx.op("Tanh", ctx.op("Mul", ctx.const(float(np.sqrt(2 / np.pi)), x.dtype), inner))
        y = ctx.op("Mul", ctx.op("Mul", ctx.const(0.5, x.dtype), x), ctx.op("Add", ctx.const(1.0, x.dtype), t))
    else:
        e = ctx.op("Erf", ctx.op("Div", x, ctx.const(float(np.sqrt(2)), x.dtype)))
        y = ctx.op("Mul", ctx.op("Mul", ctx.const(0.5, x.dtype), x), ctx.op("Add", ctx.const(1.0, x.dtype), e))
    return ctx.op("Mul", y, ctx.const(alpha, x.dtype))


onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), custom_ops={gelu_scale: kernels_gelu_scale})
print([n.op_type for n in onx.graph.node])

# %%
# The graph is pure ONNX: plain onnxruntime runs it, and its outputs match the kernel's.

import onnxruntime as ort  # noqa: E402

plain = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
feed = torch.randn(5, 8)
got = plain.run(None, {"x": feed.numpy()})[0]
np.testing.assert_allclose(got, model(feed).detach().numpy(), atol=1e-5)
print(f"max difference with eager: {np.abs(got - model(feed).detach().numpy()).max():.2e}")

# %%
# The two exports side by side, drawn by :func:`~experimental.torch_interpreter.plot_graph`: the PythonOp node
# (yellow: a node of another domain than ONNX's) and the nodes the converter wrote in its place.

import matplotlib.pyplot as plt  # noqa: E402

from experimental.torch_interpreter import plot_graph  # noqa: E402

with_python_op = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), custom_ops="python_op")
fig, axes = plt.subplots(1, 2, figsize=(9, 7.5))
plot_graph(with_python_op, axes[0], title="way 1: a PythonOp node")
plot_graph(onx, axes[1], title="way 2: a converter")
plt.show()

# %%
# A converter is checked like the project's own: the element type and shape of what it returns are compared
# with the fake kernel's, and a failure names the node and the user's source line. Page 2b shows how to give
# ``to_onnx`` a registry of your own, and :doc:`/design` the rules converters follow.
