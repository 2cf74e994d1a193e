"""Tiny random-weight transformers models of several families, use_cache=False, dynamic batch and sequence:
each exports with to_onnx and matches eager PyTorch in onnxruntime on two shapes."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from experimental.torch_interpreter.testing.check import check_model, op_types  # noqa: E402

VOCAB = 1000
SMALL = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    vocab_size=VOCAB, max_position_embeddings=256, use_cache=False,
)
BATCH_SEQ = {0: "batch", 1: "seq"}


def _ids(batch, seq, seed, vocab=VOCAB):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _mask(batch, seq, left=True):
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if left:
        mask[0, : seq // 3] = 0  # left padding on the first row (decoders)
    else:
        mask[-1, seq - seq // 3 :] = 0  # right padding on the last row (encoders)
    return mask


def _dims(onx, index=0):
    return [d.dim_param or d.dim_value for d in onx.graph.output[index].type.tensor_type.shape.dim]


# -- decoders --------------------------------------------------------------------------------------------


def _decoder(name):
    if name == "mistral":
        return transformers.MistralForCausalLM(transformers.MistralConfig(num_key_value_heads=2, **SMALL))
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(num_key_value_heads=2, **SMALL))
    if name == "phi3":
        return transformers.Phi3ForCausalLM(transformers.Phi3Config(num_key_value_heads=2, pad_token_id=0, **SMALL))
    raise ValueError(name)


def _decoder_inputs(batch, seq):
    return {"input_ids": _ids(batch, seq, batch * 100 + seq), "attention_mask": _mask(batch, seq)}


@pytest.mark.parametrize("name", ["mistral", "qwen2", "phi3"])
def test_decoder_dynamic(name):
    torch.manual_seed(0)
    model = _decoder(name).eval()
    onx = check_model(
        model, (), _decoder_inputs(2, 8),
        dynamic_shapes={"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ},
        more_inputs=[((), _decoder_inputs(3, 13))], atol=1e-4,
    )
    assert [o.name for o in onx.graph.output] == ["logits"]
    assert _dims(onx) == ["batch", "seq", VOCAB]


# -- encoders --------------------------------------------------------------------------------------------


def _bert_inputs(batch, seq):
    token_type_ids = torch.zeros(batch, seq, dtype=torch.int64)
    token_type_ids[:, seq // 2 :] = 1  # sentence pairs
    return {
        "input_ids": _ids(batch, seq, batch * 100 + seq),
        "attention_mask": _mask(batch, seq, left=False),
        "token_type_ids": token_type_ids,
    }


@pytest.mark.parametrize("head", ["masked_lm", "base"])
def test_bert_dynamic(head):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(type_vocab_size=2, **SMALL)
    model = (transformers.BertForMaskedLM if head == "masked_lm" else transformers.BertModel)(cfg).eval()
    onx = check_model(
        model, (), _bert_inputs(2, 7),
        dynamic_shapes={"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ, "token_type_ids": BATCH_SEQ},
        more_inputs=[((), _bert_inputs(3, 12))], atol=1e-4,
    )
    if head == "masked_lm":
        assert _dims(onx) == ["batch", "seq", VOCAB]
    else:
        assert [o.name for o in onx.graph.output] == ["last_hidden_state", "pooler_output"]
        assert _dims(onx, 1) == ["batch", 64]
    assert "Erf" in op_types(onx) or "Gelu" in op_types(onx)


# -- encoder-decoder -------------------------------------------------------------------------------------


def _t5_inputs(batch, seq, dec_seq):
    return {
        "input_ids": _ids(batch, seq, batch * 100 + seq),
        "attention_mask": _mask(batch, seq, left=False),
        "decoder_input_ids": _ids(batch, dec_seq, dec_seq),
    }


def test_t5_encoder_decoder_dynamic():
    torch.manual_seed(0)
    cfg = transformers.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=32, use_cache=False,
        decoder_start_token_id=0, pad_token_id=0,
    )
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    dec = {0: "batch", 1: "dec_seq"}
    onx = check_model(
        model, (), _t5_inputs(2, 9, 4),
        dynamic_shapes={"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ, "decoder_input_ids": dec},
        more_inputs=[((), _t5_inputs(3, 5, 7))], atol=1e-4,
    )
    assert onx.graph.output[0].name == "logits"
    assert _dims(onx) == ["batch", "dec_seq", VOCAB]
