"""The folder rule for checkpoints (``checkpoint/folder_files.py``): ``weights=FOLDER`` and ``export_genai(FOLDER)``
read only the folder's own regular files. A crafted ``model.safetensors.index.json`` naming ``../other`` or an
absolute shard read another checkpoint's weights into the ONNX model; a shard linked out of the folder did too; a
FIFO named ``*.safetensors`` hung the export."""

from __future__ import annotations

import json
import os
import threading

import pytest
import torch
from safetensors.torch import save_file

from experimental.torch_interpreter import CheckpointError, GenAIError
from experimental.torch_interpreter.checkpoint import Checkpoint
from experimental.torch_interpreter.checkpoint.folder_files import file_in_folder


@pytest.fixture
def folders(tmp_path):
    """``model/`` (the folder the user names, empty) and ``other/`` beside it holding a real shard."""
    model, other = tmp_path / "model", tmp_path / "other"
    model.mkdir()
    other.mkdir()
    save_file({"w": torch.full((2, 3), 7.0)}, str(other / "secret.safetensors"))
    return model, other


def _index(folder, shard):
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))


@pytest.mark.parametrize("shard", ["../other/secret.safetensors", "ABSOLUTE"])
def test_index_naming_a_shard_out_of_the_folder(folders, shard):
    model, other = folders
    _index(model, str(other / "secret.safetensors") if shard == "ABSOLUTE" else shard)
    with pytest.raises(CheckpointError, match="leads out of the folder") as e:
        Checkpoint(str(model))
    assert e.value.path.endswith("model.safetensors.index.json")


def test_shard_linked_out_of_the_folder(folders):
    model, other = folders
    os.symlink(other / "secret.safetensors", model / "model-00001.safetensors")
    _index(model, "model-00001.safetensors")
    with pytest.raises(CheckpointError, match="leads out of the folder"):
        Checkpoint(str(model))
    (model / "model.safetensors.index.json").unlink()  # the same link found by listing the folder
    with pytest.raises(CheckpointError, match="leads out of the folder"):
        Checkpoint(str(model))


def test_a_link_inside_the_folder_is_read(folders):
    model, other = folders
    save_file({"w": torch.ones(2, 3)}, str(model / "real.safetensors"))
    os.symlink(model / "real.safetensors", model / "model.safetensors")
    assert Checkpoint(str(model)).tensor("w", (2, 3), torch.float32).numpy().sum() == 6


def test_fifo_named_safetensors_is_refused_without_waiting(folders):
    model, _ = folders
    os.mkfifo(model / "model.safetensors")
    done = []

    def read():
        try:
            Checkpoint(str(model))
        except CheckpointError as e:
            done.append(e)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(10)
    assert done and "not a regular file" in str(done[0])


@pytest.mark.parametrize("index", [
    {"weight_map": ["model.safetensors"]},
    {"weight_map": {"w": 3}},
    {"weight_map": {"w": ["a", "b"]}},
    ["weight_map"],
    {"weight_map": {"w": ""}},
])
def test_index_of_the_wrong_types(folders, index):
    model, _ = folders
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="checkpoint index|not a file name"):
        Checkpoint(str(model))


def test_index_too_large_is_not_parsed(folders, monkeypatch):
    from experimental.torch_interpreter.checkpoint import source

    model, _ = folders
    monkeypatch.setattr(source, "MAX_INDEX_BYTES", 100)
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {f"w{i}": "a" for i in range(50)}}))
    with pytest.raises(CheckpointError, match="more than 100"):
        Checkpoint(str(model))


def test_genai_folder_whose_index_leads_out(folders):
    """export_genai reads the folder through transformers, which joins the index's names to the folder: the index
    is checked first, nothing is loaded and no package is written."""
    from experimental.torch_interpreter import export_genai

    model, other = folders
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    _index(model, "../other/secret.safetensors")
    out = model.parent / "package"
    with pytest.raises(GenAIError, match="leads out of the folder"):
        export_genai(str(model), str(out))
    assert not out.exists()


def test_file_in_folder_names():
    with pytest.raises(CheckpointError, match="is not a file name"):
        file_in_folder("/tmp", "a\x00b", CheckpointError, "the shard")
    with pytest.raises(CheckpointError, match="is not a file name"):
        file_in_folder("/tmp", 3, CheckpointError, "the shard")


def test_genai_folder_with_pickled_weights_runs_nothing(tmp_path):
    """A ``pytorch_model.bin`` whose pickle calls a function when loaded: transformers loads it with
    ``weights_only=True``, which refuses it; the refusal is ``GenAIError``, nothing ran, no package is written."""
    import pickle

    import transformers

    from experimental.torch_interpreter import export_genai

    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                      vocab_size=100, bos_token_id=1, eos_token_id=2)
    model = tmp_path / "model"
    transformers.LlamaForCausalLM(config).save_pretrained(str(model))
    (model / "model.safetensors").unlink()
    planted = tmp_path / "planted"

    class Planted:
        def __reduce__(self):
            return (os.mkdir, (str(planted),))

    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"model.embed_tokens.weight": Planted()}))
    with pytest.raises(GenAIError, match="UnpicklingError"):
        export_genai(str(model), str(tmp_path / "package"))
    assert not planted.exists() and not (tmp_path / "package").exists()
