"""The example inputs a decoder is exported with for onnxruntime-genai, and their dynamic axes.

The cache comes from the model itself (a first call on a short prompt), so that its heads and head sizes are the
model's whatever the family (grouped-query heads, a head size apart from ``hidden_size / heads``, keys and values
of different sizes). The input names are those onnxruntime-genai feeds: ``input_ids``, ``attention_mask``,
``position_ids`` when the model takes it, ``past_key_values.%d.key`` / ``.value``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import GenAIError

#: batch, new tokens and past tokens of the example inputs (none of them 0 or 1: torch.export would specialize)
BATCH, SEQUENCE, PAST = 2, 3, 5


@dataclass
class DecoderInputs:
    """The keyword inputs of the export, their dynamic shapes, and the cache's layout (layers, key-value heads
    and head size as the model's cache holds them)."""

    kwargs: dict[str, Any]
    dynamic_shapes: dict[str, Any]
    num_layers: int
    kv_heads: int
    head_size: int
    has_position_ids: bool
    #: the keyword of the cache (``cache`` from transformers 5.2x, ``past_key_values`` before): the ONNX inputs are
    #: named ``<it>.%d.key``
    cache_argument: str = "past_key_values"


def decoder_inputs(model: torch.nn.Module) -> DecoderInputs:
    """Inputs for ``to_onnx`` with :func:`bypass_export_some_errors` (``patch_transformers=True``): ``PAST``
    tokens already in the cache, ``SEQUENCE`` new ones, a batch of ``BATCH``.

    Example::

        >>> import transformers
        >>> cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        ...                                num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
        >>> inputs = decoder_inputs(transformers.LlamaForCausalLM(cfg).eval())
        >>> inputs.num_layers, inputs.kv_heads, inputs.head_size, inputs.dynamic_shapes["input_ids"]
        (2, 2, 8, {0: 'batch_size', 1: 'sequence_length'})
    """
    import transformers

    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(0)
    weights_device = next(model.parameters()).device
    on_meta = weights_device.type == "meta"
    # a model on the meta device computes the cache's shapes there; the inputs are real tensors of those shapes
    device = torch.device("cpu") if on_meta else weights_device
    prompt = torch.randint(3, vocab, (BATCH, PAST), generator=gen).to(weights_device)
    parameters = inspect.signature(model.forward).parameters
    argument = cache_argument(model)
    # on the meta device, values cannot be read: transformers' look for padding tokens (GPT-2) is skipped
    pad = getattr(model.config, "pad_token_id", None)
    if on_meta:
        model.config.pad_token_id = None
    try:
        with torch.no_grad():
            out = model(input_ids=prompt, use_cache=True,
                        **{argument: transformers.DynamicCache(config=model.config)})
    finally:
        if on_meta:
            model.config.pad_token_id = pad
    cache = returned_cache(out, argument)
    if cache is not None and on_meta:
        for layer in cache.layers:
            layer.keys, layer.values = (torch.zeros(t.shape, dtype=t.dtype) for t in (layer.keys, layer.values))
    if cache is None:
        raise GenAIError(
            f"{type(model).__name__} returns no key-value cache when called with use_cache=True (an encoder, or a "
            "config without is_decoder): onnxruntime-genai generates with a decoder that keeps its keys and values")
    keys = [layer.keys for layer in cache.layers]
    takes_positions = "position_ids" in parameters
    kwargs: dict[str, Any] = {
        "input_ids": torch.randint(3, vocab, (BATCH, SEQUENCE), generator=gen).to(device),
        "attention_mask": torch.ones(BATCH, PAST + SEQUENCE, dtype=torch.int64, device=device),
    }
    dynamic_shapes: dict[str, Any] = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
    }
    if takes_positions:
        kwargs["position_ids"] = torch.arange(PAST, PAST + SEQUENCE, device=device).expand(BATCH, SEQUENCE)
        dynamic_shapes["position_ids"] = {0: "batch_size", 1: "sequence_length"}
    kwargs[argument] = cache
    dynamic_shapes[argument] = [{0: "batch_size", 2: "past_sequence_length"}] * (2 * len(keys))
    return DecoderInputs(kwargs, dynamic_shapes, len(keys), int(keys[0].shape[1]), int(keys[0].shape[3]),
                         takes_positions, argument)


def cache_argument(model: torch.nn.Module) -> str | None:
    """The keyword ``model.forward`` takes its key-value cache by (``cache`` or ``past_key_values``), None if
    none."""
    parameters = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in parameters), None)


def returned_cache(out: Any, argument: str) -> Any:
    """The cache a transformers model's output holds, under the name of its keyword ``argument`` (``cache``) or
    ``past_key_values``; None if none."""
    return next((out[k] for k in (argument, "past_key_values") if k in out and out[k] is not None), None)
