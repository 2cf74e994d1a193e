"""GELU into onnxruntime's ``com.microsoft`` kernels (``Gelu``, ``BiasGelu`` after onnxscript's bias fusion,
``FastGelu``), on float32 only (the CPU kernels' type): pattern, check and replacement rules of onnxscript's
rewriter (:data:`GELU_RULES`).

onnxscript's own GELU patterns group ``x * (0.5 * (1 + t))``; the translation of ``aten::gelu`` divides by
``sqrt(2)`` (the form onnxruntime's own GeluFusion reads; ``x * sqrt(0.5)`` is matched too), cubes with
``x * (x * x)`` and groups ``(x * 0.5) * (t + 1)``, as
does the tanh GELU written out by hand in transformers (``NewGELUActivation``, GPT-2, with ``pow(x, 3)``).
From opset 20 on ``aten::gelu`` is ONNX ``Gelu``, which becomes ``com.microsoft::Gelu`` too: onnxscript's
``BiasGelu`` fusion reads the latter.

Example::

    >>> import torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> from experimental.torch_interpreter.optimize.gelu import GELU_RULES
    >>> m = to_onnx(torch.nn.GELU(approximate="tanh"), (torch.randn(2, 3),), as_ir=True)
    >>> GELU_RULES.apply_to_model(m), [n.op_type for n in m.graph]
    (1, ['FastGelu'])
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from onnxscript.rewriter import pattern


class _MicrosoftGelu(pattern.RewriteRuleClassBase):
    """The check and the replacement of the GELU rules: ``com.microsoft::Gelu``, or ``FastGelu`` for the tanh
    form, on float32 only; a subclass gives the pattern."""

    def __init__(self, name: str, tanh: bool) -> None:
        super().__init__(name)
        self._tanh = tanh

    def check(self, context: Any, x: ir.Value, **_: Any) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype != ir.DataType.FLOAT:
            return result.fail("the CPU kernels take float32 only", x)
        return result

    def rewrite(self, op: Any, x: ir.Value, **_: Any) -> ir.Value:
        return op.FastGelu(x, _domain="com.microsoft") if self._tanh else op.Gelu(x, _domain="com.microsoft")


class _GeluFusion(_MicrosoftGelu):
    """``(x * 0.5) * (erf(x * sqrt(0.5)) + 1)`` → ``com.microsoft::Gelu``, or the tanh form → ``FastGelu``."""

    def __init__(self, name: str, tanh: bool, cube_as_pow: bool = True, divide: bool = False) -> None:
        super().__init__(name, tanh)
        self._pow = cube_as_pow
        self._divide = divide

    def pattern(self, op: Any, x: ir.Value) -> ir.Value:
        if self._tanh:
            cube = op.Pow(x, 3.0) if self._pow else op.Mul(x, op.Mul(x, x))
            inner = op.Add(x, op.Mul(cube, 0.044715))
            t = op.Tanh(op.Mul(inner, math.sqrt(2 / math.pi)))
        elif self._divide:  # aten::gelu's translation: x / sqrt(2)
            t = op.Erf(op.Div(x, math.sqrt(2.0)))
        else:
            t = op.Erf(op.Mul(x, math.sqrt(0.5)))
        return op.Mul(op.Mul(x, 0.5), op.Add(t, 1.0))


class _OnnxGelu(_MicrosoftGelu):
    """ONNX ``Gelu`` (opset 20, what ``aten::gelu`` becomes from that opset on) → ``com.microsoft::Gelu`` or
    ``FastGelu``: onnxscript's ``BiasGelu`` fusion reads the former, and the CPU kernels are these."""

    def pattern(self, op: Any, x: ir.Value) -> ir.Value:
        return op.Gelu(x, approximate="tanh" if self._tanh else "none")


#: GELU spelled as ``aten::gelu``'s translation and transformers' tanh GELU write it (operands commuted too)
GELU_RULES = pattern.RewriteRuleSet(
    [
        _GeluFusion.rule("ErfGelu", tanh=False, divide=True),
        _GeluFusion.rule("ErfGeluMul", tanh=False),
        _GeluFusion.rule("TanhGeluPow", tanh=True),
        _GeluFusion.rule("TanhGeluMul", tanh=True, cube_as_pow=False),
        _OnnxGelu.rule("OnnxGelu", tanh=False),
        _OnnxGelu.rule("OnnxFastGelu", tanh=True),
    ],
    commute=True,
)
