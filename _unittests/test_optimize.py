"""to_onnx(..., optimize=...): the optimized graphs compute what the raw translation computes (and eager PyTorch),
with fewer nodes and the metadata of the nodes that remain; the onnxruntime level fuses into com.microsoft kernels."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.convert import translate
from experimental.torch_interpreter.optimize import check_level, optimize_model
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types
from experimental.torch_interpreter.translation.registry import default_registry

transformers = pytest.importorskip("transformers")

VOCAB = 1000
SMALL = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    vocab_size=VOCAB, max_position_embeddings=256, use_cache=False,
)
BATCH_SEQ = {0: "batch", 1: "seq"}


def _ids(batch, seq):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(batch * 100 + seq))


def _mask(batch, seq, left=True):
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if left:
        mask[0, : seq // 3] = 0  # left padding on the first row: fully masked query rows
    else:
        mask[-1, seq - seq // 3 :] = 0
    return mask


def _decoder_inputs(batch, seq):
    return {"input_ids": _ids(batch, seq), "attention_mask": _mask(batch, seq)}


def _bert_inputs(batch, seq):
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2 :] = 1
    return {"input_ids": _ids(batch, seq), "attention_mask": _mask(batch, seq, left=False), "token_type_ids": types}


def _t5_inputs(batch, seq):
    return {
        "input_ids": _ids(batch, seq),
        "attention_mask": _mask(batch, seq, left=False),
        "decoder_input_ids": _ids(batch, seq + 2),
    }


def _family(name):
    """(model, inputs(batch, seq), dynamic_shapes) of a tiny random-weight model."""
    decoders = {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ}
    if name in ("llama", "mistral", "qwen2", "phi3"):
        cls, config = {
            "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig),
            "mistral": (transformers.MistralForCausalLM, transformers.MistralConfig),
            "qwen2": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config),
            "phi3": (transformers.Phi3ForCausalLM, transformers.Phi3Config),
        }[name]
        extra = {"pad_token_id": 0} if name == "phi3" else {}
        return cls(config(num_key_value_heads=2, **extra, **SMALL)), _decoder_inputs, decoders
    if name == "gpt2":
        cfg = transformers.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=256, use_cache=False,
            bos_token_id=0, eos_token_id=0,
        )
        return transformers.GPT2LMHeadModel(cfg), _decoder_inputs, decoders
    if name == "bert":
        cfg = transformers.BertConfig(type_vocab_size=2, **SMALL)
        return transformers.BertModel(cfg), _bert_inputs, {**decoders, "token_type_ids": BATCH_SEQ}
    if name == "t5":
        cfg = transformers.T5Config(
            vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=32, use_cache=False,
            decoder_start_token_id=0, pad_token_id=0,
        )
        dec = {0: "batch", 1: "dec_seq"}
        return transformers.T5ForConditionalGeneration(cfg), _t5_inputs, {**decoders, "decoder_input_ids": dec}
    raise ValueError(name)


def _run(onx, inputs):
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.numpy() for k, v in inputs.items()})


def _has_fx_metadata(node) -> bool:
    return "pkg.torch.fx_node" in node.metadata_props


FAMILIES = ["llama", "mistral", "qwen2", "phi3", "gpt2", "bert", "t5"]


# t5 (an encoder-decoder, 23 s) with --heavy: bert and the decoders cover the same rewrites by default
@pytest.mark.parametrize("name", [pytest.param(f, marks=pytest.mark.heavy) if f == "t5" else f for f in FAMILIES])
def test_optimized_equals_raw(name):
    """Raw, default and onnxruntime levels give the same outputs on two shapes; fewer nodes each level."""
    torch.manual_seed(0)
    model, make_inputs, dynamic = _family(name)
    model = model.eval()
    onx = {
        level: to_onnx(model, (), make_inputs(2, 7), dynamic_shapes=dynamic, optimize=level)
        for level in (False, True, "onnxruntime")
    }
    onnx.checker.check_model(onx[True], full_check=True)
    counts = {level: len(m.graph.node) for level, m in onx.items()}
    assert counts[True] < counts[False], counts
    assert counts["onnxruntime"] <= counts[True], counts
    for batch, seq in [(2, 7), (3, 12)]:
        inputs = make_inputs(batch, seq)
        with torch.no_grad():
            expected = model(**inputs)[0].numpy()
        raw = _run(onx[False], inputs)
        for level in (True, "onnxruntime"):
            got = _run(onx[level], inputs)
            assert len(got) == len(raw)
            for r, g in zip(raw, got):
                np.testing.assert_allclose(g, r, atol=1e-4, rtol=1e-4, err_msg=f"optimize={level!r}")
            np.testing.assert_allclose(got[0], expected, atol=1e-4, rtol=1e-4, err_msg=f"optimize={level!r}")


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_metadata_kept(name):
    """Every node of the raw translation (Constant nodes aside) has its FX node; every node the generic level
    keeps still has it (constants become initializers)."""
    torch.manual_seed(0)
    model, make_inputs, dynamic = _family(name)
    raw = to_onnx(model.eval(), (), make_inputs(2, 7), dynamic_shapes=dynamic, optimize=False, as_ir=True)
    assert all(_has_fx_metadata(n) for n in raw.graph if n.op_type != "Constant")
    sources = {n.metadata_props["pkg.torch.fx_node"] for n in raw.graph if n.op_type != "Constant"}
    optimize_model(raw, True)
    assert "Constant" not in {n.op_type for n in raw.graph}
    assert all(_has_fx_metadata(n) for n in raw.graph), [n.op_type for n in raw.graph if not _has_fx_metadata(n)]
    assert {n.metadata_props["pkg.torch.fx_node"] for n in raw.graph} <= sources


def test_onnxruntime_level_fuses_llama():
    """RMSNorm, residual + RMSNorm and attention become onnxruntime's kernels (attention: ONNX Attention at
    opset 23, the grouped-query heads given unrepeated, the left-padded rows 0 as in eager without a guard);
    numerics checked against eager."""
    torch.manual_seed(0)
    model, make_inputs, dynamic = _family("llama")
    onx = check_model(
        model, (), make_inputs(2, 8), dynamic_shapes=dynamic, more_inputs=[((), make_inputs(3, 13))],
        atol=1e-4, optimize="onnxruntime", check_onnx=False,  # SimplifiedLayerNormalization: onnxruntime's, in ""
    )
    ops = collections.Counter((n.domain, n.op_type) for n in onx.graph.node)
    # 2 layers: 2 input norms, 2 post-attention norms, the final norm; the residual + norm fusions whose sum is
    # read again given back as Add + norm (onnxruntime's fused kernel is the slower on its CPU provider,
    # optimize/skip_norm.py), the final one (its sum read by the norm alone) stays fused
    assert ops[("", "SimplifiedLayerNormalization")] == 4
    assert ops[("com.microsoft", "SkipSimplifiedLayerNormalization")] == 1
    assert ops[("", "Attention")] == 2 and ("com.microsoft", "MultiHeadAttention") not in ops
    # no repeat_kv (Unsqueeze, Expand, Reshape) before Attention, no masked-row guard (ReduceMax, Equal, Where)
    producers = {out: n.op_type for n in onx.graph.node for out in n.output}
    attention = [n for n in onx.graph.node if n.op_type == "Attention"]
    assert all(producers.get(n.input[i]) != "Reshape" for n in attention for i in (1, 2))
    assert ("", "ReduceMax") not in ops and ("", "Equal") not in ops
    assert ("", "ReduceMean") not in ops
    # rotary embedding on the projections, attention on [batch, seq, hidden]: no head split or merge left
    assert ops[("", "RotaryEmbedding")] == 4 and ("", "Neg") not in ops and ("", "Transpose") not in ops, ops
    assert all({a.name: a.i for a in n.attribute}.get("q_num_heads") == 4 for n in attention)
    assert onx.ir_version == 10
    assert {o.domain: o.version for o in onx.opset_import}[""] == 23


def test_onnxruntime_level_fuses_bert():
    """LayerNorm after a residual becomes SkipLayerNormalization; GELU stays exact (erf)."""
    torch.manual_seed(0)
    model, make_inputs, dynamic = _family("bert")
    onx = check_model(
        model, (), make_inputs(2, 7), dynamic_shapes=dynamic, more_inputs=[((), make_inputs(3, 12))],
        atol=1e-4, optimize="onnxruntime", check_onnx=False,
    )
    ops = collections.Counter(n.op_type for n in onx.graph.node)
    assert ops["SkipLayerNormalization"] >= 4, ops
    assert ops["BiasGelu"] == 2 and "Erf" not in ops, ops  # one per layer, the Linear's bias taken in
    # projections and attention in one com.microsoft::Attention per layer, the padding mask's index grid gone
    assert ops["Attention"] == 2 and not {"Split", "GatherND"} & set(ops), ops


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_onnxruntime_level_fuses_gelu(approximate, dtype):
    """aten::gelu becomes com.microsoft BiasGelu (erf) or FastGelu (tanh) in float32; in float16 the ONNX Gelu
    of opset 23 (the onnxruntime level's opset) may stay (onnxscript fuses the erf one with its bias)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(approximate=approximate)).to(dtype)
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.float16 else {}
    onx = check_model(
        model, (torch.randn(2, 5, 8, dtype=dtype) * 3,), dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.randn(3, 5, 8, dtype=dtype),), None)], optimize="onnxruntime", **tol,
    )
    ops = {(n.domain, n.op_type) for n in onx.graph.node}
    # the onnxruntime level translates at opset 23: aten::gelu is ONNX Gelu (float16 too), then onnxruntime's
    fused = ("com.microsoft", "FastGelu" if approximate == "tanh" else "BiasGelu")
    assert fused in ops or (dtype == torch.float16 and ("", "Gelu") in ops), ops
    assert not {("", "Erf"), ("", "Tanh")} & ops


