"""``Transpose(weight)`` folded into a lazy initializer: computed when the model is saved, one weight at a time.

A ``Linear`` is translated as ``MatMul(x, Transpose(W))``; onnxscript's constant folding always folds a
``Transpose`` of a constant, computing the transposed copy of every weight at once, in memory, and keeping them all
until the model is saved (a model's size again on top of PyTorch's copy). Folded here first, the new initializer
is an ``onnx_ir.LazyTensor``: the copy is made when the model is serialized, and released after. The graph is the
one onnxscript's folding gives (same initializer name, the ``Transpose``'s output), for any weight: one held in
memory, one that lies in a checkpoint's file (:mod:`..checkpoint`), one that is itself lazy.

A checkpoint's tensor the saved model points at in place (:data:`~..saving.IN_PLACE`) keeps its ``Transpose``
node, here and in onnxscript's folding (:func:`kept_in_place`): folding it would write a transposed copy of the
checkpoint; onnxruntime transposes it when it loads the model.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..saving import in_place, release_mapped

#: weights smaller than this (elements) are left to onnxscript's folding, which computes them at once
LAZY_SIZE = 8192


def lazy_weight_transposes(model: ir.Model) -> int:
    """Replaces each ``Transpose`` of an initializer of :data:`LAZY_SIZE` elements or more in the main graph, its
    only reader (as onnxscript's folding), by a lazy initializer holding the transposed weight; returns how many.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> w = ir.Value(name="w", const_value=ir.tensor(np.arange(20000, dtype=np.float32).reshape(100, 200)))
        >>> w.shape, w.type = ir.Shape([100, 200]), ir.TensorType(ir.DataType.FLOAT)
        >>> t = ir.node("Transpose", [w], attributes={"perm": [1, 0]})
        >>> t.outputs[0].name = "wt"
        >>> g = ir.Graph([], t.outputs, nodes=[t], initializers=[w], opset_imports={"": 21})
        >>> lazy_weight_transposes(ir.Model(g, ir_version=10))
        1
        >>> out = g.outputs[0]
        >>> out.name, type(out.const_value).__name__, out.const_value.numpy()[3, 1] == 203.0
        ('wt', 'LazyTensor', np.True_)
    """
    graph = model.graph
    count = 0
    for node in list(graph):
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
            continue
        weight = node.inputs[0]
        tensor = weight.const_value if weight is not None and weight.is_initializer() else None
        if tensor is None or tensor.size < LAZY_SIZE or len(weight.uses()) != 1 or weight.is_graph_output() \
                or kept_in_place(node):
            continue  # a weight read elsewhere too (tied to an embedding) keeps its Transpose: no second copy
        perm_attribute = node.attributes.get("perm")
        rank = len(tensor.shape)
        perm = tuple(perm_attribute.as_ints()) if perm_attribute is not None else tuple(reversed(range(rank)))
        out = node.outputs[0]
        lazy = lazy_transpose(tensor, perm, out.name)
        value = ir.Value(name=None, type=ir.TensorType(tensor.dtype), shape=lazy.shape, const_value=lazy)
        out.replace_all_uses_with(value, replace_graph_outputs=True)
        graph.remove(node, safe=True)
        value.name = out.name
        graph.register_initializer(value)
        count += 1
    return count


def kept_in_place(node: ir.Node) -> bool:
    """Whether ``node`` is a ``Transpose`` of a checkpoint's tensor the saved model points at in place, which no
    folding computes.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.saving import IN_PLACE
        >>> w = ir.ExternalTensor("model.safetensors", 0, 16, ir.DataType.FLOAT, shape=ir.Shape([2, 2]), name="w")
        >>> w.meta[IN_PLACE] = True
        >>> kept_in_place(ir.node("Transpose", [ir.Value(name="w", const_value=w)]))
        True
    """
    if node.op_type != "Transpose" or not node.inputs or node.inputs[0] is None:
        return False
    return in_place(node.inputs[0].const_value)


def lazy_transpose(tensor: ir.TensorProtocol, perm: tuple[int, ...], name: str | None) -> ir.LazyTensor:
    """``tensor`` transposed by ``perm``, computed when read (a file's mapping released once copied).

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> lazy_transpose(ir.tensor(np.arange(6).reshape(2, 3)), (1, 0), "t").numpy().tolist()
        [[0, 3], [1, 4], [2, 5]]
    """

    def transposed() -> ir.Tensor:
        result = ir.Tensor(np.ascontiguousarray(tensor.numpy().transpose(perm)), name=name)
        release_mapped(tensor)
        return result

    shape = ir.Shape([tensor.shape[p] for p in perm])
    return ir.LazyTensor(transposed, dtype=tensor.dtype, shape=shape, name=name)
