"""The patch registry: every patch, one module per family, read through :func:`select`.

:func:`~experimental.torch_interpreter.bypass_export_some_errors` selects patches by group (its flags
``patch_torch``, ``patch_transformers``, ``patch_torchvision``, ``patch_ultralytics``), the capture strategies by family (``control_flow`` for
``control_flow_aliasing``, ``transformers_caches``, ``transformers_recurrences``, ``transformers_sizes``): both read this one list.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import Patch, applied
from .control_flow import PATCHES as _CONTROL_FLOW
from .torch_strict import PATCHES as _TORCH_STRICT
from .torchvision_detection import PATCHES as _TORCHVISION_DETECTION
from .torchvision_image_sizes import PATCHES as _TORCHVISION_IMAGE_SIZES
from .transformers_caches import PATCHES as _TRANSFORMERS_CACHES
from .transformers_recurrences import PATCHES as _TRANSFORMERS_RECURRENCES
from .transformers_sizes import PATCHES as _TRANSFORMERS_SIZES
from .ultralytics_heads import PATCHES as _ULTRALYTICS_HEADS

#: the patches of each family (the module defining them), families in the order they are applied
FAMILIES: dict[str, tuple[Patch, ...]] = {
    "torch_strict": tuple(_TORCH_STRICT),
    "control_flow": tuple(_CONTROL_FLOW),
    "transformers_caches": tuple(_TRANSFORMERS_CACHES),
    "transformers_recurrences": tuple(_TRANSFORMERS_RECURRENCES),
    "transformers_sizes": tuple(_TRANSFORMERS_SIZES),
    "torchvision_detection": tuple(_TORCHVISION_DETECTION),
    "torchvision_image_sizes": tuple(_TORCHVISION_IMAGE_SIZES),
    "ultralytics_heads": tuple(_ULTRALYTICS_HEADS),
}

#: every known patch, in the order they are applied
ALL_PATCHES: list[Patch] = [patch for family in FAMILIES.values() for patch in family]


def select(groups: Iterable[str] | None = None, families: Iterable[str] | None = None) -> list[Patch]:
    """The patches of ``groups`` (``"sympy"``, ``"torch"``, ``"transformers"``) and of ``families`` (keys of
    :data:`FAMILIES`), in the order they are applied; None does not filter.

    >>> [p.name for p in select(families=["control_flow"])]
    ['torch.cond without aliasing', 'while_loop without aliasing', 'scan without aliasing']
    >>> len(select(groups=["torch"])) == len(FAMILIES["torch_strict"]) + len(FAMILIES["control_flow"])
    True
    """
    groups = None if groups is None else set(groups)
    families = None if families is None else set(families)
    unknown = sorted((families or set()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown patch families {unknown}; the families are {list(FAMILIES)}")
    return [
        patch
        for family, patches in FAMILIES.items()
        if families is None or family in families
        for patch in patches
        if groups is None or patch.group in groups
    ]


__all__ = ["ALL_PATCHES", "FAMILIES", "Patch", "applied", "select"]
