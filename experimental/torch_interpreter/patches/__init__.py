"""The patches of :func:`experimental.torch_interpreter.bypass_export_some_errors`, one module per group."""

from .base import Patch
from .control_flow import PATCHES as _CONTROL_FLOW
from .torch_strict import PATCHES as _TORCH
from .transformers_caches import PATCHES as _TRANSFORMERS
from .transformers_recurrences import PATCHES as TRANSFORMERS_RECURRENCES

#: every known patch, in the order they are applied
ALL_PATCHES: list[Patch] = [*_TORCH, *_CONTROL_FLOW, *_TRANSFORMERS, *TRANSFORMERS_RECURRENCES]

__all__ = ["ALL_PATCHES", "TRANSFORMERS_RECURRENCES", "Patch"]
