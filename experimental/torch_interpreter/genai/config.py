"""``genai_config.json``: what onnxruntime-genai reads to drive the exported decoder (model type, cache layout,
input and output names, special tokens, search defaults from ``generation_config.json``)."""

from __future__ import annotations

from typing import Any

from ..errors import GenAIError
from .inputs import DecoderInputs

#: the longest context a package is made for (its rotary tables hold one row per position): above the longest
#: published one (Llama 4 Scout's 10,485,760 positions), a config asking for more is refused before any allocation
MAX_CONTEXT_LENGTH = 2**24

#: the model types onnxruntime-genai knows as decoders with one key and one value per layer (its ``gpt2`` reads a
#: cache of another layout); any other decoder is its generic ``"decoder"``
GENAI_TYPES = frozenset({
    "chatglm", "ernie4_5", "gemma", "gemma2", "gemma3_text", "granite", "internlm2", "llama", "mistral",
    "nemotron", "olmo", "phi", "phimoe", "phi3", "phi3small", "qwen2", "qwen3", "smollm3",
})

#: the search options of ``generation_config.json`` onnxruntime-genai takes, with its defaults
SEARCH_DEFAULTS: dict[str, Any] = {
    "diversity_penalty": 0.0,
    "do_sample": False,
    "early_stopping": True,
    "length_penalty": 1.0,
    "min_length": 0,
    "no_repeat_ngram_size": 0,
    "num_beams": 1,
    "num_return_sequences": 1,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
}

#: onnxruntime-genai's name of each provider of ``export_genai(provider=...)``
PROVIDER_OPTIONS = {"cpu": [], "cuda": [{"cuda": {}}]}

#: the session options written for each provider besides ``provider_options``. On the CPU, the threads of each
#: operator: onnxruntime-genai's own default is half the machine's hardware threads (it assumes two per core), which
#: is one thread per core where a core runs two, but half the cores where each core runs one (no SMT: many cloud
#: machines, Arm); 0 is onnxruntime's count, one thread per physical core, on both (2 cores without SMT: decoding
#: 1.8x as fast). onnxruntime-genai also caps its count at 16, 0 does not. The threads do not spin waiting for work
#: (``session.intra_op.allow_spinning``: "0"): spinning threads on every core collapse when the cores are shared
#: (beside one busy process per core, medium Llama and Qwen2: 1.02x and 0.91x the builder's decoding with spinning,
#: 1.23x and 1.15x without; idle: 1.54x and 1.44x with, 1.32x and 1.33x without).
SESSION_OPTIONS: dict[str, dict[str, Any]] = {
    "cpu": {"intra_op_num_threads": 0, "session.intra_op.allow_spinning": "0"},
    "cuda": {},
}


def context_length(config: Any) -> int:
    """The longest sequence the package generates: the model's position table, or a sliding window when the
    cache keeps one (onnxruntime-genai gives every layer's cache one length)."""
    text = config.get_text_config(decoder=True)
    key, length = next(((k, getattr(text, k)) for k in ("max_position_embeddings", "n_positions",
                                                        "max_sequence_length", "seq_length") if getattr(text, k, None)),
                       ("default", 2048))
    if isinstance(length, bool) or not isinstance(length, int) or not 0 < length <= MAX_CONTEXT_LENGTH:
        raise GenAIError(
            f"the model's config gives {key}={repr(length)[:40]}: a context length is a whole number of positions "
            f"from 1 to {MAX_CONTEXT_LENGTH:,} (the package's rotary tables hold one row per position)"
        )
    window = getattr(text, "sliding_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return min(length, window)
    return length


def genai_config(config: Any, generation: Any, inputs: DecoderInputs, *, provider: str, filename: str,
                 share_buffer: bool) -> dict[str, Any]:
    """The content of ``genai_config.json`` for the decoder exported with ``inputs``.

    :param config: the model's transformers config
    :param generation: its ``GenerationConfig`` (search defaults, special tokens), or None
    :param provider: ``"cpu"`` or ``"cuda"``
    :param filename: the ONNX file of the decoder, relative to the package
    :param share_buffer: ``past_present_share_buffer`` (the cache written in place, one buffer for past and
        present: a model whose attention writes into it, ``GroupQueryAttention``)

    Example::

        >>> import transformers
        >>> from experimental.torch_interpreter.genai.inputs import DecoderInputs
        >>> cfg = transformers.LlamaConfig(num_hidden_layers=2, bos_token_id=1, eos_token_id=2)
        >>> inputs = DecoderInputs({}, {}, 2, 8, 128, True)
        >>> c = genai_config(cfg, None, inputs, provider="cpu", filename="model.onnx", share_buffer=False)
        >>> c["model"]["type"], c["model"]["decoder"]["inputs"]["position_ids"], c["search"]["max_length"]
        ('llama', 'position_ids', 2048)
        >>> c["model"]["decoder"]["session_options"]["intra_op_num_threads"]  # onnxruntime's count: every core
        0
    """
    text = config.get_text_config(decoder=True)
    length = context_length(config)
    names = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    if inputs.has_position_ids:
        names["position_ids"] = "position_ids"
    past = inputs.cache_argument
    names.update(past_key_names=f"{past}.%d.key", past_value_names=f"{past}.%d.value")
    bos, eos, pad = special_tokens(text, generation)
    model_type = text.model_type if text.model_type in GENAI_TYPES else "decoder"
    decoder = {
        "session_options": {"log_id": "onnxruntime-genai", **SESSION_OPTIONS[provider],
                            "provider_options": PROVIDER_OPTIONS[provider]},
        "filename": filename,
        "head_size": inputs.head_size,
        "hidden_size": _first(text, "hidden_size", "n_embd", "d_model"),
        "inputs": names,
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value"},
        "num_attention_heads": _first(text, "num_attention_heads", "n_head", "num_heads"),
        "num_hidden_layers": inputs.num_layers,
        "num_key_value_heads": inputs.kv_heads,
    }
    search = dict(SEARCH_DEFAULTS)
    for key in SEARCH_DEFAULTS:
        value = getattr(generation, key, None) if generation is not None else None
        if value is not None:
            search[key] = type(SEARCH_DEFAULTS[key])(value)
    search.update(max_length=length, past_present_share_buffer=share_buffer)
    return {
        "model": {"bos_token_id": bos, "context_length": length, "decoder": decoder, "eos_token_id": eos,
                  "pad_token_id": pad, "type": model_type, "vocab_size": int(text.vocab_size)},
        "search": dict(sorted(search.items())),
    }


def _first(config: Any, *names: str) -> int:
    return int(next(getattr(config, n) for n in names if getattr(config, n, None) is not None))


def special_tokens(config: Any, generation: Any) -> tuple[int, int | list[int], int]:
    """bos, eos (one id or several) and pad: the generation config's first, the model config's next; no pad token
    is the first eos, as transformers' generate does."""
    def pick(name: str):
        for source in (generation, config):
            value = getattr(source, name, None) if source is not None else None
            if value is not None:
                return value
        return None

    eos = pick("eos_token_id")
    eos_ids = [int(e) for e in eos] if isinstance(eos, (list, tuple)) else ([] if eos is None else [int(eos)])
    pad = pick("pad_token_id")
    pad = int(pad) if pad is not None else (eos_ids[0] if eos_ids else 0)
    bos = pick("bos_token_id")
    return (int(bos) if bos is not None else pad,
            eos_ids[0] if len(eos_ids) == 1 else (eos_ids or [pad]), pad)
