"""The weights of a float32 CPU decoder stored as ``[1, K, N]`` so that onnxruntime multiplies one row by them with
its matrix-vector kernel.

onnxruntime's CPU ``MatMul`` repacks a ``[K, N]`` weight into panels when the session is created (prepacking) and
then always runs its general matrix product, even for one row. A ``[1, K, N]`` weight is not repacked, and a product
of one row by an unpacked weight goes to MLAS's matrix-vector kernel, which reads the weight once, in order. While
generating, every decoding step multiplies one row (one new token) by every weight, so that is what the step costs.

Measured here (2 cores, onnxruntime 1.32, ``[1, 1, 512] x [512, 32000]``): 2.23 ms packed, 1.80 ms as ``[1, K, N]``,
and 2.7 ms for the ``FusedMatMul(transB=1)`` of an output projection tied to the embedding; a 128-row prompt pays
the other way (27.1 ms -> 30.3 ms), and the vocabulary projection, which :mod:`.last_token` already gives one row
per sequence, gains in both phases.

A weight tied to the embedding (``Gather`` of its rows, ``FusedMatMul(transB=1)`` for the logits) is stored once,
transposed, as ``[1, hidden, vocab]``: the lookup gathers its columns (``Gather(axis=2)``, then a ``Transpose``
and a ``Squeeze``), so the package holds no second copy. The products and the looked-up rows are the same; only the
order of the float32 sums differs, as between any two kernels.
"""

from __future__ import annotations

import onnx_ir as ir

from ..optimize.graph_match import int64s
from ..optimize.lazy_transposes import lazy_transpose, reshaped

#: how a weight is used: as ``MatMul``'s ``[K, N]``, as ``FusedMatMul(transB=1)``'s ``[N, K]``, as a lookup table
_PLAIN, _TRANSPOSED, _TABLE = "plain", "transposed", "table"


def one_row_weights(model: ir.Model) -> int:
    """Stores as ``[1, K, N]`` each float32 2-D initializer used only as the weight of products whose other input
    has rank 3 (the decoder's ``[batch, sequence, hidden]``), all in the same orientation, and possibly as the table
    of a ``Gather`` (the embedding); returns how many.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 1, 4]))
        >>> w = ir.Value(name="w", const_value=ir.tensor(np.ones((4, 3), np.float32), name="w"))
        >>> node = ir.node("MatMul", [x, w])
        >>> graph = ir.Graph([x], node.outputs, nodes=[node], initializers=[w], opset_imports={"": 21})
        >>> one_row_weights(ir.Model(graph, ir_version=10)), w.shape
        (1, Shape([1, 4, 3]))
    """
    count = 0
    for value in list(model.graph.initializers.values()):
        tensor = value.const_value
        if tensor is None or tensor.dtype != ir.DataType.FLOAT or len(tensor.shape) != 2 or not value.uses():
            continue
        kinds = [_use_kind(node, index) for node, index in value.uses()]
        products = set(kinds) - {_TABLE}
        if None in kinds or len(products) != 1:
            continue
        transposed = products == {_TRANSPOSED}
        rows, columns = (int(d) for d in (reversed(tensor.shape) if transposed else tensor.shape))
        # read when the model is saved: a weight lying in a checkpoint's file is not loaded here
        source = lazy_transpose(tensor, (1, 0), value.name) if transposed else tensor
        value.const_value = reshaped(source, [1, rows, columns], value.name)
        value.shape = ir.Shape([1, rows, columns])
        for node, index in list(value.uses()):
            if node.op_type == "Gather":
                _gather_from(model.graph, node, axis=2 if transposed else 1)
            elif transposed:
                _as_matmul(model.graph, node)
        count += 1
    return count


def _use_kind(node: ir.Node, index: int) -> str | None:
    """How ``node`` uses the weight at input ``index``: one of the kinds above, or None (the weight stays)."""
    if node.domain == "" and node.op_type == "Gather" and index == 0:
        known = node.inputs[1] is not None and node.inputs[1].shape is not None
        return _TABLE if known and _attribute(node, "axis", 0) == 0 else None
    if index != 1 or node.inputs[0] is None or node.inputs[0].shape is None or len(node.inputs[0].shape) != 3:
        return None
    if node.domain == "" and node.op_type == "MatMul":
        return _PLAIN
    if node.domain == "com.microsoft" and node.op_type == "FusedMatMul":
        plain = all(_attribute(node, name, 0) == 0 for name in ("transA", "transBatchA", "transBatchB"))
        if plain and _attribute(node, "transB", 0) == 1 and _attribute(node, "alpha", 1.0) == 1.0:
            return _TRANSPOSED
    return None


def _attribute(node: ir.Node, name: str, default: float) -> float:
    attribute = node.attributes.get(name)
    return default if attribute is None else attribute.value


def _as_matmul(graph: ir.Graph, node: ir.Node) -> None:
    """``FusedMatMul(x, W, transB=1)`` -> ``MatMul(x, W3)`` with ``W3`` the ``[1, K, N]`` weight."""
    product = ir.node("MatMul", list(node.inputs), name=node.name)
    ir.convenience.replace_nodes_and_values(graph, node, [node], [product], node.outputs, product.outputs)


def _gather_from(graph: ir.Graph, node: ir.Node, axis: int) -> None:
    """``Gather(W, ids)`` -> the same rows read from the ``[1, K, N]`` weight: gathered along ``axis`` (2 when the
    rows became its columns, then moved last) and the leading 1 dropped."""
    table, ids = node.inputs
    gathered = ir.node("Gather", [table, ids], attributes={"axis": axis}, name=f"{node.name}/one_row_table")
    nodes = [gathered]
    if axis == 2:
        # [1, K, *ids] -> [1, *ids, K]
        rank = len(ids.shape)
        perm = [0, *range(2, rank + 2), 1]
        nodes.append(ir.node("Transpose", nodes[-1].outputs, attributes={"perm": perm},
                             name=f"{node.name}/one_row_rows"))
    axes = int64s(graph, f"{node.name}/one_row_axes", [0])
    nodes.append(ir.node("Squeeze", [nodes[-1].outputs[0], axes], name=f"{node.name}/one_row_squeeze"))
    ir.convenience.replace_nodes_and_values(graph, node, [node], nodes, node.outputs, nodes[-1].outputs)
