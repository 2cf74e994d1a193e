"""Moving and repeating elements (ops/reorder.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, rand

X = torch.randn(2, 3, 4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.flip(x, [0, -1]),
        lambda x: torch.flip(x, []),
        lambda x: torch.fliplr(x),
        lambda x: torch.flipud(x),
        lambda x: torch.rot90(x),
        lambda x: torch.rot90(x, 1, [1, 2]),
        lambda x: torch.rot90(x, 2, [0, 2]),
        lambda x: torch.rot90(x, 3, [2, 1]),
        lambda x: torch.rot90(x, -1, [1, 2]),
        lambda x: torch.rot90(x, 4, [1, 2]),  # a full turn
        lambda x: torch.roll(x, 2, 2),
        lambda x: torch.roll(x, -1),  # flattened
        lambda x: torch.roll(x, (1, -2), (0, 2)),
        lambda x: torch.roll(x, 7, -1),  # more than the size
        lambda x: x.repeat(2, 1, 3),
        lambda x: x.repeat(2, 1, 1, 2),  # a new leading axis
        lambda x: x.repeat(1, 0, 1),  # empty
        lambda x: x.tile((2,)),  # fewer repeats than axes
        lambda x: x.tile((2, 1, 1, 1)),
        lambda x: torch.repeat_interleave(x, 2, dim=1),
        lambda x: torch.repeat_interleave(x, 3),  # flattened
        lambda x: torch.repeat_interleave(x, 2, dim=-1, output_size=8),
        lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 2]), dim=1),  # a count per element
        lambda x: torch.repeat_interleave(x[0, 0], torch.tensor([2, 1, 0, 3]), dim=0),
        pytest.param(
            lambda x: torch.repeat_interleave(x[0, 0], torch.tensor([2, 1, 0, 3])),
            marks=pytest.mark.xfail(
                strict=True,
                raises=ConversionError,
                reason="repeat_interleave.self_Tensor without dim (flattened input): "
                "'ValueError: the rank of repeat_interleave__Reshape is unknown'; with dim=0 it converts",
            ),
            id="repeat_interleave_tensor_no_dim",
        ),
    ],
)
def test_reorder(fn):
    check_model(Fn(fn), (X,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: F.pixel_shuffle(x, 2), X.reshape(1, 4, 2, 3)),
        (lambda x: F.pixel_unshuffle(x, 2), X.reshape(1, 2, 2, 6)),
        (lambda x: F.pixel_shuffle(x, 1), X.reshape(2, 3, 2, 2)),
        (lambda x: F.pixel_shuffle(x, 2), rand(2, 8, 2, 3, dtype=torch.uint8, high=200)),
        # no DepthToSpace kernel for these types in onnxruntime: Reshape, Transpose, Reshape
        (lambda x: F.pixel_shuffle(x, 2), rand(2, 8, 2, 3, dtype=torch.int64)),
        (lambda x: F.pixel_shuffle(x, 2), rand(3, 2, 8, 2, 3, dtype=torch.bool)),
        (lambda x: F.pixel_shuffle(x, 3), rand(0, 9, 2, 3, dtype=torch.int32)),
        (lambda x: F.pixel_unshuffle(x, 2), rand(1, 2, 4, 6, dtype=torch.int64)),
        (lambda x: F.channel_shuffle(x, 2), torch.arange(2 * 6 * 2, dtype=torch.float32).reshape(2, 6, 2)),
        (lambda x: F.channel_shuffle(x, 3), torch.arange(6 * 4, dtype=torch.float32).reshape(1, 6, 2, 2)),
        (lambda x: torch.nn.ChannelShuffle(2)(x), rand(1, 4, 3, dtype=torch.int64)),
        (lambda x: torch.native_channel_shuffle(x, 2), torch.randn(2, 4, 3)),
    ],
    ids=[
        "pixel_shuffle",
        "pixel_unshuffle",
        "pixel_shuffle_1",
        "pixel_shuffle_uint8",
        "pixel_shuffle_int64",
        "pixel_shuffle_bool_5d",
        "pixel_shuffle_int32_empty",
        "pixel_unshuffle_int64",
        "channel_shuffle_3d",
        "channel_shuffle_4d",
        "channel_shuffle_module",
        "native_channel_shuffle",
    ],
)
def test_shuffles(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_pixel_shuffle_dynamic(dtype):
    check_dynamic(lambda x: F.pixel_shuffle(x, 2), rand(2, 8, 3, 4, dtype=dtype), dynamic=(0, 2, 3))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float16])
def test_dtypes(dtype):
    x = rand(2, 3, 4, dtype=dtype)
    check_model(
        Fn(
            lambda x: (
                torch.flip(x, [1]),
                torch.rot90(x, 1, [1, 2]),
                torch.roll(x, 1, 2),
                x.repeat(1, 2, 1),
                x.repeat_interleave(2, 0),
            )
        ),
        (x,),
    )


def test_roll_dynamic():
    check_model(
        Fn(lambda x: torch.roll(x, 1, 1)),
        (torch.randn(2, 5),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 8),), None)],
    )


def test_dynamic_batch():
    def fn(x):
        return (
            torch.flip(x, [0, 2]),
            torch.rot90(x, 1, [1, 2]),
            torch.roll(x, -1, 0),
            x.repeat(2, 1, 1),
            x.repeat_interleave(2, 0),
            F.channel_shuffle(x, 3),
        )

    check_dynamic(fn, torch.randn(2, 6, 4), other=torch.randn(5, 6, 4))
