"""Greedy generation with a package (onnxruntime-genai) and with transformers, for the same prompts: the check that
a package generates the tokens transformers does.

onnxruntime-genai reads a batch's padding at the end of each row (the pad tokens after the prompt); transformers'
``generate`` takes it at the start (left padding). The two functions take the prompts unpadded and pad them the way
each one reads, so their results are the same sequences when the package is right.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import torch


def genai_greedy(folder: str, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                 pad_token_id: int | None = None) -> list[list[int]]:
    """The tokens onnxruntime-genai generates greedily for each prompt (one batch, each row padded at the end with
    the package's pad token), each prompt followed by ``max_new_tokens`` tokens (fewer when an end token comes,
    which is not kept).

    Example::

        >>> import tempfile, os, transformers
        >>> from experimental.torch_interpreter import export_genai
        >>> cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...     num_attention_heads=2, vocab_size=100, bos_token_id=1, eos_token_id=2, pad_token_id=0)
        >>> package = export_genai(transformers.LlamaForCausalLM(cfg), os.path.join(tempfile.mkdtemp(), "p"))
        >>> [len(t) for t in genai_greedy(package.folder, [[1, 5, 7], [1, 9]], 4)]
        [7, 6]
    """
    import onnxruntime_genai as og

    model = og.Model(folder)
    with open(os.path.join(folder, "genai_config.json"), encoding="utf-8") as f:
        config = json.load(f)["model"]
    pad_token_id = config["pad_token_id"] if pad_token_id is None else pad_token_id
    width = max(len(p) for p in prompts)
    batch = np.array([list(p) + [pad_token_id] * (width - len(p)) for p in prompts], dtype=np.int32)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + max_new_tokens, do_sample=False, batch_size=len(prompts))
    generator = og.Generator(model, params)
    generator.append_tokens(batch)
    while not generator.is_done():
        generator.generate_next_token()
    return [list(p) + _until_end(list(map(int, generator.get_sequence(i)))[width:], config["eos_token_id"])
            for i, p in enumerate(prompts)]


def _until_end(generated: list[int], eos: int | Sequence[int] | None) -> list[int]:
    """The generated tokens before the first end token (onnxruntime-genai does not keep the end token in the
    sequence, transformers does and pads after it)."""
    ends = set(eos) if isinstance(eos, (list, tuple)) else {eos}
    for i, token in enumerate(generated):
        if token in ends:
            return generated[:i]
    return generated


def transformers_greedy(model: torch.nn.Module, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                        pad_token_id: int) -> list[list[int]]:
    """The tokens transformers' ``generate`` gives greedily for each prompt (one batch, left-padded with
    ``pad_token_id``), each prompt followed by the generated tokens up to the first end token (excluded)."""
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_token_id] * (width - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=pad_token_id)
    eos = model.generation_config.eos_token_id
    return [list(p) + _until_end(out[i, width:].tolist(), eos) for i, p in enumerate(prompts)]
