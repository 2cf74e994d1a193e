import operator

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

aten = torch.ops.aten
OPS = {
    "eq": (operator.eq, "Equal"),
    "ne": (operator.ne, "Equal"),
    "lt": (operator.lt, "Less"),
    "le": (operator.le, "LessOrEqual"),
    "gt": (operator.gt, "Greater"),
    "ge": (operator.ge, "GreaterOrEqual"),
}


class Two(torch.nn.Module):
    """Named inputs, for dynamic_shapes."""

    def forward(self, x, y):
        return x < y, x == y, x >= 0.5, torch.isfinite(x), y != x.shape[0]


def _x(*shape, dtype=torch.float32):
    """Integers in [-2, 2], floats multiple of 0.5 in [-2, 2]: many ties."""
    if dtype.is_floating_point:
        return rand(*shape, dtype=torch.int64, low=-4, high=4).to(dtype) / 2
    return rand(*shape, dtype=dtype, low=-2, high=2)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.float32, torch.float32),
        (torch.int64, torch.int64),
        (torch.int64, torch.float32),
        (torch.int32, torch.int64),
        (torch.bool, torch.bool),
        (torch.bool, torch.int64),
        (torch.float16, torch.float16),
        (torch.bfloat16, torch.float32),
        (torch.int8, torch.int16),
    ],
    ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""),
)
def test_compare_tensor(name, dtypes):
    fn, op = OPS[name]
    onx = check_model(Fn(fn), (_x(3, 4, dtype=dtypes[0]), _x(4, dtype=dtypes[1])))
    assert op in op_types(onx)
    assert onx.graph.output[0].type.tensor_type.elem_type == 9  # BOOL
    if dtypes == (torch.float32, torch.float32):
        assert op_types(onx) == ([op, "Not"] if name == "ne" else [op])


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize(
    "dtype, scalar",
    [(torch.float32, 0.5), (torch.int64, 1), (torch.int64, 0.5), (torch.bool, True), (torch.float16, 1.5)],
    ids=["float-float", "int-int", "int-float", "bool-bool", "half-float"],
)
def test_compare_scalar(name, dtype, scalar):
    fn, op = OPS[name]
    check_model(Fn(lambda x: fn(x, scalar)), (_x(3, 4, dtype=dtype),))


def test_compare_scalar_overloads():
    fn = lambda x: tuple(getattr(aten, n).Scalar(x, 0.5) for n in OPS)  # noqa: E731
    check_model(Fn(fn), (_x(3, 4, dtype=torch.int64),))


def test_compare_zero_dim():
    # float16 tensor and float32 0-D tensor compare in float16
    check_model(Fn(lambda x, y: (x < y, x == y)), (_x(3, 4, dtype=torch.float16), torch.tensor(0.5)))


def test_compare_nan():
    x = torch.tensor([float("nan"), 1.0, float("inf"), -float("inf")])
    check_model(Fn(lambda x: tuple(fn(x, x) for fn, _ in OPS.values())), (x,))


SPECIAL = torch.tensor([[float("nan"), 1.0, float("inf")], [-float("inf"), 0.0, -2.0]])


@pytest.mark.parametrize("fn", [torch.isnan, torch.isinf, torch.isfinite, torch.isposinf, torch.isneginf])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool]
)
def test_classify(fn, dtype):
    x = SPECIAL.to(dtype) if dtype.is_floating_point else _x(2, 3, dtype=dtype)
    onx = check_model(Fn(fn), (x,))
    if dtype == torch.float32 and fn in (torch.isnan, torch.isinf):
        assert op_types(onx) == ["IsNaN" if fn is torch.isnan else "IsInf"]


def test_dynamic():
    x, y = _x(3, 4), _x(3, 4)
    x[0, 0] = float("inf")
    x2, y2 = _x(5, 4), _x(5, 4)
    x2[1, 1] = float("nan")
    onx = check_model(
        Two(), (x, y), dynamic_shapes=({0: "batch"}, {0: "batch"}), more_inputs=[((x2, y2), None)]
    )
    assert onx.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
