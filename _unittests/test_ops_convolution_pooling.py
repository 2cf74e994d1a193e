import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, op_types

torch.manual_seed(0)
X1, X2, X3 = torch.randn(2, 4, 9), torch.randn(2, 4, 9, 8), torch.randn(2, 4, 5, 6, 7)


def _ops(onx):
    return [t for t in op_types(onx) if t != "Constant"]


def _check(model, x, dynamic=(0,), expected=None, **kwargs):
    """Dynamic batch (and other axes), checked on a second shape with 3 more on each dynamic axis;
    ``expected``: the ONNX op types without Constant."""
    onx = check_dynamic(model, x, dynamic, **kwargs)
    if expected is not None:
        assert _ops(onx) == expected
    return onx


# -- convolutions ----------------------------------------------------------------------------------------------------

CONVS = {
    "conv1d": (nn.Conv1d(4, 3, 3, stride=2, padding=1), X1),
    "conv2d": (nn.Conv2d(4, 6, 3, stride=2, padding=(1, 2), dilation=(1, 2), groups=2), X2),
    "conv2d_nobias": (nn.Conv2d(4, 3, 2, bias=False), X2),
    "conv3d": (nn.Conv3d(4, 3, 2, padding=(1, 0, 1)), X3),
    "conv1d_same": (nn.Conv1d(4, 3, 4, padding="same"), X1),
    "conv2d_same": (nn.Conv2d(4, 3, (4, 3), padding="same", dilation=(1, 2)), X2),
    "conv3d_same": (nn.Conv3d(4, 2, 3, padding="same"), X3),
    "conv2d_valid": (nn.Conv2d(4, 3, 3, padding="valid"), X2),
    "conv_transpose1d": (nn.ConvTranspose1d(4, 3, 3, stride=2, output_padding=1), X1),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2), X2),
    "conv_transpose3d": (nn.ConvTranspose3d(4, 3, 2, stride=2, padding=1), X3),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv(name):
    model, x = CONVS[name]
    op = "ConvTranspose" if "transpose" in name else "Conv"
    _check(model, x, expected=[op])


@pytest.mark.parametrize("name", ["conv2d_same", "conv_transpose2d"])
def test_conv_dynamic_spatial(name):
    model, x = CONVS[name]
    _check(model, x, dynamic=(0, 2, 3))


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution(transposed):
    w = torch.randn(4, 3, 3, 3)  # (in, out, ...) transposed, (out, in, ...) else
    b = torch.randn(3 if transposed else 4)

    def fn(x):
        return torch.convolution(x, w, b, [2, 1], [1, 0], [1, 2], transposed, [1, 0] if transposed else [0, 0], 1)

    op = "ConvTranspose" if transposed else "Conv"
    _check(Fn(fn), X2 if transposed else torch.randn(2, 3, 9, 8), expected=[op])


