"""Strategy ``refine_dynamic_shapes``: torch's suggested fixes applied to the dynamic shapes when they stay dynamic.

"Constraints violated" with suggested fixes (``h = Dim('h', min=3)``, ``a = b + 1``) is retried with
:func:`torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes` when every fix keeps the axis
dynamic (bounds, relations), three times at most; a fix making an axis static (``a = 8``) raises
:class:`~experimental.torch_interpreter.DynamicShapeError` naming the input and axis.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch.utils._pytree import tree_map

from ...errors import DynamicShapeError
from ..dynamic_shapes import DimSpec
from ..failures import Failure, FailureKind, SuggestedFix
from ..report import CaptureReport
from ..strategy import Attempt, Strategy

#: how many times torch's fixes are applied in one series of tries
MAX_REFINEMENTS = 3


def _axes_named(spec: DimSpec, name: str) -> list[str]:
    return [f"input {label} axis {axis}" for label, axes in spec.axes.values() for axis, n in axes.items() if n == name]


def refine(fixes: tuple[SuggestedFix, ...], spec: DimSpec, torch_spec: Any) -> tuple[Any, str]:
    """``torch_spec`` with torch's suggested ``fixes`` applied, and a description of them.

    Raises :class:`DynamicShapeError` when a fix makes an axis static.

    >>> x = torch.zeros(8)
    >>> spec = DimSpec({"x": {0: torch.export.Dim("a")}}, {"[0][0]": ("x", {0: "a"})})
    >>> refine((SuggestedFix("a", "8"),), spec, spec.torch_spec)
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.DynamicShapeError: axes declared dynamic are fixed by the model: \
input x axis 0 would become static (8). torch.export suggests making them static; aten2onnx does not silently \
drop a dynamic axis. Declare the axis static (remove it from dynamic_shapes) or change the model's code that \
fixes this size.
    """
    static = [fix for fix in fixes if fix.static]
    if static:
        where = "; ".join(
            f"{', '.join(_axes_named(spec, fix.name)) or fix.name} would become static ({fix.fix})" for fix in static
        )
        raise DynamicShapeError(
            f"axes declared dynamic are fixed by the model: {where}. torch.export suggests making them static; "
            "aten2onnx does not silently drop a dynamic axis. Declare the axis static (remove it from "
            "dynamic_shapes) or change the model's code that fixes this size."
        )
    block = "Suggested fixes:\n" + "\n".join(f"  {fix.name} = {fix.fix}" for fix in fixes)
    # torch's function reads the name of every axis: an unnamed one (Dim.DYNAMIC, a name given as a string)
    # stands in as a named Dim for the call
    hints: dict[str, Any] = {}

    def named(dim: Any) -> Any:
        if dim is None or isinstance(dim, int) or hasattr(dim, "__name__"):
            return dim
        name = f"_unnamed_axis_{len(hints)}"
        hints[name] = dim
        return torch.export.Dim(name)

    def unnamed(dim: Any) -> Any:
        return hints.get(getattr(dim, "__name__", None), dim)

    try:
        stand_in = tree_map(named, torch_spec, is_leaf=lambda d: d is None)
        refined = torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(block, stand_in)
    except Exception as e:  # torch cannot apply its own fixes to this spec
        raise DynamicShapeError(f"could not apply torch's suggested fixes ({block!r}): {e}") from e
    applied = ", ".join(f"{fix.name} = {fix.fix}" for fix in fixes)
    return tree_map(unnamed, refined, is_leaf=lambda d: d is None), applied


class RefineDynamicShapes(Strategy):
    """Answers :attr:`FailureKind.SUGGESTED_FIXES` with the spec torch suggests, when it stays dynamic."""

    name = "refine_dynamic_shapes"

    def retry(self, attempt: Attempt, failure: Failure, report: CaptureReport) -> Attempt | None:
        if FailureKind.SUGGESTED_FIXES not in failure.kinds or attempt.retries.count(self.name) >= MAX_REFINEMENTS:
            return None
        try:
            torch_spec, applied = refine(failure.fixes, attempt.spec, attempt.torch_spec)
        except DynamicShapeError as refused:
            raise DynamicShapeError(f"{refused}\n{failure.error}") from failure.error.__cause__
        report.use(self.name, f"applied torch's suggested fixes: {applied}")
        return replace(attempt, torch_spec=torch_spec, retries=(*attempt.retries, self.name))
