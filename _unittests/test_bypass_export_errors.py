"""bypass_export_some_errors: each patch shows the failure without it and the success with it."""

import pytest
import torch
import torch.utils._pytree as pytree

transformers = pytest.importorskip("transformers")

from experimental.torch_interpreter import (  # noqa: E402
    DynamicShapeError,
    ExportCaptureError,
    bypass_export_some_errors,
    to_onnx,
)
from experimental.torch_interpreter.onnx_export_errors import patch_table  # noqa: E402
from experimental.torch_interpreter.patches import ALL_PATCHES  # noqa: E402
from experimental.torch_interpreter.testing.check import check_model  # noqa: E402


class JitIsinstance(torch.nn.Module):
    def forward(self, x):
        return x + 1 if torch.jit.isinstance(x, torch.Tensor) else x


class StaticAddress(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.ones(3))

    def forward(self, x):
        torch._dynamo.mark_static_address(self.cache)
        return x + self.cache


@pytest.mark.parametrize(
    "model, message",
    [(JitIsinstance(), "isinstance"), (StaticAddress(), "mark_static_address")],
    ids=["jit_isinstance", "mark_static_address"],
)
def test_strict_patches(model, message):
    x = torch.randn(3)
    with pytest.raises(ExportCaptureError, match=message):
        to_onnx(model, (x,), strict=True, capture_strategies=False)
    with bypass_export_some_errors() as adapt:
        check_model(model, adapt((x,)), strict=True, capture_strategies=False)  # strict itself, no fallback
    assert torch.jit.isinstance.__name__ == "isinstance" and not hasattr(torch.jit.isinstance, "__aten2onnx_patch__")


class SumCache(torch.nn.Module):
    def forward(self, x, cache):
        return x + sum(t.sum() for t in pytree.tree_leaves(cache))


def _dynamic_cache(batch=2, past=3):
    cache = transformers.DynamicCache()
    for layer in range(2):
        cache.update(torch.randn(batch, 2, past, 4), torch.randn(batch, 2, past, 4), layer)
    return cache


def test_dynamic_cache_registration():
    x, cache = torch.randn(2), _dynamic_cache()
    with pytest.raises(ExportCaptureError, match="Unsupported input type.*DynamicCache"):
        to_onnx(SumCache(), (x, cache), capture_strategies=False)
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = to_onnx(SumCache(), adapt((x, cache)))
    assert transformers.DynamicCache not in pytree.SUPPORTED_NODES, "the registration is undone"
    assert [i.name for i in onx.graph.input][1:] == ["cache_0_key", "cache_0_value", "cache_1_key", "cache_1_value"]


def test_encoder_decoder_cache_registration():
    x = torch.randn(2)
    cache = transformers.EncoderDecoderCache(_dynamic_cache(), _dynamic_cache(past=5))
    with pytest.raises(ExportCaptureError, match="Unsupported input type.*EncoderDecoderCache"):
        to_onnx(SumCache(), (x, cache), capture_strategies=False)
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        onx = check_model(SumCache(), adapt((x, cache)))
    assert len(onx.graph.input) == 9


def test_undone_when_the_body_raises_and_nesting_is_safe():
    original = torch.jit.isinstance
    with pytest.raises(RuntimeError, match="boom"):
        with bypass_export_some_errors(patch_transformers=True):
            with bypass_export_some_errors(patch_transformers=True):
                assert torch.jit.isinstance is not original
            assert torch.jit.isinstance is not original, "the inner context must not undo the outer's patch"
            assert transformers.DynamicCache in pytree.SUPPORTED_NODES
            raise RuntimeError("boom")
    assert torch.jit.isinstance is original
    assert transformers.DynamicCache not in pytree.SUPPORTED_NODES


def test_adapt_copies_caches():
    cache = _dynamic_cache()
    with bypass_export_some_errors(patch_transformers=True) as adapt:
        inputs = adapt({"x": torch.randn(2), "past_key_values": cache})
    assert inputs["past_key_values"] is not cache
    torch.testing.assert_close(inputs["past_key_values"].layers[0].keys, cache.layers[0].keys)


class Past(torch.nn.Module):
    def forward(self, x, past):
        return torch.cat([past, x], dim=1).mean(dim=1)


def test_backed_size_oblivious_keeps_a_past_of_one_dynamic():
    x, past = torch.randn(2, 3), torch.randn(2, 1)
    ds = ({1: "seq"}, {1: "past"})
    with pytest.raises(DynamicShapeError, match="past") as info:
        to_onnx(Past(), (x, past), dynamic_shapes=ds, capture_strategies=False)
    assert "backed_size_oblivious=True" in str(info.value)
    with bypass_export_some_errors(backed_size_oblivious=True):
        onx = check_model(Past(), (x, past), dynamic_shapes=ds, more_inputs=[((torch.randn(2, 4), torch.randn(2, 6)), None)])
    dims = [d.dim_param for d in onx.graph.input[1].type.tensor_type.shape.dim]
    assert dims[1] == "past"


def test_patch_table_documents_every_patch():
    table = patch_table()
    doc = bypass_export_some_errors.__doc__
    for patch in ALL_PATCHES:
        assert patch.name in table and patch.name in doc
        assert patch.versions and patch.fixes and patch.replaces
