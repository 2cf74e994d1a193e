"""Padding and sliding windows (ops/padding_windows.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, rand

X1, X2, X3 = torch.randn(2, 2, 5), torch.randn(2, 2, 4, 5), torch.randn(2, 2, 3, 4, 5)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "pad, x",
    [((1, 2, 2, 1), X2), ((2, 3), X1), ((1, 0, 0, 2, 2, 1), X3), ((0, 0, 1, 3), X2)],
    ids=["2d", "1d", "3d", "one_axis"],
)
def test_pad_modes(mode, pad, x):
    check_model(Fn(lambda x: F.pad(x, pad, mode=mode)), (x,))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: F.pad(x, (1, 2), value=-1.5), X2),
        (lambda x: F.pad(x, (-1, 2, 0, -2)), X2),  # negative: crops
        (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1)), X2),  # pads the channel axis too
        (lambda x: F.pad(x, (2, 1), value=7), rand(2, 3, dtype=torch.int64)),
        (lambda x: F.pad(x, (1, 1), value=True), rand(2, 3, dtype=torch.bool)),
        (lambda x: F.pad(x, (1, 1, 2, 0), mode="reflect"), X2[0]),  # unbatched
        (lambda x: F.pad(x, (4, 4), mode="reflect"), X1),  # the largest reflect padding (size - 1)
        (lambda x: F.pad(x, (5, 0), mode="circular"), X1),  # the whole size
        (lambda x: F.pad(x, (-1, 2), mode="replicate"), X1),
        (lambda x: F.pad(x, (0, 0)), X1),
        (lambda x: torch.constant_pad_nd(x, [1, 2, 3, 0]), X1),
    ],
    ids=[
        "value",
        "negative",
        "channel",
        "int64",
        "bool",
        "reflect_unbatched",
        "reflect_max",
        "circular_whole",
        "replicate_negative",
        "zero",
        "constant_pad_nd",
    ],
)
def test_pad_cases(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_dynamic(mode):
    check_dynamic(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode), X2, dynamic=(0, 2, 3))


def test_pad_float16():
    check_model(Fn(lambda x: (F.pad(x, (1, 2, 0, 1), mode="reflect"), F.pad(x, (1, 1), value=0.5))), (X2.half(),))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: x.unfold(0, 3, 2), torch.arange(10, dtype=torch.float32)),
        (lambda x: x.unfold(0, 3, 4), torch.arange(10, dtype=torch.float32)),  # step > size: gaps
        (lambda x: x.unfold(-1, 2, 1), X2),
        (lambda x: x.unfold(2, 4, 4), X2),  # one window
        (lambda x: x.unfold(0, 1, 1), X2[0, 0]),
        (lambda x: x.unfold(1, 2, 2), rand(3, 5, dtype=torch.int64)),
        (lambda x: x.unfold(0, 2, 1), torch.tensor([1.0, 2.0])),
    ],
    ids=["1d", "gaps", "neg_dim", "one_window", "size1", "int64", "exact"],
)
def test_tensor_unfold(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 2, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3), "dilation": (1, 2)},
        {"kernel_size": 3, "stride": (2, 1), "padding": (1, 0), "dilation": 1},
    ],
)
def test_im2col_and_col2im(kwargs):
    img = torch.randn(2, 3, 5, 6)
    check_model(Fn(lambda x: F.unfold(x, **kwargs)), (img,))
    cols = F.unfold(img, **kwargs)
    check_model(Fn(lambda c: F.fold(c, (5, 6), **kwargs)), (cols,))  # overlapping windows add up


def test_unfold_fold_modules_and_unbatched():
    unfold, fold = torch.nn.Unfold(2, padding=1), torch.nn.Fold((4, 5), 2, padding=1)
    check_model(unfold, (torch.randn(3, 4, 5),))  # unbatched
    check_model(fold, (unfold(torch.randn(2, 3, 4, 5)),))
    check_model(fold, (unfold(torch.randn(3, 4, 5)),))


def test_tensor_unfold_dynamic():
    check_dynamic(lambda x: (x.unfold(3, 2, 1), x.unfold(1, 2, 2)), X2, dynamic=(0, 2))


@pytest.mark.parametrize(
    "kwargs", [{"kernel_size": 2}, {"kernel_size": (2, 3), "padding": 1, "stride": 2}, {"kernel_size": 2, "dilation": 2}]
)
def test_im2col_dynamic(kwargs):
    """The window positions computed in the graph: batch, height and width dynamic (ConvBERT's unfold)."""
    check_dynamic(lambda x: F.unfold(x, **kwargs), torch.randn(2, 3, 7, 8), dynamic=(0, 2, 3))


def test_im2col_dynamic_column_windows():
    """ConvBERT: a ``(k, 1)`` kernel over ``[batch, hidden, seq, 1]`` padded along the sequence."""
    check_dynamic(lambda x: F.unfold(x, (3, 1), padding=(1, 0)), torch.randn(2, 4, 7, 1), dynamic=(0, 2), grow=4)
