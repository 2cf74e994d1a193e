"""
.. _l-errors:

3. Frequent errors and their fixes
==================================

Every failure ``to_onnx`` reports derives from
:class:`~experimental.torch_interpreter.TorchInterpreterError`; the class tells which stage failed:

* :class:`~experimental.torch_interpreter.InvalidModelError`,
  :class:`~experimental.torch_interpreter.InputMismatchError`: the call itself;
* :class:`~experimental.torch_interpreter.DynamicShapeError`: the dynamic shapes do not fit the inputs or
  the model;
* :class:`~experimental.torch_interpreter.ExportCaptureError`: ``torch.export.export`` failed (its exception
  is chained as ``__cause__``);
* :class:`~experimental.torch_interpreter.UnsupportedOpError`: some ops have no converter;
* :class:`~experimental.torch_interpreter.ConversionError`: a converter failed (page 4);
* :class:`~experimental.torch_interpreter.RuntimeFeedError`: the feeds given to ``InferenceSession``.

Each section below triggers one and prints the real message.
"""

import warnings

import torch
from torch._higher_order_ops.scan import scan

from experimental.torch_interpreter import (
    DynamicShapeError,
    ExportCaptureError,
    InferenceSession,
    InputMismatchError,
    InvalidModelError,
    RuntimeFeedError,
    TorchInterpreterError,
    UnsupportedOpError,
    to_onnx,
)


def show(fn):
    """Runs ``fn`` and prints the exception it raises."""
    try:
        fn()
    except TorchInterpreterError as e:
        print(f"{type(e).__name__}:\n{e}")
    else:
        print("no error")


# %%
# Operators without a converter
# -----------------------------
#
# The graph is checked before anything is built, and **every** missing operator is listed at once, with
# how many nodes use it and the first source line. ``missing`` has the same information as a dict.


class Airy(torch.nn.Module):
    def forward(self, x):
        y = torch.special.airy_ai(x)
        z = torch.linalg.matrix_exp(x)
        return torch.special.airy_ai(y + z)


try:
    to_onnx(Airy(), (torch.randn(3, 3),))
except UnsupportedOpError as e:
    print(e)
    print(e.missing)
else:
    print("no error")

# %%
# What to do: write a converter (:doc:`/design`, and page 2b for a worked example), or change the model
# code at the line given to use supported ops. :doc:`/supported_ops` lists what is covered.
#
# Not a module, inputs that do not match forward
# ----------------------------------------------

show(lambda: to_onnx(lambda x: x + 1, (torch.randn(2),)))

# %%
show(lambda: to_onnx(torch.nn.Linear(2, 2), (torch.randn(1, 2), torch.randn(1, 2))))

# %%
show(lambda: to_onnx(torch.nn.Linear(2, 2), {"input": torch.randn(1, 2)}))

# %%
# Keyword inputs go in ``kwargs``; ``dynamic_shapes`` then is a dict keyed by argument name:

onx = to_onnx(torch.nn.Linear(2, 2), (), {"input": torch.randn(3, 2)}, dynamic_shapes={"input": {0: "batch"}})
print([i.name for i in onx.graph.input])

# %%
# Dynamic shapes that do not fit
# ------------------------------
#
# The spec is checked against the inputs before exporting:

show(lambda: to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes=({2: "batch"},)))

