"""The capture strategies, in the order the loop asks them: one line each in :data:`STRATEGIES`.

The order matters where two strategies could answer the same failure (``size_oblivious`` is tried before
``refine_dynamic_shapes`` on a 0/1 size torch also suggests fixes for) and for fallbacks (a strategy's
fallback restarts those after it: ``transformers_dynamic_shapes`` exports static after ``other_mode`` failed).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..strategy import Strategy
from .control_flow_aliasing import ControlFlowAliasing
from .lower_functorch import LowerFunctorch
from .other_mode import OtherMode
from .refine_dynamic_shapes import RefineDynamicShapes
from .size_oblivious import SizeOblivious
from .transformers_caches import TransformersCaches
from .transformers_dynamic_shapes import TransformersDynamicShapes
from .transformers_recurrences import TransformersRecurrences
from .transformers_sizes import TransformersSizes
from .ultralytics_heads import UltralyticsHeads
from .unsolved_constraints import UnsolvedConstraints

#: every strategy, in the order they are asked
STRATEGIES: tuple[Strategy, ...] = (
    TransformersCaches(),
    TransformersDynamicShapes(),
    SizeOblivious(),
    RefineDynamicShapes(),
    ControlFlowAliasing(),
    UnsolvedConstraints(),
    OtherMode(),
    LowerFunctorch(),
    TransformersRecurrences(),
    TransformersSizes(),
    UltralyticsHeads(),
)

#: their names, what ``to_onnx(capture_strategies=...)`` takes
NAMES: tuple[str, ...] = tuple(s.name for s in STRATEGIES)


def select(choice: bool | str | Strategy | Sequence[str | Strategy] | None) -> tuple[Strategy, ...]:
    """The strategies named by ``choice``: ``True`` or None all, ``False`` none, names (taken in the order of
    :data:`STRATEGIES`), or :class:`Strategy` objects (taken as given).

    >>> [s.name for s in select(("other_mode", "size_oblivious"))]
    ['size_oblivious', 'other_mode']
    >>> select(False)
    ()
    """
    if choice is None or choice is True:
        return STRATEGIES
    if choice is False:
        return ()
    items = (choice,) if isinstance(choice, (str, Strategy)) else tuple(choice)
    if all(isinstance(item, Strategy) for item in items):
        return items
    unknown = [n for n in items if n not in NAMES]
    if unknown:
        raise ValueError(f"unknown capture strategies {unknown}; the strategies are {list(NAMES)}")
    return tuple(s for s in STRATEGIES if s.name in items)


__all__ = ["NAMES", "STRATEGIES", "select"]
