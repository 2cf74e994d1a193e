"""A captured ``torch.autograd.Function.apply`` call: one ``com.microsoft::PythonOp`` node (ONNX Runtime's schema)."""

from __future__ import annotations

import onnx_ir as ir

from ..context import NodeContext
from ..dtypes import onnx_dtype
from ..python_op import table
from ..python_op.attributes import DOMAIN, OP_TYPE, node_attributes
from ..registry import register


@register("aten2onnx::python_op.default")
def aten2onnx_python_op(ctx: NodeContext, key: str, inputs: list[ir.Value]) -> tuple[ir.Value, ...]:
    """python_op(str key, Tensor[] inputs) -> Tensor[]: output 0 of the node is the context (INT64 [1]) kept for a
    gradient builder, the function's outputs follow."""
    call = table.get(key)
    outs = list(ctx.val)
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
    return tuple(results[1:])