# %%
show(lambda: to_onnx(torch.nn.Linear(2, 2), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"}, None)))

# %%
# A dimension declared dynamic that the model **specializes**: the code below reshapes to a fixed size, so
# the first axis can only be 3.


class FixedBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(3, 2) * 2


show(lambda: to_onnx(FixedBatch(), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"},)))

# %%
# What to do: write the shape from the input (``x.reshape(x.shape[0], -1)``), or drop the axis from
# ``dynamic_shapes`` if it really is fixed.


class AnyBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1) * 2


onx = to_onnx(AnyBatch(), (torch.randn(3, 2),), dynamic_shapes=({0: "batch"},))
print(onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param)

# %%
# The most frequent one with ``torch.export`` itself: an **example input of size 1** (or 0) on a dynamic
# axis, which torch specializes (a size 1 broadcasts). ``to_onnx`` captures such an example size-obliviously:
# the axis stays dynamic, with no error, and the graph runs for other sizes:

onx = to_onnx(torch.nn.Linear(4, 2), (torch.randn(1, 4),), dynamic_shapes=({0: "batch"},))
print(onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param)
print(InferenceSession(onx).run(None, {"input": torch.randn(5, 4)})[0].shape)

# %%
# Control flow that depends on the data
# -------------------------------------
#
# A Python ``if`` on a tensor's value cannot be recorded in a graph: it would be decided once, on the
# example input. Both modes refuse it, each with its own words; the last line says what to try.


class DataDependentIf(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


show(lambda: to_onnx(DataDependentIf(), (torch.randn(3, 2),)))

# %%
show(lambda: to_onnx(DataDependentIf(), (torch.randn(3, 2),), strict=True))

# %%
# What to do: ``torch.cond`` records both branches (an ONNX ``If``), or, when both branches have the same
# shape, compute both and select with ``torch.where``.


class WithCond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))


onx = to_onnx(WithCond(), (torch.randn(3, 2),))
print([n.op_type for n in onx.graph.node])

# %%
# Shapes that depend on the data
# ------------------------------
#
# ``x[x > 0]`` has as many elements as there are positive values: its size is an *unbacked* symbol
# (``u0``), unknown until run time, and a Python test on it cannot be decided.


class MeanOfPositive(torch.nn.Module):
    def forward(self, x):
        positive = x[x > 0]
        if positive.shape[0] > 0:
            return positive.mean()
        return torch.zeros(())


show(lambda: to_onnx(MeanOfPositive(), (torch.randn(6),)))

# %%
# What to do: write the computation so that it needs no decision on the size: here ``torch.sym_max`` keeps
# the comparison symbolic (Python's ``max`` would ask for the value), and an empty selection gives 0. When
# the code needs a fact torch cannot know (``k >= 0``, ``k <= n``), state it with ``torch._check(...)``.


class MeanOfPositiveNoBranch(torch.nn.Module):
    def forward(self, x):
        positive = x[x > 0]
        return positive.sum() / torch.sym_max(positive.shape[0], 1)


onx = to_onnx(MeanOfPositiveNoBranch(), (torch.randn(6),))
sess = InferenceSession(onx)
for x in (torch.randn(6), -torch.rand(6)):
    print(sess.run(None, {"x": x})[0], MeanOfPositiveNoBranch()(x))

# %%
# Code that strict mode cannot trace
# ----------------------------------
#
# ``strict=True`` reads the bytecode with dynamo, which refuses calls it does not understand (C extensions,
# some builtins such as ``open``). With ``capture_strategies=False`` the error is raised as it is:

import os  # noqa: E402


class ReadsAFile(torch.nn.Module):
    def forward(self, x):
        with open(os.devnull) as f:
            offset = len(f.read())
        return x + offset


show(lambda: to_onnx(ReadsAFile(), (torch.randn(2),), strict=True, capture_strategies=False))

# %%
# What to do: ``strict=False`` (the default) runs such code in Python. With ``strict=True`` and the default
# capture strategies, ``to_onnx`` retries that way itself and says so:

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    onx = to_onnx(ReadsAFile(), (torch.randn(2),), strict=True)
print([n.op_type for n in onx.graph.node])
print([f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught if "Strategy" in w.category.__name__])

# %%
# A scan body that returns the same tensor twice
# ----------------------------------------------
#
# The bodies of ``scan``, ``cond``, ``while_loop`` and ``map`` may not return aliases: the same tensor twice
# or an input unchanged.


class RunningSum(torch.nn.Module):
    def forward(self, x):
        def combine_fn(carry, xi):
            carry = carry + xi
            return carry, carry  # the carry is also the scanned output

        return scan(combine_fn, torch.zeros_like(x[0]), x)[1]


show(lambda: to_onnx(RunningSum(), (torch.randn(4, 3),)))

# %%
# What to do: return a copy, ``return carry, carry.clone()``.
#
# Exporting under torch.no_grad()
# -------------------------------
#
# Models are often exported inside ``with torch.no_grad():``, and some call ``torch.no_grad()`` in
# ``forward``. The region becomes a ``wrap_with_set_grad_enabled`` node in the graph, which ``to_onnx``
# inlines; with torch 2.13 it exports in both modes.


class NoGradInside(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
        return y.relu()


for strict in (False, True):
    with torch.no_grad():
        onx = to_onnx(NoGradInside(), (torch.randn(2, 3),), strict=strict)
    print(f"strict={strict}:", [n.op_type for n in onx.graph.node])

# %%
# When it fails on another version of torch, the message contains ``_set_grad_enabled`` and the advice is to
# export outside ``no_grad()``.
#
# Feeds that do not match the ONNX inputs
# ---------------------------------------
#
# ONNX inputs are named after ``forward``'s parameters; ``InferenceSession`` checks the names before running.

sess = InferenceSession(to_onnx(torch.nn.ReLU(), (torch.randn(3),)))
print([i.name for i in sess.get_inputs()])
show(lambda: sess.run(None, {"x": torch.randn(3)}))

# %%
# Sizes the exported graph does not cover
# ---------------------------------------
#
# Some graphs hold for a range of sizes only: ``x.split(3, dim=1)`` exported with 6 columns gives two pieces,
# a number the graph fixes without a guard; with 8 columns PyTorch gives three pieces, and the ExportedProgram
# and an ONNX model two others. ``to_onnx`` warns (``RangeConstraintWarning``), keeps the condition in
# ``metadata_props`` and ``InferenceSession`` refuses the sizes outside it instead of returning other numbers.


class LastPiece(torch.nn.Module):
    def forward(self, x):
        return x.split(3, dim=1)[-1] * 2


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    onx = to_onnx(LastPiece(), (torch.randn(2, 6),), dynamic_shapes=({1: "n"},))
print("\n".join(str(w.message)[:150] for w in caught))
sess = InferenceSession(onx)
print(sess.run(None, {"x": torch.randn(2, 5)})[0].shape)  # 5 columns: two pieces, as in PyTorch
show(lambda: sess.run(None, {"x": torch.randn(2, 8)}))

# %%
# One base class
# --------------
#
# Catching :class:`~experimental.torch_interpreter.TorchInterpreterError` catches all of the above; each
# class also derives from the built-in exception it refines (``ValueError``, ``RuntimeError``,
# ``NotImplementedError``, ``TypeError``), and the original exception of ``torch.export`` stays available.

for cls in (InvalidModelError, InputMismatchError, DynamicShapeError, ExportCaptureError, UnsupportedOpError,
            RuntimeFeedError):
    print(f"{cls.__name__:20}", [base.__name__ for base in cls.__mro__[1:-3]])

try:
    to_onnx(DataDependentIf(), (torch.randn(3, 2),))
except ExportCaptureError as e:
    print("cause:", type(e.__cause__).__module__, type(e.__cause__).__name__)

# %%
# The classes of this page, under their common base:

import matplotlib.pyplot as plt  # noqa: E402

classes = [InvalidModelError, InputMismatchError, DynamicShapeError, ExportCaptureError, UnsupportedOpError,
           RuntimeFeedError]
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.axis("off")
ax.text(0.02, 0.5, "TorchInterpreterError", ha="left", va="center", bbox={"boxstyle": "round", "fc": "#e8eefc"})
for i, cls in enumerate(classes):
    y = 0.93 - i * 0.172
    builtin = [b.__name__ for b in cls.__mro__[1:] if b.__module__ == "builtins" and b is not object][:1]
    ax.annotate(
        f"{cls.__name__}  ({', '.join(builtin)})", xy=(0.33, 0.5), xytext=(0.42, y), ha="left", va="center",
        fontsize=9, bbox={"boxstyle": "round", "fc": "#f4f4f4"},
        arrowprops={"arrowstyle": "-", "color": "gray", "relpos": (0, 0.5)},
    )
fig.tight_layout()
