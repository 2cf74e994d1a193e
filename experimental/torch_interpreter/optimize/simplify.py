"""Exact rewrites of standard ONNX the generic level adds to onnxscript's rules.

Each one removes nodes the translation of a common PyTorch idiom leaves and onnxscript's optimizer keeps:

* :func:`gather_on_index_grid`: ``data[arange(B)[:, None, None, None], arange(T)[None, None, None, :]]``
  (transformers' padding mask, ``GatherND`` over a grid of two ``Range``) is ``data`` with unit axes added;
* :func:`and_with_all_true`: ``And(x, all true)`` is ``x`` when the all-true side does not broadcast ``x``
  to a larger shape;
* :func:`scalar_round_trips`: ``Reshape(Squeeze(v), [1])`` of a one-element 1-D ``v`` is ``v``.

Written by hand, not as onnxscript rules: :func:`gather_on_index_grid` matches one ``Concat`` input per axis of the
data (no fixed pattern); the other two make the readers of a node read one of its inputs, which keeps its name,
where onnxscript's rewriter gives the replaced output's name to its replacement (the input would be renamed) or
leaves an ``Identity``. The nodes they leave unused are removed after them (``cleanup`` in the pipeline).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..provenance import copy_provenance
from .graph_match import dims, int64s, ints, producer, same_dim


def _replace(node: ir.Node, value: ir.Value) -> bool:
    """Makes the readers of ``node``'s output read ``value`` (not when that output is a graph output)."""
    out = node.outputs[0]
    if out.is_graph_output():
        return False
    out.replace_all_uses_with(value)
    return True


def _arange_axis(value: ir.Value, size: object) -> int | None:
    """The axis along which ``value`` holds ``0, 1, ..., size - 1`` (a ``Range(0, n, 1)`` of length ``size``
    with unit axes added by ``Unsqueeze``), every other axis of size 1; else None."""
    shape = dims(value)
    source = value
    while (node := producer(source, "Unsqueeze")) is not None:
        source = node.inputs[0]
    arange = producer(source, "Range")
    if shape is None or arange is None or ints(arange.inputs[0]) != [0] or ints(arange.inputs[2]) != [1]:
        return None
    length = dims(arange.outputs[0])
    if length is None or len(length) != 1 or not same_dim(length[0], size):
        return None
    long = [i for i, d in enumerate(shape) if d != 1]
    if len(long) != 1 or not same_dim(shape[long[0]], size):
        return None  # a range of one element lies along no axis of its own
    return long[0]


def _grid_axes(gather: ir.Node) -> list[int] | None:
    """The output axes that index each axis of the data when ``gather``'s indices are a full index grid."""
    data, indices = gather.inputs[0], gather.inputs[1]
    shape, out = dims(data), dims(gather.outputs[0])
    concat = producer(indices, "Concat")
    if shape is None or out is None or concat is None or len(concat.inputs) != len(shape):
        return None
    axes = []
    for k, part in enumerate(concat.inputs):
        unsqueeze = producer(part, "Unsqueeze")
        if unsqueeze is None or ints(unsqueeze.inputs[1]) not in ([-1], [len(out)]):
            return None
        grid = unsqueeze.inputs[0]
        expand = producer(grid, "Expand")
        axis = _arange_axis(expand.inputs[0] if expand is not None else grid, shape[k])
        if axis is None or (axes and axis <= axes[-1]):
            return None
        axes.append(axis)
    if any(not same_dim(out[a], shape[k]) for k, a in enumerate(axes)):
        return None
    if any(out[i] != 1 for i in range(len(out)) if i not in axes):
        return None
    return axes


