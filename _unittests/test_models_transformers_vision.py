"""transformers' detection and segmentation models (DETR, RT-DETR, OWL-ViT, SAM): small random configs exported
with dynamic batch and image sizes (or numbers of queries and points), run in onnxruntime at other sizes and
compared with eager PyTorch output by output."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.runtime import InferenceSession
from experimental.torch_interpreter.testing.transformers_vision import (
    detr_model,
    image,
    owlvit_inputs,
    owlvit_model,
    rt_detr_model,
    sam_inputs,
    sam_model,
)


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


def test_detr_dynamic_batch_and_image_size():
    model = detr_model()
    onx = to_onnx(model, (), {"pixel_values": image(2, 64, 96)},
                  dynamic_shapes={"pixel_values": {0: "batch", 2: "height", 3: "width"}})
    for shape in [(2, 64, 96), (1, 96, 64), (3, 80, 128)]:
        _check(model, onx, {"pixel_values": image(*shape)})


#: RT-DETR's outputs computed for every anchor, before its top-k selection of queries
_RT_DETR_ANCHORS = ("enc_outputs_class", "enc_outputs_coord_logits", "encoder_last_hidden_state.0",
                    "encoder_last_hidden_state.1", "encoder_last_hidden_state.2")


@pytest.fixture(scope="module")
def rt_detr():
    """RT-DETR exported once with dynamic batch, height and width."""
    model = rt_detr_model()
    onx = to_onnx(model, (), {"pixel_values": image(2, 64, 96)},
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
    for shape in [(2, 64, 96), (1, 96, 64), (3, 128, 128), (2, 96, 96)]:
        got, expected = _run(model, onx, {"pixel_values": image(*shape)})
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
    x = image(2, 80, 112)
    with pytest.raises(RuntimeError), torch.no_grad():
        model(pixel_values=x)
    with pytest.raises(Exception, match="Concat"):
        InferenceSession(onx.SerializeToString()).run(None, {"pixel_values": x.numpy()})


def test_owlvit_dynamic_images_and_queries():
    model = owlvit_model()
    onx = to_onnx(model, (), owlvit_inputs(2, 2), dynamic_shapes={
        "input_ids": {0: "texts"}, "attention_mask": {0: "texts"}, "pixel_values": {0: "images"}})
    for images, queries in [(2, 2), (3, 2), (2, 3)]:
        _check(model, onx, owlvit_inputs(images, queries), atol=5e-4)


def test_sam_dynamic_batch_and_points():
    model = sam_model()
    onx = to_onnx(model, (), sam_inputs(2, 2), dynamic_shapes={
        "pixel_values": {0: "batch"}, "input_points": {0: "batch", 2: "points"}})
    for batch, points in [(2, 2), (1, 3), (3, 1)]:
        _check(model, onx, sam_inputs(batch, points), atol=5e-4)

