"""Rewrites of our own, around onnxscript's ORT fusions, where their patterns do not see our spellings.

GELU: onnxscript's patterns divide by ``sqrt(2)`` and group ``x * (0.5 * (1 + t))``; the translation of
``aten::gelu`` multiplies by ``sqrt(0.5)``, cubes with ``x * (x * x)`` and groups ``(x * 0.5) * (t + 1)``, as
does the tanh GELU written out by hand in transformers (``NewGELUActivation``, GPT-2, with ``pow(x, 3)``). :data:`GELU_RULES` fuse both into
``com.microsoft`` ``Gelu`` (``BiasGelu`` after onnxscript's bias fusion) and ``FastGelu``, on float32 only
(the CPU kernels' type).

Attention: the translation of ``scaled_dot_product_attention`` sets to 0 the rows a mask hides entirely (PyTorch's
result; the softmax of a row of ``-inf`` is NaN): after the fusion, that ``Where`` sits between the
``Transpose`` out of the fused kernel's layout and the ``Transpose`` back to it, and keeps both.
:class:`WhereBetweenTransposesPass` transposes the (small) condition instead. onnxscript's fusions are
written against ``torch.onnx.export``'s graphs, which have no such guard (their padded rows differ from eager).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult
from onnxscript.rewriter import pattern

from .graph_match import only_used_by, producer

logger = logging.getLogger(__name__)

_SWAP_1_2 = (0, 2, 1, 3)


def _scalar(value: ir.Value | None) -> float | None:
    """The number a constant of one element holds, else None."""
    if value is None or value.const_value is None or value.const_value.size != 1:
        return None
    return float(np.asarray(value.const_value.numpy()).reshape(-1)[0])


class WhereBetweenTransposesPass(InPlacePass):
    """``Transpose(Where(cond, a, Transpose(x, p)), p)`` → ``Where(Transpose(cond, p), a, x)`` with
    ``p = (0, 2, 1, 3)`` (its own inverse), ``cond`` of rank 4 and ``a`` a scalar."""

    def call(self, model: ir.Model) -> PassResult:
        graph, count = model.graph, 0
        for outer in list(graph):
            if outer.op_type != "Transpose" or outer.domain not in ("", "ai.onnx"):
                continue
            if tuple(outer.attributes.get_ints("perm", ())) != _SWAP_1_2:
                continue
            where = producer(outer.inputs[0], "Where")
            if where is None or not only_used_by(where.outputs[0], outer):
                continue
            cond, a, inner_out = where.inputs
            inner = producer(inner_out, "Transpose")
            if inner is None or tuple(inner.attributes.get_ints("perm", ())) != _SWAP_1_2:
                continue
            if not only_used_by(inner_out, where) or _scalar(a) is None:
                continue
            if cond is None or cond.shape is None or len(cond.shape) != 4:
                continue
            new_cond = ir.node("Transpose", [cond], attributes={"perm": list(_SWAP_1_2)}, name=f"{where.name}_cond_T")
            new_where = ir.node("Where", [new_cond.outputs[0], a, inner.inputs[0]], name=f"{where.name}_T")
            new_cond.outputs[0].dtype = cond.dtype
            new_cond.outputs[0].shape = ir.Shape([cond.shape[i] for i in _SWAP_1_2])
            new_where.outputs[0].type = outer.outputs[0].type
            new_where.outputs[0].shape = outer.outputs[0].shape
            for n in (new_cond, new_where):
                n.metadata_props.update(where.metadata_props)
            ir.convenience.replace_nodes_and_values(
                graph, outer, [inner, where, outer], [new_cond, new_where], [outer.outputs[0]], [new_where.outputs[0]]
            )
            count += 1
        self.count = count
        return PassResult(model, count > 0)


class _GeluFusion(pattern.RewriteRuleClassBase):
    """``(x * 0.5) * (erf(x * sqrt(0.5)) + 1)`` → ``com.microsoft::Gelu``, or the tanh form → ``FastGelu``."""

    def __init__(self, name: str, tanh: bool, cube_as_pow: bool = True):
        super().__init__(name)
        self._tanh = tanh
        self._pow = cube_as_pow

    def pattern(self, op, x):
        if self._tanh:
            cube = op.Pow(x, 3.0) if self._pow else op.Mul(x, op.Mul(x, x))
            inner = op.Add(x, op.Mul(cube, 0.044715))
            t = op.Tanh(op.Mul(inner, math.sqrt(2 / math.pi)))
        else:
            t = op.Erf(op.Mul(x, math.sqrt(0.5)))
        return op.Mul(op.Mul(x, 0.5), op.Add(t, 1.0))

    def check(self, context, x, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype != ir.DataType.FLOAT:
            return result.fail("the CPU kernels take float32 only", x)
        return result

    def rewrite(self, op, x, **_):
        return op.FastGelu(x, _domain="com.microsoft") if self._tanh else op.Gelu(x, _domain="com.microsoft")


class _OnnxGelu(pattern.RewriteRuleClassBase):
    """ONNX ``Gelu`` (opset 20, what ``aten::gelu`` becomes from that opset on) → ``com.microsoft::Gelu`` or
    ``FastGelu``: onnxscript's ``BiasGelu`` fusion reads the former, and the CPU kernels are these."""

    def __init__(self, name: str, tanh: bool):
        super().__init__(name)
        self._tanh = tanh

    def pattern(self, op, x):
        return op.Gelu(x, approximate="tanh" if self._tanh else "none")

    def check(self, context, x, **_) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype != ir.DataType.FLOAT:
            return result.fail("the CPU kernels take float32 only", x)
        return result

    def rewrite(self, op, x, **_):
        return op.FastGelu(x, _domain="com.microsoft") if self._tanh else op.Gelu(x, _domain="com.microsoft")


