import pytest
import torch

import onnx

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types


def _dyn(fn, shape=(3, 4), other=(5, 4)):
    """Checks ``fn`` with axis 0 of its input dynamic, on two shapes."""
    return check_model(
        Fn(fn),
        (torch.randn(shape),),
        dynamic_shapes=({0: torch.export.Dim.DYNAMIC},),
        more_inputs=[((torch.randn(other),), None)],
    )


def _check_empty(fn, x, dynamic_shapes=None, other=None):
    """``empty`` has no defined values: only the shapes and types are compared."""
    onx = to_onnx(Fn(fn), (x,), dynamic_shapes=dynamic_shapes)
    onnx.checker.check_model(onx, full_check=True)
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    for inp in [x] if other is None else [x, other]:
        expected = fn(inp)
        got = sess.run(None, {onx.graph.input[0].name: inp})[0]
        assert got.shape == tuple(expected.shape)
        assert str(got.dtype) == str(expected.dtype).replace("torch.", "")


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.arange(5),
        lambda x: torch.arange(2, 7),
        lambda x: torch.arange(7, 2, -2),
        lambda x: torch.arange(1, 5.5, 0.5),
        lambda x: torch.arange(0.1, 1.0, 0.1),
        lambda x: torch.arange(-1, 3, 0.01),
        lambda x: torch.arange(5, dtype=torch.float16),
        lambda x: torch.arange(5, dtype=torch.int32),
        lambda x: torch.arange(0.5, 4, dtype=torch.int64),
        lambda x: torch.arange(-3, 3, dtype=torch.float64),
    ],
)
def test_arange_static(fn):
    check_model(Fn(fn), (torch.randn(2),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.arange(x.shape[0]),
        lambda x: torch.arange(1, x.shape[0]),
        lambda x: torch.arange(x.shape[0], dtype=torch.float32),
        lambda x: torch.arange(0, x.shape[0] * 2, 3),
        lambda x: torch.arange(x.shape[0], dtype=torch.int32),
        lambda x: torch.arange(0, x.shape[0], 0.5),
        lambda x: torch.arange(x.shape[0], 0, -1, dtype=torch.float16),
    ],
)
def test_arange_dynamic(fn):
    onx = _dyn(fn)
    assert "Range" in op_types(onx)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.zeros(2, 3),
        lambda x: torch.ones(2, 3, dtype=torch.int32),
        lambda x: torch.zeros(()),
        lambda x: torch.zeros(0, 3),
        lambda x: torch.full((2, 3), 1.5),
        lambda x: torch.full((2,), 7),
        lambda x: torch.full((2,), True),
        lambda x: torch.full((2, 2), 2.5, dtype=torch.float16),
        lambda x: torch.full((2, 2), -1, dtype=torch.bfloat16),
        lambda x: torch.ones(3, dtype=torch.bool),
        lambda x: torch.zeros_like(x),
        lambda x: torch.ones_like(x, dtype=torch.int64),
        lambda x: torch.full_like(x, 3),
        lambda x: torch.full_like(x, 3.7, dtype=torch.int32),
        lambda x: x.new_zeros((2, 3)),
        lambda x: x.new_ones(4, dtype=torch.bool),
        lambda x: x.new_full((2,), 5),
        lambda x: torch.scalar_tensor(3),
        lambda x: torch.scalar_tensor(2.5, dtype=torch.float64),
        lambda x: torch.scalar_tensor(1, dtype=torch.bool),
        lambda x: torch.eye(3),
        lambda x: torch.eye(2, 4, dtype=torch.int64),
        lambda x: torch.eye(3, dtype=torch.bool),
        lambda x: torch.linspace(0, 1, 5),
        lambda x: torch.linspace(-2, 10, 7, dtype=torch.int64),
        lambda x: torch.linspace(3, 3, 1),
    ],
)
def test_creation_static(fn):
    check_model(Fn(fn), (torch.randn(2, 3),))


def test_full_is_constant_of_shape():
    onx = check_model(Fn(lambda x: torch.full((2, 3), 1.5)), (torch.randn(2, 3),))
    assert "ConstantOfShape" in op_types(onx)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.zeros(x.shape[0], 3),
        lambda x: torch.ones(x.shape[0], x.shape[0] + 1, dtype=torch.int64),
        lambda x: torch.full((x.shape[0], 2), 0.5),
        lambda x: torch.full((2,), x.shape[0]),
        lambda x: torch.zeros_like(x),
        lambda x: torch.ones_like(x, dtype=torch.float16),
        lambda x: torch.full_like(x, 2),
        lambda x: x.new_zeros((x.shape[0], 2)),
        lambda x: x.new_full((x.shape[1], x.shape[0]), -1),
        lambda x: x.new_ones(x.shape[0]),
        lambda x: torch.scalar_tensor(x.shape[0]),
        lambda x: torch.eye(x.shape[0]),
        lambda x: torch.eye(x.shape[0], 2),
        lambda x: torch.linspace(0, x.shape[0], 4),
    ],
)
def test_creation_dynamic(fn):
    _dyn(fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32, torch.bool, torch.uint8])
@pytest.mark.parametrize("diagonal", [0, 1, -2])
def test_triu_tril(dtype, diagonal):
    x = torch.randn(2, 4, 5).to(dtype) if dtype != torch.bool else torch.rand(2, 4, 5) > 0.3
    onx = check_model(Fn(lambda x: (torch.triu(x, diagonal), torch.tril(x, diagonal))), (x,))
    assert op_types(onx).count("Trilu") == 2


def test_triu_dynamic():
    _dyn(lambda x: torch.triu(torch.ones(x.shape[0], x.shape[0]), 1), shape=(3,), other=(6,))
    _dyn(lambda x: torch.tril(x, 1), shape=(3, 5), other=(6, 5))


def test_empty():
    x = torch.randn(3, 4)
    _check_empty(lambda x: torch.empty(2, 3), x)
    _check_empty(lambda x: torch.empty_like(x), x)
    _check_empty(lambda x: x.new_empty((3, 1), dtype=torch.int64), x)
    _check_empty(lambda x: torch.empty_strided((2, 3), (3, 1)), x)
    _check_empty(lambda x: x.new_empty_strided((2,), (1,)), x)
    dyn = ({0: "batch"},)
    _check_empty(lambda x: torch.empty(x.shape), x, dyn, torch.randn(5, 4))
    _check_empty(lambda x: torch.empty_like(x, dtype=torch.float16), x, dyn, torch.randn(5, 4))
