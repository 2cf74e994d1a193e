"""A GenAI package holds a decoder-only text model: a folder of another kind (an encoder-decoder such as Whisper or
BART, a vision-language model), or one whose checkpoint and causal LM do not match weight for weight, is refused
with GenAIError naming what is wrong, before anything is written. transformers builds a causal LM from Whisper's and
BART's folders all the same (their decoder alone), and such a package ran and reported success."""

from __future__ import annotations

import os

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from experimental.torch_interpreter import GenAIError, export_genai
from experimental.torch_interpreter.genai.tiny import write_random_causal_lm


def _save(model: torch.nn.Module, folder) -> str:
    model.eval().save_pretrained(folder)
    return str(folder)


def _whisper():
    return transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100, num_mel_bins=16, max_target_positions=32,
        decoder_start_token_id=1, eos_token_id=2, pad_token_id=0, bos_token_id=1))


def _bart():
    return transformers.BartForConditionalGeneration(transformers.BartConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100, max_position_embeddings=32))


def _gemma3_vision():
    return transformers.Gemma3ForConditionalGeneration(transformers.Gemma3Config(
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=300, head_dim=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14)))


@pytest.mark.parametrize(("build", "words"), [
    (_whisper, ["'whisper'", "encoder-decoder"]),
    (_bart, ["'bart'", "encoder-decoder"]),
    (_gemma3_vision, ["'gemma3'", "vision_config"]),
], ids=["whisper", "bart", "gemma3-vision"])
def test_folder_of_another_kind_is_refused_naming_its_type(tmp_path, build, words):
    torch.manual_seed(0)
    source = _save(build(), tmp_path / "model")
    with pytest.raises(GenAIError) as e:
        export_genai(source, tmp_path / "package")
    for word in words:
        assert word in str(e.value)
    assert not os.path.exists(tmp_path / "package")


def test_model_object_of_another_kind_is_refused(tmp_path):
    torch.manual_seed(0)
    with pytest.raises(GenAIError, match="'whisper' model, an encoder-decoder"):
        export_genai(_whisper(), tmp_path / "package")
    assert not os.path.exists(tmp_path / "package")


def _edit_checkpoint(folder: str, edit) -> None:
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path, metadata={"format": "pt"})


def test_checkpoint_missing_a_weight_is_refused(tmp_path):
    """transformers initializes a weight the checkpoint lacks at random and only logs it: the package would hold
    that random weight."""
    source = write_random_causal_lm("llama", tmp_path / "llama", hidden=32, layers=1, heads=2, kv_heads=1)
    _edit_checkpoint(source, lambda t: t.pop("model.layers.0.mlp.up_proj.weight"))
    with pytest.raises(GenAIError, match=r"model\.layers\.0\.mlp\.up_proj\.weight has no value in the checkpoint"):
        export_genai(source, tmp_path / "package")
    assert not os.path.exists(tmp_path / "package")


def test_checkpoint_with_weights_the_model_leaves_out_is_refused(tmp_path):
    source = write_random_causal_lm("llama", tmp_path / "llama", hidden=32, layers=1, heads=2, kv_heads=1)
    _edit_checkpoint(source, lambda t: t.update({"model.extra_head.weight": torch.ones(3, 32)}))
    with pytest.raises(GenAIError, match=r"model\.extra_head\.weight is not a weight of the causal LM"):
        export_genai(source, tmp_path / "package")
