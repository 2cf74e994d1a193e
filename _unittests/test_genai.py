"""onnxruntime-genai packages (export_genai): greedy tokens equal to transformers' generate, int4, CUDA packages,
the command line, and bad input refused with nothing written."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import onnx
import pytest
import torch

og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed (pip install -e .[dev])")
transformers = pytest.importorskip("transformers")

from experimental.torch_interpreter import GenAIError, export_genai  # noqa: E402
from experimental.torch_interpreter.cli import main  # noqa: E402
from experimental.torch_interpreter.genai.generate import genai_greedy, transformers_greedy  # noqa: E402
from experimental.torch_interpreter.genai.tiny import PAD, write_random_causal_lm  # noqa: E402
from experimental.torch_interpreter.testing.check import (  # noqa: E402
    bfloat16_nodes_without_cuda_kernel,
    nodes_without_cuda_kernel,
)

#: a prompt, and a batch of two prompts of different lengths (padded by each runtime the way it reads padding)
PROMPTS = [[1, 5, 17, 33, 8, 99, 4], [1, 44, 7]]
NEW_TOKENS = 12


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("genai")
    made = {}

    def folder(family, **config):
        key = (family, tuple(sorted(config.items())))
        if key not in made:
            made[key] = write_random_causal_lm(family, root / f"{family}_{len(made)}", **config)
        return made[key]

    return folder


@pytest.fixture(scope="module")
def llama_package(folders, tmp_path_factory):
    """One fp32 Llama package the tests that only read a package share (an export costs seconds)."""
    src = folders("llama")
    return src, export_genai(src, tmp_path_factory.mktemp("llama") / "pkg")


def _same_tokens(src, package_folder, prompts):
    hf = transformers.AutoModelForCausalLM.from_pretrained(src).eval()
    expected = transformers_greedy(hf, prompts, NEW_TOKENS, PAD)
    got = genai_greedy(package_folder, prompts, NEW_TOKENS)
    assert got == expected


#: the families of the test, their config, and whether their attention becomes GroupQueryAttention (the cache
#: written in place; Qwen3: heads first, a norm of the query and key heads) or stays as exported (Gemma 2 computes
#: its soft-capped attention without ONNX Attention); onnxruntime-genai's model builder refuses GPT-2 and OPT
FAMILIES = [
    ("llama", {}, True),
    ("mistral", {"sliding_window": 64}, True),
    ("qwen2", {}, True),
    ("qwen3", {}, True),
    ("phi3", {}, True),
    ("gemma2", {}, False),
    ("gpt2", {}, True),
    ("opt", {}, True),
]


@pytest.mark.parametrize("family, config, gqa", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_greedy_tokens_equal_transformers(folders, tmp_path, family, config, gqa):
    """A batch of one and a batch of two prompts of different lengths: onnxruntime-genai generates the tokens
    transformers' generate gives (an empty past at the first step, one new token after), with the cache written in
    place (GroupQueryAttention) or concatenated (Attention)."""
    src = folders(family, **config)
    package = export_genai(src, tmp_path / "pkg")
    assert (package.attention == "GroupQueryAttention") == gqa, package.attention
    assert package.config["search"]["past_present_share_buffer"] == gqa
    assert ("GroupQueryAttention" in package.op_counts) == gqa
    assert package.files[:2] == ["genai_config.json", "model.onnx"]
    assert "tokenizer.json" in package.files
    _same_tokens(src, package.folder, PROMPTS[:1])
    _same_tokens(src, package.folder, PROMPTS)


def test_genai_config(llama_package):
    _, package = llama_package
    with open(os.path.join(package.folder, "genai_config.json")) as f:
        config = json.load(f)
    assert config == package.config
    model, decoder = config["model"], config["model"]["decoder"]
    assert (model["type"], model["bos_token_id"], model["eos_token_id"], model["pad_token_id"]) == ("llama", 1, 2, 0)
    assert (decoder["num_hidden_layers"], decoder["num_attention_heads"], decoder["num_key_value_heads"],
            decoder["head_size"], decoder["hidden_size"]) == (2, 4, 2, 16, 64)
    onx = onnx.load(os.path.join(package.folder, "model.onnx"), load_external_data=False)
    inputs, outputs = [i.name for i in onx.graph.input], [o.name for o in onx.graph.output]
    # the rotary embedding computed inside GroupQueryAttention: position_ids is read no more
    assert inputs[:2] == ["input_ids", "attention_mask"] and "position_ids" not in inputs
    assert "position_ids" not in decoder["inputs"]
    assert decoder["inputs"]["past_key_names"] % 1 in inputs
    assert outputs[0] == "logits" and decoder["outputs"]["present_value_names"] % 1 in outputs
    assert [d.dim_value or d.dim_param for d in onx.graph.output[0].type.tensor_type.shape.dim][1] == 1
    assert onx.ir_version <= 10
    assert config["search"]["max_length"] == model["context_length"] == 1024
    assert config["search"]["past_present_share_buffer"] is True
    # onnxruntime's thread count (one per physical core), not onnxruntime-genai's half of the hardware threads
    assert decoder["session_options"]["intra_op_num_threads"] == 0
    # threads that do not spin: decoding holds beside busy processes (measured with bench_genai.py --busy)
    assert decoder["session_options"]["session.intra_op.allow_spinning"] == "0"


def test_package_folder_has_the_permissions_of_a_new_folder(llama_package):
    """The package is written in a staging folder then renamed: it must not keep the owner-only permissions of a
    temporary folder (a service running as another user could not read the model it is given)."""
    _, package = llama_package
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(package.folder).st_mode) == 0o777 & ~mask


def test_group_query_attention_kept_only_when_it_gives_pytorchs_logits(folders, tmp_path, monkeypatch):
    """The rewritten decoder is compared with PyTorch before it is kept: a difference keeps ONNX Attention and the
    concatenated cache, which still generates transformers' tokens."""
    from experimental.torch_interpreter.genai import package as package_module

    src = folders("llama")
    monkeypatch.setattr(package_module, "check_shared_buffer", lambda *a, **k: "step 0: logits differ (forced)")
    package = export_genai(src, tmp_path / "pkg")
    assert package.attention.startswith("Attention (GroupQueryAttention gave other logits: step 0")
    assert package.config["search"]["past_present_share_buffer"] is False
    assert "position_ids" in package.config["model"]["decoder"]["inputs"]
    _same_tokens(src, package.folder, PROMPTS)


