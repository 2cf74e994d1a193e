"""Backward converters of the normalizations and convolutions (ops/normalization_backward.py,
ops/convolution_backward.py) and the functional batch norm of training graphs: onnxruntime against eager
calling the same aten op, and against ``torch.autograd.grad`` of the forward function."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession
from experimental.torch_interpreter.testing.aot import aot_graphs
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types

A = torch.ops.aten
ALL = [True, True, True]
HALF_TOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


def _run(onx, args):
    names = [i.name for i in onx.graph.input]
    got = InferenceSession(onx, providers=["CPUExecutionProvider"]).run(None, dict(zip(names, args)))
    return [g.astype(np.float32) if g.dtype.name == "bfloat16" else g for g in got]


def _check_autograd(model, args, expected, atol=1e-4, rtol=1e-4, **kwargs):
    """check_model (onnxruntime against eager), then the ONNX results against ``expected`` (autograd's)."""
    onx = check_model(model, args, atol=atol, rtol=rtol, **kwargs)
    got = _run(onx, args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e.detach().float().numpy(), atol=atol, rtol=rtol)


def _grads(fn, inputs, grad):
    """``torch.autograd.grad`` of ``fn(*inputs)`` for ``inputs`` (leaves that require grad) with ``grad``."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    return torch.autograd.grad(fn(*leaves), leaves, grad)


# -- layer norm ----------------------------------------------------------------------------------------------


def _layer_norm_backward(shape, eps=1e-5, mask=ALL, affine=True):
    def fn(g, x, *params):
        w, b = params if affine else (None, None)
        _, mean, rstd = A.native_layer_norm.default(x, shape, w, b, eps)
        return A.native_layer_norm_backward.default(g, x, shape, mean, rstd, w, b, mask)

    return Fn(fn)


@pytest.mark.parametrize("shape", [[6], [4, 6], [3, 4, 6]], ids=["last", "two", "all"])
def test_layer_norm_backward_autograd(shape):
    torch.manual_seed(0)
    x, g = torch.randn(3, 4, 6) * 2 + 1, torch.randn(3, 4, 6)
    w, b = torch.randn(shape), torch.randn(shape)
    expected = _grads(lambda x, w, b: F.layer_norm(x, shape, w, b, 1e-3), (x, w, b), g)
    _check_autograd(_layer_norm_backward(shape, 1e-3), (g, x, w, b), expected)


def test_layer_norm_backward_no_affine_and_masks():
    torch.manual_seed(0)
    x, g = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    expected = _grads(lambda x: F.layer_norm(x, [8]), (x,), g)
    _check_autograd(_layer_norm_backward([8], affine=False, mask=[True, False, False]), (g, x), expected)
    w, b = torch.randn(8), torch.randn(8)
    onx = check_model(_layer_norm_backward([8], mask=[False, True, True]), (g, x, w, b))
    assert len(onx.graph.output) == 2
    check_model(_layer_norm_backward([8], mask=[True, False, True]), (g, x, w, b))


def test_layer_norm_backward_saved_statistics_as_inputs():
    """mean and rstd given (not those of x): the formula holds for any statistics, as PyTorch's kernel."""
    torch.manual_seed(0)
    x, g, w = torch.randn(3, 4, 6), torch.randn(3, 4, 6), torch.randn(6)
    mean, rstd = torch.randn(3, 4, 1), torch.rand(3, 4, 1) + 0.5
    fn = Fn(lambda g, x, m, r, w: A.native_layer_norm_backward.default(g, x, [6], m, r, w, None, [True, True, False]))
    check_model(fn, (g, x, mean, rstd, w))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layer_norm_backward_half(dtype):
    torch.manual_seed(0)
    args = [t.to(dtype) for t in (torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(8), torch.randn(8))]
    tol = HALF_TOL[dtype]
    check_model(_layer_norm_backward([8]), tuple(args), atol=tol, rtol=tol)


@pytest.mark.parametrize("affine", [True, False])
def test_native_layer_norm_float64_with_statistics(affine):
    """onnxruntime has no float64 LayerNormalization giving mean and rstd (training seed 996): reductions instead"""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64) * 3 + 1
    params = (torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)) if affine else ()

    def fn(x, *params):
        w, b = params if affine else (None, None)
        y, mean, rstd = A.native_layer_norm.default(x, [4, 8], w, b, 1e-5)
        return y, mean, rstd

    check_model(Fn(fn), (x, *params), atol=1e-10, rtol=1e-10)


