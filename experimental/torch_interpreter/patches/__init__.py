"""The patches of :func:`experimental.torch_interpreter.bypass_export_some_errors`, one module per group."""

from .base import Patch
from .control_flow import PATCHES as _CONTROL_FLOW
from .torch_strict import PATCHES as _TORCH
from .transformers_caches import PATCHES as _TRANSFORMERS

#: every known patch, in the order they are applied
ALL_PATCHES: list[Patch] = [*_TORCH, *_CONTROL_FLOW, *_TRANSFORMERS]

__all__ = ["ALL_PATCHES", "Patch"]