#: GELU spelled as ``aten::gelu``'s translation and transformers' tanh GELU write it (operands commuted too)
GELU_RULES = pattern.RewriteRuleSet(
    [
        _GeluFusion.rule("ErfGelu", tanh=False),
        _GeluFusion.rule("TanhGeluPow", tanh=True),
        _GeluFusion.rule("TanhGeluMul", tanh=True, cube_as_pow=False),
        _OnnxGelu.rule("OnnxGelu", tanh=False),
        _OnnxGelu.rule("OnnxFastGelu", tanh=True),
    ],
    commute=True,
)


def fuse_gelu(model: ir.Model) -> dict[str, int]:
    """Applies :data:`GELU_RULES` to ``model`` in place; returns ``{"gelu": n}`` when ``n > 0`` applied.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize.ort_rewrites import fuse_gelu
        >>> m = to_onnx(torch.nn.GELU(approximate="tanh"), (torch.randn(2, 3),), as_ir=True)
        >>> fuse_gelu(m), [n.op_type for n in m.graph]
        ({'gelu': 1}, ['FastGelu'])
    """
    count = GELU_RULES.apply_to_model(model)
    return {"gelu": count} if count else {}


class GuardAfterMergeHeadsPass(InPlacePass):
    """``Reshape(Transpose(Where(cond, a, x), (0, 2, 1, 3)), shape)`` → ``Where(Squeeze(cond, [1]), a,
    Reshape(Transpose(x, (0, 2, 1, 3)), shape))`` when ``cond`` is ``[B, 1, S, 1]`` (one value per query
    row, for every head) and the result ``[B, S, H*D]``: the guard moves after the heads are merged, and the
    attention pattern ``SDPA → Transpose → Reshape`` of onnxscript's fusions appears.

    Not when the heads merge into ``[B*S, H*D]`` (GPT-2's ``Conv1D``): onnxscript's attention fusion then
    replaces that ``Reshape`` by one to ``[B, S, H*D]`` and the ``Gemm`` after it gets a rank-3 input
    (onnxruntime refuses the model; it happens to ``torch.onnx.export``'s GPT-2 too)."""

    def call(self, model: ir.Model) -> PassResult:
        graph, count = model.graph, 0
        for reshape in list(graph):
            if reshape.op_type != "Reshape" or reshape.domain not in ("", "ai.onnx"):
                continue
            out = reshape.outputs[0]
            transpose = producer(reshape.inputs[0], "Transpose")
            if out.shape is None or len(out.shape) != 3 or transpose is None:
                continue
            merged = transpose.outputs[0].shape
            heads = merged[2] * merged[3] if merged is not None and len(merged) == 4 and all(
                isinstance(d, int) for d in (merged[2], merged[3])) else None
            if heads is None or out.shape[-1] != heads:
                continue
            if tuple(transpose.attributes.get_ints("perm", ())) != _SWAP_1_2:
                continue
            where = producer(transpose.inputs[0], "Where")
            if where is None or not only_used_by(where.outputs[0], transpose) or not only_used_by(transpose.outputs[0], reshape):
                continue
            cond, a, x = where.inputs
            if _scalar(a) is None or cond is None or cond.shape is None or len(cond.shape) != 4:
                continue
            if cond.shape[1] != 1 or cond.shape[3] != 1:
                continue
            axes = ir.Value(
                name=f"{where.name}_axes", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([1]),
                const_value=ir.tensor(np.array([1], dtype=np.int64), name=f"{where.name}_axes"),
            )
            squeeze = ir.node("Squeeze", [cond, axes], name=f"{where.name}_Squeeze")
            new_t = ir.node("Transpose", [x], attributes={"perm": list(_SWAP_1_2)}, name=f"{transpose.name}_x")
            new_r = ir.node("Reshape", [new_t.outputs[0], *reshape.inputs[1:]], attributes=dict(reshape.attributes), name=f"{reshape.name}_x")
            new_w = ir.node("Where", [squeeze.outputs[0], a, new_r.outputs[0]], name=f"{where.name}_merged")
            squeeze.outputs[0].dtype = cond.dtype
            squeeze.outputs[0].shape = ir.Shape([cond.shape[0], cond.shape[2], 1])
            new_t.outputs[0].type, new_t.outputs[0].shape = transpose.outputs[0].type, transpose.outputs[0].shape
            for n in (new_r, new_w):
                n.outputs[0].type, n.outputs[0].shape = out.type, out.shape
            for new, old in ((squeeze, where), (new_w, where), (new_t, transpose), (new_r, reshape)):
                new.metadata_props.update(old.metadata_props)
            graph.register_initializer(axes)
            ir.convenience.replace_nodes_and_values(
                graph, reshape, [where, transpose, reshape], [squeeze, new_t, new_r, new_w], [out], [new_w.outputs[0]]
            )
            count += 1
        self.count = count
        return PassResult(model, count > 0)