def test_layer_norm_backward_dynamic():
    torch.manual_seed(0)
    x, g, w, b = torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(8), torch.randn(8)
    x2, g2 = torch.randn(4, 5, 8), torch.randn(4, 5, 8)
    dims = {0: "batch", 1: "seq"}
    check_model(
        _layer_norm_backward([8]), (g, x, w, b), dynamic_shapes=(dims, dims, None, None),
        more_inputs=[((g2, x2, w, b), None)],
    )


# -- batch norm ----------------------------------------------------------------------------------------------


def _batch_norm_backward(train, mask=ALL, affine=True, eps=1e-5):
    def fn(g, x, rm, rv, *params):
        w, b = params if affine else (None, None)
        _, sm, sr, _, _ = A._native_batch_norm_legit_functional.default(x, w, b, rm, rv, train, 0.1, eps)
        return A.native_batch_norm_backward.default(g, x, w, rm, rv, sm, sr, train, eps, mask)

    return Fn(fn)


def _stats(c):
    return torch.randn(c), torch.rand(c) + 0.5


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4)], ids=["1d", "2d", "3d", "4d"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_backward_autograd(shape, train):
    torch.manual_seed(0)
    x, g = torch.randn(shape) * 2 + 1, torch.randn(shape)
    (rm, rv), w, b = _stats(3), torch.randn(3), torch.randn(3)

    def forward(x, w, b):  # copies: training mode updates the running statistics in place
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=train, momentum=0.1, eps=1e-3)

    expected = _grads(forward, (x, w, b), g)
    _check_autograd(_batch_norm_backward(train, eps=1e-3), (g, x, rm, rv, w, b), expected)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_backward_no_affine_and_masks(train):
    torch.manual_seed(0)
    x, g = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    rm, rv = _stats(3)
    expected = _grads(lambda x: F.batch_norm(x, rm.clone(), rv.clone(), training=train), (x,), g)
    _check_autograd(_batch_norm_backward(train, mask=[True, False, False], affine=False), (g, x, rm, rv), expected)
    w, b = torch.randn(3), torch.randn(3)
    onx = check_model(_batch_norm_backward(train, mask=[False, True, True]), (g, x, rm, rv, w, b))
    assert len(onx.graph.output) == 2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_backward_half(dtype, train):
    """All in ``dtype``, and (bfloat16) the mixed precision of autocast: parameters and statistics in float32."""
    torch.manual_seed(0)
    x, g = torch.randn(2, 3, 4, 5, dtype=dtype), torch.randn(2, 3, 4, 5, dtype=dtype)
    params = (*_stats(3), torch.randn(3), torch.randn(3))
    tol = HALF_TOL[dtype]
    check_model(_batch_norm_backward(train), (g, x, *(p.to(dtype) for p in params)), atol=tol, rtol=tol)
    if dtype == torch.bfloat16:
        check_model(_batch_norm_backward(train), (g, x, *params), atol=tol, rtol=tol)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_backward_dynamic(train):
    torch.manual_seed(0)
    params = (*_stats(3), torch.randn(3), torch.randn(3))
    x, g, x2, g2 = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5), torch.randn(4, 3, 6, 2), torch.randn(4, 3, 6, 2)
    dims = {0: "batch", 2: "h", 3: "w"}
    check_model(
        _batch_norm_backward(train), (g, x, *params), dynamic_shapes=(dims, dims, None, None, None, None),
        more_inputs=[((g2, x2, *params), None)],
    )


# -- the functional batch norm of training graphs ------------------------------------------------------------


def _batch_norm_functional(train, momentum=0.1, eps=1e-5):
    def fn(x, w, b, rm, rv):
        return A._native_batch_norm_legit_functional.default(x, w, b, rm, rv, train, momentum, eps)

    return Fn(fn)


