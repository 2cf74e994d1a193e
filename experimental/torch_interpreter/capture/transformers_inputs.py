"""Recognizes a transformers model and its caches by their classes, without importing transformers."""

from __future__ import annotations

from typing import Any


def is_cache(value: Any) -> bool:
    """Whether ``value`` is a transformers cache (``DynamicCache``, ``EncoderDecoderCache``...).

    >>> is_cache({})
    False
    """
    name = type(value).__name__
    return type(value).__module__.startswith("transformers") and name.endswith("Cache")


def contains_cache(value: Any) -> bool:
    """Whether a transformers cache is found in ``value`` or in its dicts, lists and tuples.

    >>> contains_cache(((1, 2), {"x": None}))
    False
    """
    if is_cache(value):
        return True
    if isinstance(value, dict):
        return any(contains_cache(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_cache(v) for v in value)
    return False


def is_transformers_model(model: Any) -> bool:
    """Whether ``model`` is a transformers ``PreTrainedModel``.

    >>> import torch
    >>> is_transformers_model(torch.nn.Linear(2, 2))
    False
    """
    return any(
        c.__module__.startswith("transformers.") and c.__name__ == "PreTrainedModel" for c in type(model).__mro__
    )
