"""Tiny random-weight transformers models export with dynamic batch and sequence and match eager PyTorch."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from experimental.torch_interpreter.testing.check import check_model  # noqa: E402

DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def _inputs(batch, seq, vocab=1000):
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, : seq // 3] = 0  # left padding on the first row
    return {"input_ids": ids, "attention_mask": mask}


def _llama():
    cfg = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256, use_cache=False,
    )
    return transformers.LlamaForCausalLM(cfg)


def _gpt2():
    cfg = transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=256, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.parametrize("factory", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_tiny_llm_dynamic(factory):
    torch.manual_seed(0)
    model = factory().eval()
    onx = check_model(
        model, (), _inputs(2, 8), dynamic_shapes=DYNAMIC, more_inputs=[((), _inputs(3, 13))], atol=1e-4
    )
    assert [o.name for o in onx.graph.output] == ["logits"]
    dims = [d.dim_param or d.dim_value for d in onx.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq", 1000]
    ops = {n.op_type for n in onx.graph.node}
    assert "Softmax" in ops or "Attention" in ops
