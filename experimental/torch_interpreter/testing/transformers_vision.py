"""transformers' vision and audio models from small random configs (no model hub), shared by the tests and the vision
zoo (``benchmarks/vision_zoo.py --source transformers``): each builder gives the model; :data:`ZOO` wraps each into a
module of positional tensors returning the output's tensors, with its example, a second input of other sizes and the
axes declared dynamic.

Weights: transformers initializes some heads to constants (every DETR-like query scoring the same); noise of 0.1
on every weight separates them. RT-DETR still scores its anchors within ~1e-6 of each other with random weights:
its top-k of queries then depends on float32 noise, so its row compares the logits and the scores of every anchor
(before the selection), not the boxes of the selected queries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers

B, H, W = "batch", "height", "width"


class Outputs(torch.nn.Module):
    """``model(**dict(zip(names, args)))``'s tensors ``keys`` (every tensor when empty), as a tuple."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...], keys: tuple[str, ...] = (), **fixed: Any):
        super().__init__()
        self.model, self.names, self.keys, self.fixed = model, names, keys, fixed

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.names, args)), **self.fixed)
        keys = self.keys or [k for k, v in out.items() if isinstance(v, torch.Tensor)]
        return tuple(out[k] for k in keys)


def noisy(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` in eval mode with noise of 0.1 on every weight (transformers initializes some heads to constants).

    >>> noisy(torch.nn.Linear(2, 2)).training
    False
    """
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def _resnet(config_class: type, stages: list[str]) -> Any:
    return config_class(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], out_features=stages)


def image(b: int, h: int, w: int) -> torch.Tensor:
    """A batch of ``b`` random images of ``h`` x ``w`` pixels (the same for the same sizes).

    >>> image(2, 8, 6).shape
    torch.Size([2, 3, 8, 6])
    """
    return torch.randn(b, 3, h, w, generator=torch.Generator().manual_seed(h * w + b))


def detr_model() -> torch.nn.Module:
    """A DETR detector (ResNet backbone, one encoder and decoder layer, 10 queries) with noisy random weights."""
    torch.manual_seed(0)
    cfg = transformers.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=_resnet(transformers.ResNetConfig, ["stage4"]), d_model=32, encoder_layers=1,
        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, num_queries=10)
    return noisy(transformers.DetrForObjectDetection(cfg))


def detr():
    model = Outputs(detr_model(), ("pixel_values",), ("logits", "pred_boxes"))
    return model, [image(2, 64, 96)], [image(1, 96, 64)], ({0: B, 2: H, 3: W},)


def rt_detr_model() -> torch.nn.Module:
    """An RT-DETR detector (ResNet backbone at strides 8, 16, 32; 10 queries) with noisy random weights."""
    torch.manual_seed(0)
    cfg = transformers.RTDetrConfig(
        use_pretrained_backbone=False,
        backbone_config=_resnet(transformers.RTDetrResNetConfig, ["stage2", "stage3", "stage4"]),
        encoder_hidden_dim=32, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
        encoder_in_channels=[32, 64, 128], num_feature_levels=3, decoder_in_channels=[32, 32, 32])
    return noisy(transformers.RTDetrForObjectDetection(cfg))


def rt_detr():
    model = Outputs(rt_detr_model(), ("pixel_values",), ("logits", "enc_outputs_class", "enc_outputs_coord_logits"))
    return model, [image(2, 64, 96)], [image(1, 128, 64)], ({0: B, 2: H, 3: W},)


def owlvit_model() -> torch.nn.Module:
    """An OWL-ViT detector (one text and one vision layer, 64x64 images) with noisy random weights."""
    torch.manual_seed(0)
    cfg = transformers.OwlViTConfig(
        text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         vocab_size=100, max_position_embeddings=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=64, patch_size=16), projection_dim=32)
    return noisy(transformers.OwlViTForObjectDetection(cfg))


def owlvit_inputs(images: int, queries: int) -> dict[str, torch.Tensor]:
    """OWL-ViT's inputs: ``images`` images and ``queries`` texts for each."""
    ids = torch.randint(0, 100, (images * queries, 16), generator=torch.Generator().manual_seed(images))
    return {"input_ids": ids, "pixel_values": image(images, 64, 64), "attention_mask": torch.ones_like(ids)}


def owlvit():
    names = ("input_ids", "pixel_values", "attention_mask")
    model = Outputs(owlvit_model(), names, ("logits", "pred_boxes"))

    def inputs(images: int, queries: int) -> list[torch.Tensor]:
        return [owlvit_inputs(images, queries)[name] for name in names]

    return model, inputs(2, 2), inputs(3, 2), ({0: "texts"}, {0: "images"}, {0: "texts"})


def sam_model() -> torch.nn.Module:
    """A SAM model (two vision layers, 64x64 images, one mask decoder layer) with noisy random weights."""
    torch.manual_seed(0)
    cfg = transformers.SamConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=64, patch_size=16, global_attn_indexes=[1], window_size=2, mlp_dim=64),
        prompt_encoder_config=dict(image_size=64, patch_size=16), mask_decoder_config=dict(num_hidden_layers=1))
    return noisy(transformers.SamModel(cfg))


def sam_inputs(batch: int, points: int) -> dict[str, torch.Tensor]:
    """SAM's inputs: ``batch`` images, ``points`` points for each."""
    points_xy = torch.rand(batch, 1, points, 2, generator=torch.Generator().manual_seed(points)) * 64
    return {"pixel_values": image(batch, 64, 64), "input_points": points_xy}


def sam():
    model = Outputs(sam_model(), ("pixel_values", "input_points"), ("iou_scores", "pred_masks"))

    def inputs(b: int, points: int) -> list[torch.Tensor]:
        return list(sam_inputs(b, points).values())

    return model, inputs(2, 2), inputs(1, 3), ({0: B}, {0: B, 2: "points"})


def _vit_like(config: Any, model_class: type, size: tuple[int, int], second: tuple[int, int], **fixed: Any):
    model = Outputs(noisy(model_class(config)), ("pixel_values",), ("last_hidden_state",), **fixed)
    return model, [image(2, *size)], [image(1, *second)], ({0: B, 2: H, 3: W},)


def vit():
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=8)
    return _vit_like(cfg, transformers.ViTModel, (48, 64), (64, 40), interpolate_pos_encoding=True)


def dinov2():
    cfg = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                    image_size=32, patch_size=8)
    return _vit_like(cfg, transformers.Dinov2Model, (48, 64), (64, 40))


def swin():
    cfg = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                  window_size=4)
    return _vit_like(cfg, transformers.SwinModel, (64, 64), (48, 80))


def convnext():
    cfg = transformers.ConvNextConfig(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])
    model = Outputs(noisy(transformers.ConvNextForImageClassification(cfg)), ("pixel_values",), ("logits",))
    return model, [image(2, 64, 64)], [image(1, 96, 64)], ({0: B, 2: H, 3: W},)


def segformer():
    cfg = transformers.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                       num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=5,
                                       patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])
    model = Outputs(noisy(transformers.SegformerForSemanticSegmentation(cfg)), ("pixel_values",), ("logits",))
    return model, [image(2, 64, 64)], [image(1, 96, 64)], ({0: B, 2: H, 3: W},)


def mobilevit():
    cfg = transformers.MobileViTConfig(image_size=64, hidden_sizes=[32, 40, 48],
                                       neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])
    model = Outputs(noisy(transformers.MobileViTForImageClassification(cfg)), ("pixel_values",), ("logits",))
    return model, [image(2, 64, 64)], [image(1, 96, 128)], ({0: B, 2: H, 3: W},)


def whisper_encoder():
    cfg = transformers.WhisperConfig(d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=2,
                                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                     num_mel_bins=16, max_source_positions=50)
    model = Outputs(noisy(transformers.WhisperModel(cfg).get_encoder()), ("input_features",), ("last_hidden_state",))
    g = torch.Generator().manual_seed(0)
    return model, [torch.randn(2, 16, 100, generator=g)], [torch.randn(3, 16, 100, generator=g)], ({0: B},)


def wav2vec2():
    cfg = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                      conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=20)
    model = Outputs(noisy(transformers.Wav2Vec2ForCTC(cfg)), ("input_values",), ("logits",))
    g = torch.Generator().manual_seed(0)
    return model, [torch.randn(2, 1600, generator=g)], [torch.randn(1, 2400, generator=g)], ({0: B, 1: "samples"},)


#: name -> builder of (model of positional tensors, example, second input, dynamic shapes)
ZOO: dict[str, Callable[[], tuple]] = {
    f.__name__: f for f in (detr, rt_detr, owlvit, sam, vit, dinov2, swin, convnext, segformer, mobilevit,
                            whisper_encoder, wav2vec2)
}