@pytest.mark.parametrize("dtype, provider", [(torch.float32, "cpu"), (torch.bfloat16, "cuda")], ids=["fp32", "bf16"])
def test_shared_buffer_check_sees_a_wrong_rotary_table(folders, dtype, provider):
    """The check itself: a rewritten decoder whose cosine table is off by one position differs from PyTorch; in
    bfloat16 (for CUDA), checked on the CPU as its float32 twin against the model in float32."""
    import copy

    import onnx_ir as ir

    from experimental.torch_interpreter import bypass_export_some_errors, to_onnx
    from experimental.torch_interpreter.genai.float32_twin import float32_twin
    from experimental.torch_interpreter.genai.group_query_attention import fuse_group_query_attention
    from experimental.torch_interpreter.genai.inputs import decoder_inputs
    from experimental.torch_interpreter.genai.last_token import LastTokenLogits
    from experimental.torch_interpreter.genai.shared_buffer_check import check_shared_buffer

    lm = transformers.AutoModelForCausalLM.from_pretrained(folders("llama"), dtype=dtype).eval()
    inputs = decoder_inputs(lm)
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = to_onnx(LastTokenLogits(lm), (), adapt(inputs.kwargs), dynamic_shapes=inputs.dynamic_shapes,
                      optimize="onnxruntime", providers=provider, as_ir=True)
    assert fuse_group_query_attention(onx, 64).layers == 2
    if dtype == torch.bfloat16:
        twin = float32_twin(onx)
        assert {v.dtype for v in onx.graph.inputs[2:]} == {ir.DataType.BFLOAT16}
        assert {v.dtype for v in twin.graph.inputs[2:]} == {ir.DataType.FLOAT}
        onx, lm = twin, copy.deepcopy(lm).to(torch.float32)
    args = (lm, inputs.cache_argument, PAD, inputs.kv_heads, inputs.head_size)
    assert check_shared_buffer(onx, *args) == ""
    cos = onx.graph.initializers["cos_cache"]
    cos.const_value = ir.tensor(np.roll(cos.const_value.numpy(), 1, axis=0))
    assert "logits differ from PyTorch's" in check_shared_buffer(onx, *args)


