"""While capturing, ``model.forward`` names every keyword it is called with (``**kwargs`` made explicit)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import torch


@contextlib.contextmanager
def keywords_as_parameters(model: torch.nn.Module, kwargs: dict[str, Any] | None) -> Iterator[None]:
    """While capturing, ``model.forward`` has a signature naming every keyword it is called with.

    A ``forward(self, x, **kwargs)`` called with keywords its signature does not name (transformers 5
    passes ``past_key_values`` through ``**kwargs``) cannot take dynamic shapes for them: torch.export
    wants the spec of a ``**kwargs`` as one dict and then fails inside. The instance gets a ``forward``
    whose signature lists those keywords as keyword-only parameters (the call goes to the original
    ``forward`` unchanged), removed on exit; parameter names are not affected.

    >>> class M(torch.nn.Module):
    ...     def forward(self, x, **kwargs):
    ...         return x
    >>> m = M()
    >>> with keywords_as_parameters(m, {"mask": None}):
    ...     list(inspect.signature(m.forward).parameters)
    ['x', 'mask']
    >>> list(inspect.signature(m.forward).parameters)
    ['x', 'kwargs']
    """
    signature = inspect.signature(model.forward)
    params = list(signature.parameters.values())
    extra = [k for k in (kwargs or {}) if k not in signature.parameters]
    if not extra or not any(p.kind == p.VAR_KEYWORD for p in params):
        yield
        return
    original = model.forward
    named = [p for p in params if p.kind != p.VAR_KEYWORD]
    named += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None) for k in extra]

    def forward(*args: Any, **kw: Any) -> Any:
        return original(*args, **kw)

    forward.__signature__ = signature.replace(parameters=named)  # type: ignore[attr-defined]
    had = "forward" in model.__dict__
    saved = model.__dict__.get("forward")
    model.forward = forward
    try:
        yield
    finally:
        if had:
            model.forward = saved
        else:
            del model.forward
