import functools

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, op_types, rand

aten = torch.ops.aten
F16 = dict(atol=2e-2, rtol=2e-2)


#: standard normal floats, integers in [-5, 5], booleans mostly true
_x = functools.partial(rand, low=-5, high=5, normal=True, p_true=0.7)


def _check(fn, x, **kwargs):
    tol = F16 if x.dtype in (torch.float16, torch.bfloat16) else {}
    return check_model(Fn(fn), (x,), **tol, **kwargs)


SUMS = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_dims_keepdim": lambda x: x.sum((0, -1), keepdim=True),
    "sum_neg": lambda x: x.sum(-1),
    "sum_empty_dims": lambda x: aten.sum.dim_IntList(x, []),
    "sum_none_keepdim": lambda x: aten.sum.dim_IntList(x, None, True),
    "sum_dtype": lambda x: x.sum(dtype=torch.float64),
    "sum_dim_dtype": lambda x: x.sum(1, dtype=torch.float32),
    "nansum": lambda x: x.nansum(1),
    "prod": lambda x: x.prod(),
    "prod_dim": lambda x: x.prod(-1, keepdim=True),
    "prod_dtype": lambda x: x.prod(1, dtype=torch.float64),
    "count_nonzero": lambda x: torch.count_nonzero(x),
    "count_nonzero_dim": lambda x: torch.count_nonzero(x, dim=(0, 2)),
    "cumsum": lambda x: x.cumsum(1),
    "cumsum_neg": lambda x: x.cumsum(-1),
    "cumsum_dtype": lambda x: x.cumsum(0, dtype=torch.float64),
}


@pytest.mark.parametrize("name", SUMS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_sum_prod(name, dtype):
    x = _x(2, 3, 4, dtype=dtype)
    if name.startswith("prod") and dtype.is_floating_point:
        x = x.abs() + 0.5
    if name == "nansum" and dtype.is_floating_point:
        x[0, 1, 2] = float("nan")
    onx = _check(SUMS[name], x, optimize=False)  # the converter's translation
    if name == "sum_dim":
        expected = {torch.float32: ["Constant", "ReduceSum"], torch.int64: ["Constant", "ReduceSum"]}
        assert op_types(onx) == expected.get(dtype, op_types(onx))


MEANS = {
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(1),
    "mean_dims_keepdim": lambda x: x.mean((0, -1), keepdim=True),
    "mean_dtype": lambda x: x.mean(-1, dtype=torch.float64),
    "var": lambda x: x.var(),
    "var_dim": lambda x: x.var(1),
    "var_unbiased_false": lambda x: x.var(-1, unbiased=False, keepdim=True),
    "var_correction": lambda x: torch.var(x, (0, 2), correction=2),
    "var_default": lambda x: aten.var.default(x, False),
    "std": lambda x: x.std(),
    "std_dim": lambda x: x.std(1, keepdim=True),
    "std_correction": lambda x: torch.std(x, -1, correction=0),
    "std_default": lambda x: aten.std.default(x),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "var_mean_all": lambda x: torch.var_mean(x, correction=0),
    "std_mean_keepdim": lambda x: torch.std_mean(x, (0, 1), keepdim=True),
    "std_mean_all": lambda x: torch.std_mean(x),
    "logsumexp": lambda x: x.logsumexp(1),
    "logsumexp_dims": lambda x: x.logsumexp((0, 2), keepdim=True),
    "norm": lambda x: x.norm(),
    "norm_dim": lambda x: torch.linalg.vector_norm(x, dim=1),
    "norm1": lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2), keepdim=True),
    "norm_inf": lambda x: torch.linalg.vector_norm(x, float("inf"), dim=-1),
    "norm_ninf": lambda x: torch.linalg.vector_norm(x, -float("inf")),
    "norm0": lambda x: torch.linalg.vector_norm(x, 0, dim=1),
    "norm3": lambda x: torch.linalg.vector_norm(x, 3, dim=1),
    "norm_dtype": lambda x: torch.linalg.vector_norm(x, dtype=torch.float64),
}


