"""The context length a GenAI package is made for, read from the model's config, is bounded before anything is
allocated: a crafted ``max_position_embeddings`` of 2e9 asked for 14.9 GiB of positions (and far more of rotary
tables); a value of the wrong type raised a raw exception. Each is refused with ``GenAIError``; rotary tables out of
proportion to the model (above 256 MiB and above its weights) are refused before they are computed."""

from __future__ import annotations

import json
import os
import types

import pytest
import transformers

from experimental.torch_interpreter import GenAIError, export_genai
from experimental.torch_interpreter.genai.config import MAX_CONTEXT_LENGTH, context_length


def _config(**kwargs):
    return transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                    vocab_size=100, bos_token_id=1, eos_token_id=2, **kwargs)


class _Config(types.SimpleNamespace):
    """A config as older transformers keep it: any value, no type check."""

    def get_text_config(self, decoder=False):
        return self


@pytest.mark.parametrize("value", [2_000_000_000, MAX_CONTEXT_LENGTH + 1, -5, "4096", 4096.5, True, [4096]])
def test_context_length_out_of_bounds_is_refused(value):
    with pytest.raises(GenAIError, match="max_position_embeddings"):
        context_length(_Config(max_position_embeddings=value))


@pytest.mark.parametrize("value", ['"4096"', "[4096]", '{"a": 1}', "4096.5"])
def test_folder_config_of_the_wrong_type_is_refused(tmp_path, value):
    transformers.LlamaForCausalLM(_config()).save_pretrained(tmp_path / "model")
    path = tmp_path / "model" / "config.json"
    config = json.loads(path.read_text())
    config["max_position_embeddings"] = json.loads(value)
    path.write_text(json.dumps(config))
    with pytest.raises(GenAIError, match="max_position_embeddings"):
        export_genai(str(tmp_path / "model"), str(tmp_path / "package"))
    assert not os.path.exists(tmp_path / "package")


def test_context_length_within_bounds():
    assert context_length(_config(max_position_embeddings=131072)) == 131072
    assert context_length(_config(max_position_embeddings=MAX_CONTEXT_LENGTH)) == MAX_CONTEXT_LENGTH
    assert context_length(_config(max_position_embeddings=4096, sliding_window=512)) == 512


def test_folder_with_a_huge_context_is_refused_before_the_export(tmp_path):
    model = transformers.LlamaForCausalLM(_config(max_position_embeddings=1024))
    model.save_pretrained(tmp_path / "model")
    text = (tmp_path / "model" / "config.json").read_text().replace('"max_position_embeddings": 1024',
                                                                   '"max_position_embeddings": 2000000000')
    (tmp_path / "model" / "config.json").write_text(text)
    with pytest.raises(GenAIError, match="2000000000"):
        export_genai(str(tmp_path / "model"), str(tmp_path / "package"))
    assert not os.path.exists(tmp_path / "package")


def test_rotary_tables_out_of_proportion_are_refused(tmp_path):
    # 10 million positions of a 1-layer model: 610 MiB of tables for 40 KB of weights
    model = transformers.LlamaForCausalLM(_config(max_position_embeddings=10_000_000))
    with pytest.raises(GenAIError, match="out of proportion"):
        export_genai(model, str(tmp_path / "package"))
    assert not os.path.exists(tmp_path / "package")