def test_conv_unbatched():
    onx = check_model(nn.Conv2d(4, 3, 3, padding=1), (X2[0],))
    assert _ops(onx) == ["Unsqueeze", "Conv", "Squeeze"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_conv_dtypes(dtype):
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    check_model(nn.Conv2d(4, 3, 3).to(dtype), (X2.to(dtype),), atol=tol, rtol=tol)
    check_model(nn.ConvTranspose2d(4, 3, 3, 2).to(dtype), (X2.to(dtype),), atol=tol, rtol=tol)


# -- pooling ---------------------------------------------------------------------------------------------------------

POOLS = {
    "max_pool1d": (nn.MaxPool1d(2), X1, ["MaxPool"]),
    "max_pool2d": (nn.MaxPool2d(3, 2, 1), X2, ["MaxPool"]),
    "max_pool2d_dilation": (nn.MaxPool2d(2, 1, dilation=2), X2, ["MaxPool"]),
    "max_pool3d": (nn.MaxPool3d(2), X3, ["MaxPool"]),
    "max_pool1d_indices": (nn.MaxPool1d(3, 2, return_indices=True), X1, ["MaxPool", "Mod"]),
    "max_pool2d_indices": (nn.MaxPool2d(3, 2, 1, return_indices=True), X2, ["MaxPool", "Mod"]),
    "max_pool2d_indices_dilation": (nn.MaxPool2d(2, 1, dilation=2, return_indices=True), X2, ["MaxPool", "Mod"]),
    "max_pool3d_indices": (nn.MaxPool3d(2, return_indices=True), X3, ["MaxPool", "Mod"]),
    "max_pool2d_values_only": (Fn(lambda x: F.max_pool2d_with_indices(x, 2)[0]), X2, ["MaxPool"]),
    "avg_pool1d": (nn.AvgPool1d(3, 2, 1), X1, ["AveragePool"]),
    "avg_pool2d": (nn.AvgPool2d(3, 2, 1, count_include_pad=False), X2, ["AveragePool"]),
    "avg_pool2d_include_pad": (nn.AvgPool2d((3, 2), (2, 1), (1, 1)), X2, ["AveragePool"]),
    "avg_pool3d": (nn.AvgPool3d(2), X3, ["AveragePool"]),
    "avg_pool2d_divisor": (nn.AvgPool2d(3, 2, 1, divisor_override=4), X2, ["Conv", "Div"]),
    "adaptive_avg_pool1d_1": (nn.AdaptiveAvgPool1d(1), X1, ["GlobalAveragePool"]),
    "adaptive_avg_pool2d_1": (nn.AdaptiveAvgPool2d(1), X2, ["GlobalAveragePool"]),
    "adaptive_avg_pool3d_1": (nn.AdaptiveAvgPool3d(1), X3, ["GlobalAveragePool"]),
    "adaptive_avg_pool2d_divisible": (nn.AdaptiveAvgPool2d((3, 4)), X2, ["AveragePool"]),
    "adaptive_avg_pool3d_divisible": (nn.AdaptiveAvgPool3d((5, 3, 7)), X3, ["AveragePool"]),
    "adaptive_avg_pool1d_any": (nn.AdaptiveAvgPool1d(4), X1, ["Gather", "Where", "ReduceSum", "Div"]),
    "adaptive_avg_pool2d_any": (nn.AdaptiveAvgPool2d((4, 3)), X2, ["Transpose", "Gather", "Where", "ReduceSum", "Div", "Transpose", "Gather", "Where", "ReduceSum", "Div"]),
    "adaptive_avg_pool2d_one_axis": (nn.AdaptiveAvgPool2d((4, 8)), X2, ["Transpose", "Gather", "Where", "ReduceSum", "Div", "Transpose"]),
    "adaptive_max_pool2d_1": (nn.AdaptiveMaxPool2d(1), X2, ["GlobalMaxPool"]),
    "adaptive_max_pool1d": (nn.AdaptiveMaxPool1d(3), X1, ["MaxPool"]),
    "adaptive_max_pool2d_indices": (nn.AdaptiveMaxPool2d((3, 2), return_indices=True), X2, ["MaxPool", "Mod"]),
    "adaptive_max_pool2d_1_indices": (nn.AdaptiveMaxPool2d(1, return_indices=True), X2, ["MaxPool", "Mod"]),
}


#: a MaxPool (GlobalMaxPool) without indices: an If runs the plain pool when the input holds no NaN and no -inf (its
#: ReduceSum is above -inf), the exact computation otherwise (onnxruntime's MaxPool skips NaN, and a window of -inf
#: gives the lowest float); with indices, the pool comes first and its smallest value is checked too
_VALUES_GUARD = ["ReduceSum", "Greater", "If"]
_INDICES_GUARD = ["ReduceSum", "Greater", "ReduceMin", "Greater", "And", "If"]


def _branches(onx):
    """The op types of the first If's branches (without Constant): the kernel's, the exact one's."""
    node = next(n for n in onx.graph.node if n.op_type == "If")
    graphs = {a.name: a.g for a in node.attribute}
    return [[n.op_type for n in graphs[b].node if n.op_type != "Constant"] for b in ("then_branch", "else_branch")]


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool(name):
    model, x, expected = POOLS[name]
    pool = next((p for p in ("MaxPool", "GlobalMaxPool") if p in expected), None)
    if pool is not None:
        i = expected.index(pool)
        if "Mod" in expected:  # with indices
            expected = [*expected[: i + 1], *_INDICES_GUARD, *expected[i + 1 :]]
        else:
            expected = [*expected[:i], *_VALUES_GUARD, *expected[i + 1 :]]
    onx = _check(model, x, expected=expected)
    if pool is not None:
        kernel, exact = _branches(onx)
        assert kernel == ([pool] if "Mod" not in expected else ["Identity", "Identity"])
        assert pool in exact


@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (2, 3, 6, 7)])
@pytest.mark.parametrize("opset", [18, 22])
def test_pool_ceil_mode(shape, opset):
    # (5, 6) with kernel 2, stride 2, padding 1: ONNX before opset 22 adds a window starting in the padding
    x = torch.randn(*shape)
    models = [
        nn.MaxPool2d(2, 2, 1, ceil_mode=True),
        nn.MaxPool2d(3, 2, 1, ceil_mode=True, return_indices=True),
        nn.AvgPool2d(2, 2, 1, ceil_mode=True),
        nn.AvgPool2d(2, 2, 1, ceil_mode=True, count_include_pad=False),
        nn.AvgPool2d(3, 2, 1, ceil_mode=True),
        nn.AvgPool2d(2, 2, 1, ceil_mode=True, divisor_override=3),
        nn.AvgPool1d(1, 3, ceil_mode=True),
    ]
    for model in models:
        check_model(model, (x if not isinstance(model, nn.AvgPool1d) else x[0],), target_opset=opset)


