"""Bitwise and logical ops (ops/logical.py), on bool and integer tensors and mixed dtypes. test_ops_elementwise.py
checks the ONNX op of each bitwise op per dtype; this file the values on promotions, signs, scalars and NaN."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.errors import UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_model

aten = torch.ops.aten
NAN = float("nan")
I = torch.tensor([0, 3, -5, 12])
J = torch.tensor([1, 6, 2, -12])
B = torch.tensor([True, False, True, False])
U8 = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
I8 = torch.tensor([0, -1, 127, -128], dtype=torch.int8)


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.bitwise_and, (I, J)),
        (torch.bitwise_or, (I.int(), J.int())),
        (torch.bitwise_xor, (B, ~B)),
        (torch.bitwise_not, (I,)),
        (torch.bitwise_not, (I8,)),
        (torch.bitwise_not, (U8,)),
        (torch.bitwise_and, (I.int(), J)),  # int32 & int64 -> int64
        (torch.bitwise_or, (B, J)),  # bool | int64 -> int64
        (torch.bitwise_xor, (U8, I8)),  # uint8 ^ int8 -> int16
        (torch.bitwise_and, (I8, U8)),
        (lambda a: a & 1, (B,)),  # bool & int scalar -> int64
        (lambda a: torch.bitwise_and(a, -4), (I,)),  # a negative mask
        (lambda a: a | 8, (I.int(),)),  # the scalar keeps int32
        (lambda a: torch.bitwise_xor(a, True), (B,)),
        (lambda a: torch.bitwise_and(a, torch.tensor(6)), (I,)),  # a 0-D tensor
        (lambda a: aten.bitwise_and.Scalar_Tensor(5, a), (I,)),
        (lambda a: aten.bitwise_or.Scalar_Tensor(5, a), (I,)),
        (lambda a: aten.bitwise_xor.Scalar_Tensor(5, a), (I,)),
        (lambda a, b: aten.__and__.Tensor(a, b), (I, J)),
        (lambda a, b: aten.__or__.Tensor(a, b), (I, J)),
        (lambda a, b: aten.__xor__.Tensor(a, b), (B, J > 0)),
        (lambda a, b: a.clone().bitwise_and_(b), (I, J)),
        (lambda a, b: torch.bitwise_or(a, b), (I[:, None], J[:3])),  # broadcast
    ],
)
def test_bitwise(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.logical_and, (I, B)),
        (torch.logical_or, (I.float(), J)),
        (torch.logical_xor, (B, J)),
        (torch.logical_not, (I,)),
        (torch.logical_and, (torch.tensor([0.0, 1.5]).half(), torch.tensor([True, True]))),
        (torch.logical_xor, (U8, torch.tensor([0, 0, 3, 0], dtype=torch.uint8))),
        (torch.logical_or, (torch.tensor([[0], [1]]), torch.tensor([0.0, 2.0, 0.0]))),  # broadcast
        (torch.logical_and, (torch.tensor(3), torch.tensor([0, 1]))),  # 0-D
        (lambda a, b: a.clone().logical_and_(b), (B, J)),
        (lambda a, b: torch.logical_not(a) & torch.logical_or(a, b), (B, I)),
    ],
)
def test_logical(fn, args):
    check_model(Fn(fn), args)


def test_logical_nan_and_signed_zero():
    # NaN is true, -0.0 is false
    a, b = torch.tensor([NAN, 0.0, -0.0, 2.0]), torch.tensor([0.0, NAN, 1.0, 0.0])
    fn = lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b), torch.logical_not(a))  # noqa: E731
    check_model(Fn(fn), (a, b))


def test_dynamic():
    def fn(a, b):
        return a & b, a | 3, ~a, torch.logical_xor(a, b), torch.logical_not(b)

    check_model(
        Fn(fn),
        (I, J),
        dynamic_shapes=({0: "n"}, {0: "n"}),
        more_inputs=[((torch.tensor([7, -8, 1]), torch.tensor([5, 5, 0])), None)],
    )


_NO_SHIFT = pytest.mark.xfail(strict=True, raises=UnsupportedOpError, reason="the shift ops have no converter")


@pytest.mark.parametrize(
    "fn, args",
    [
        pytest.param(lambda a, b: a << b, (I, J.abs() % 4), marks=_NO_SHIFT, id="lshift"),
        pytest.param(lambda a: a >> 1, (I,), marks=_NO_SHIFT, id="rshift_scalar"),
        pytest.param(torch.bitwise_left_shift, (I, J.abs() % 4), marks=_NO_SHIFT, id="bitwise_left_shift"),
        pytest.param(
            torch.bitwise_right_shift,
            (U8, torch.tensor([1, 2, 3, 7], dtype=torch.uint8)),
            marks=_NO_SHIFT,
            id="bitwise_right_shift",
        ),
    ],
)
def test_shifts(fn, args):
    check_model(Fn(fn), args)
