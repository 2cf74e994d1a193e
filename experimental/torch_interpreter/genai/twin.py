"""A small twin of a language model: its config with fewer layers, random weights in memory.

A model built on the meta device has no weights to run, yet the package keeps ``GroupQueryAttention`` only when
onnxruntime, fed as onnxruntime-genai feeds it, gives PyTorch's logits with it (:mod:`.shared_buffer_check`). The
rewrite depends on the layers' code, not on their weights or their number: the check runs on a twin with one layer
of each kind the model has (``layer_types``: sliding and full attention), the other settings unchanged.
"""

from __future__ import annotations

import copy

import torch


def twin_model(config: object, dtype: torch.dtype) -> torch.nn.Module:
    """A causal LM of ``config`` with one layer of each kind (in the order they first appear, two layers for a
    config without ``layer_types``), random weights (seeded), in eval mode and in ``dtype``.

    Example::

        >>> import transformers
        >>> cfg = transformers.Gemma2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=6,
        ...                                 num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        ...                                 vocab_size=100)
        >>> twin = twin_model(cfg, torch.float32)
        >>> twin.config.num_hidden_layers, twin.config.layer_types, cfg.num_hidden_layers
        (2, ['sliding_attention', 'full_attention'], 6)
    """
    import transformers

    twin_config = copy.deepcopy(config)
    text = twin_config.get_text_config(decoder=True)
    kinds = getattr(text, "layer_types", None)
    if isinstance(kinds, list) and kinds:
        text.layer_types = list(dict.fromkeys(kinds))
        text.num_hidden_layers = len(text.layer_types)
    else:
        text.num_hidden_layers = min(text.num_hidden_layers, 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return transformers.AutoModelForCausalLM.from_config(twin_config, dtype=dtype).eval()
