import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, op_types

torch.manual_seed(0)
X = torch.randn(2, 4, 6, 8) * 2 + 1
X1 = torch.randn(2, 4, 7)
X3 = torch.randn(2, 4, 3, 4, 5)


def _randomized(model):
    """Random affine parameters and running statistics, so that they matter."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
            elif name.endswith("running_mean"):
                b.copy_(torch.randn_like(b))
    return model


def _ops(onx):
    return [t for t in op_types(onx) if t != "Constant"]


def _check(model, x, expected=None, dynamic=(0,), **kwargs):
    """Dynamic batch (and other axes), checked on a second shape with 3 more on each dynamic axis;
    ``expected``: the ONNX op types without Constant."""
    if expected is not None:
        kwargs.setdefault("optimize", False)  # expected: the raw translation
    onx = check_dynamic(model, x, dynamic, **kwargs)
    if expected is not None:
        assert _ops(onx) == expected
    return onx


CASES = {
    "layer_norm": (nn.LayerNorm(8), X, ["LayerNormalization"]),
    "layer_norm_2d_no_affine": (nn.LayerNorm([6, 8], elementwise_affine=False), X, ["LayerNormalization"]),
    "layer_norm_no_bias": (nn.LayerNorm(8, bias=False), X, ["LayerNormalization"]),
    "layer_norm_fn": (Fn(lambda x: F.layer_norm(x, (6, 8), eps=1e-3)), X, ["LayerNormalization"]),
    "batch_norm2d": (nn.BatchNorm2d(4), X, ["BatchNormalization"]),
    "batch_norm1d": (nn.BatchNorm1d(4), X1, ["BatchNormalization"]),
    "batch_norm1d_2d_input": (nn.BatchNorm1d(4), torch.randn(3, 4), ["BatchNormalization"]),
    "batch_norm3d": (nn.BatchNorm3d(4), X3, ["BatchNormalization"]),
    "batch_norm_no_affine": (nn.BatchNorm2d(4, affine=False, eps=1e-3), X, ["BatchNormalization"]),
    "batch_norm_batch_stats": (nn.BatchNorm2d(4, track_running_stats=False), X, None),
    # each plane shifted by its first value (exact on a constant plane: test_regressions.py)
    "instance_norm": (nn.InstanceNorm2d(4), X, ["Slice", "Sub", "InstanceNormalization"]),
    "instance_norm_affine": (nn.InstanceNorm2d(4, affine=True), X, ["Slice", "Sub", "InstanceNormalization"]),
    "instance_norm1d": (nn.InstanceNorm1d(4, affine=True), X1, ["Slice", "Sub", "InstanceNormalization"]),
    "instance_norm_running_stats": (
        nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
        X,
        ["BatchNormalization"],
    ),
    "group_norm": (nn.GroupNorm(2, 4), X, None),
    "group_norm_no_affine": (
        nn.GroupNorm(4, 4, affine=False),
        X,
        ["Reshape", "Slice", "Sub", "InstanceNormalization", "Shape", "Reshape"],
    ),
    "group_norm_3d": (nn.GroupNorm(2, 4), X1, None),
    "rms_norm": (nn.RMSNorm(8), X, None),
    "rms_norm_2d": (nn.RMSNorm([6, 8], eps=1e-3), X, None),
    "rms_norm_fn": (Fn(lambda x: F.rms_norm(x, (8,))), X, None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_normalization(name):
    model, x, expected = CASES[name]
    _check(_randomized(model), x, expected)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm_is_a_shifted_instance_norm(opset):
    """InstanceNormalization of the groups shifted by their first value at every opset: onnxruntime's
    GroupNormalization-21 is not exact on a constant group, where PyTorch is (test_regressions.py)."""
    onx = check_model(_randomized(nn.GroupNorm(2, 4)), (X,), target_opset=opset)
    assert {"Slice", "Sub", "InstanceNormalization"} <= set(op_types(onx))
    assert "GroupNormalization" not in op_types(onx)


@pytest.mark.parametrize("name", ["rms_norm", "rms_norm_2d", "rms_norm_fn"])
def test_rms_norm_opset23(name):
    model, x, _ = CASES[name]
    onx = _check(_randomized(model), x, target_opset=23)
    assert _ops(onx) == ["RMSNormalization"]


def test_layer_norm_dynamic_shape():
    _check(_randomized(nn.LayerNorm(8)), X, dynamic=(0, 1, 2))
    _check(Fn(lambda x: F.layer_norm(x, x.shape[-2:])), X, dynamic=(0, 2))


@pytest.mark.parametrize(
    "name", ["layer_norm", "batch_norm2d", "batch_norm_batch_stats", "instance_norm_affine", "group_norm", "rms_norm"]
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_dtypes(name, dtype):
    model, x, _ = CASES[name]
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    check_model(_randomized(model).to(dtype), (x.to(dtype),), atol=tol, rtol=tol)
    model.float()


def test_rms_norm_float16_default_eps():
    # eps=None is float32's epsilon for float16 inputs (PyTorch computes in float32)
    x = torch.full((2, 4), 1e-3, dtype=torch.float16)
    check_model(Fn(lambda x: F.rms_norm(x, (4,))), (x,), atol=1e-3, rtol=1e-3)


def test_native_overloads():
    """The overloads of decomposed programs, their saved statistics returned."""
    w, b = torch.randn(4), torch.randn(4)
    mean, var = torch.randn(4), torch.rand(4) + 0.5
    w8, b8 = torch.randn(8), torch.randn(8)

    def fn(x):
        return (
            torch.ops.aten.native_layer_norm(x, [8], w8, b8, 1e-5),
            torch.ops.aten.native_group_norm(x, w, b, x.shape[0], 4, 48, 2, 1e-5),
            torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, mean, var, 0.1, 1e-5)[0],
            torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
            torch.ops.aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
        )

    _check(Fn(fn), X, atol=1e-4)


def test_native_batch_norm_eval_empty_stats():
    mean, var = torch.randn(4), torch.rand(4) + 0.5
    fn = torch.ops.aten._native_batch_norm_legit_no_training
    check_model(Fn(lambda x: fn(x, None, None, mean, var, 0.1, 1e-5)), (X,))


@pytest.mark.parametrize(("dim", "layer"), [
    (0, lambda: torch.nn.Conv1d(4, 8, 3)), (2, lambda: torch.nn.Conv1d(4, 8, 3)), (1, lambda: torch.nn.Linear(6, 5)),
    (-1, lambda: torch.nn.Linear(6, 5)),
], ids=["conv-out-channels", "conv-kernel", "linear-in", "whole"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_weight_norm(dim, layer, dtype):
    """``aten::_weight_norm`` (torch.nn.utils weight_norm, Wav2Vec2's positional convolution): ``v * g / ||v||``
    over every axis but ``dim``."""
    torch.manual_seed(0)
    model = torch.nn.utils.parametrizations.weight_norm(layer(), dim=dim).eval().to(dtype)
    x = torch.randn(2, 4, 10) if isinstance(model, torch.nn.Conv1d) else torch.randn(3, 6)
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    check_model(model, (x.to(dtype),), atol=tol, rtol=tol)