@pytest.mark.parametrize("shape", [(6, 3), (2, 3, 5), (2, 3, 4, 5)], ids=["1d", "2d", "3d"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_functional(shape, train):
    torch.manual_seed(0)
    x = torch.randn(shape) * 3 + 2
    args = (x, torch.randn(3), torch.randn(3), *_stats(3))
    check_model(_batch_norm_functional(train, momentum=0.3, eps=1e-3), args)


def test_batch_norm_functional_matches_module_update():
    """The running statistics returned are the ones BatchNorm2d writes in training mode (unbiased variance)."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3, momentum=0.2).train()
    x = torch.randn(2, 3, 4, 5) * 2 + 1
    args = (x, bn.weight.detach(), bn.bias.detach(), bn.running_mean.clone(), bn.running_var.clone())
    onx = check_model(_batch_norm_functional(True, momentum=0.2), args)
    y = bn(x)
    got = _run(onx, args)
    for g, e in zip([got[0], got[3], got[4]], [y, bn.running_mean, bn.running_var]):
        np.testing.assert_allclose(g, e.detach().numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_functional_dtypes_and_dynamic(train):
    torch.manual_seed(0)
    params = (torch.randn(3), torch.randn(3), *_stats(3))
    x = torch.randn(2, 3, 4, 5, dtype=torch.bfloat16)  # autocast's mixed precision
    check_model(_batch_norm_functional(train), (x, *params), atol=5e-2, rtol=5e-2)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float16)
    check_model(_batch_norm_functional(train), (x, *(p.half() for p in params)), atol=1e-2, rtol=1e-2)
    x, x2 = torch.randn(2, 3, 4, 5), torch.randn(5, 3, 2, 6)
    check_model(
        _batch_norm_functional(train), (x, *params),
        dynamic_shapes=({0: "batch", 2: "h", 3: "w"}, None, None, None, None),
        more_inputs=[((x2, *params), None)],
    )


# -- group norm ----------------------------------------------------------------------------------------------


def _group_norm_backward(groups, mask=ALL, affine=True, eps=1e-5):
    def fn(g, x, *params):
        w, b = params if affine else (None, None)
        n, c = x.shape[:2]
        hxw = x.numel() // (n * c) if x.numel() else 0
        _, mean, rstd = A.native_group_norm.default(x, w, b, n, c, hxw, groups, eps)
        return A.native_group_norm_backward.default(g, x, mean, rstd, w, n, c, hxw, groups, mask)

    return Fn(fn)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 4), 3), ((3, 4, 5), 2), ((4, 6), 6), ((2, 4, 2, 3, 2), 1)])
def test_group_norm_backward_autograd(shape, groups):
    torch.manual_seed(0)
    x, g = torch.randn(shape) * 2 + 1, torch.randn(shape)
    c = shape[1]
    w, b = torch.randn(c), torch.randn(c)
    expected = _grads(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-3), (x, w, b), g)
    _check_autograd(_group_norm_backward(groups, eps=1e-3), (g, x, w, b), expected)


def test_group_norm_backward_no_affine_half_and_dynamic():
    torch.manual_seed(0)
    x, g = torch.randn(2, 6, 3, 4), torch.randn(2, 6, 3, 4)
    expected = _grads(lambda x: F.group_norm(x, 2), (x,), g)
    _check_autograd(_group_norm_backward(2, mask=[True, False, False], affine=False), (g, x), expected)
    w, b = torch.randn(6), torch.randn(6)
    half = tuple(t.half() for t in (g, x, w, b))
    check_model(_group_norm_backward(2), half, atol=1e-2, rtol=1e-2)
    x2, g2 = torch.randn(3, 6, 5, 2), torch.randn(3, 6, 5, 2)
    dims = {0: "batch", 2: "h", 3: "w"}
    check_model(
        _group_norm_backward(2), (g, x, w, b), dynamic_shapes=(dims, dims, None, None),
        more_inputs=[((g2, x2, w, b), None)],
    )


# -- convolution ---------------------------------------------------------------------------------------------

#: name: (input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
CONVS = {
    "conv1d": ((2, 4, 9), (3, 4, 3), [2], [1], [1], False, [0], 1),
    "conv2d": ((2, 4, 9, 8), (6, 2, 3, 2), [2, 3], [1, 0], [1, 2], False, [0, 0], 2),
    "conv2d_plain": ((2, 3, 6, 5), (4, 3, 3, 3), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d_depthwise": ((2, 4, 7, 7), (8, 1, 3, 3), [2, 2], [1, 1], [1, 1], False, [0, 0], 4),
    "conv2d_large_stride": ((1, 2, 10, 11), (3, 2, 2, 3), [4, 3], [2, 1], [2, 1], False, [0, 0], 1),
    "conv3d": ((2, 4, 5, 6, 7), (4, 2, 2, 3, 2), [1, 2, 2], [1, 0, 1], [2, 1, 1], False, [0, 0, 0], 2),
    "conv_transpose1d": ((2, 4, 9), (4, 3, 3), [2], [0], [1], True, [1], 1),
    "conv_transpose2d": ((2, 4, 9, 8), (4, 3, 3, 2), [2, 3], [1, 0], [1, 2], True, [1, 0], 2),
    "conv_transpose2d_out_pad_dilation": ((2, 2, 5, 4), (2, 3, 3, 3), [1, 2], [1, 1], [3, 1], True, [2, 1], 1),
    "conv_transpose3d": ((2, 4, 3, 4, 5), (4, 2, 2, 2, 3), [2, 1, 2], [1, 0, 1], [1, 1, 2], True, [1, 0, 0], 2),
    # the weight gradient by im2col: the windows stacked (narrow inputs), or one product per offset (16 channels on)
    "conv1d_wide": ((2, 16, 11), (3, 16, 3), [2], [2], [2], False, [0], 1),
    "conv1d_groups_one_row": ((2, 32, 9), (2, 16, 3), [2], [1], [2], False, [0], 2),
    "conv2d_1x1": ((2, 16, 5, 4), (3, 16, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d_groups": ((2, 8, 7, 6), (8, 4, 3, 3), [2, 1], [1, 2], [1, 2], False, [0, 0], 2),
    "conv2d_groups_wide": ((2, 32, 6, 5), (8, 8, 2, 3), [1, 2], [0, 1], [2, 1], False, [0, 0], 4),
    "conv2d_large_kernel": ((1, 2, 12, 11), (2, 2, 9, 8), [1, 1], [1, 0], [1, 1], False, [0, 0], 1),
    "conv2d_wide": ((2, 16, 6, 5), (4, 16, 3, 3), [2, 1], [1, 1], [1, 2], False, [0, 0], 1),
    "conv3d_groups": ((2, 8, 4, 5, 4), (8, 4, 2, 2, 2), [1, 2, 1], [0, 1, 1], [1, 1, 2], False, [0, 0, 0], 2),
    "conv3d_plain": ((2, 3, 5, 6, 7), (4, 3, 2, 3, 2), [1, 2, 2], [1, 0, 1], [2, 1, 1], False, [0, 0, 0], 1),
    "conv3d_wide": ((1, 16, 4, 5, 4), (2, 16, 2, 2, 2), [2, 1, 1], [1, 0, 1], [1, 2, 1], False, [0, 0, 0], 1),
    "conv_transpose1d_wide": ((2, 4, 6), (4, 16, 3), [2], [1], [1], True, [1], 1),
    "conv_transpose2d_groups": ((2, 8, 4, 5), (8, 4, 3, 3), [2, 2], [1, 0], [1, 2], True, [1, 0], 2),
}

#: name: how many matrix products (Gemm, MatMul) make the weight gradient: one of the stacked windows, one per
#: kernel offset, or none: the convolution with the batch as channels (depthwise-like groups, > 64 offsets)
WEIGHT_PRODUCTS = {
    "conv1d": 1, "conv1d_groups_one_row": 3, "conv1d_wide": 3, "conv2d": 0, "conv2d_1x1": 1, "conv2d_depthwise": 0,
    "conv2d_groups": 1, "conv2d_groups_wide": 6, "conv2d_large_kernel": 0, "conv2d_large_stride": 1,
    "conv2d_plain": 1, "conv2d_wide": 9, "conv3d": 0, "conv3d_groups": 1, "conv3d_plain": 1, "conv3d_wide": 8,
    "conv_transpose1d": 1, "conv_transpose1d_wide": 3, "conv_transpose2d": 0, "conv_transpose2d_groups": 1,
    "conv_transpose2d_out_pad_dilation": 1, "conv_transpose3d": 0,
}


def _conv_case(name, dtype=torch.float32, batch=None, sizes=None):
    torch.manual_seed(0)
    x_shape, w_shape, stride, padding, dilation, transposed, out_pad, groups = CONVS[name]
    if batch is not None:
        x_shape = (batch, x_shape[1], *sizes)
    x, w = torch.randn(x_shape, dtype=dtype), torch.randn(w_shape, dtype=dtype)
    y = A.convolution.default(x.float(), w.float(), None, stride, padding, dilation, transposed, out_pad, groups)
    g = torch.randn(y.shape, dtype=dtype)
    return (g, x, w), CONVS[name][2:]


def _conv_backward(config, mask=ALL, bias=True):
    stride, padding, dilation, transposed, out_pad, groups = config

    def fn(g, x, w):
        sizes = [g.shape[1]] if bias else None
        return A.convolution_backward.default(
            g, x, w, sizes, stride, padding, dilation, transposed, out_pad, groups, mask
        )

    return Fn(fn)


@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolution_backward_autograd(name):
    (g, x, w), config = _conv_case(name)
    stride, padding, dilation, transposed, out_pad, groups = config
    b = torch.randn(g.shape[1])

    def forward(x, w, b):
        return A.convolution.default(x, w, b, stride, padding, dilation, transposed, out_pad, groups)

    expected = _grads(forward, (x, w, b), g)
    _check_autograd(_conv_backward(config), (g, x, w), expected)


@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolution_backward_weight_path(name):
    """The weight gradient alone: by im2col (no Conv; one Gemm or MatMul of the stacked windows, or one per kernel
    offset; no Slice for a 1 x 1 kernel) or, where it does not fit, the convolution with the batch as channels."""
    args, config = _conv_case(name)
    onx = check_model(_conv_backward(config, [False, True, False], bias=False), args, atol=1e-4)
    ops = op_types(onx)
    products = ops.count("Gemm") + ops.count("MatMul")
    assert products == WEIGHT_PRODUCTS[name], ops
    assert ("Conv" in ops) == (products == 0), ops
    if name == "conv2d_1x1":
        assert "Slice" not in ops and "Concat" not in ops, ops


def test_conv2d_backward_matches_functional_autograd():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 4, 8, 7), torch.randn(6, 2, 3, 3), torch.randn(6)
    y = F.conv2d(x, w, b, stride=2, padding=1, dilation=1, groups=2)
    g = torch.randn(y.shape)
    expected = _grads(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), (x, w, b), g)
    _check_autograd(_conv_backward(([2, 2], [1, 1], [1, 1], False, [0, 0], 2)), (g, x, w), expected)
    x, w = torch.randn(2, 4, 5, 6), torch.randn(4, 3, 3, 3)
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)  # noqa: E731
    g = torch.randn(fn(x, w, torch.zeros(3)).shape)
    expected = _grads(fn, (x, w, torch.randn(3)), g)
    _check_autograd(_conv_backward(([2, 2], [1, 1], [1, 1], True, [1, 1], 1)), (g, x, w), expected)


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, False], [False, True, True]])
def test_convolution_backward_masks(mask):
    args, config = _conv_case("conv2d")
    onx = check_model(_conv_backward(config, mask, bias=mask[2]), args, atol=1e-4)
    assert len(onx.graph.output) == sum(mask)


@pytest.mark.parametrize(
    "name", ["conv2d", "conv2d_large_stride", "conv_transpose2d", "conv_transpose2d_out_pad_dilation",
             "conv2d_groups", "conv2d_groups_wide", "conv2d_wide", "conv_transpose2d_groups"],
)
def test_convolution_backward_dynamic(name):
    """Dynamic batch and spatial sizes (grad_output's independent of the input's): strides > 1 pad the full
    transposed convolution and cut the input's window."""
    args, config = _conv_case(name)
    sizes = [s + 3 for s in args[1].shape[2:]]
    args2, _ = _conv_case(name, batch=3, sizes=sizes)
    dg, dx = {0: "batch", 2: "gh", 3: "gw"}, {0: "batch", 2: "h", 3: "w"}
    check_model(
        _conv_backward(config), args, dynamic_shapes=(dg, dx, None), more_inputs=[(args2, None)], atol=1e-4
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["conv2d", "conv_transpose2d", "conv2d_plain", "conv2d_groups_wide", "conv3d_wide"])
def test_convolution_backward_half(name, dtype):
    args, config = _conv_case(name, dtype=dtype)
    tol = HALF_TOL[dtype]
    check_model(_conv_backward(config), args, atol=tol, rtol=tol)


def test_empty_batch():
    """No row: empty input gradients, zero parameter gradients."""
    x, w = torch.randn(0, 3, 8), torch.randn(8)
    check_model(_layer_norm_backward([8]), (torch.randn(0, 3, 8), x, w, torch.randn(8)))
    args, config = _conv_case("conv2d", batch=0, sizes=[9, 8])
    check_model(_conv_backward(config), args)
    for name in ("conv2d_plain", "conv2d_wide", "conv2d_groups", "conv2d_groups_wide"):
        args, config = _conv_case(name, batch=0, sizes=CONVS[name][0][2:])
        check_model(_conv_backward(config), args)


# -- whole training graphs -----------------------------------------------------------------------------------


def test_aot_autograd_graphs():
    """The forward and backward graphs AOTAutograd makes for a small network (conv, batch norm in training mode,
    group norm, transposed conv, layer norm), each converted and compared on the inputs autograd gave them."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, stride=2, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.GroupNorm(2, 4),
        torch.nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1),
        torch.nn.LayerNorm(10),
    )
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    graphs = aot_graphs(model, x, grad=torch.ones_like)
    for kind in ("forward", "backward"):
        gm, args = graphs[kind]
        targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
        if kind == "backward":
            assert {"aten.convolution_backward.default", "aten.native_batch_norm_backward.default"} <= targets
        else:
            assert "aten._native_batch_norm_legit_functional.default" in targets
        check_model(gm, tuple(args), atol=1e-4)
