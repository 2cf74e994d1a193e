"""checkpoint/: a model whose parameters are on the meta device, exported with weights= (safetensors files, sharded
folders, mappings): onnxruntime gives the ordinary export's numbers; bad checkpoints get a CheckpointError naming
the tensor, and nothing is written."""

import json
import os

import numpy as np
import onnxruntime as ort
import pytest
import torch
import transformers
from safetensors.torch import save_file

from experimental.torch_interpreter import ArgumentError, CheckpointError, empty_weights, to_onnx

VOCAB = 500
#: no keyword input: the configs say use_cache=False (a Python scalar input would be baked in, with a warning)
KWARGS = None


def _config(**kwargs):
    return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, vocab_size=VOCAB, use_cache=False, **kwargs)


def _ids():
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))


def _run(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input_ids": _ids().numpy()})[0]


def _meta(config):
    with empty_weights():
        model = transformers.LlamaForCausalLM(config).eval()
    assert model.lm_head.weight.device.type == "meta"
    assert model.model.rotary_emb.inv_freq.device.type == "cpu"  # buffers keep their values
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two tiny Llamas saved by transformers (tied head in one file; untied, sharded) and their eager logits."""
    root = tmp_path_factory.mktemp("checkpoints")
    made = {}
    for name, tied, shard in (("tied", True, None), ("sharded", False, "150KB")):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(_config(tie_word_embeddings=tied)).eval()
        folder = root / name
        model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
        expected = model(_ids()).logits.detach().numpy()
        ordinary = to_onnx(model, (_ids(),), KWARGS, filename=root / f"{name}_ordinary" / "model.onnx")
        made[name] = (folder, tied, expected, _run(str(root / f"{name}_ordinary" / "model.onnx")), ordinary)
    return made


@pytest.mark.parametrize("name", ["tied", "sharded"])
def test_meta_model_gives_the_ordinary_numbers(checkpoints, tmp_path, name):
    """In the checkpoint's folder the model points into its safetensors files (nothing copied); elsewhere the
    tensors are copied into the model's own data file; both give the ordinary export's numbers."""
    folder, tied, expected, ordinary, _ = checkpoints[name]
    if name == "sharded":
        assert (folder / "model.safetensors.index.json").exists() and len(list(folder.glob("*.safetensors"))) > 1
    meta = _meta(_config(tie_word_embeddings=tied))
    elsewhere = tmp_path / "out" / "model.onnx"
    to_onnx(meta, (_ids(),), KWARGS, filename=elsewhere, weights=folder)
    in_place = folder / "model.onnx"
    proto = to_onnx(meta, (_ids(),), KWARGS, filename=in_place, weights=str(folder))
    locations = {e.value for t in proto.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations and all(loc.endswith(".safetensors") for loc in locations), locations
    assert sorted(os.listdir(tmp_path / "out")) == ["model.onnx", "model.onnx.data"]
    for path in (elsewhere, in_place):
        got = _run(str(path))
        np.testing.assert_allclose(got, ordinary, rtol=0, atol=1e-6)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    for f in ("model.onnx", "model.onnx.data"):
        (folder / f).unlink(missing_ok=True)


def test_bfloat16_checkpoint_into_a_float32_model(tmp_path):
    """A bfloat16 checkpoint read by a float32 model: each tensor converted when the model is saved; the numbers
    are those of the float32 model holding the bfloat16 values."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_config()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
               if not k.endswith("inv_freq")}, str(tmp_path / "model.safetensors"))
    to_onnx(_meta(_config()), (_ids(),), KWARGS, filename=tmp_path / "out" / "model.onnx",
            weights=tmp_path / "model.safetensors")
    expected = model(_ids()).logits.detach().numpy()
    np.testing.assert_allclose(_run(str(tmp_path / "out" / "model.onnx")), expected, rtol=1e-4, atol=1e-4)


def test_mapping_of_tensors(checkpoints, tmp_path):
    folder, tied, _, ordinary, _ = checkpoints["tied"]
    torch.manual_seed(0)
    weights = transformers.LlamaForCausalLM(_config(tie_word_embeddings=True)).state_dict()
    to_onnx(_meta(_config(tie_word_embeddings=True)), (_ids(),), KWARGS, filename=tmp_path / "m.onnx",
            weights=weights)
    np.testing.assert_allclose(_run(str(tmp_path / "m.onnx")), ordinary, rtol=0, atol=1e-6)


def _state(seed=0):
    torch.manual_seed(seed)
    return {k: v for k, v in transformers.LlamaForCausalLM(_config()).state_dict().items()}


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("model.layers.1.mlp.up_proj.weight"), "'model.layers.1.mlp.up_proj.weight' of the model is not"),
    (lambda s: s.__setitem__("model.norm.weight", torch.ones(65)), "'model.norm.weight': the model's shape is [64]"),
    (lambda s: s.__setitem__("model.norm.weight", torch.ones(64, dtype=torch.int64)),
     "'model.norm.weight': the model's type is FLOAT, the checkpoint's"),
])
def test_bad_checkpoint_names_the_tensor(tmp_path, change, message):
    state = _state()
    change(state)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    out = tmp_path / "out"
    with pytest.raises(CheckpointError) as e:
        to_onnx(_meta(_config()), (_ids(),), KWARGS, filename=out / "model.onnx", weights=tmp_path)
    assert message in str(e.value), str(e.value)
    assert not out.exists() or not any(out.iterdir())