def test_tokenizer_loads_and_round_trips(llama_package):
    src, package = llama_package
    tokenizer = og.Tokenizer(og.Model(package.folder))
    expected = transformers.AutoTokenizer.from_pretrained(src)
    text = "Beautiful is better than ugly. Simple is better than complex."
    ids = tokenizer.encode(text)
    assert list(ids) == expected.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text


def test_model_object_with_tokenizer(tmp_path, folders):
    """A model object (the caller's left in its dtype) and a tokenizer given apart."""
    src = folders("llama")
    model = transformers.AutoModelForCausalLM.from_pretrained(src)
    tokenizer = transformers.AutoTokenizer.from_pretrained(src)
    package = export_genai(model, tmp_path / "pkg", tokenizer=tokenizer)
    assert "tokenizer.json" in package.files
    _same_tokens(src, package.folder, PROMPTS[:1])


def test_model_object_finds_its_folders_tokenizer(tmp_path, folders):
    """A model object loaded with from_pretrained: the tokenizer files of the folder its name_or_path names (the
    package had none, and onnxruntime_genai.Tokenizer could not load it)."""
    src = folders("llama")
    package = export_genai(transformers.AutoModelForCausalLM.from_pretrained(src), tmp_path / "pkg")
    assert "tokenizer.json" in package.files
    _same_tokens(src, package.folder, PROMPTS[:1])


def test_int4_package(folders, llama_package, tmp_path):
    """Every product's weight in int4 through onnxruntime's quantizer; the package loads and generates, its logits
    close to fp32's: cosine above 0.95 (0.99 measured), the same next token (random weights give flat logits, so
    later tokens may differ without being wrong)."""
    src, fp32 = llama_package
    int4 = export_genai(src, tmp_path / "int4", precision="int4")
    assert int4.op_counts.get("MatMulNBits", 0) >= 7 and "MatMul" not in int4.op_counts
    tokens = genai_greedy(int4.folder, PROMPTS, NEW_TOKENS)
    assert [len(t) for t in tokens] == [len(p) + NEW_TOKENS for p in PROMPTS]
    logits = {}
    for package in (fp32, int4):
        model = og.Model(package.folder)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=16)
        generator = og.Generator(model, params)
        generator.append_tokens(np.array([PROMPTS[0]], dtype=np.int32))
        logits[package.precision] = np.asarray(generator.get_output("logits"))[0, -1]
    a, b = logits["fp32"], logits["int4"]
    assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.95
    assert a.argmax() == b.argmax()


def test_int4_quantizes_every_product(folders, tmp_path):
    """Gemma's output projection tied to the embedding (a transposed weight) is quantized too: no float product
    of a weight is left (GPT-2's Gemm: test_products_as_matmul_keep_the_numbers)."""
    src = folders("gemma")
    int4 = export_genai(src, tmp_path / "int4", precision="int4")
    assert not {"MatMul", "Gemm", "FusedMatMul"} & set(int4.op_counts)
    # per layer: packed query/key/value, output, gate, up, down; the head
    assert int4.op_counts["MatMulNBits"] == 5 * 2 + 1
    tokens = genai_greedy(int4.folder, PROMPTS[:1], NEW_TOKENS)
    assert len(tokens[0]) == len(PROMPTS[0]) + NEW_TOKENS