def test_onnxruntime_level_fuses_gpt2_tanh_gelu():
    """transformers' NewGELUActivation (pow(x, 3), written out in aten ops) becomes FastGelu."""
    torch.manual_seed(0)
    model, make_inputs, dynamic = _family("gpt2")
    onx = check_model(
        model, (), make_inputs(2, 7), dynamic_shapes=dynamic, more_inputs=[((), make_inputs(3, 12))],
        atol=1e-4, optimize="onnxruntime", check_onnx=False,
    )
    ops = collections.Counter(n.op_type for n in onx.graph.node)
    assert ops["FastGelu"] == 2 and "Tanh" not in ops, ops
    # pre-norm: the residual sums read again stay Add + LayerNormalization (onnxruntime's SkipLayerNormalization
    # is the slower on its CPU provider), the last one (read by ln_f alone) stays fused
    assert ops["Attention"] == 2 and ops["SkipLayerNormalization"] == 1 and ops["LayerNormalization"] == 4, ops


def test_optimize_false_is_the_translation():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x * 2) + (x * 2).sin()

    x = torch.randn(2, 3)
    ep = torch.export.export(M(), (x,))
    expected = [n.op_type for n in translate(ep, default_registry, {}, 18).graph]
    assert op_types(to_onnx(M(), (x,), optimize=False)) == expected == ["Constant", "Mul", "Mul", "Sin", "Add"]
    assert op_types(check_model(M(), (x,))) == ["Mul", "Sin", "Add"]  # folded constant, one Mul


