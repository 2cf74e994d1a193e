"""The decoder exported with the logits of one token per row: the last token of each row's prompt.

onnxruntime-genai reads only the logits of the last token of each row to pick the next one; a decoder whose
``logits`` output has a sequence axis of a fixed size 1 is one it knows to have done that selection itself (it then
skips its own). Computing the vocabulary projection for the prompt's last token alone instead of every token saves
most of the prompt's time at a large vocabulary (128 prompt tokens, hidden 512, 32,000 tokens: the projection is
about half the prompt's products).

The last token of a row is the last one its attention mask keeps among the new tokens: the row's end when the
batch is padded at the start (transformers) or not padded, the token before the padding when padded at the end
(onnxruntime-genai). Its hidden state is selected just before the model's output projection (a forward pre-hook on
it), so what the model does to the logits after the projection (a soft cap, a scale) is kept as it is.
"""

from __future__ import annotations

from typing import Any

import torch


class LastTokenLogits(torch.nn.Module):
    """``lm`` returning the logits of the last kept token of each row only (``[batch, 1, vocab]``), the cache as
    ``lm`` returns it.

    Example::

        >>> import torch, transformers
        >>> cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...                                num_attention_heads=2, vocab_size=100)
        >>> lm = transformers.LlamaForCausalLM(cfg).eval()
        >>> ids, mask = torch.tensor([[5, 6, 7], [8, 9, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
        >>> with torch.no_grad():
        ...     last = LastTokenLogits(lm)(input_ids=ids, attention_mask=mask).logits
        ...     full = lm(input_ids=ids, attention_mask=mask).logits
        >>> close = lambda a, b: torch.allclose(a, b, atol=1e-6)
        >>> last.shape, close(last[0, 0], full[0, 2]), close(last[1, 0], full[1, 1])
        (torch.Size([2, 1, 100]), True, True)
    """

    def __init__(self, lm: torch.nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: Any = None,
                cache: Any = None, past_key_values: Any = None) -> Any:
        sequence = input_ids.shape[1]
        kept = attention_mask[:, -sequence:]
        # the largest position (counted from 1) among the kept ones, minus one; 0 for a row with none kept. A
        # maximum of integers: onnxruntime's CUDA provider has ReduceMax for int64 (its ArgMax takes floating
        # types only, and a float argmax would carry a NaN guard), and a decoding step runs a few nodes only
        order = torch.arange(1, sequence + 1, device=kept.device, dtype=kept.dtype)
        last = ((kept * order).amax(dim=-1) - 1).clamp_min(0)

        def select(module, args):
            hidden = args[0]
            index = last.view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
            return (hidden.gather(1, index),) + tuple(args[1:])

        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": True}
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if cache is not None:
            kwargs["cache"] = cache
        if past_key_values is not None:
            kwargs["past_key_values"] = past_key_values
        handle = self.lm.get_output_embeddings().register_forward_pre_hook(select)
        try:
            return self.lm(**kwargs)
        finally:
            handle.remove()
