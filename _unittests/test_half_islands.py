"""A half-precision model made for CUDA only computes its float32 islands in half precision
(``optimize/half_islands.py``): the casts the converters write to round once, or for the CPU's missing bfloat16
kernels, go; an island whose result reaches a jump keeps them. Numbers are compared with eager PyTorch on the CPU
provider (float16: onnxruntime's CPU runs a model made for CUDA; it has no bfloat16 arithmetic)."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.optimize.pipeline import named
from experimental.torch_interpreter.testing.check import Fn, bfloat16_nodes_without_cuda_kernel, element_types

transformers = pytest.importorskip("transformers")

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
LEVELS = [False, True, "onnxruntime"]
FLOAT = onnx.TensorProto.FLOAT


def _linear_inputs(dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 16, generator=gen).to(dtype)
    w = (torch.randn(8, 16, generator=gen) / 4).to(dtype)
    b = torch.randn(8, generator=gen).to(dtype)
    return x, w, b


def _float32_results(onx: onnx.ModelProto) -> collections.Counter:
    """The op types (casts left out) of the nodes computing a float32 result."""
    types = element_types(onx)
    return collections.Counter(
        n.op_type for n in onx.graph.node if n.op_type != "Cast" and any(types.get(o) == FLOAT for o in n.output)
    )


def _run_cpu(onx: onnx.ModelProto, args) -> list[np.ndarray]:
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a.numpy() for i, a in zip(onx.graph.input, args)})


@pytest.mark.parametrize("level", LEVELS, ids=["none", "default", "onnxruntime"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_linear_and_silu_computed_in_half_for_cuda(dtype, level):
    """``silu(linear(x, w, b))``: float32 between casts for any provider (PyTorch rounds each once), in half
    precision with no cast for CUDA only, within float16's tolerance."""
    fn = Fn(lambda x, w, b: F.silu(F.linear(x, w, b)))
    args = _linear_inputs(DTYPES[dtype])
    anywhere = to_onnx(fn, args, optimize=level)
    cuda = to_onnx(fn, args, optimize=level, providers="cuda")
    assert {"Sigmoid"} <= set(_float32_results(anywhere)) and "Cast" not in _float32_results(anywhere)
    assert sum(n.op_type == "Cast" for n in anywhere.graph.node) >= 3
    assert not [n.op_type for n in cuda.graph.node if n.op_type == "Cast"], [n.op_type for n in cuda.graph.node]
    assert not _float32_results(cuda)
    if dtype == "float16":
        with torch.no_grad():
            expected = fn(*args).numpy()
        for onx in (anywhere, cuda):
            np.testing.assert_allclose(_run_cpu(onx, args)[0], expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w, b: (F.linear(x, w, b) * 4).floor(),  # a rounding op after correctly rounded arithmetic
        lambda x, w, b: F.silu(F.linear(x, w, b)) > 0.25,  # a comparison
        lambda x, w, b: F.linear(x, w, b).reshape(-1).long(),  # a cast to an integer after a move
    ],
    ids=["floor", "greater", "long"],
)
def test_island_read_by_a_jump_stays_float32(fn):
    """A result that jumps keeps PyTorch's rounding: its island stays in float32, with its casts."""
    args = _linear_inputs(torch.float16)
    onx = to_onnx(Fn(fn), args, providers="cuda")
    assert _float32_results(onx)["MatMul"] == 1, [n.op_type for n in onx.graph.node]
    with torch.no_grad():
        expected = Fn(fn)(*args).numpy()
    np.testing.assert_array_equal(_run_cpu(onx, args)[0], expected)


def test_constant_inexact_in_half_keeps_the_island():
    """The tanh GELU written out before opset 20 multiplies by 0.044715 and sqrt(2/pi), which float16 does not
    hold: computing it in float16 would change the constants, the island stays in float32."""
    x = torch.randn(4, 8).half()
    onx = to_onnx(torch.nn.GELU(approximate="tanh"), (x,), providers="cuda", target_opset=18)
    assert _float32_results(onx)["Tanh"] == 1
    np.testing.assert_allclose(_run_cpu(onx, (x,))[0], F.gelu(x.float(), approximate="tanh").half().numpy(),
                               atol=1e-3, rtol=1e-3)


def test_nothing_for_a_model_that_may_run_on_the_cpu():
    """The rewrite reads the providers the model is made for: ``"any"`` and ``"cpu"`` keep every island."""
    args = _linear_inputs(torch.bfloat16)
    fn = Fn(lambda x, w, b: F.silu(F.linear(x, w, b)))
    for providers in ("any", "cpu"):
        onx = to_onnx(fn, args, optimize=False, providers=providers, as_ir=True)
        assert named("half_islands").apply(onx) == 0
        assert any(n.op_type == "Cast" for n in onx.graph)


def _tiny(name: str, dtype: torch.dtype):
    torch.manual_seed(0)
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
                 max_position_embeddings=256, use_cache=False)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (2, 8), generator=gen)
    mask = torch.ones(2, 8, dtype=torch.int64)
    if name == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **small))
        inputs = {"input_ids": ids, "attention_mask": mask}
    elif name == "gemma":
        model = transformers.GemmaForCausalLM(transformers.GemmaConfig(num_key_value_heads=2, head_dim=16, **small))
        inputs = {"input_ids": ids, "attention_mask": mask}
    else:
        model = transformers.BertModel(transformers.BertConfig(type_vocab_size=2, **small))
        inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    return model.eval().to(dtype), inputs


