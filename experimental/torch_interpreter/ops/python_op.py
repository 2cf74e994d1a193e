"""A captured ``torch.autograd.Function.apply`` call, or a custom op without converter: one
``com.microsoft::PythonOp`` node (ONNX Runtime's schema)."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from ..dtypes import onnx_dtype
from ..errors import ConversionError
from ..python_op import custom_ops, encoding, table
from ..python_op.attributes import DOMAIN, GRAD_OP_TYPE, OP_TYPE, grad_node_attributes, node_attributes
from ..translation.context import NodeContext
from ..translation.registry import register, register_fallback


def _python_op_node(ctx: NodeContext, call: table.Call, inputs: list[ir.Value], outs: list[torch.Tensor]) -> list[ir.Value]:
    """The PythonOp node of ``call``: its context (INT64 [1]) then its outputs."""
    attrs = node_attributes(
        call,
        [v.dtype for v in inputs],
        [ctx.rank(v) for v in inputs],
        [onnx_dtype(o.dtype) for o in outs],
        [o.dim() for o in outs],
    )
    results = ctx.op(OP_TYPE, *inputs, domain=DOMAIN, num_outputs=1 + len(outs), **{a.name: a for a in attrs})
    context = results[0]
    context.dtype = ir.DataType.INT64
    context.shape = ir.Shape([1])
    ctx.rename(context, f"{ctx.node.name}_ctx")
    return list(results)


@register("aten2onnx::python_op.default")
def aten2onnx_python_op(ctx: NodeContext, key: str, inputs: list[ir.Value]) -> tuple[ir.Value, ...]:
    """python_op(str key, Tensor[] inputs) -> Tensor[]: output 0 of the node is the context (INT64 [1]) kept for a
    gradient builder, the function's outputs follow."""
    return tuple(_python_op_node(ctx, table.get(key), inputs, list(ctx.val))[1:])


@register("aten2onnx::python_op_train.default")
def aten2onnx_python_op_train(ctx: NodeContext, key: str, inputs: list[ir.Value]) -> tuple[ir.Value, ...]:
    """python_op_train(str key, Tensor[] inputs) -> Tensor[]: the PythonOp node of a differentiated call
    (``training_mode=1``); its output 0, the context, is the first output here, read by the backward graph's
    PythonOpGrad."""
    return tuple(_python_op_node(ctx, table.get(key), inputs, list(ctx.val)[1:]))


@register("aten2onnx::python_op_grad.default")
def aten2onnx_python_op_grad(
    ctx: NodeContext, key: str, context: ir.Value, grads: list[ir.Value | None], sizes: list[Any]
) -> tuple[ir.Value, ...]:
    """python_op_grad(str key, Tensor context, Tensor?[] grads, SymInt[] sizes) -> Tensor[]: one PythonOpGrad
    node (context, then the gradients of the forward's outputs; None for an output without gradient); its outputs
    are the gradients of every tensor input of the forward, those that need none are left unread. ``sizes`` only
    served PyTorch's shape propagation."""
    call = table.get(key)
    types = [int(g.dtype) if g is not None else 0 for g in grads]
    ranks = [ctx.rank(g) if g is not None else 0 for g in grads]
    inputs_types = [int(onnx_dtype(t)) for t in call.tensor_dtypes]
    attrs = grad_node_attributes(call, types, ranks, inputs_types)
    results = ctx.op(
        GRAD_OP_TYPE, context, *grads, domain=DOMAIN, num_outputs=len(call.tensor_dtypes), **{a.name: a for a in attrs}
    )
    results = [results] if isinstance(results, ir.Value) else list(results)
    return tuple(r for r, wanted in zip(results, call.tensor_requires_grads()) if wanted)


@register_fallback(custom_ops.PYTHON_OP)
def custom_op_python_op(ctx: NodeContext, *args: Any, **kwargs: Any) -> ir.Value | tuple[ir.Value, ...]:
    """Any custom op without converter (``mylib::op.overload``, handed out per export by
    ``python_op/custom_ops.py``, which finds it as the registry's fallback ``python_op``): one PythonOp node
    whose ``func_name`` is ``torch.ops.mylib.op.overload``, the call written as ``python_op/encoding.py`` says;
    output 0 is the context (INT64 [1]), the op's outputs follow, typed from the FakeTensors PyTorch computed."""
    op = ctx.node.target
    where = f"node {ctx.node.name!r} ({ctx.key})"
    call, tensors = encoding.custom_call(op, args, kwargs, lambda v: isinstance(v, ir.Value), where)
    val = ctx.val
    outs = list(val) if isinstance(val, (tuple, list)) else [val]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise ConversionError(
            f"{where} returns {val!r}: the PythonOp fallback handles ops returning tensors only; register a "
            f"converter for {ctx.key!r}"
        )
    attrs = node_attributes(
        call,
        [v.dtype for v in tensors],
        [ctx.rank(v) for v in tensors],
        [onnx_dtype(o.dtype) for o in outs],
        [o.dim() for o in outs],
        pointer_id=call.pointer_id,
    )
    attrs = [a for a in attrs if a.name != "comment"] + [ir.AttrString("comment", call.comment())]
    results = ctx.op(OP_TYPE, *tensors, domain=DOMAIN, num_outputs=1 + len(outs), **{a.name: a for a in attrs})
    context = results[0]
    context.dtype = ir.DataType.INT64
    context.shape = ir.Shape([1])
    ctx.rename(context, f"{ctx.node.name}_ctx")
    return results[1] if isinstance(val, torch.Tensor) else tuple(results[1:])
