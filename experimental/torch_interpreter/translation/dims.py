"""Dimensions of the FX graph's tensors as the ONNX graph writes them: an int, or a symbol named after the user's
dynamic axis (``batch``), and sizes known at export time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy
import torch


def onnx_dim(dim: Any, names: Mapping[str, str]) -> int | str:
    """An ONNX dimension: an int, or a symbolic name with user names substituted.

    >>> onnx_dim(3, {})
    3
    """
    if isinstance(dim, int):
        return dim
    if isinstance(dim, torch.SymInt):
        expr = dim.node.expr
        if expr.is_number:
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            return names.get(str(expr), str(expr))
        return str(expr.xreplace({s: sympy.Symbol(names.get(str(s), str(s))) for s in expr.free_symbols}))
    return str(dim)


def static_dim(d: Any) -> int | None:
    """``d`` (an int or a SymInt) as an int when it is known at export time, else None.

    >>> static_dim(3), static_dim(None)
    (3, None)
    """
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt) and d.node.expr.is_number:
        return int(d.node.expr)
    return None