def test_products_as_matmul_keep_the_numbers():
    """Gemm (weight transposed or not, with a bias) and FusedMatMul of a transposed weight, rewritten to MatMul:
    onnxruntime gives the same results."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from experimental.torch_interpreter.genai.quantize import products_as_matmul

    rng = np.random.default_rng(0)
    w, wt, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (6, 8), (6,)))
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (wt, "wt"), (b, "b"))]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y1"]),
             helper.make_node("Gemm", ["x", "wt", "b"], ["y2"], transB=1),
             helper.make_node("FusedMatMul", ["x", "wt"], ["y3"], domain="com.microsoft", transB=1, alpha=1.0)]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [3, 6]) for i in (1, 2, 3)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])], outputs,
                              inits)
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    before = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    assert products_as_matmul(model) == 3
    assert {n.op_type for n in model.graph.node} == {"MatMul", "Add"}
    after = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    for e, g in zip(before, after):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family, precision", [("llama", "fp16"), ("llama", "bf16"), ("gemma", "bf16"),
                                               ("gemma", "int4")])
def test_half_package_for_cuda(folders, tmp_path, family, precision):
    """A package made for CUDA: the weights in the precision, CUDA named in genai_config.json, the cache written in
    place by GroupQueryAttention (checked on the CPU), every node an op CUDA has a kernel for in its types (a node
    on the CPU would cost a copy each way and keep CUDA graphs off; Gemma: its norm in float32)."""
    src = folders(family)
    package = export_genai(src, tmp_path / "pkg", precision=precision, provider="cuda")
    assert package.config["model"]["decoder"]["session_options"]["provider_options"] == [{"cuda": {}}]
    assert package.attention == "GroupQueryAttention" and package.op_counts["GroupQueryAttention"] == 2
    assert package.config["search"]["past_present_share_buffer"] is True
    onx = onnx.load(os.path.join(package.folder, "model.onnx"), load_external_data=False)
    dtype = onnx.TensorProto.BFLOAT16 if precision == "bf16" else onnx.TensorProto.FLOAT16
    assert onx.graph.output[0].type.tensor_type.elem_type == dtype
    assert {i.type.tensor_type.elem_type for i in onx.graph.input[3:]} == {dtype}
    full = onnx.load(os.path.join(package.folder, "model.onnx"))
    assert not nodes_without_cuda_kernel(full), sorted(nodes_without_cuda_kernel(full))
    if precision == "bf16":
        missing = bfloat16_nodes_without_cuda_kernel(full)
        assert not missing, f"bfloat16 nodes with no CUDA kernel: {sorted(missing)}"
    # the last token's index: a maximum of int64 positions (CUDA's ArgMax takes floats only, a float argmax carries
    # a NaN guard)
    assert "ArgMax" not in {n.op_type for n in onx.graph.node}


# -- bad input: a clear error, nothing written ------------------------------------------------------------------


def _nothing_written(parent):
    return [p for p in os.listdir(parent) if p.startswith(".genai_")] == []


def test_folder_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(GenAIError, match="has no config.json"):
        export_genai(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(GenAIError, match="is not a folder"):
        export_genai(tmp_path / "missing", tmp_path / "out")
    assert not (tmp_path / "out").exists() and _nothing_written(tmp_path)


def test_model_without_kv_cache(tmp_path):
    cfg = transformers.MambaConfig(hidden_size=32, num_hidden_layers=1, vocab_size=100, state_size=4)
    with pytest.raises(GenAIError, match="recurrent state"):
        export_genai(transformers.MambaForCausalLM(cfg), tmp_path / "out")
    with pytest.raises(GenAIError, match="causal language model"):
        export_genai(torch.nn.Linear(2, 2), tmp_path / "out")
    assert not (tmp_path / "out").exists() and _nothing_written(tmp_path)


def test_encoder_folders_are_refused(tmp_path):
    small = dict(num_hidden_layers=1, num_attention_heads=2, vocab_size=100)
    transformers.BertModel(transformers.BertConfig(hidden_size=32, intermediate_size=64, **small)).save_pretrained(
        tmp_path / "bert")
    with pytest.raises(GenAIError, match="returns no key-value cache"):
        export_genai(tmp_path / "bert", tmp_path / "out")
    cfg = transformers.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2, vocab_size=100)
    transformers.T5Model(cfg).save_pretrained(tmp_path / "t5")
    with pytest.raises(GenAIError, match="'t5' model, an encoder-decoder"):
        export_genai(tmp_path / "t5", tmp_path / "out")
    assert not (tmp_path / "out").exists() and _nothing_written(tmp_path)


def test_bad_arguments(folders, tmp_path):
    src = folders("llama")
    with pytest.raises(GenAIError, match="unknown precision 'int8'"):
        export_genai(src, tmp_path / "out", precision="int8")
    with pytest.raises(GenAIError, match="unknown provider 'tpu'"):
        export_genai(src, tmp_path / "out", provider="tpu")
    with pytest.raises(GenAIError, match="made for CUDA"):
        export_genai(src, tmp_path / "out", precision="bf16")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(GenAIError, match="exists"):
        export_genai(src, tmp_path / "taken")
    assert os.listdir(tmp_path / "taken") == ["keep.txt"] and _nothing_written(tmp_path)


def test_failure_leaves_nothing(llama_package, tmp_path, monkeypatch):
    """A failure while writing removes the temporary folder and leaves an existing package as it was."""
    import shutil

    from experimental.torch_interpreter.genai import package as package_module

    src, package = llama_package
    shutil.copytree(package.folder, tmp_path / "pkg")
    before = sorted(os.listdir(tmp_path / "pkg"))

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(package_module, "write_tokenizer", broken)
    with pytest.raises(OSError, match="No space left"):
        export_genai(src, tmp_path / "pkg", overwrite=True)
    assert sorted(os.listdir(tmp_path / "pkg")) == before and _nothing_written(tmp_path)


def test_command_line(folders, tmp_path, capsys):
    src = folders("llama")
    assert main(["genai", src, str(tmp_path / "pkg"), "--precision", "fp32", "--provider", "cpu"]) == 0
    assert "saved" in capsys.readouterr().out
    assert og.Model(str(tmp_path / "pkg")) is not None
    assert main(["genai", src, str(tmp_path / "pkg")]) == 1
    err = capsys.readouterr().err
    assert "GenAIError" in err and "exists" in err
    assert main(["genai", src, str(tmp_path / "other"), "--precision", "bf16"]) == 1
    assert "made for CUDA" in capsys.readouterr().err and not (tmp_path / "other").exists()


def test_folder_naming_code_of_its_own_is_refused(tmp_path, folders, monkeypatch):
    """A config.json with an ``auto_map`` pointing at a Python file of the folder and a model type transformers does
    not know: transformers asked on standard input and ran the file on "y"; the project refuses it unless
    ``trust_remote_code=True`` (nothing runs, nothing is read from stdin). With a model type it knows, the folder's
    code is left alone and the package is made from transformers' own class."""
    import io
    import json
    import shutil

    marker = tmp_path / "ran.txt"
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    for model_type in ("evil_llama", "llama"):
        src = tmp_path / model_type
        shutil.copytree(folders("llama"), src)
        (src / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                     "from transformers import LlamaConfig\nclass EvilConfig(LlamaConfig):\n"
                                     f"    model_type = {model_type!r}\n")
        config = json.loads((src / "config.json").read_text())
        config.update(model_type=model_type, auto_map={"AutoConfig": "evil.EvilConfig"})
        (src / "config.json").write_text(json.dumps(config))
        if model_type == "evil_llama":
            with pytest.raises(GenAIError, match="trust_remote_code=True"):
                export_genai(src, tmp_path / "pkg")
            assert not (tmp_path / "pkg").exists()
        else:
            assert "model.onnx" in export_genai(src, tmp_path / "pkg").files
        assert not marker.exists()