def test_python_op_survives():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class M(torch.nn.Module):
        def forward(self, x):
            y = x * 2 + 1
            return Twice.apply(y) + (x * 2 + 1)

    for level in (True, "onnxruntime"):
        onx = check_model(M(), (torch.randn(3, 4),), optimize=level, check_onnx=False)
        assert ("com.microsoft", "PythonOp") in {(n.domain, n.op_type) for n in onx.graph.node}


def test_control_flow_survives():
    class M(torch.nn.Module):
        def forward(self, x):
            def true_fn(x):
                return (x * 2).sin() + (x * 2)

            def false_fn(x):
                return x.cos() + 1

            return torch.cond(x.sum() > 0, true_fn, false_fn, (x,)) * 3

    for x in (torch.rand(3, 4), -torch.rand(3, 4)):
        for level in (True, "onnxruntime"):
            onx = check_model(M(), (x,), optimize=level)
            assert "If" in op_types(onx)


def test_unknown_level():
    assert check_level("default") == "default"
    with pytest.raises(ValueError, match="optimize='fast'"):
        to_onnx(Fn(torch.sin), (torch.randn(2),), optimize="fast")


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_onnxruntime_level_with_cache(name):
    """A decoder with its cache as inputs and outputs: fused, same outputs as eager, names kept."""
    from experimental.torch_interpreter.testing import llm_models as models

    from experimental.torch_interpreter import bypass_export_some_errors

    model = models.decoder_model(name)
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = check_model(
            model, (), adapt(models.decoder_inputs(model, batch=2, seq=3, past=4)),
            dynamic_shapes=models.decoder_dynamic_shapes(model),
            more_inputs=[((), adapt(models.decoder_inputs(model, batch=3, seq=5, past=7, seed=1)))],
            atol=1e-4, optimize="onnxruntime", check_onnx=False,
        )
    assert [o.name for o in onx.graph.output][:3] == ["logits", "present.0.key", "present.0.value"]
    assert collections.Counter(n.op_type for n in onx.graph.node)["Attention"] == 2
    # the cache goes through Attention's past inputs, the present keys and values are its outputs
    producers = {out: n.op_type for n in onx.graph.node for out in n.output}
    assert {producers[o.name] for o in onx.graph.output[1:]} == {"Attention"}
    assert "Concat" not in {producers.get(i) for n in onx.graph.node if n.op_type == "Attention" for i in n.input}


