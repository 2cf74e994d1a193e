"""The generic level: standard ONNX in, standard ONNX out, fewer nodes.

onnxscript's optimizer does the job (a well-kept library, used by ``torch.onnx.export``): constant folding
(with ONNX shape inference, so ``Shape``/``Slice``/``Concat`` chains on static dimensions fold), its default
rewrite rules (collapsed slices and reshapes, no-op casts and transposes), unused nodes, functions and opsets
removed, constants lifted to initializers, duplicated initializers and common subexpressions merged.
:mod:`.simplify` then removes what onnxscript keeps of a few PyTorch idioms (exact rewrites of our own).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxscript.optimizer
from onnx_ir.passes.common import RemoveUnusedNodesPass

from ..errors import ConversionError
from .simplify import simplify

logger = logging.getLogger(__name__)

#: the largest constant (elements) onnxscript folds an op into; larger ones (the weights) are left to the
#: runtime, which folds ``Transpose(weight)`` when it loads the model: folding here would copy the weights
FOLD_INPUT_SIZE_LIMIT = 8192


def optimize_generic(model: ir.Model) -> ir.Model:
    """Folds constants, simplifies shape ops, removes unused nodes and merges common subexpressions,
    in place; the model keeps its inputs, outputs and node metadata.

    :param model: an ``onnx_ir.Model``
    :return: the same model

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import optimize_generic
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> two = ir.node("Constant", [], attributes={"value": ir.tensor([2.0])})
        >>> a = ir.node("Mul", [x, two.outputs[0]])
        >>> b = ir.node("Mul", [x, two.outputs[0]])
        >>> s = ir.node("Add", [a.outputs[0], b.outputs[0]])
        >>> s.outputs[0].name = "y"
        >>> g = ir.Graph([x], s.outputs, nodes=[two, a, b, s], opset_imports={"": 18})
        >>> [n.op_type for n in optimize_generic(ir.Model(g, ir_version=10)).graph]
        ['Mul', 'Add']
    """
    with exact_rule_constants():
        onnxscript.optimizer.optimize(model, input_size_limit=FOLD_INPUT_SIZE_LIMIT)
    if simplify(model):
        RemoveUnusedNodesPass()(model)
    register_dangling_constants(model)
    split_constant_of_shape_casts(model)
    repair_empty_reshapes(model)
    return model


@contextlib.contextmanager
def exact_rule_constants() -> Iterator[None]:
    """Makes the constants of onnxscript's default rewrite rules match exactly while the optimizer runs.

    onnxscript compares a pattern's constant with ``math.isclose(rel_tol=1e-5, abs_tol=1e-8)``: its no-op
    rules then removed ``x + 1e-8`` as ``x + 0`` (``poisson_nll_loss``'s ``log(x + eps)`` gave ``inf`` for
    ``x = 0``) and would remove ``x * 1.000001`` as ``x * 1``. The tolerances come back on exit.
    """
    import onnxscript.rewriter as rewriter
    from onnxscript.rewriter._pattern_ir import Constant

    saved = []
    for rule in rewriter._DEFAULT_REWRITE_RULES:
        for node in getattr(rule, "_target_pattern", ()) or ():
            for value in getattr(node, "inputs", ()):
                if isinstance(value, Constant):
                    saved.append((value, value._rel_tol, value._abs_tol))
                    value._rel_tol = value._abs_tol = 0.0
    try:
        yield
    finally:
        for value, rel, abs_ in saved:
            value._rel_tol, value._abs_tol = rel, abs_


def register_dangling_constants(model: ir.Model) -> int:
    """Makes initializers of the constants that nodes read but no graph holds; returns how many.

    onnxscript 0.7's rewrite rules may give a node a constant input (the bounds of a ``Clip`` made from
    ``Max``/``Min``) without adding it to any graph: onnxruntime then refuses the model ("not a graph input,
    initializer, or output of a previous node"). Such a value becomes an initializer of the main graph, which
    every subgraph sees. An input with neither producer nor value is a broken model: :class:`ConversionError`.

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import register_dangling_constants
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> low = ir.Value(name="low", const_value=ir.tensor(0.0))
        >>> clip = ir.node("Clip", [x, low])
        >>> g = ir.Graph([x], clip.outputs, nodes=[clip], opset_imports={"": 18})
        >>> register_dangling_constants(ir.Model(g, ir_version=10)), list(g.initializers)
        (1, ['low'])
    """
    main = model.graph
    added = 0
    for node in ir.traversal.RecursiveGraphIterator(main):
        for value in node.inputs:
            if value is None or value.producer() is not None or value.graph is not None:
                continue  # a node's output, or a graph input or initializer
            if value.const_value is None:
                raise ConversionError(
                    f"the optimizer left node {node.name!r} ({node.op_type}) reading {value.name!r}, which nothing "
                    "produces; export with optimize=False and report this model"
                )
            base = value.name or "dangling_constant"
            name, i = base, 0
            while name in main.initializers:
                i += 1
                name = f"{base}_{i}"
            value.name = name
            main.register_initializer(value)
            added += 1
    if added:
        logger.debug("%d dangling constant(s) registered as initializers", added)
    return added


#: element types ConstantOfShape takes only from opset 20 on
_CONSTANT_OF_SHAPE_20 = frozenset(
    {ir.DataType.BFLOAT16, ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
     ir.DataType.FLOAT8E5M2FNUZ}
)


def split_constant_of_shape_casts(model: ir.Model) -> int:
    """Gives back the ``Cast`` that onnxscript's optimizer folded into a ``ConstantOfShape`` of a type the
    model's opset does not allow it (bfloat16 before opset 20: the checker refuses the model); returns how many.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import split_constant_of_shape_casts
        >>> shape = ir.val("shape", ir.DataType.INT64, [2])
        >>> fill = ir.tensor(np.array([1.0], dtype=ir.DataType.BFLOAT16.numpy()), dtype=ir.DataType.BFLOAT16)
        >>> node = ir.node("ConstantOfShape", [shape], attributes={"value": fill})
        >>> g = ir.Graph([shape], node.outputs, nodes=[node], opset_imports={"": 18})
        >>> split_constant_of_shape_casts(ir.Model(g, ir_version=10)), [n.op_type for n in g]
        (1, ['ConstantOfShape', 'Cast'])
    """
    if model.opset_imports.get("", 0) >= 20:
        return 0
    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        value = node.attributes.get("value")
        if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or value is None:
            continue
        tensor = value.as_tensor()
        if tensor.dtype not in _CONSTANT_OF_SHAPE_20:
            continue
        as_float = ir.tensor(tensor.numpy().astype("float32"), dtype=ir.DataType.FLOAT)
        fill = ir.node("ConstantOfShape", list(node.inputs), attributes={"value": as_float}, name=node.name)
        fill.metadata_props.update(node.metadata_props)
        fill.outputs[0].dtype = ir.DataType.FLOAT
        fill.outputs[0].shape = node.outputs[0].shape
        cast = ir.node("Cast", fill.outputs, attributes={"to": tensor.dtype}, name=f"{node.name}/cast")
        cast.metadata_props.update(node.metadata_props)
        old = node.outputs[0]
        new = cast.outputs[0]
        new.dtype, new.shape = old.dtype, old.shape
        graph = node.graph
        graph.insert_before(node, [fill, cast])
        if old.is_graph_output():
            outputs = graph.outputs
            for i, out in enumerate(outputs):
                if out is old:
                    outputs[i] = new
        old.replace_all_uses_with(new)
        new.name = old.name
        graph.remove(node, safe=True)
        changed += 1
    return changed


def repair_empty_reshapes(model: ir.Model) -> int:
    """Gives a dynamic size back to the ``Reshape`` nodes whose shape onnxscript's optimizer made a constant
    holding both ``-1`` and ``0`` (``allowzero=1``): its ``MaterializeReshapeShape`` rule writes ``-1`` for the
    one symbolic dimension, which no runtime can infer next to a 0 (onnxruntime refuses the model: "Product
    cannot be 0 in combination with -1"). The ``-1`` becomes the size of an axis with the same symbolic
    dimension, of the reshaped value or of a model input; returns how many nodes changed. Without such an
    axis: :class:`ConversionError`.

    Example::

        >>> import numpy as np, onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.passes import repair_empty_reshapes
        >>> x = ir.val("x", ir.DataType.FLOAT, ["n", 1, 0])
        >>> node = ir.node("Reshape", [x, ir.Value(name="s", const_value=ir.tensor(np.array([-1, 0])))],
        ...                attributes={"allowzero": 1})
        >>> node.outputs[0].shape = ir.Shape(["n", 0])
        >>> g = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 18})
        >>> repair_empty_reshapes(ir.Model(g, ir_version=10)), [n.op_type for n in g]
        (1, ['Shape', 'Concat', 'Reshape'])
    """
    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
            continue
        allowzero = node.attributes.get("allowzero")
        if allowzero is None or allowzero.as_int() != 1:  # 0 copies the input's size: valid next to -1
            continue
        target = node.inputs[1].const_value if node.inputs[1] is not None else None
        if target is None:
            continue
        dims = [int(d) for d in target.numpy().reshape(-1)]
        if -1 not in dims or 0 not in dims:
            continue
        data, out = node.inputs[0], node.outputs[0]
        k = dims.index(-1)
        wanted = out.shape[k] if out.shape is not None and len(out.shape) == len(dims) else None
        found = _axis_of(wanted, [data, *model.graph.inputs])
        if found is None:
            raise ConversionError(
                f"the optimizer made Reshape {node.name!r} a constant shape {dims} with -1 next to 0, which no runtime "
                "can infer; export with optimize=False and report this model"
            )
        source, axis = found
        size = ir.node("Shape", [source], attributes={"start": axis, "end": axis + 1}, name=f"{node.name}/size")
        before = ir.Value(name=f"{node.name}_before", const_value=ir.tensor(np.array(dims[:k], dtype=np.int64)))
        after = ir.Value(name=f"{node.name}_after", const_value=ir.tensor(np.array(dims[k + 1 :], dtype=np.int64)))
        for v in (before, after):
            model.graph.register_initializer(v)
        concat = ir.node("Concat", [before, size.outputs[0], after], attributes={"axis": 0}, name=f"{node.name}/shape")
        for n in (size, concat):
            n.metadata_props.update(node.metadata_props)
        node.graph.insert_before(node, [size, concat])
        node.replace_input_with(1, concat.outputs[0])
        changed += 1
    return changed


def _axis_of(dim: Any, values: list[ir.Value]) -> tuple[ir.Value, int] | None:
    """The first value of ``values`` and its axis whose size is the symbolic dimension ``dim``."""
    if dim is None or isinstance(dim, int):
        return None
    for value in values:
        for axis, d in enumerate(value.shape or []):
            if not isinstance(d, int) and d.value is not None and d == dim:
                return value, axis
    return None