def test_tokenizer_files_stay_in_the_folder(tmp_path, folders):
    """Tokenizer files are regular files inside the model's folder: a link out of it (another file, /dev/zero,
    which copied forever) or a FIFO (which hung) is refused before anything is copied; a file's setuid and
    world-writable bits are not copied into the package."""
    import os
    import shutil

    src = tmp_path / "model"
    shutil.copytree(folders("llama"), src)
    os.chmod(src / "tokenizer.json", 0o4777)
    package = export_genai(src, tmp_path / "ok")
    assert "tokenizer.json" in package.files
    assert os.stat(os.path.join(package.folder, "tokenizer.json")).st_mode & 0o7777 == 0o644
    outside = tmp_path / "secret.txt"
    outside.write_text("not a tokenizer")
    for name, make in (("link", lambda p: p.symlink_to(outside)), ("zero", lambda p: p.symlink_to("/dev/zero")),
                       ("fifo", lambda p: os.mkfifo(p))):
        bad = tmp_path / name
        shutil.copytree(folders("llama"), bad)
        (bad / "tokenizer.json").unlink()
        make(bad / "tokenizer.json")
        with pytest.raises(GenAIError, match="leads out of the folder|not a regular file"):
            export_genai(bad, tmp_path / f"pkg_{name}")
        assert not (tmp_path / f"pkg_{name}").exists()