def test_truncated_shard(tmp_path):
    save_file({k: v.contiguous() for k, v in _state().items()}, str(tmp_path / "model.safetensors"))
    with open(tmp_path / "model.safetensors", "r+b") as f:
        f.truncate(os.path.getsize(tmp_path / "model.safetensors") - 100)
    with pytest.raises(CheckpointError, match="truncated: the tensor's bytes end at byte") as e:
        to_onnx(_meta(_config()), (_ids(),), KWARGS, filename=tmp_path / "out" / "model.onnx", weights=tmp_path)
    assert e.value.tensor is not None and e.value.tensor in str(e.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        to_onnx(_meta(_config()), (_ids(),), KWARGS, filename=tmp_path / "m.onnx", weights=tmp_path)
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "missing.safetensors"}}))
    with pytest.raises(CheckpointError, match="names shards that are not in the folder"):
        to_onnx(_meta(_config()), (_ids(),), KWARGS, filename=tmp_path / "m.onnx", weights=tmp_path)


def test_meta_model_arguments(checkpoints, tmp_path):
    folder = checkpoints["tied"][0]
    meta = _meta(_config(tie_word_embeddings=True))
    with pytest.raises(CheckpointError, match="on the meta device and hold no values.*give their values with weights="):
        to_onnx(meta, (_ids(),), KWARGS, filename=tmp_path / "m.onnx")
    with pytest.raises(ArgumentError, match="give filename="):
        to_onnx(meta, (_ids(),), KWARGS, weights=folder)
    with pytest.raises(ArgumentError, match="verify=True runs the PyTorch model"):
        to_onnx(meta, (_ids(),), KWARGS, filename=tmp_path / "m.onnx", weights=folder, verify=True)
    with pytest.raises(ArgumentError, match="this model has none there"):
        to_onnx(torch.nn.Linear(2, 2), (torch.randn(1, 2),), weights=folder)


def test_buffers_on_meta_get_the_advice(checkpoints, tmp_path):
    """``with torch.device("meta")`` also puts the buffers a model computes there (the rotary frequencies), which
    no checkpoint holds: the error says to build the model under empty_weights()."""
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(_config(tie_word_embeddings=True)).eval()
    with pytest.raises(CheckpointError, match="inv_freq.*build the model under empty_weights()"):
        to_onnx(meta, (_ids(),), KWARGS, filename=tmp_path / "m.onnx", weights=checkpoints["tied"][0])
    assert not (tmp_path / "m.onnx").exists()


def test_as_ir_reads_weights_when_needed(checkpoints, tmp_path):
    """as_ir=True: the weights stay in the checkpoint's file until the model is saved."""
    from experimental.torch_interpreter.saving import save

    folder, _, _, ordinary, _ = checkpoints["tied"]
    model = to_onnx(_meta(_config(tie_word_embeddings=True)), (_ids(),), KWARGS, weights=folder, as_ir=True)
    kinds = {type(v.const_value).__name__ for v in model.graph.initializers.values() if v.const_value is not None}
    assert "ExternalTensor" in kinds and "TorchTensor" not in kinds, kinds
    save(model, tmp_path / "model.onnx")
    np.testing.assert_allclose(_run(str(tmp_path / "model.onnx")), ordinary, rtol=0, atol=1e-6)


def test_genai_folder_for_cuda_is_read_on_the_meta_device(tmp_path, monkeypatch):
    """export_genai(large folder, "fp16", "cuda") builds the model on the meta device and converts each weight as
    it is written: the package is the one the model loaded in memory gives, bit for bit."""
    import onnx
    from onnx import numpy_helper

    from experimental.torch_interpreter import export_genai
    from experimental.torch_interpreter.checkpoint import source
    from experimental.torch_interpreter.genai.tiny import write_random_causal_lm

    from experimental.torch_interpreter.genai import package

    monkeypatch.setattr(package, "META_ABOVE_BYTES", 0)  # the tiny folder read as a large one is
    src = tmp_path / "llama"
    write_random_causal_lm("llama", str(src))
    read = []
    monkeypatch.setattr(source.Checkpoint, "tensor",
                        lambda self, name, *a, _f=source.Checkpoint.tensor: read.append(name) or _f(self, name, *a))
    meta = export_genai(src, tmp_path / "meta", precision="fp16", provider="cuda")
    assert read, "the folder's weights were not read from its checkpoint"
    model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float16)
    memory = export_genai(model, tmp_path / "memory", precision="fp16", provider="cuda")
    a, b = (onnx.load(str(tmp_path / p / "model.onnx")) for p in ("meta", "memory"))
    assert [(n.op_type, list(n.input)) for n in a.graph.node] == [(n.op_type, list(n.input)) for n in b.graph.node]
    weights = {i.name: numpy_helper.to_array(i).tobytes() for i in b.graph.initializer}
    assert {i.name: numpy_helper.to_array(i).tobytes() for i in a.graph.initializer} == weights
    assert meta.config == memory.config


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_genai_folder_for_the_cpu_read_on_the_meta_device(tmp_path, monkeypatch, family):
    """A large folder for the CPU in fp32: the model on the meta device, GroupQueryAttention checked on a twin
    with real weights (Gemma 2: one sliding and one full layer; its soft cap keeps Attention); onnxruntime-genai
    generates transformers' greedy tokens from the package."""
    from experimental.torch_interpreter import export_genai
    from experimental.torch_interpreter.genai import generate, package
    from experimental.torch_interpreter.genai.tiny import PAD, write_random_causal_lm

    monkeypatch.setattr(package, "META_ABOVE_BYTES", 0)
    src = tmp_path / family
    write_random_causal_lm(family, str(src), layers=3)
    built = export_genai(src, tmp_path / "pkg")
    assert (built.attention == "GroupQueryAttention") == (family == "llama"), built.attention
    prompts = [[1, 5, 17, 33, 8, 99, 4], [1, 44, 7]]
    hf = transformers.AutoModelForCausalLM.from_pretrained(src).eval()
    assert generate.genai_greedy(built.folder, prompts, 8) == generate.transformers_greedy(hf, prompts, 8, PAD)
