"""Control flow: ``torch.cond`` -> If, ``while_loop`` -> Loop, ``scan`` and ``map`` -> Scan.

Bodies and branches are translated by the same converters into ONNX subgraphs. What a body reads
besides its own inputs (weights, closures: the ``additional_inputs``) is taken from the outer scope,
never passed as a loop input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch

from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import BOOL, INT64


def _graph_name(ctx: NodeContext, index: int) -> str:
    """The name of the submodule given as FX argument ``index`` (``true_graph_0``)."""
    arg = ctx.node.args[index]
    return arg.target if isinstance(arg, torch.fx.Node) else f"{ctx.node.name}_body"


def _tensors(ctx: NodeContext, values: Sequence[Any]) -> list[ir.Value]:
    """Loop/Scan inputs: Python ints (static sizes) become 0-D INT64 tensors."""
    return [v if isinstance(v, ir.Value) else ctx.const(v, BOOL if isinstance(v, bool) else INT64) for v in values]


def _run(ctx: NodeContext, op_type: str, inputs: Sequence[ir.Value | None], graph: ir.Graph, **attrs: Any) -> tuple:
    """One If/Loop/Scan node; its outputs take the element types of the subgraph's outputs
    (``skip`` of them first: the condition of a Loop body)."""
    skip = 1 if op_type == "Loop" else 0
    count = len(graph.outputs) - skip
    outputs = ctx.op(op_type, *inputs, num_outputs=count, **attrs)
    outputs = (outputs,) if count == 1 else outputs
    for out, inner in zip(outputs, graph.outputs[skip:]):
        out.dtype = inner.dtype
    return outputs


@register("higher_order::cond")
def higher_order_cond(
    ctx: NodeContext, pred: Any, true_fn: torch.fx.GraphModule, false_fn: torch.fx.GraphModule, operands: Sequence[Any]
) -> tuple:
    """cond(Tensor pred, GraphModule true_fn, GraphModule false_fn, Tensor[] operands) -> Tensor[]:
    ONNX If, whose branches read the operands from the outer scope; a static predicate keeps one branch."""
    operands = list(operands)
    if not isinstance(pred, ir.Value):
        return tuple(ctx.subgraph(true_fn if pred else false_fn, operands))
    then_branch = ctx.translate_subgraph(true_fn, operands, _graph_name(ctx, 1))
    else_branch = ctx.translate_subgraph(false_fn, operands, _graph_name(ctx, 2))
    return _run(ctx, "If", [ctx.cast(pred, BOOL)], then_branch, then_branch=then_branch, else_branch=else_branch)


@register("higher_order::while_loop")
def higher_order_while_loop(
    ctx: NodeContext,
    cond_fn: torch.fx.GraphModule,
    body_fn: torch.fx.GraphModule,
    carried_inputs: Sequence[Any],
    additional_inputs: Sequence[Any],
) -> tuple:
    """while_loop(GraphModule cond_fn, GraphModule body_fn, Tensor[] carried_inputs, Tensor[] additional_inputs)
    -> Tensor[]: ONNX Loop without trip count; ``cond_fn`` runs once before the loop and at the end of each
    iteration of the body."""
    carried, extra = _tensors(ctx, carried_inputs), list(additional_inputs)
    first = ctx.operand(ctx.subgraph(cond_fn, carried + extra)[0], BOOL)
    sub = ctx.new_subgraph()
    sub.input("iteration_num", INT64, [])
    sub.input("cond_in", BOOL, [])
    placeholders = [n for n in body_fn.graph.nodes if n.op == "placeholder"]
    inputs = [sub.input_like(n.name, n.meta.get("val")) for n in placeholders[: len(carried)]]
    outputs = sub.inline(body_fn, inputs + extra)
    keep = sub.inline(cond_fn, outputs + extra)[0]
    if not isinstance(keep, ir.Value) or keep.dtype != BOOL:
        keep = sub.op("Cast", keep if isinstance(keep, ir.Value) else sub.const(keep), to=BOOL)
    sub.outputs([keep, *outputs], [True, *ctx.output_vals(body_fn)])
    body = sub.graph(_graph_name(ctx, 1))
    return _run(ctx, "Loop", [None, first, *carried], body, body=body)


@register("higher_order::scan")
def higher_order_scan(
    ctx: NodeContext,
    combine_fn: torch.fx.GraphModule,
    init: Sequence[Any],
    xs: Sequence[ir.Value],
    additional_inputs: Sequence[Any],
) -> tuple:
    """scan(GraphModule combine_fn, Tensor[] init, Tensor[] xs, Tensor[] additional_inputs) -> Tensor[]:
    ONNX Scan over axis 0 (torch.export moves ``dim`` to 0 and flips for ``reverse`` outside the operator)."""
    init, xs = _tensors(ctx, init), list(xs)
    bindings = [None] * (len(init) + len(xs)) + list(additional_inputs)
    body = ctx.translate_subgraph(combine_fn, bindings, _graph_name(ctx, 0))
    return _run(ctx, "Scan", [*init, *xs], body, body=body, num_scan_inputs=len(xs))


@register("higher_order::map_impl")
def higher_order_map_impl(
    ctx: NodeContext, f: torch.fx.GraphModule, xs: Sequence[ir.Value], pos_args: Sequence[Any]
) -> tuple:
    """map_impl(GraphModule f, Tensor[] xs, Tensor[] pos_args) -> Tensor[]: ONNX Scan without state over axis 0."""
    xs = list(xs)
    body = ctx.translate_subgraph(f, [None] * len(xs) + list(pos_args), _graph_name(ctx, 0))
    return _run(ctx, "Scan", xs, body, body=body, num_scan_inputs=len(xs))
