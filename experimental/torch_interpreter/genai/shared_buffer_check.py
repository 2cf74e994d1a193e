"""The check a decoder rewritten with ``GroupQueryAttention`` passes before it is kept: onnxruntime fed as
onnxruntime-genai feeds it (a batch of two prompts of different lengths padded at the end, the cache one buffer of
the whole length written in place, then one token per step) gives the logits PyTorch gives for each prompt alone.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

logger = logging.getLogger(__name__)

#: the two prompts (token ids, the second shorter: padded at the end) and the decoding steps of the check
PROMPT_LENGTHS = (6, 3)
STEPS = 3


def check_shared_buffer(model: ir.Model, lm: torch.nn.Module, cache_argument: str, pad_token_id: int,
                        kv_heads: int, head_size: int) -> str:
    """Runs the rewritten decoder ``model`` as onnxruntime-genai does with ``past_present_share_buffer`` and
    compares its logits with ``lm``'s (each prompt alone, no padding); returns ``""`` when they agree, else what
    differs."""
    import onnxruntime as ort

    from .last_token import LastTokenLogits

    vocab = lm.config.get_text_config(decoder=True).vocab_size
    rng = np.random.default_rng(0)
    prompts = [rng.integers(4, min(vocab, 500), n).tolist() for n in PROMPT_LENGTHS]
    expected = _torch_logits(LastTokenLogits(lm), prompts, cache_argument)
    session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    width = max(PROMPT_LENGTHS)
    batch = len(prompts)
    dtype = model.graph.inputs[-1].dtype.numpy()
    buffers = {v.name: np.zeros((batch, kv_heads, width + STEPS, head_size), dtype=dtype)
               for v in model.graph.inputs if v.name.endswith((".key", ".value"))}
    ids = np.array([p + [pad_token_id] * (width - len(p)) for p in prompts], dtype=np.int64)
    mask = np.array([[1] * len(p) + [0] * (width - len(p)) for p in prompts], dtype=np.int64)
    positions = np.array([list(range(len(p))) + [0] * (width - len(p)) for p in prompts], dtype=np.int64)
    for step, reference in enumerate(expected):
        feeds = {"input_ids": ids, "attention_mask": mask, **buffers}
        if "position_ids" in names:
            feeds["position_ids"] = positions
        outputs = session.run(None, {k: v for k, v in feeds.items() if k in names})
        logits = np.asarray(outputs[0], dtype=np.float32)[:, -1]
        scale = max(1.0, float(np.abs(reference).max()))
        error = float(np.abs(logits - reference).max())
        if not error <= 1e-3 * scale:
            return f"step {step}: logits differ from PyTorch's by {error:.3g} (scale {scale:.3g})"
        for name, value in zip([o.name for o in session.get_outputs()][1:], outputs[1:]):
            buffers[name.replace("present", _past_prefix(buffers))] = value
        ids = reference.argmax(-1).astype(np.int64)[:, None]
        mask = np.concatenate([mask, np.ones((batch, 1), dtype=np.int64)], axis=1)
        positions = mask.sum(axis=1, keepdims=True) - 1
    return ""


def _past_prefix(buffers: dict) -> str:
    return next(iter(buffers)).split(".")[0]


def _torch_logits(wrapper: torch.nn.Module, prompts: list[list[int]], cache_argument: str) -> list[np.ndarray]:
    """The logits of the last token, for each prompt alone then for each greedy step: ``[steps + 1][batch, vocab]``."""
    import transformers

    from .inputs import returned_cache

    rows = []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        cache: Any = transformers.DynamicCache(config=wrapper.lm.config)
        mask = torch.ones_like(ids)
        logits = []
        with torch.no_grad():
            for _ in range(STEPS + 1):
                out = wrapper(input_ids=ids, attention_mask=mask, **{cache_argument: cache})
                last = out.logits[0, -1].float()
                logits.append(last.numpy())
                cache = returned_cache(out, cache_argument)
                ids = last.argmax().view(1, 1)
                mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
        rows.append(logits)
    return [np.stack([row[step] for row in rows]) for step in range(STEPS + 1)]
