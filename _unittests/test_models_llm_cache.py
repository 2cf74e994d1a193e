"""LLMs with a DynamicCache (and T5 with an EncoderDecoderCache) export under bypass_export_some_errors
with dynamic batch, sequence and cache length, and match eager PyTorch on a second set of shapes."""

import pytest

pytest.importorskip("transformers")

from experimental.torch_interpreter import bypass_export_some_errors  # noqa: E402
from experimental.torch_interpreter.testing import llm_models as models  # noqa: E402
from experimental.torch_interpreter.testing.check import check_model  # noqa: E402


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "phi3", "gpt2"])
def test_decoder_with_cache(name):
    model = models.decoder_model(name)
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = check_model(
            model,
            (),
            adapt(models.decoder_inputs(model, batch=2, seq=3, past=4)),
            dynamic_shapes=models.decoder_dynamic_shapes(model),
            more_inputs=[((), adapt(models.decoder_inputs(model, batch=3, seq=5, past=7, seed=1)))],
            atol=1e-4,
        )
    inputs = {i.name: _dims(i) for i in onx.graph.input}
    outputs = {o.name: _dims(o) for o in onx.graph.output}
    assert inputs["input_ids"] == ["batch", "seq"]
    past = inputs["past_key_values.1.value"]
    assert past[0] == "batch" and past[2] == "past"
    assert list(outputs) == ["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]
    assert outputs["logits"] == ["batch", "seq", models.VOCAB]
    assert outputs["present.0.key"][2] == "past + seq"


def test_llama_with_cache_strict():
    model = models.decoder_model("llama")
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        check_model(
            model,
            (),
            adapt(models.decoder_inputs(model, batch=2, seq=3, past=4)),
            dynamic_shapes=models.decoder_dynamic_shapes(model),
            more_inputs=[((), adapt(models.decoder_inputs(model, batch=1, seq=2, past=9, seed=1)))],
            atol=1e-4,
            strict=True,
        )


def test_t5_with_encoder_decoder_cache():
    model = models.t5_model()
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = check_model(
            model,
            (),
            adapt(models.t5_inputs(model, batch=2, enc=5, dec=3, past=4)),
            dynamic_shapes=models.t5_dynamic_shapes(model),
            more_inputs=[((), adapt(models.t5_inputs(model, batch=3, enc=7, dec=2, past=6, seed=1)))],
            atol=1e-4,
        )
    names = [o.name for o in onx.graph.output]
    assert names[0] == "logits" and "present.self_attention_cache.0.key" in names