@pytest.mark.parametrize("name", MEANS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_mean_var_norm(name, dtype):
    _check(MEANS[name], _x(2, 3, 4, dtype=dtype))


def test_int_inputs_give_float():
    x = _x(2, 3, dtype=torch.int64)
    _check(lambda x: (x.mean(dtype=torch.float32), x.logsumexp(1), x.sum(), x.prod(1), x.cumsum(0)), x)


def test_logsumexp_large():
    x = torch.tensor([[1000.0, 1000.5, -1000.0], [-1000.0, -1001.0, -float("inf")]])
    _check(lambda x: x.logsumexp(1), x)


MAXMIN = {
    "amax": lambda x: x.amax(1),
    "amax_dims": lambda x: x.amax((0, -1), keepdim=True),
    "amax_all": lambda x: x.amax(),
    "amin": lambda x: x.amin(-1),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_dim": lambda x: x.max(1),
    "max_dim_keepdim": lambda x: x.max(-1, keepdim=True),
    "min_dim": lambda x: x.min(0),
    "aminmax": lambda x: torch.aminmax(x),
    "aminmax_dim": lambda x: torch.aminmax(x, dim=1, keepdim=True),
    "argmax": lambda x: x.argmax(),
    "argmax_keepdim": lambda x: x.argmax(keepdim=True),
    "argmax_dim": lambda x: x.argmax(1),
    "argmax_dim_keepdim": lambda x: x.argmax(-1, keepdim=True),
    "argmin": lambda x: x.argmin(),
    "argmin_dim": lambda x: x.argmin(2, keepdim=True),
}


@pytest.mark.parametrize(
    "name, dtype",
    [
        (name, dtype)
        for name in MAXMIN
        for dtype in [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int16, torch.bool]
        if not (dtype == torch.bool and name.startswith("arg"))  # PyTorch has no argmax for bool
    ],
)
def test_max_min(name, dtype):
    x = torch.randperm(24).reshape(2, 3, 4)  # no ties, the indices are unique
    x = (x > 11) if dtype == torch.bool else (x - 12).to(dtype)
    onx = _check(MAXMIN[name], x, optimize=False)  # the converter's translation
    if name == "max_dim" and dtype == torch.int64:
        assert op_types(onx) == ["Constant", "ReduceMax", "ArgMax"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_max_nan(dtype):
    x = torch.tensor([[1.0, float("nan"), 3.0], [0.0, 2.0, 1.0]], dtype=dtype)
    _check(lambda x: (x.amax(1), x.max(), x.min(1).values, x.amin(0), torch.aminmax(x, dim=1)), x)


def test_argmax_first_of_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    _check(lambda x: (x.argmax(1), x.argmin(1), x.max(1).indices, x.argmax()), x)


LOGICAL = {
    "all": lambda x: x.all(),
    "all_dim": lambda x: x.all(1),
    "all_dim_keepdim": lambda x: x.all(-1, keepdim=True),
    "all_dims": lambda x: x.all((0, 2)),
    "any": lambda x: x.any(),
    "any_dim": lambda x: x.any(0),
    "any_dims_keepdim": lambda x: torch.any(x, (0, -1), keepdim=True),
}


@pytest.mark.parametrize("name", LOGICAL)
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64, torch.uint8])
def test_all_any(name, dtype):
    x = _x(2, 3, 4, dtype=torch.bool)
    x[0] = True
    x[1, 0] = False
    x = x.to(dtype)
    if dtype == torch.float32:
        x[0, 0, 0] = float("nan")  # NaN is true
    _check(LOGICAL[name], x)


def test_empty():
    x = torch.zeros(2, 0)
    _check(lambda x: (x.sum(1), x.all(1), x.any(1), x.prod(1), x.mean()), x)


def test_zero_dim():
    x = torch.tensor(2.5)
    _check(lambda x: (x.sum(), x.sum(0), x.amax(0), x.argmax(), x.argmax(0), x.max(0), x.cumsum(0) * 2, x.all(0)), x)


def test_dynamic():
    def fn(x):
        return (
            x.sum(1),
            x.mean((0, 2), keepdim=True),
            x.var(0),
            x.std(-1, keepdim=True),
            torch.var_mean(x, 0, correction=0),
            x.max(0),
            x.argmax(),
            x.logsumexp(0),
            x.cumsum(0),
            torch.linalg.vector_norm(x, 3, dim=0),
            (x > 0).all(0),
            (x > 0).sum(),
        )

    onx = check_dynamic(fn, _x(2, 3, 4), other=_x(5, 3, 4))
    assert onx.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
