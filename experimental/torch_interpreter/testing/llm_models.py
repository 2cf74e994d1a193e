"""Tiny random-weight transformers models with a cache, and inputs of given sizes (shared by tests).

Example::

    >>> model = decoder_model("llama")
    >>> inputs = decoder_inputs(model, batch=2, seq=3, past=5)
    >>> model(**inputs).logits.shape
    torch.Size([2, 3, 1000])
    >>> decoder_dynamic_shapes(model)["input_ids"]
    {0: 'batch', 1: 'seq'}
"""

from __future__ import annotations

import torch
import transformers

VOCAB = 1000
SMALL = dict(vocab_size=VOCAB, max_position_embeddings=256)


def decoder_config(name: str):
    """The config of a tiny decoder of family ``name`` (llama, mistral, qwen2, phi3, gpt2), cache on."""
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, use_cache=True, **SMALL)
    if name == "llama":
        return transformers.LlamaConfig(**common)
    if name == "mistral":
        return transformers.MistralConfig(sliding_window=64, **common)
    if name == "qwen2":
        return transformers.Qwen2Config(**common)
    if name == "phi3":
        return transformers.Phi3Config(pad_token_id=0, **common)
    if name == "gpt2":
        return transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=256,
                                       use_cache=True, bos_token_id=0, eos_token_id=0)
    raise ValueError(name)


def decoder_model(name: str):
    """A random-weight model of :func:`decoder_config` (seed 0), in eval mode."""
    torch.manual_seed(0)
    cfg = decoder_config(name)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def _kv_shape(cfg, batch, past):
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return (batch, heads, past, head_dim)


def decoder_inputs(model, batch: int, seq: int, past: int, seed: int = 0) -> dict:
    """input_ids (batch, seq), attention_mask (batch, past + seq), a DynamicCache of ``past`` tokens."""
    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    cache = transformers.DynamicCache(config=cfg)
    for layer in range(cfg.num_hidden_layers):
        shape = _kv_shape(cfg, batch, past)
        cache.update(torch.randn(shape, generator=gen), torch.randn(shape, generator=gen), layer)
    return {
        "input_ids": torch.randint(0, VOCAB, (batch, seq), generator=gen),
        "attention_mask": torch.ones(batch, past + seq, dtype=torch.int64),
        "past_key_values": cache,
    }


def decoder_dynamic_shapes(model) -> dict:
    """The dynamic shapes of :func:`decoder_inputs`: batch, seq, total (past + seq) and past."""
    layer = {0: "batch", 2: "past"}
    return {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
        "past_key_values": [layer] * (2 * model.config.num_hidden_layers),
    }


def t5_model():
    """A random-weight T5 (2 encoder and 2 decoder layers, seed 0), cache on, in eval mode."""
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                                num_heads=4, use_cache=True, decoder_start_token_id=0, pad_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg).eval()


def t5_inputs(model, batch: int, enc: int, dec: int, past: int, seed: int = 0) -> dict:
    """Encoder ids and mask (batch, enc), decoder ids (batch, dec), an EncoderDecoderCache (past self-attention
    tokens, enc cross-attention ones)."""
    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    self_cache, cross_cache = transformers.DynamicCache(), transformers.DynamicCache()
    for layer in range(cfg.num_decoder_layers):
        self_cache.update(torch.randn(batch, cfg.num_heads, past, cfg.d_kv, generator=gen),
                          torch.randn(batch, cfg.num_heads, past, cfg.d_kv, generator=gen), layer)
        cross_cache.update(torch.randn(batch, cfg.num_heads, enc, cfg.d_kv, generator=gen),
                           torch.randn(batch, cfg.num_heads, enc, cfg.d_kv, generator=gen), layer)
    return {
        "input_ids": torch.randint(0, VOCAB, (batch, enc), generator=gen),
        "attention_mask": torch.ones(batch, enc, dtype=torch.int64),
        "decoder_input_ids": torch.randint(0, VOCAB, (batch, dec), generator=gen),
        "past_key_values": transformers.EncoderDecoderCache(self_cache, cross_cache),
    }


def t5_dynamic_shapes(model) -> dict:
    """The dynamic shapes of :func:`t5_inputs`."""
    n = 2 * model.config.num_decoder_layers
    return {
        "input_ids": {0: "batch", 1: "encoder_seq"},
        "attention_mask": {0: "batch", 1: "encoder_seq"},
        "decoder_input_ids": {0: "batch", 1: "seq"},
        "past_key_values": [[{0: "batch", 2: "past"}] * n, [{0: "batch", 2: "encoder_seq"}] * n],
    }