class _Rope(torch.nn.Module):
    """transformers' rotary embedding on split heads, then attention and merged heads; ``pos`` of batch 1 or B."""

    def forward(self, q, k, v, pos):
        split = lambda t: t.view(t.shape[0], t.shape[1], 2, 8).transpose(1, 2)  # noqa: E731
        f = pos[:, :, None].float() * (1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]
        rotate = lambda x: torch.cat((-x[..., 4:], x[..., :4]), dim=-1)  # noqa: E731
        q, k = (split(x) * cos + rotate(split(x)) * sin for x in (q, k))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, split(v), is_causal=True)
        return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], 16)


@pytest.mark.parametrize("pos_batch", [1, 3])
def test_onnxruntime_level_rotary_and_attention_on_bsd(pos_batch):
    """Rotary embedding fused into RotaryEmbedding (its caches widened to the batch when the positions have
    a batch of 1), attention on 3-D tensors; numerics against eager at another batch and length."""

    def inputs(batch, seq, seed):
        gen = torch.Generator().manual_seed(seed)
        pos = torch.arange(seq).expand(pos_batch if pos_batch == 1 else batch, seq) + 3
        return (*(torch.randn(batch, seq, 16, generator=gen) for _ in "qkv"), pos)

    dims = {0: "batch", 1: "seq"}
    pos_dims = {1: "seq"} if pos_batch == 1 else dims
    onx = check_model(
        _Rope(), inputs(3, 5, 0), dynamic_shapes=(dims, dims, dims, pos_dims),
        more_inputs=[(inputs(2 if pos_batch == 1 else 3, 9, 1), None)], atol=1e-5, optimize="onnxruntime",
    )
    ops = collections.Counter(n.op_type for n in onx.graph.node)
    assert ops["RotaryEmbedding"] == 2 and ops["Attention"] == 1, ops
    assert not {"Neg", "Slice", "Transpose"} & set(ops), ops
    assert ("Expand" in ops) == (pos_batch == 1), ops
