"""Recurrent layers: ``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu`` (``.input``) -> ONNX LSTM, GRU, RNN.

One ONNX node per layer, both directions in the same node. ONNX orders the gates differently
(LSTM i,o,f,c for PyTorch's i,f,g,o; GRU z,r,h for r,z,n) and stacks the directions on a leading
axis: constant weights are reordered once, with torch, into new initializers.

The ops reach the graph whole, with a dynamic sequence length, thanks to the capture-time kernels of
``capture/kernels.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
import torch

from ..dtypes import torch_dtype
from ..translation.context import NodeContext
from ..translation.registry import register
from ._common import FLOAT, INT64

_aten = torch.ops.aten


def _tensor(value: ir.Value) -> torch.Tensor:
    """The torch tensor of a constant value (a parameter wraps its tensor without copy)."""
    raw = value.const_value.raw
    return raw.detach() if isinstance(raw, torch.Tensor) else torch.from_numpy(value.const_value.numpy())


def _reorder_torch(t: torch.Tensor, order: Sequence[int]) -> torch.Tensor:
    chunks = t.chunk(len(order), 0)
    return torch.cat([chunks[i] for i in order], 0)


def _reorder_onnx(ctx: NodeContext, x: ir.Value, order: Sequence[int], dtype: ir.DataType) -> ir.Value:
    x = ctx.cast(x, dtype)
    if len(order) == 1:
        return x
    sizes = ctx.const([x.shape[0] // len(order)] * len(order), INT64)
    gates = ctx.op("Split", x, sizes, axis=0, num_outputs=len(order))
    return ctx.op("Concat", *[gates[i] for i in order], axis=0)


def _stacked(
    ctx: NodeContext,
    kind: str,
    groups: Sequence[Sequence[ir.Value]],
    order: Sequence[int],
    dtype: ir.DataType,
) -> ir.Value:
    """ONNX ``W``, ``R`` or ``B`` (``kind``): per direction (``groups``), the gates of each tensor
    reordered, the tensors concatenated, the directions stacked on a new leading axis."""
    values = [v for group in groups for v in group]
    if all(v.const_value is not None for v in values):
        cache = ctx.memo("rnn.weights")  # reordered weights made once per graph, shared by the layers
        key = (kind, dtype, tuple(values))
        if key not in cache:
            tdtype = torch_dtype(dtype)
            stacked = torch.stack(
                [torch.cat([_reorder_torch(_tensor(v).to(tdtype), order) for v in group]) for group in groups]
            )
            cache[key] = ctx.initializer(f"{values[0].name}__{kind}", stacked)
        return cache[key]
    per_direction = []
    for group in groups:
        parts = [_reorder_onnx(ctx, v, order, dtype) for v in group]
        joined = parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, axis=0)
        per_direction.append(ctx.op("Unsqueeze", joined, ctx.const([0], INT64)))
    return per_direction[0] if len(per_direction) == 1 else ctx.op("Concat", *per_direction, axis=0)


#: ONNX op, gate order (PyTorch gate index of each ONNX gate), extra attributes
_KINDS: dict[str, tuple[str, list[int], dict[str, Any]]] = {
    "lstm": ("LSTM", [0, 3, 1, 2], {}),
    "gru": ("GRU", [1, 0, 2], {"linear_before_reset": 1}),
    "rnn_tanh": ("RNN", [0], {"activations": ["Tanh"]}),
    "rnn_relu": ("RNN", [0], {"activations": ["Relu"]}),
}


def _layer_slice(ctx: NodeContext, h: ir.Value, layer: int, directions: int, num_layers: int) -> ir.Value:
    if num_layers == 1:
        return h
    return ctx.op(
        "Slice",
        h,
        ctx.const([layer * directions], INT64),
        ctx.const([(layer + 1) * directions], INT64),
        ctx.const([0], INT64),
    )


def _recurrent(
    ctx: NodeContext,
    kind: str,
    input: ir.Value,
    states: Sequence[ir.Value],
    params: Sequence[ir.Value],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[ir.Value, ...]:
    op_type, order, attrs = _KINDS[kind]
    if ctx.rank(input) != 3:
        raise NotImplementedError(f"aten.{kind} on a {ctx.rank(input)}-D input (a 3-D input is expected)")
    directions = 2 if bidirectional else 1
    param_nodes = ctx.node.args[2]
    per_group = len(params) // (num_layers * directions)
    if per_group != 2 + 2 * bool(has_biases):
        raise NotImplementedError(
            f"aten.{kind} with {per_group} tensors per layer and direction: LSTM projections (proj_size > 0) "
            "have no ONNX equivalent"
        )
    hidden = param_nodes[1].meta["val"].shape[1]
    out_dtype = ctx.out_dtype
    dtype = FLOAT  # onnxruntime's CPU kernels of LSTM, GRU and RNN compute in float32 only
    if kind.startswith("rnn"):
        attrs = {"activations": attrs["activations"] * directions}
    x = ctx.cast(input, dtype)
    if batch_first:
        x = ctx.op("Transpose", x, perm=[1, 0, 2])
    states = [ctx.cast(s, dtype) for s in states]
    last: list[list[ir.Value]] = [[] for _ in states]
    for layer in range(num_layers):
        groups = [params[(layer * directions + d) * per_group :][:per_group] for d in range(directions)]
        w = _stacked(ctx, "W", [g[0:1] for g in groups], order, dtype)
        r = _stacked(ctx, "R", [g[1:2] for g in groups], order, dtype)
        b = _stacked(ctx, "B", [g[2:4] for g in groups], order, dtype) if has_biases else None
        initial = [_layer_slice(ctx, s, layer, directions, num_layers) for s in states]
        outputs = ctx.op(
            op_type,
            x,
            w,
            r,
            b,
            None,
            *initial,
            num_outputs=1 + len(states),
            hidden_size=hidden,
            direction="bidirectional" if bidirectional else "forward",
            **attrs,
        )
        y = outputs[0]  # (seq, directions, batch, hidden)
        if directions == 1:
            x = ctx.op("Squeeze", y, ctx.const([1], INT64))
        else:
            y = ctx.op("Transpose", y, perm=[0, 2, 1, 3])
            x = ctx.op("Reshape", y, ctx.const([0, 0, -1], INT64))
        if train and dropout > 0 and layer < num_layers - 1:
            x = ctx.op("Dropout", x, ctx.const(float(dropout), dtype), ctx.const(True, ir.DataType.BOOL))
        for i, final in enumerate(outputs[1:]):
            last[i].append(final)
    if batch_first:
        x = ctx.op("Transpose", x, perm=[1, 0, 2])
    finals = [f[0] if len(f) == 1 else ctx.op("Concat", *f, axis=0) for f in last]
    return tuple(ctx.cast(v, out_dtype) for v in (x, *finals))


@register("aten::lstm.input")
def aten_lstm_input(
    ctx: NodeContext,
    input: ir.Value,
    hx: Sequence[ir.Value],
    params: Sequence[ir.Value],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[ir.Value, ...]:
    """lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)"""
    return _recurrent(
        ctx, "lstm", input, list(hx), params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    )


@register("aten::gru.input", "aten::rnn_tanh.input", "aten::rnn_relu.input")
def aten_gru_input(
    ctx: NodeContext,
    input: ir.Value,
    hx: ir.Value,
    params: Sequence[ir.Value],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[ir.Value, ...]:
    """gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout,
    bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor); rnn_tanh.input and
    rnn_relu.input take the same arguments."""
    kind = ctx.op_name
    return _recurrent(
        ctx, kind, input, [hx], params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    )