def rewrite_before_fusions(model: ir.Model) -> dict[str, int]:
    """GELU (:func:`fuse_gelu`) and the masked-row guard (:class:`GuardAfterMergeHeadsPass`), in place,
    before onnxscript's fusions; returns how many times each applied (those that did)."""
    counts = fuse_gelu(model)
    guard = GuardAfterMergeHeadsPass()
    guard(model)
    if guard.count:
        counts["guard_after_merge_heads"] = guard.count
    return counts


def rewrite_around_attention(model: ir.Model) -> dict[str, int]:
    """Runs the rewrites on ``model`` in place; returns how many times each applied (those that did).

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.ort_rewrites import rewrite_around_attention
        >>> x = ir.val("x", ir.DataType.FLOAT, [1, 2, 3, 4])
        >>> c = ir.val("c", ir.DataType.BOOL, [1, 3, 2, 1])
        >>> zero = ir.Value(name="zero", const_value=ir.tensor(np.array(0.0, dtype=np.float32)))
        >>> t1 = ir.node("Transpose", [x], attributes={"perm": [0, 2, 1, 3]})
        >>> w = ir.node("Where", [c, zero, t1.outputs[0]])
        >>> t2 = ir.node("Transpose", [w.outputs[0]], attributes={"perm": [0, 2, 1, 3]})
        >>> t2.outputs[0].name = "y"
        >>> g = ir.Graph([x, c], t2.outputs, nodes=[t1, w, t2], initializers=[zero], opset_imports={"": 18})
        >>> m = ir.Model(g, ir_version=10)
        >>> rewrite_around_attention(m)
        {'where_between_transposes': 1}
        >>> [n.op_type for n in m.graph], m.graph.outputs[0].name
        (['Transpose', 'Where'], 'y')
    """
    rewrite = WhereBetweenTransposesPass()
    rewrite(model)
    return {"where_between_transposes": rewrite.count} if rewrite.count else {}
