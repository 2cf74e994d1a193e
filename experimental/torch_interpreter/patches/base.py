"""A patch: what it replaces, the export failure it fixes, when it is needed, how to undo it."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

Undo = Callable[[], None]

_MARK = "__aten2onnx_patch__"

#: the names of the patches applied now, in the order they were applied (the capture records them)
_ACTIVE: list[str] = []


def active() -> list[str]:
    """The names of the patches applied now (by :func:`applied` or ``bypass_export_some_errors``), in order.

    >>> active()
    []
    """
    return list(_ACTIVE)


def mark_active(patch: Patch, undo: Undo) -> Undo:
    """Records ``patch`` as applied until ``undo`` (returned, wrapped) is called."""
    _ACTIVE.append(patch.name)

    def undo_and_forget() -> None:
        undo()
        if patch.name in _ACTIVE:
            _ACTIVE.remove(patch.name)

    return undo_and_forget


@dataclass(frozen=True)
class Patch:
    """One patch of :func:`bypass_export_some_errors`.

    ``needed()`` tells whether the installed versions need it (and that it is not applied already,
    which makes nesting safe); ``apply()`` applies it and returns the function that undoes it.
    """

    name: str
    group: str  #: "sympy", "torch", "transformers", "torchvision" or "ultralytics"
    replaces: str
    fixes: str
    versions: str
    needed: Callable[[], bool]
    apply: Callable[[], Undo]


@contextlib.contextmanager
def applied(patches: Iterable[Patch]) -> Iterator[list[Patch]]:
    """Applies those of ``patches`` the installed versions need, in order, and undoes them in reverse on exit;
    gives the list of the patches applied.

    >>> with applied([]) as done:
    ...     done
    []
    """
    undo: list[tuple[Patch, Undo]] = []
    try:
        for patch in patches:
            if patch.needed():
                undo.append((patch, mark_active(patch, patch.apply())))
        yield [patch for patch, _ in undo]
    finally:
        for patch, fn in reversed(undo):
            fn()
            logger.debug("undid patch %r", patch.name)


def replace_attribute(owner: Any, name: str, new: Any) -> Undo:
    """Sets ``owner.name = new`` and returns the undo; ``new`` is marked as a patch."""
    old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(new, _MARK, True)
    setattr(owner, name, new)

    def undo() -> None:
        setattr(owner, name, old)

    return undo


def build_trace_rules() -> None:
    """Makes dynamo build its map of torch functions now, before a patch replaces one of them.

    dynamo builds the map lazily, looking the functions up by name (``torch.jit.isinstance``): built while
    a patch is applied, it would hold the replacement, marked as a function not to trace, and strict
    export would fail on the very call the patch is for.
    """
    import torch._dynamo.trace_rules as trace_rules

    trace_rules.get_torch_obj_rule_map()


def is_patched(owner: Any, name: str) -> bool:
    return getattr(getattr(owner, name, None), _MARK, False)


def imported_owner(module: str, cls: str | None = None) -> Any:
    """The module ``module`` if it is imported (its class ``cls`` when given), else None: a patch of a library
    applies only to what the model's code already imported.

    >>> imported_owner("no_such_module_here") is None, imported_owner("sys") is sys
    (True, True)
    """
    owner = sys.modules.get(module)
    return getattr(owner, cls, None) if owner is not None and cls else owner


def attribute_needed(module: str, name: str, cls: str | None = None) -> bool:
    """Whether ``module.name`` (``module.cls.name``) is imported, exists and is not patched already.

    >>> attribute_needed("no_such_module_here", "f"), attribute_needed("sys", "getrecursionlimit")
    (False, True)
    """
    owner = imported_owner(module, cls)
    return owner is not None and hasattr(owner, name) and not is_patched(owner, name)