def gather_on_index_grid(model: ir.Model) -> int:
    """``GatherND(data, grid)`` → ``Unsqueeze(data, other axes)`` when ``grid[..., k]`` is ``arange`` of the
    size of ``data``'s axis ``k`` along an axis of its own (in the order of ``data``'s axes); returns how many.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> class M(torch.nn.Module):
        ...     def forward(self, mask):
        ...         b, t = torch.arange(mask.shape[0]), torch.arange(mask.shape[1])
        ...         return ~mask[b[:, None, None, None], t[None, None, None, :]]
        >>> mask = torch.ones(2, 5, dtype=torch.bool)
        >>> m = to_onnx(M(), (mask,), dynamic_shapes=({0: "batch", 1: "seq"},), as_ir=True)
        >>> [n.op_type for n in m.graph]
        ['Unsqueeze', 'Not']
    """
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.op_type != "GatherND" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
            continue
        batch_dims = node.attributes.get("batch_dims")
        if batch_dims is not None and batch_dims.as_int() != 0:
            continue
        axes = _grid_axes(node)
        if axes is None:
            continue
        data, out = node.inputs[0], node.outputs[0]
        if out.is_graph_output():
            continue
        others = [i for i in range(len(out.shape)) if i not in axes]
        if not others:
            changed += _replace(node, data)
            continue
        unsqueeze = ir.node("Unsqueeze", [data, int64s(graph, f"{node.name}_axes", others)], name=f"{node.name}_unsqueeze")
        unsqueeze.outputs[0].type, unsqueeze.outputs[0].shape = out.type, out.shape
        copy_provenance(node, unsqueeze)
        graph.insert_before(node, unsqueeze)
        _replace(node, unsqueeze.outputs[0])
        unsqueeze.outputs[0].name, out.name = out.name, None
        changed += 1
    return changed


def _all_true(value: ir.Value | None) -> bool:
    if value is None or value.dtype != ir.DataType.BOOL:
        return False
    if value.const_value is not None:
        return bool(np.all(value.const_value.numpy()))
    fill = producer(value, "ConstantOfShape")
    attr = fill.attributes.get("value") if fill is not None else None
    return attr is not None and bool(np.all(attr.as_tensor().numpy()))


def and_with_all_true(model: ir.Model) -> int:
    """``And(x, t)`` (either order) → ``x`` when ``t`` is all true and the output has ``x``'s shape; returns
    how many.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return ~(torch.ones((), dtype=torch.bool) & (x > 0))
        >>> m = to_onnx(M(), (torch.randn(2, 5),), as_ir=True)
        >>> [n.op_type for n in m.graph]
        ['Greater', 'Not']
    """
    changed = 0
    for node in list(model.graph):
        if node.op_type != "And" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
            continue
        out = dims(node.outputs[0])
        for i in (0, 1):
            x, other = node.inputs[i], node.inputs[1 - i]
            shape = dims(x)
            if not _all_true(other) or shape is None or out is None or len(shape) != len(out):
                continue
            if all(same_dim(a, b) for a, b in zip(shape, out)) and _replace(node, x):
                changed += 1
                break
    return changed


def scalar_round_trips(model: ir.Model) -> int:
    """``Reshape(Squeeze(v), [1])`` or ``Unsqueeze(Squeeze(v), [0])`` → ``v`` when ``v`` is 1-D of one element
    (a size read with ``Shape(start, end)``, made a Python int, then a 1-D tensor again); returns how many.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x.reshape(-1)[: x.shape[1]]
        >>> m = to_onnx(M(), (torch.randn(2, 3),), dynamic_shapes=({1: "n"},), as_ir=True)
        >>> [n.op_type for n in m.graph]
        ['Shape', 'Reshape', 'Slice']
    """
    changed = 0
    for node in list(model.graph):
        if node.op_type not in ("Reshape", "Unsqueeze") or node.domain not in ("", "ai.onnx"):
            continue
        squeeze = producer(node.inputs[0], "Squeeze")
        target = ints(node.inputs[1]) if len(node.inputs) > 1 else None
        if squeeze is None or target != ([1] if node.op_type == "Reshape" else [0]):
            continue
        v = squeeze.inputs[0]
        if dims(v) == [1] and (len(squeeze.inputs) < 2 or ints(squeeze.inputs[1]) in ([0], [-1])):
            changed += _replace(node, v)
    return changed
