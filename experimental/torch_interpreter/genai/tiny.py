"""A random-weight causal LM folder of any transformers family, written as ``save_pretrained`` writes a checkpoint
(config, safetensors, a byte-level BPE tokenizer trained on a few lines of English): what the tests, the benchmark
and the tutorial export and compare without a model hub."""

from __future__ import annotations

import os
from typing import Any

import torch

#: the special tokens' ids: ``<pad>``, ``<s>`` (begins), ``</s>`` (ends), ``<unk>``
PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


def write_random_causal_lm(family: str, folder: str | os.PathLike, *, hidden: int = 64, layers: int = 2,
                           heads: int = 4, kv_heads: int = 2, vocab: int | None = None, intermediate: int | None = None,
                           seed: int = 0, **config: Any) -> str:
    """Writes a random-weight causal LM of ``family`` (a transformers model type: ``llama``, ``qwen2``, ``gpt2``...)
    into ``folder``: ``config.json``, ``model.safetensors``, ``generation_config.json`` and a byte-level BPE
    tokenizer (the tokenizers package, trained on the Zen of Python), which ``from_pretrained``,
    :func:`export_genai`, onnxruntime-genai's tokenizer and its model builder read. Returns the folder.

    :param hidden, layers, heads, kv_heads, vocab, intermediate: the sizes (``intermediate`` defaults to
        ``2 * hidden``); a family without grouped-query heads ignores ``kv_heads``; ``vocab`` defaults to
        the tokenizer's (548 tokens); a larger one gives the model ids the tokenizer does not decode
    :param config: more config values (``sliding_window=64``...)

    Example::

        >>> import os, tempfile
        >>> folder = write_random_causal_lm("qwen2", os.path.join(tempfile.mkdtemp(), "qwen2"))
        >>> sorted(os.listdir(folder))[:3]
        ['config.json', 'generation_config.json', 'model.safetensors']
    """
    import transformers

    folder = os.fspath(folder)
    tokenizer = _bpe_tokenizer(vocab or 1000)
    vocab = max(vocab or 0, len(tokenizer.get_vocab()))
    cfg = transformers.AutoConfig.for_model(
        family, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab, max_position_embeddings=1024,
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, **config)
    torch.manual_seed(seed)
    transformers.AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(folder)
    pad, bos, eos, unk = SPECIAL_TOKENS
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=bos, eos_token=eos, pad_token=pad,
                                         unk_token=unk).save_pretrained(folder)
    return folder


def _bpe_tokenizer(vocab: int):
    """A byte-level BPE tokenizer of at most ``vocab`` tokens, trained on the Zen of Python (in the standard
    library, so the same everywhere)."""
    import codecs
    import contextlib
    import io

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    with contextlib.redirect_stdout(io.StringIO()):
        import this
    text = codecs.decode(this.s, "rot13").splitlines()
    tokenizer = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text * 4, trainer)
    return tokenizer
