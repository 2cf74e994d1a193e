"""transformers' detection and segmentation models (DETR, RT-DETR, OWL-ViT, SAM): small random configs exported
with dynamic batch and image sizes (or numbers of queries and points), run in onnxruntime at other sizes and
compared with eager PyTorch output by output."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.runtime import InferenceSession


def _outputs(out, prefix: str = "") -> dict[str, torch.Tensor]:
    """The tensors of a transformers output (nested outputs and tuples included), named as ``to_onnx`` names the
    graph's outputs."""
    items = out.items() if isinstance(out, dict) else enumerate(out)
    flat = {}
    for key, value in items:
        if isinstance(value, torch.Tensor):
            flat[f"{prefix}{key}"] = value
        elif isinstance(value, (dict, tuple, list)):
            flat.update(_outputs(value, f"{prefix}{key}."))
    return flat


def _run(model, onx, inputs: dict[str, torch.Tensor]) -> tuple[dict[str, np.ndarray], dict[str, torch.Tensor]]:
    sess = InferenceSession(onx.SerializeToString())
    got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})
    with torch.no_grad():
        expected = _outputs(model(**inputs))
    names = [o.name for o in onx.graph.output]
    assert set(names) == set(expected), (names, list(expected))
    return dict(zip(names, got)), expected


def _check(model, onx, inputs, names=None, atol=1e-4) -> None:
    got, expected = _run(model, onx, inputs)
    for name in names or expected:
        np.testing.assert_allclose(got[name], expected[name].numpy(), atol=atol, rtol=1e-4, err_msg=name)


def _perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """transformers initializes some heads to constants (every query scoring the same): noise on every weight."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def _small_resnet(config_class, stages):
    return config_class(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], out_features=stages)


def test_detr_dynamic_batch_and_image_size():
    torch.manual_seed(0)
    config = transformers.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=_small_resnet(transformers.ResNetConfig, ["stage4"]), d_model=32, encoder_layers=1,
        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, num_queries=10)
    model = _perturbed(transformers.DetrForObjectDetection(config))
    onx = to_onnx(model, (), {"pixel_values": torch.randn(2, 3, 64, 96)},
                  dynamic_shapes={"pixel_values": {0: "batch", 2: "height", 3: "width"}})
    for shape in [(2, 3, 64, 96), (1, 3, 96, 64), (3, 3, 80, 128)]:
        _check(model, onx, {"pixel_values": torch.randn(*shape)})


def _rt_detr():
    torch.manual_seed(0)
    config = transformers.RTDetrConfig(
        use_pretrained_backbone=False,
        backbone_config=_small_resnet(transformers.RTDetrResNetConfig, ["stage2", "stage3", "stage4"]),
        encoder_hidden_dim=32, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
        encoder_in_channels=[32, 64, 128], num_feature_levels=3, decoder_in_channels=[32, 32, 32])
    return _perturbed(transformers.RTDetrForObjectDetection(config))


#: RT-DETR's outputs computed for every anchor, before its top-k selection of queries
_RT_DETR_ANCHORS = ("enc_outputs_class", "enc_outputs_coord_logits", "encoder_last_hidden_state.0",
                    "encoder_last_hidden_state.1", "encoder_last_hidden_state.2")


@pytest.fixture(scope="module")
def rt_detr():
    """RT-DETR exported once with dynamic batch, height and width."""
    model = _rt_detr()
    onx = to_onnx(model, (), {"pixel_values": torch.randn(2, 3, 64, 96)},
                  dynamic_shapes={"pixel_values": {0: "batch", 2: "height", 3: "width"}})
    return model, onx


def test_rt_detr_dynamic_batch_and_image_size(rt_detr):
    """RT-DETR makes its anchors from ``torch_int(height)`` (the ``transformers_sizes`` patch keeps it symbolic)
    and its batch from ``len(x)`` (a Python int when tracing Python: the strict capture keeps it symbolic).
    Random weights score the anchors within a few 1e-6 of each other, below float32's noise: the queries the
    top-k keeps, and so the decoder's outputs, are compared where onnxruntime kept eager's queries; the
    outputs for every anchor, before the selection, everywhere."""
    model, onx = rt_detr
    strategies = {p.key: p.value for p in onx.metadata_props}["aten2onnx.capture.strategies"]
    assert "transformers_sizes" in strategies and "other_mode" in strategies, strategies
    same_queries = 0
    torch.manual_seed(0)
    for shape in [(2, 3, 64, 96), (1, 3, 96, 64), (3, 3, 128, 128), (2, 3, 96, 96)]:
        got, expected = _run(model, onx, {"pixel_values": torch.randn(*shape)})
        for name in _RT_DETR_ANCHORS:
            np.testing.assert_allclose(got[name], expected[name].numpy(), atol=1e-4, rtol=1e-4, err_msg=name)
        if np.allclose(got["enc_topk_bboxes"], expected["enc_topk_bboxes"].numpy(), atol=1e-5):
            same_queries += 1
            for name in expected:
                np.testing.assert_allclose(got[name], expected[name].numpy(), atol=1e-4, rtol=1e-4, err_msg=name)
    assert same_queries >= 2, same_queries


def test_rt_detr_at_a_size_eager_refuses_fails_clearly(rt_detr):
    """At a size whose feature maps do not line up (not a multiple of 32), eager PyTorch raises; onnxruntime
    raises too (in a Concat), it does not return numbers."""
    model, onx = rt_detr
    x = torch.randn(2, 3, 80, 112)
    with pytest.raises(RuntimeError), torch.no_grad():
        model(pixel_values=x)
    with pytest.raises(Exception, match="Concat"):
        InferenceSession(onx.SerializeToString()).run(None, {"pixel_values": x.numpy()})


def test_owlvit_dynamic_images_and_queries():
    torch.manual_seed(0)
    config = transformers.OwlViTConfig(
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         vocab_size=100, max_position_embeddings=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=64, patch_size=16),
        projection_dim=32)
    model = _perturbed(transformers.OwlViTForObjectDetection(config))

    def inputs(images, queries):
        ids = torch.randint(0, 100, (images * queries, 16))
        return {"input_ids": ids, "pixel_values": torch.randn(images, 3, 64, 64),
                "attention_mask": torch.ones_like(ids)}

    onx = to_onnx(model, (), inputs(2, 2), dynamic_shapes={
        "input_ids": {0: "texts"}, "attention_mask": {0: "texts"}, "pixel_values": {0: "images"}})
    for images, queries in [(2, 2), (3, 2), (2, 3)]:
        _check(model, onx, inputs(images, queries), atol=5e-4)


def test_sam_dynamic_batch_and_points():
    torch.manual_seed(0)
    config = transformers.SamConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=64, patch_size=16, global_attn_indexes=[1], window_size=2, mlp_dim=64),
        prompt_encoder_config=dict(image_size=64, patch_size=16), mask_decoder_config=dict(num_hidden_layers=1))
    model = _perturbed(transformers.SamModel(config))

    def inputs(batch, points):
        return {"pixel_values": torch.randn(batch, 3, 64, 64), "input_points": torch.rand(batch, 1, points, 2) * 64}

    onx = to_onnx(model, (), inputs(2, 2), dynamic_shapes={
        "pixel_values": {0: "batch"}, "input_points": {0: "batch", 2: "points"}})
    for batch, points in [(2, 2), (1, 3), (3, 1)]:
        _check(model, onx, inputs(batch, points), atol=5e-4)
