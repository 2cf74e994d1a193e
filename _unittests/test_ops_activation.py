import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, op_types

torch.manual_seed(0)
X = torch.randn(2, 4, 3, 6) * 3
X2 = torch.randn(5, 4, 3, 6) * 3
DYN = ({0: "batch"},)


def _ops(onx):
    return [t for t in op_types(onx) if t != "Constant"]


# name -> (model, ONNX op types without Constant, None to skip the check)
CASES = {
    "relu": (nn.ReLU(), ["Relu"]),
    "relu6": (nn.ReLU6(), ["Clip"]),
    "hardtanh": (nn.Hardtanh(-2, 2.5), ["Clip"]),
    "gelu": (nn.GELU(), ["Div", "Erf", "Mul", "Add", "Mul"]),
    "gelu_tanh": (nn.GELU("tanh"), None),
    "silu": (nn.SiLU(), ["Sigmoid", "Mul"]),
    "sigmoid": (nn.Sigmoid(), ["Sigmoid"]),
    "softmax": (nn.Softmax(1), ["Softmax"]),
    "softmax_neg": (Fn(lambda x: torch.softmax(x, -1)), ["Softmax"]),
    "log_softmax": (nn.LogSoftmax(-2), ["LogSoftmax"]),
    "_softmax": (Fn(lambda x: torch._softmax(x, 2, False)), ["Softmax"]),
    "_log_softmax": (Fn(lambda x: torch._log_softmax(x, 0, False)), ["LogSoftmax"]),
    "leaky_relu": (nn.LeakyReLU(0.2), ["LeakyRelu"]),
    "elu": (nn.ELU(0.5), ["Elu"]),
    "elu_scaled": (Fn(lambda x: torch.ops.aten.elu(x, 1.5, 2.0, 0.5)), None),
    "elu_scale_only": (Fn(lambda x: torch.ops.aten.elu(x, 1.5, 2.0)), ["Elu", "Mul"]),
    "selu": (nn.SELU(), ["Selu"]),
    "celu": (nn.CELU(0.7), ["Celu"]),
    "hardsigmoid": (nn.Hardsigmoid(), ["HardSigmoid"]),
    "hardswish": (nn.Hardswish(), ["HardSwish"]),
    "softplus": (nn.Softplus(), ["Softplus", "Greater", "Where"]),
    "softplus_beta": (nn.Softplus(2, 3), ["Mul", "Softplus", "Div", "Greater", "Where"]),
    "mish": (nn.Mish(), ["Mish"]),
    "glu": (nn.GLU(1), ["Split", "Sigmoid", "Mul"]),
    "glu_last": (nn.GLU(), ["Split", "Sigmoid", "Mul"]),
    "prelu": (nn.PReLU(4, 0.1), ["Reshape", "PRelu"]),
    "prelu_single": (nn.PReLU(), ["PRelu"]),
    "log_sigmoid": (nn.LogSigmoid(), ["Neg", "Softplus", "Neg"]),
    "threshold": (nn.Threshold(0.1, 20), ["Greater", "Where"]),
    "hardshrink": (nn.Hardshrink(1.5), ["Abs", "Greater", "Where"]),
    "softshrink": (nn.Softshrink(0.7), ["Shrink"]),
    "rrelu_eval": (nn.RReLU(0.1, 0.3), ["LeakyRelu"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation(name):
    model, expected = CASES[name]
    if isinstance(model, nn.PReLU):
        with torch.no_grad():
            model.weight.copy_(torch.linspace(-0.5, 0.5, model.weight.numel()))
    onx = check_dynamic(model, X, other=X2, optimize=expected is None)  # expected: the raw translation
    if expected is not None:
        assert _ops(onx) == expected


def test_inplace_overloads():
    def fn(x):
        return (
            torch.relu_(x.clone()),
            F.relu6(x.clone(), inplace=True),
            F.hardtanh(x.clone(), -2.0, 2.0, inplace=True),
            F.silu(x.clone(), inplace=True),
            torch.sigmoid_(x.clone()),
            F.leaky_relu(x.clone(), 0.3, inplace=True),
            F.elu(x.clone(), inplace=True),
            F.selu(x.clone(), inplace=True),
            F.celu(x.clone(), inplace=True),
            F.hardsigmoid(x.clone(), inplace=True),
            F.hardswish(x.clone(), inplace=True),
            F.threshold(x.clone(), 0.5, -1.0, inplace=True),
            F.mish(x.clone(), inplace=True),
            F.rrelu(x.clone(), inplace=True),
        )

    check_dynamic(Fn(fn), X, other=X2)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate):
    onx = check_model(nn.GELU(approximate), (X,), dynamic_shapes=DYN, target_opset=20)
    assert op_types(onx) == ["Gelu"]


@pytest.mark.parametrize(
    "name", ["gelu", "gelu_tanh", "silu", "softmax", "log_softmax", "celu", "softplus_beta", "mish"]
)
def test_float16(name):
    check_model(CASES[name][0], (X.half(),), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", ["gelu", "celu", "elu_scaled", "hardswish"])
def test_float64(name):
    # Erf and Celu have no DOUBLE kernel in onnxruntime: they run in float32
    check_model(CASES[name][0], (X.double(),), atol=1e-6, rtol=1e-5)


def test_softmax_dtype():
    model = Fn(lambda x: (F.softmax(x, 1, dtype=torch.float64), F.log_softmax(x.half(), -1, dtype=torch.float32)))
    onx = check_dynamic(model, X, other=X2)
    assert op_types(onx) == ["Cast", "Softmax", "Cast", "Cast", "LogSoftmax"]


def test_softmax_half_to_float():
    # eager PyTorch refuses half_to_float on CPU: compare with the softmax of the float32 input
    x = X.half()
    onx = to_onnx(Fn(lambda x: torch._softmax(x, -1, True)), (x,))
    got = InferenceSession(onx, providers=["CPUExecutionProvider"]).run(None, {onx.graph.input[0].name: x.numpy()})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, torch.softmax(x.float(), -1).numpy(), atol=1e-6)


def test_softmax_scalar():
    check_model(Fn(lambda x: (x.softmax(0), x.log_softmax(-1))), (torch.tensor(2.5),))


def test_integer_inputs():
    x = torch.randint(-5, 5, (3, 4))
    model = Fn(
        lambda x: (torch.relu(x), F.hardtanh(x, -2, 3), torch.sigmoid(x), torch.softmax(x, -1, dtype=torch.float32))
    )
    check_model(model, (x,))


def test_bfloat16_runs_in_float():
    x = X.bfloat16()
    onx = check_model(Fn(lambda x: (torch.relu(x), F.gelu(x), torch.sigmoid(x))), (x,), atol=1e-2, rtol=1e-2)
    assert "Cast" in op_types(onx)


def test_prelu_low_rank():
    check_model(nn.PReLU(1, 0.2), (torch.randn(4),))
    model = nn.PReLU(4, 0.2)
    check_dynamic(model, torch.randn(3, 4), other=torch.randn(6, 4))


def test_rrelu_training_draws_slopes_in_range():
    """Random slopes cannot match PyTorch's draw: check the law instead (x if x >= 0, else x * U[lower, upper))."""
    onx = to_onnx(Fn(lambda x: F.rrelu(x, 0.1, 0.3, training=True)), (X,))
    x = torch.randn(*X.shape)
    (y,) = InferenceSession(onx).run(None, {onx.graph.input[0].name: x})
    x, y = x.numpy(), y
    positive = x >= 0
    np.testing.assert_array_equal(y[positive], x[positive])
    ratio = y[~positive] / x[~positive]
    assert ratio.min() >= 0.1 - 1e-6 and ratio.max() <= 0.3 + 1e-6 and ratio.std() > 0.01
