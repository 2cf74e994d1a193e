"""Gathers and scatters that test_ops_indexing.py and test_ops_conv_pool.py leave out: embedding_bag
(ops/indexing.py) and max_unpool (ops/pooling.py, a scatter of the pooled values at their indices)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model

torch.manual_seed(0)
WEIGHT = torch.randn(10, 3)
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
OFFSETS = torch.tensor([0, 4])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    "kwargs, indices, offsets",
    [
        ({}, INDICES, OFFSETS),
        ({}, INDICES.reshape(2, 4), None),  # 2-D: one bag a row
        ({}, INDICES, torch.tensor([0, 0, 3, 8])),  # empty bags: zeros
        ({"include_last_offset": True}, INDICES, torch.tensor([0, 3, 8])),
        ({"padding_idx": 2}, INDICES, OFFSETS),  # index 2 left out of the bags
        ({}, INDICES.int(), OFFSETS.int()),
    ],
    ids=["offsets", "2d", "empty_bags", "include_last_offset", "padding_idx", "int32"],
)
def test_embedding_bag(mode, kwargs, indices, offsets):
    if offsets is None:
        check_model(Fn(lambda i, w: F.embedding_bag(i, w, mode=mode, **kwargs)), (indices, WEIGHT))
    else:
        check_model(Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode=mode, **kwargs)), (indices, offsets, WEIGHT))


def test_embedding_bag_weights_module_and_float16():
    fn = lambda i, o, w, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p)  # noqa: E731
    check_model(Fn(fn), (INDICES, OFFSETS, WEIGHT, torch.rand(8)))
    check_model(torch.nn.EmbeddingBag(10, 3, mode="mean"), (INDICES.reshape(2, 4),))
    check_model(Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode="mean")), (INDICES, OFFSETS, WEIGHT.half()), atol=1e-2)


def test_embedding_bag_dynamic_indices():
    """The number of indices changes, the number of bags (the size of offsets) is fixed."""
    check_model(
        Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode="mean")),
        (INDICES, OFFSETS, WEIGHT),
        dynamic_shapes=({0: "n"}, None, None),
        more_inputs=[((torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9]), torch.tensor([0, 6]), WEIGHT), None)],
    )


def test_embedding_bag_dynamic_bags_is_reported():
    with pytest.raises(ConversionError, match="dynamic number of bags"):
        to_onnx(
            Fn(lambda i, o, w: F.embedding_bag(i, w, o)),
            (INDICES, OFFSETS, WEIGHT),
            dynamic_shapes=(None, {0: "bags"}, None),
        )


def _pool_unpool(pool, unpool, *args, **kwargs):
    return lambda x: unpool(*pool(x, *args, return_indices=True), *args, **kwargs)


@pytest.mark.parametrize(
    "fn, x",
    [
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 2), torch.randn(2, 3, 4, 6)),
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 2, output_size=(5, 7)), torch.randn(2, 3, 5, 7)),  # odd sizes
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 3, 2, 1), torch.randn(1, 2, 5, 5)),  # stride and padding
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 3, 1), torch.randn(1, 2, 5, 5)),  # overlapping: repeated indices
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 2), torch.randn(3, 4, 6)),  # unbatched
        (_pool_unpool(F.max_pool1d, F.max_unpool1d, 2), torch.randn(2, 3, 8)),
        (_pool_unpool(F.max_pool3d, F.max_unpool3d, 2), torch.randn(1, 2, 4, 4, 6)),
        (_pool_unpool(F.max_pool3d, F.max_unpool3d, 2, 1), torch.randn(1, 2, 3, 4, 4)),
        (lambda x: torch.nn.MaxUnpool2d(2)(*torch.nn.MaxPool2d(2, return_indices=True)(x)), torch.randn(2, 3, 4, 6)),
        (_pool_unpool(F.max_pool2d, F.max_unpool2d, 2), torch.randn(2, 3, 4, 6).half()),
    ],
    ids=[
        "2d",
        "output_size",
        "stride_padding",
        "overlapping",
        "unbatched",
        "1d",
        "3d",
        "3d_stride",
        "module",
        "float16",
    ],
)
def test_max_unpool(fn, x):
    check_model(Fn(fn), (x,))


def test_max_unpool_indices_as_inputs():
    values, indices = F.max_pool2d(torch.randn(2, 3, 4, 6), 2, return_indices=True)
    check_model(Fn(lambda v, i: F.max_unpool2d(v, i, 2)), (values, indices))
    check_model(Fn(lambda v, i: F.max_unpool2d(v, i, 2)), (torch.tensor([[[[5.0, 7.0]]]]), torch.tensor([[[[1, 6]]]])))


def test_max_unpool_dynamic_batch():
    check_dynamic(_pool_unpool(F.max_pool2d, F.max_unpool2d, 2), torch.randn(2, 3, 4, 6))
