"""transformers LLMs with their default ``use_cache=True`` convert with ``to_onnx(model, kwargs=inputs)`` alone:
the cache classes are registered for the export only (capture strategy ``transformers_caches``), a batch of 1
keeps the batch axis dynamic (``size_oblivious``), and the model matches eager on batch 1 and batch 3."""

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
import transformers  # noqa: E402

from experimental.torch_interpreter import (  # noqa: E402
    CaptureStrategyWarning,
    DynamicShapeError,
    ExportCaptureError,
    InferenceSession,
    to_onnx,
)
from experimental.torch_interpreter.testing import llm_models as models  # noqa: E402


def _feeds(inputs: dict) -> dict:
    feeds = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}
    for i, layer in enumerate(inputs["past_key_values"].layers):
        feeds[f"past_key_values.{i}.key"] = layer.keys
        feeds[f"past_key_values.{i}.value"] = layer.values
    return feeds


def _expected(model, inputs: dict) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(**inputs)
    tensors = [out.logits] + [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
    return [t.numpy() for t in tensors]


@pytest.mark.parametrize(
    "name,given",
    [("llama", False), ("mistral", False), ("gpt2", False), ("llama", True)],
    ids=["llama", "mistral", "gpt2", "llama_given_shapes"],
)
def test_default_cache_batch_of_one(name, given):
    """``to_onnx(model, kwargs=inputs)``: nothing else; the dynamic shapes are inferred (or given)."""
    model = models.decoder_model(name)
    assert model.config.use_cache
    inputs = models.decoder_inputs(model, batch=1, seq=3, past=4)
    onx = to_onnx(model, kwargs=inputs, dynamic_shapes=models.decoder_dynamic_shapes(model) if given else None)
    # the registration was scoped to the export, the user's cache was not extended
    assert transformers.DynamicCache not in pytree.SUPPORTED_NODES
    assert inputs["past_key_values"].get_seq_length() == 4
    outputs = [o.name for o in onx.graph.output]
    assert outputs == ["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]
    dims = [d.dim_param or d.dim_value for d in onx.graph.input[2].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2] == "past"
    assert [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim] == ["batch", "seq"]
    meta = {p.key: p.value for p in onx.metadata_props}
    inferred = "transformers_caches,transformers_dynamic_shapes,size_oblivious"
    expected = "transformers_caches,size_oblivious" if given else inferred
    assert meta["aten2onnx.capture.strategies"] == expected
    sess = InferenceSession(onx)
    for batch, seq, past in [(1, 3, 4), (3, 5, 7)]:
        feeds_inputs = models.decoder_inputs(model, batch=batch, seq=seq, past=past, seed=batch)
        got = sess.run(None, _feeds(feeds_inputs))
        for g, e in zip(got, _expected(model, feeds_inputs)):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, atol=1e-4, rtol=1e-4)


def test_default_cache_strategy_off():
    model = models.decoder_model("gpt2")
    inputs = models.decoder_inputs(model, batch=2, seq=3, past=4)
    with pytest.raises((ExportCaptureError, DynamicShapeError), match="transformers_caches"):
        to_onnx(model, kwargs=inputs, dynamic_shapes=models.decoder_dynamic_shapes(model), capture_strategies=False)


def test_sequence_of_one_says_what_to_change():
    """transformers' sdpa computes ``is_causal = q_length > 1``: a sequence of 1 in the example cannot stay
    dynamic; the error says to give a longer example."""
    model = models.decoder_model("gpt2")
    inputs = models.decoder_inputs(model, batch=1, seq=1, past=1)
    with pytest.raises(ExportCaptureError, match="size >= 2 on dynamic axes"):
        to_onnx(model, kwargs=inputs, dynamic_shapes=models.decoder_dynamic_shapes(model))


def test_t5_encoder_decoder_cache_batch_of_one():
    model = models.t5_model()
    onx = to_onnx(model, kwargs=models.t5_inputs(model, batch=1, enc=5, dec=3, past=4))
    assert transformers.EncoderDecoderCache not in pytree.SUPPORTED_NODES
    names = [i.name for i in onx.graph.input]
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onx.graph.input}
    assert dims["input_ids"] == ["batch", "encoder_seq"] and dims["decoder_input_ids"] == ["batch", "seq"]
    assert dims["past_key_values.cross_attention_cache.0.key"][2] == "encoder_seq"
    assert "present.cross_attention_cache.1.value" in [o.name for o in onx.graph.output]
    sess = InferenceSession(onx)
    for batch in (1, 3):
        inputs = models.t5_inputs(model, batch=batch, enc=6, dec=2, past=5, seed=batch)
        feeds = {k: inputs[k] for k in ("input_ids", "attention_mask", "decoder_input_ids")}
        cache = inputs["past_key_values"]
        for part in ("self_attention_cache", "cross_attention_cache"):
            for i, layer in enumerate(getattr(cache, part).layers):
                feeds[f"past_key_values.{part}.{i}.key"] = layer.keys
                feeds[f"past_key_values.{part}.{i}.value"] = layer.values
        got = sess.run(None, {n: feeds[n] for n in names})
        with torch.no_grad():
            expected = model(**inputs).logits.numpy()
        np.testing.assert_allclose(got[0], expected, atol=1e-4, rtol=1e-4)


class FixedLength(transformers.PreTrainedModel):
    """A transformers model whose code fixes the sequence length: the inferred dynamic shapes cannot hold."""

    config_class = transformers.PretrainedConfig

    def __init__(self, config):
        super().__init__(config)
        self.embedding = torch.nn.Embedding(10, 4)

    def forward(self, input_ids):
        return self.embedding(input_ids).reshape(2, 12)


def test_inferred_shapes_fall_back_to_static():
    model = FixedLength(transformers.PretrainedConfig()).eval()
    ids = torch.randint(0, 10, (2, 3))
    with pytest.warns(CaptureStrategyWarning, match="usual dynamic shapes of a transformers model do not fit"):
        onx = to_onnx(model, kwargs={"input_ids": ids})
    assert [d.dim_value for d in onx.graph.input[0].type.tensor_type.shape.dim] == [2, 3]
    got = InferenceSession(onx).run(None, {"input_ids": ids})[0]
    np.testing.assert_allclose(got, model(ids).detach().numpy(), rtol=1e-6)


def test_batch_of_one_without_cache_holds_at_every_batch():
    """A Llama without cache, exported from a batch of 1 with a dynamic batch: under backed_size_oblivious a
    broadcast of the mask fixed the batch to 1 (the graph failed in plain onnxruntime at batch 2 while its input
    declared ``batch``); the capture is redone from the example repeated to batch 2, checked at 1 and 2, and said
    once. The graph equals eager at batches 1, 2 and 3 in a plain onnxruntime session."""
    import warnings

    import onnxruntime as ort

    config = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, (torch.randint(0, 100, (1, 6)),), dynamic_shapes=({0: "batch", 1: "seq"},))
    said = [str(w.message) for w in caught if issubclass(w.category, CaptureStrategyWarning)]
    assert len(said) == 1 and "repeated to size 2" in said[0], said
    assert [w.filename for w in caught if issubclass(w.category, CaptureStrategyWarning)] == [__file__]
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch, seq in [(1, 6), (2, 6), (3, 5)]:
        ids = torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(batch))
        got = sess.run(None, {"input_ids": ids.numpy()})[0]
        np.testing.assert_allclose(got, model(ids).logits.detach().numpy(), atol=1e-4, rtol=1e-4)