def test_pool_unbatched():
    x = X2[0]
    fn = Fn(lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1)))
    onx = check_model(fn, (x,), optimize=False)  # the translation: one Unsqueeze per pooling
    assert op_types(onx).count("Unsqueeze") == 3


def test_adaptive_pool_dynamic_spatial():
    model = Fn(lambda x: (F.adaptive_avg_pool2d(x, 1), F.adaptive_max_pool2d(x, 1)))
    onx = _check(model, X2, dynamic=(0, 2, 3))
    assert _ops(onx) == ["GlobalAveragePool", *_VALUES_GUARD]


def test_adaptive_max_pool_not_divisible():
    """Output sizes that do not divide the input: windows gathered then reduced (static sizes)."""
    onx = check_model(nn.AdaptiveMaxPool2d((4, 3)), (X2,))
    assert "ReduceMax" in _ops(onx)


@pytest.mark.parametrize("output_size", [(3, 2), (4, 1), 2], ids=["3x2", "4x1", "2"])
def test_adaptive_max_pool_indices_dynamic_spatial(output_size):
    """The indices over spatial sizes known at run time (training graphs read them): the first maximum of each
    window in PyTorch's row-major scan, the last NaN where there is one, the first position of a window of -inf."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 5)
    x[0, 0, :3, :3] = float("-inf")
    x[0, 1, 1, 1] = float("nan")
    x[0, 1, 2, 0] = float("nan")
    x[1, 0] = torch.randint(0, 3, (7, 5)).float()  # ties
    x2 = torch.randint(0, 4, (1, 3, 10, 6)).float()
    d = torch.export.Dim.DYNAMIC
    check_model(Fn(lambda x: F.adaptive_max_pool2d(x, output_size, return_indices=True)), (x,),
                dynamic_shapes=({0: d, 2: d, 3: d},), more_inputs=[((x2,), None)])
    x3 = torch.randn(2, 4, 6, 5, 7)
    check_model(Fn(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True)), (x3,),
                dynamic_shapes=({2: d, 3: d, 4: d},))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_pool_dtypes(dtype):
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    model = Fn(
        lambda x: (
            F.max_pool2d(x, 2, return_indices=True),
            F.avg_pool2d(x, 3, 2, 1),
            F.adaptive_avg_pool2d(x, 1),
            F.adaptive_avg_pool2d(x, (4, 3)),
        )
    )
    check_model(model, (X2.to(dtype),), atol=tol, rtol=tol)


def test_max_pool_uint8():
    check_model(nn.MaxPool2d(2), (torch.randint(0, 255, (2, 3, 4, 4), dtype=torch.uint8),))


# -- upsampling ------------------------------------------------------------------------------------------------------

UPSAMPLES = {
    "nearest_scale": (lambda x: F.interpolate(x, scale_factor=2), X2),
    "nearest_scale_fraction": (lambda x: F.interpolate(x, scale_factor=(1.5, 0.7)), X2),
    "nearest_size": (lambda x: F.interpolate(x, size=(5, 11)), X2),
    "nearest_exact": (lambda x: F.interpolate(x, scale_factor=0.6, mode="nearest-exact"), X2),
    "nearest1d": (lambda x: F.interpolate(x, scale_factor=3), X1),
    "nearest3d": (lambda x: F.interpolate(x, size=(3, 8, 9)), X3),
    "bilinear_scale": (lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear"), X2),
    "bilinear_align_corners": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True), X2),
    "bilinear_size": (lambda x: F.interpolate(x, size=(5, 1), mode="bilinear"), X2),
    "bilinear_size_align_corners": (
        lambda x: F.interpolate(x, size=(5, 12), mode="bilinear", align_corners=True),
        X2,
    ),
    "bilinear_antialias": (lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True), X2),
    "bicubic": (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), X2),
    "bicubic_align_corners": (lambda x: F.interpolate(x, size=(4, 7), mode="bicubic", align_corners=True), X2),
    "linear1d": (lambda x: F.interpolate(x, scale_factor=2, mode="linear"), X1),
    "trilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), X3),
    "float32_scale": (lambda x: F.interpolate(x, scale_factor=0.35), torch.randn(2, 3, 20, 20)),
    "nearest_default": (lambda x: torch.ops.aten.upsample_nearest2d(x, [18, 16]), X2),
    "bilinear_default": (lambda x: torch.ops.aten.upsample_bilinear2d(x, [18, 16], False, 2.0, 2.0), X2),
    "recompute_scale_factor": (
        lambda x: F.interpolate(x, scale_factor=1.5, recompute_scale_factor=True, mode="bilinear"),
        X2,
    ),
}


@pytest.mark.parametrize("name", sorted(UPSAMPLES))
def test_upsample(name):
    fn, x = UPSAMPLES[name]
    # linear and cubic modes: an If computes PyTorch's formula instead when the input has an infinity or NaN
    exact = not name.startswith(("nearest", "float32_scale")) and "antialias" not in name
    _check(Fn(fn), x, expected=["Resize", "ReduceSum", "Mul", "IsNaN", "If"] if exact else ["Resize"])


@pytest.mark.parametrize("name", ["nearest_scale", "bilinear_scale", "bicubic", "recompute_scale_factor"])
def test_upsample_dynamic_spatial(name):
    fn, x = UPSAMPLES[name]
    _check(Fn(fn), x, dynamic=(0, 2, 3))


def test_upsample_symbolic_size():
    def fn(x):
        return F.interpolate(x, size=(x.shape[2] * 2, x.shape[3] + 1), mode="bilinear", align_corners=True)

    _check(Fn(fn), X2, dynamic=(0, 2, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.uint8])
def test_upsample_dtypes(dtype):
    x = (X2 * 10).to(dtype)
    model = Fn(lambda x: F.interpolate(x, scale_factor=2))
    if dtype != torch.uint8:
        model = Fn(lambda x: (F.interpolate(x, scale_factor=2), F.interpolate(x, scale_factor=2, mode="bilinear")))
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    check_model(model, (x,), atol=tol, rtol=tol)


# -- pixel shuffle ---------------------------------------------------------------------------------------------------


def test_pixel_shuffle():
    onx = _check(nn.PixelShuffle(2), X2, dynamic=(0, 2, 3))
    assert op_types(onx) == ["DepthToSpace"]


def test_pixel_unshuffle():
    x = torch.randn(2, 3, 4, 6)
    onx = _check(nn.PixelUnshuffle(2), x)
    assert _ops(onx) == ["Reshape", "Transpose", "Reshape"]


@pytest.mark.parametrize("shape", [(3, 8, 3, 4), (2, 3, 8, 3, 4)])
def test_pixel_shuffle_other_ranks(shape):
    x = torch.randn(*shape)
    check_model(Fn(lambda x: (F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 1))), (x,))
    check_model(nn.PixelUnshuffle(2), (torch.randn(*shape[:-2], 4, 6),))


# -- max_unpool: a scatter of the pooled values at their indices -----------------------------------------------------


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
