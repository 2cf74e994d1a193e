"""transformers' ``torch_int`` / ``torch_float`` keep a symbolic size symbolic during the export.

transformers' vision models turn image sizes into Python numbers with ``torch_int(x)`` (``int(x)`` outside
``torch.jit`` tracing) and ``torch_float(x)``: RT-DETR and D-FINE make their anchors from
``torch_int(height)``, ViT-like models interpolate their position embeddings to ``torch_int(h // patch)``. Under
``torch.export`` the size is a ``SymInt``; ``int()`` of it adds a guard that fixes it (RT-DETR's
``(height - 1) // 32 + 1 == 2``): the graph holds at the example's size only, and ``InferenceSession`` refuses any
other. The patch returns a ``SymInt`` as it is (``torch.sym_float`` of it for ``torch_float``), every other value as
transformers converts it.

``torch_int`` is imported by name into each model's module (``from ...utils import torch_int``): the patch replaces
it in every transformers module already imported that holds transformers' function, and puts it back after.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from .base import Patch, Undo, is_patched, replace_attribute

_GENERIC = "transformers.utils.generic"


def _originals() -> dict[str, Any]:
    generic = sys.modules.get(_GENERIC)
    if generic is None:
        return {}
    return {name: getattr(generic, name) for name in ("torch_int", "torch_float")
            if hasattr(generic, name) and not is_patched(generic, name)}


def _holders(name: str, original: Any) -> list[Any]:
    """The imported transformers modules whose ``name`` is transformers' own function."""
    return [module for key, module in list(sys.modules.items())
            if module is not None and (key == "transformers" or key.startswith("transformers."))
            and getattr(module, name, None) is original]


def _keeping_symbols(name: str, original: Any) -> Any:
    def torch_int(x: Any) -> Any:  # noqa: D401  (transformers' name)
        if isinstance(x, torch.SymInt):
            return x
        return original(x)

    def torch_float(x: Any) -> Any:
        if isinstance(x, (torch.SymInt, torch.SymFloat)):
            return torch.sym_float(x)
        return original(x)

    return {"torch_int": torch_int, "torch_float": torch_float}[name]


def used_by(model: Any) -> bool:
    """Whether a module defining one of ``model``'s submodules holds transformers' ``torch_int`` or ``torch_float``
    (RT-DETR's and ViT's do, Llama's does not): the patch is applied around their capture only.

    >>> used_by(torch.nn.Linear(2, 2))
    False
    """
    originals = _originals()
    names = {type(m).__module__ for m in model.modules()} if isinstance(model, torch.nn.Module) else set()
    return any(getattr(sys.modules.get(name), fn, None) is original
               for name in names for fn, original in originals.items())


def _needed() -> bool:
    return any(_holders(name, original) for name, original in _originals().items())


def _apply() -> Undo:
    undo = []
    for name, original in _originals().items():
        for module in _holders(name, original):
            undo.append(replace_attribute(module, name, _keeping_symbols(name, original)))

    def undo_all() -> None:
        for fn in reversed(undo):
            fn()

    return undo_all


PATCHES = [
    Patch(
        name="torch_int and torch_float keep symbolic sizes",
        group="transformers",
        replaces="transformers.utils.generic.torch_int / torch_float, in every imported transformers module",
        fixes="a dynamic image size fixed by `int(height)` (RT-DETR's anchors, position embeddings interpolated "
              "to the image's size): the graph held at the example's size only",
        versions="transformers 4.4x-5.x (torch_int is int(x) outside torch.jit tracing)",
        needed=_needed,
        apply=_apply,
    ),
]