# The casts left at the onnxruntime level for CUDA: the attention mask made boolean, and for Llama the rotary
# positions made float and its cosine and sine rounded to the model's type (as the official exporter's models).
LEFT_CASTS = {"llama": 4, "bert": 1}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", ["llama", "bert"])
def test_transformers_half_models_for_cuda_keep_no_float32_island(name, dtype):
    """At the onnxruntime level, a model for CUDA has no float32 MatMul, attention, norm or activation, only
    the casts of the mask and of the rotary positions; onnxruntime's fusions fire on it (the rotary embedding
    too, whose cosine and sine transformers computes in float32 and casts); a model for any provider keeps the
    rotation as PyTorch rounds it."""
    model, inputs = _tiny(name, DTYPES[dtype])
    onx = to_onnx(model, kwargs=inputs, optimize="onnxruntime", providers="cuda")
    ops = collections.Counter(n.op_type for n in onx.graph.node)
    assert ops["Cast"] == LEFT_CASTS[name], ops
    computed = _float32_results(onx)
    assert not {"MatMul", "Attention", "Sigmoid", "Gelu", "BiasGelu", "SkipLayerNormalization"} & set(computed), computed
    fused = {"llama": {"SkipSimplifiedLayerNormalization", "Attention", "RotaryEmbedding"},
             "bert": {"SkipLayerNormalization", "Attention", "BiasGelu"}}[name]
    assert fused <= set(ops), ops
    if name == "llama":
        anywhere = to_onnx(model, kwargs=inputs, optimize="onnxruntime")
        assert "RotaryEmbedding" not in {n.op_type for n in anywhere.graph.node}


def _mixed_norms(onx: onnx.ModelProto) -> list[tuple[str, int, int]]:
    """The normalizations whose input and scale element types differ: (op type, input type, scale type)."""
    types = element_types(onx)
    scale = {"SimplifiedLayerNormalization": 1, "LayerNormalization": 1, "SkipSimplifiedLayerNormalization": 2,
             "SkipLayerNormalization": 2}
    return [(n.op_type, types.get(n.input[0]), types.get(n.input[scale[n.op_type]]))
            for n in onx.graph.node if n.op_type in scale
            and types.get(n.input[0]) != types.get(n.input[scale[n.op_type]])]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_half_gemma_for_cuda_normalizes_in_one_type(dtype):
    """Gemma's RMS norm casts the half residual to float32 and scales by a float32 weight: the fused
    SkipSimplifiedLayerNormalization read a float16 input with a float32 gamma, a model onnxruntime refused on every
    provider ("Type parameter (T) bound to different types"), and a bfloat16 -> float32 SimplifiedLayerNormalization
    has no CUDA kernel. Each norm now reads its input cast to the scale's type; in float16 the model runs on the
    CPU and gives eager's logits."""
    model, inputs = _tiny("gemma", DTYPES[dtype])
    onx = to_onnx(model, kwargs=inputs, optimize="onnxruntime", providers="cuda")
    assert not _mixed_norms(onx), _mixed_norms(onx)
    assert {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"} & {n.op_type for n in onx.graph.node}
    if dtype == "bfloat16":
        assert not bfloat16_nodes_without_cuda_kernel(onx)
        return
    got = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {k: v.numpy() for k, v in inputs.items()})[0]
    with torch.no_grad():
        expected = model(**inputs).logits.float().numpy()
    np.testing.assert_allclose(got.astype(np.float32), expected, atol=2e-2, rtol=2e-2)


def test_bfloat16_model_for_cuda_on_the_cpu_is_a_clear_error():
    """onnxruntime's CPU has no bfloat16 arithmetic: a bfloat16 model made for CUDA cannot run there, and
    InferenceSession says why and what to do instead of onnxruntime's NOT_IMPLEMENTED."""
    from experimental.torch_interpreter import InferenceSession
    from experimental.torch_interpreter.errors import ProviderError

    args = _linear_inputs(torch.bfloat16)
    fn = Fn(lambda x, w, b: F.silu(F.linear(x, w, b)))
    onx = to_onnx(fn, args, providers="cuda")
    with pytest.raises(ProviderError, match="made for cuda only.*providers='any'"):
        InferenceSession(onx, providers=["CPUExecutionProvider"])
    anywhere = to_onnx(fn, args)
    feeds = {i.name: a for i, a in zip(anywhere.graph.input, args)}
    got = InferenceSession(anywhere, providers=["CPUExecutionProvider"]).run(None, feeds)
    with torch.no_grad():
        expected = fn(*args).float().numpy()
    np.testing.assert_allclose(np.asarray(got[0]).astype(np.float32), expected, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("level", LEVELS, ids=["none", "default", "onnxruntime"])
@pytest.mark.parametrize("name", ["llama", "bert"])
def test_bfloat16_nodes_of_a_model_for_cuda_have_a_cuda_kernel(name, level):
    """A bfloat16 node CUDA has no kernel for would run on the CPU's, which has none either: the session could
    not be made. Every node reading or writing bfloat16 in a model made for CUDA is an op CUDA computes in
    bfloat16, a move, or a cast."""
    model, inputs = _tiny(name, torch.bfloat16)
    onx = to_onnx(model, kwargs=inputs, optimize=level, providers="cuda")
    missing = bfloat16_nodes_without_cuda_kernel(onx)
    assert not missing, f"bfloat16 nodes with no CUDA kernel: {sorted(missing)}"
