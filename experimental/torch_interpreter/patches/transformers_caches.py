"""transformers caches as pytree nodes, so that torch.export accepts them as inputs and outputs.

A ``DynamicCache`` of L layers flattens into ``[key_0, value_0, ..., key_{L-1}, value_{L-1}]`` with
the names ``0.key``, ``0.value``, ...: its dynamic shapes are one entry per tensor, and the ONNX
inputs are named ``past_key_values.0.key`` (outputs ``present.0.key``). The unflatten sets the keys
and values of each layer directly: rebuilding through ``DynamicCache.update()`` would leave lifted
empty-tensor constants in the graph.
"""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as pytree

from .base import Patch, Undo


def _flatten_dynamic_cache(cache: Any) -> tuple[list[Any], tuple]:
    """Tensors ``[key_0, value_0, ...]`` and a context of ``(name, layer class, sliding window)`` per
    tensor: a tuple of constants, as dynamo needs in strict mode."""
    tensors, context = [], []
    for i, layer in enumerate(cache.layers):
        window = getattr(layer, "sliding_window", None)
        tensors += [layer.keys, layer.values]
        context += [(f"{i}.key", type(layer), window), (f"{i}.value", type(layer), window)]
    return tensors, tuple(context)


def _unflatten_dynamic_cache(tensors: Any, context: tuple) -> Any:
    from transformers import DynamicCache

    tensors = list(tensors)
    cache = DynamicCache()
    for i in range(0, len(context), 2):
        _, cls, window = context[i]
        layer = cls(sliding_window=window) if window is not None else cls()
        layer.keys, layer.values = tensors[i], tensors[i + 1]
        layer.dtype, layer.device = layer.keys.dtype, layer.keys.device
        layer.is_initialized = True
        if hasattr(layer, "cumulative_length"):
            layer.cumulative_length = layer.keys.shape[-2]
        cache.layers.append(layer)
    return cache


def _flatten_with_keys(flatten):
    def flatten_with_keys(obj: Any) -> tuple[list[tuple[Any, Any]], Any]:
        values, context = flatten(obj)
        names = [c[0] if isinstance(c, tuple) else c for c in context]
        return [(pytree.MappingKey(name), v) for name, v in zip(names, values)], context

    return flatten_with_keys


_ENCDEC_NAMES = ["self_attention_cache", "cross_attention_cache"]


def _flatten_encoder_decoder_cache(cache: Any) -> tuple[list[Any], tuple[str, ...]]:
    return [cache.self_attention_cache, cache.cross_attention_cache], tuple(_ENCDEC_NAMES)


def _unflatten_encoder_decoder_cache(children: Any, context: Any) -> Any:
    from transformers import EncoderDecoderCache

    return EncoderDecoderCache(*children)


def _register(cls: type, flatten, unflatten, name: str) -> Undo:
    pytree.register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=f"aten2onnx.{name}",
        flatten_with_keys_fn=_flatten_with_keys(flatten),
    )

    def undo() -> None:
        pytree._deregister_pytree_node(cls)

    return undo


def _cache_class(name: str) -> type | None:
    try:
        import transformers
    except ImportError:
        return None
    return getattr(transformers, name, None)


def _needs_registration(name: str) -> bool:
    cls = _cache_class(name)
    return cls is not None and cls not in pytree.SUPPORTED_NODES


PATCHES = [
    Patch(
        name="DynamicCache as pytree",
        group="transformers",
        replaces="registers transformers.DynamicCache as a pytree node (flattened keys and values per layer)",
        fixes="`ValueError: Unsupported input type <class 'transformers.cache_utils.DynamicCache'>`",
        versions="transformers >= 4.50 when transformers itself does not register it (5.23 does not)",
        needed=lambda: _needs_registration("DynamicCache"),
        apply=lambda: _register(
            _cache_class("DynamicCache"), _flatten_dynamic_cache, _unflatten_dynamic_cache, "DynamicCache"
        ),
    ),
    Patch(
        name="EncoderDecoderCache as pytree",
        group="transformers",
        replaces="registers transformers.EncoderDecoderCache (self- and cross-attention DynamicCache)",
        fixes="`ValueError: Unsupported input type <class '...EncoderDecoderCache'>`",
        versions="transformers >= 4.50 when transformers itself does not register it (5.23 does not)",
        needed=lambda: _needs_registration("EncoderDecoderCache"),
        apply=lambda: _register(
            _cache_class("EncoderDecoderCache"),
            _flatten_encoder_decoder_cache,
            _unflatten_encoder_decoder_cache,
            "EncoderDecoderCache",
        ),
    ),
]
