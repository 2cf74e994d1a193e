"""The custom ops a captured ``Function.apply`` call becomes when it is differentiated (the ``torch.compile``
backend): ``aten2onnx::python_op_train`` in the forward graph, ``aten2onnx::python_op_grad`` in the backward graph,
one node each, which the converters write as ``com.microsoft::PythonOp`` (``training_mode=1``) and
``com.microsoft::PythonOpGrad``.

``python_op_train(key, inputs) -> [handle, *outputs]`` runs the Function with autograd recording and keeps its
context under ``handle`` (:mod:`.contexts`); its autograd formula saves the handle for the backward, which is
``python_op_grad(key, handle, grads, sizes) -> gradients`` of the tensor inputs that need one. ``sizes`` (the
shapes of those inputs, concatenated) only tells the fake implementation the shapes of the gradients; the runtime
does not read it.
"""

from __future__ import annotations

import torch

from . import contexts, table
from .fake import fake_outputs
from ..torch_versions import original_apply


def _wanted(call: table.Call) -> list[int]:
    """The positions, among the tensor inputs, of those that get a gradient."""
    return [i for i, r in enumerate(call.tensor_requires_grads()) if r]


@torch.library.custom_op("aten2onnx::python_op_train", mutates_args=())
def python_op_train(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs the captured call ``key`` on ``inputs`` with autograd recording: ``[handle, *outputs]``."""
    call = table.get(key)
    handle, outs = contexts.run_forward(
        call.name,
        lambda *args: original_apply(call.cls, *args),
        call.bind,
        inputs,
        call.tensor_requires_grads(),
        call.outputs,
    )
    return [handle, *outs]


@python_op_train.register_fake
def _python_op_train_fake(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    outs = fake_outputs(table.get(key), inputs)
    device = inputs[0].device if inputs else torch.device("cpu")
    return [torch.empty(1, dtype=torch.int64, device=device), *outs]


@torch.library.custom_op("aten2onnx::python_op_grad", mutates_args=())
def python_op_grad(
    key: str, context: torch.Tensor, grads: list[torch.Tensor | None], sizes: list[int]
) -> list[torch.Tensor]:
    """Calls the backward of the context ``context`` once: the gradients of the tensor inputs that need one."""
    call = table.get(key)
    computed = contexts.run_backward(context, grads, call.name)
    shapes = call.split_sizes(sizes)
    results = []
    for i, shape in zip(_wanted(call), shapes):
        g = computed[i]
        results.append(g if g is not None else torch.zeros(shape, dtype=call.tensor_dtypes[i], device=context.device))
    return results


@python_op_grad.register_fake
def _python_op_grad_fake(
    key: str, context: torch.Tensor, grads: list[torch.Tensor | None], sizes: list[int]
) -> list[torch.Tensor]:
    call = table.get(key)
    return [
        context.new_empty(shape, dtype=call.tensor_dtypes[i])
        for i, shape in zip(_wanted(call), call.split_sizes(sizes))
    ]


def _setup_context(ctx, inputs, output) -> None:
    key, tensors = inputs
    call = table.get(key)
    ctx.key = key
    ctx.count = len(tensors)
    ctx.sizes = [s for i in _wanted(call) for s in tensors[i].shape]
    ctx.save_for_backward(output[0])


def _backward(ctx, grads):
    (handle,) = ctx.saved_tensors
    computed = torch.ops.aten2onnx.python_op_grad(ctx.key, handle, list(grads[1:]), ctx.sizes)
    result: list[torch.Tensor | None] = [None] * ctx.count
    for i, g in zip(_wanted(table.get(ctx.key)), computed):
        result[i] = g
    return None, result


torch.library.register_autograd("aten2onnx::python_op_train", _backward, setup_context=_setup_context)
