"""A patch: what it replaces, the export failure it fixes, when it is needed, how to undo it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Undo = Callable[[], None]

_MARK = "__aten2onnx_patch__"


@dataclass(frozen=True)
class Patch:
    """One patch of :func:`bypass_export_some_errors`.

    ``needed()`` tells whether the installed versions need it (and that it is not applied already,
    which makes nesting safe); ``apply()`` applies it and returns the function that undoes it.
    """

    name: str
    group: str  #: "sympy", "torch" or "transformers"
    replaces: str
    fixes: str
    versions: str
    needed: Callable[[], bool]
    apply: Callable[[], Undo]


def replace_attribute(owner: Any, name: str, new: Any) -> Undo:
    """Sets ``owner.name = new`` and returns the undo; ``new`` is marked as a patch."""
    old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(new, _MARK, True)
    setattr(owner, name, new)

    def undo() -> None:
        setattr(owner, name, old)

    return undo


def is_patched(owner: Any, name: str) -> bool:
    return getattr(getattr(owner, name, None), _MARK, False)
