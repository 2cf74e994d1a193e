"""Resampling (ops/sampling.py): interpolate and grid_sample. test_ops_convolution_pooling.py covers the upsample
overloads (scales, sizes, align_corners, antialias, dynamic spatial axes); this file the rest."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError, UnsupportedOpError
from experimental.torch_interpreter.testing.check import Fn, check_dynamic, check_model, rand

torch.manual_seed(0)
X = torch.randn(1, 2, 4, 5)
GRID = torch.rand(1, 3, 3, 2) * 3 - 1.5  # a third of the points outside [-1, 1]
X3 = torch.randn(1, 2, 3, 4, 5)
GRID3 = torch.rand(1, 2, 3, 2, 3) * 2.4 - 1.2
TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate(mode):
    kw = {} if mode == "nearest" else {"align_corners": False}
    check_model(Fn(lambda x: F.interpolate(x, size=(6, 7), mode=mode, **kw)), (torch.randn(1, 2, 3, 4),), **TOL)
    check_model(Fn(lambda x: F.interpolate(x, scale_factor=2.0, mode=mode, **kw)), (torch.randn(1, 2, 3, 4),), **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: F.interpolate(x, size=(4, 6, 3), mode="trilinear"), X3),
        (lambda x: F.interpolate(x, size=(5, 2, 9), mode="trilinear", align_corners=True), X3),
        (lambda x: F.interpolate(x, scale_factor=0.5, mode="bicubic", antialias=True), torch.randn(1, 2, 8, 8)),
        (lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True), torch.randn(1, 2, 8, 7)),
        (lambda x: F.interpolate(x, size=7, mode="nearest-exact"), torch.randn(1, 2, 5)),
        (lambda x: F.interpolate(x, scale_factor=(1.5, 2, 0.5), mode="nearest-exact"), X3),
        (lambda x: F.interpolate(x, size=(2, 2), mode="area"), torch.randn(1, 2, 4, 6)),
        (lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True), torch.randn(1, 2, 5)),
        (lambda x: F.interpolate(x, size=(3, 2)), torch.randn(1, 2, 7, 5)),  # downscale, not divisible
        (lambda x: F.interpolate(x, size=(1, 1), mode="bilinear"), X),  # to a single pixel
        (lambda x: torch.nn.Upsample(scale_factor=2, mode="bilinear")(x), X),
        (lambda x: torch.nn.UpsamplingNearest2d(size=(5, 7))(x), X),
        (lambda x: torch.nn.UpsamplingBilinear2d(scale_factor=2)(x), X),  # align_corners=True
    ],
    ids=[
        "trilinear_size",
        "trilinear_align_corners",
        "bicubic_antialias",
        "bilinear_antialias_size",
        "nearest_exact_1d",
        "nearest_exact_3d",
        "area",
        "linear_align_corners",
        "nearest_downscale",
        "single_pixel",
        "upsample_module",
        "upsampling_nearest2d",
        "upsampling_bilinear2d",
    ],
)
def test_interpolate_cases(fn, x):
    check_model(Fn(fn), (x,), **TOL)


_UINT8_ROUNDING = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="uint8 bilinear/bicubic: onnxruntime's Resize truncates (138.75 -> 138) where PyTorch rounds (139), "
    "and bicubic overshoots wrap (254) where PyTorch clamps (0)",
)


@pytest.mark.parametrize(
    "mode", ["nearest", pytest.param("bilinear", marks=_UINT8_ROUNDING), pytest.param("bicubic", marks=_UINT8_ROUNDING)]
)
def test_interpolate_uint8(mode):
    x = torch.tensor([[[[0, 100, 255], [7, 50, 201]]]], dtype=torch.uint8)
    check_model(Fn(lambda x: F.interpolate(x, scale_factor=2, mode=mode)), (x,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_interpolate_dtypes(dtype):
    tol = 1e-2 if dtype == torch.float16 else 1e-12  # float64 in double (it was rounded to float32: 1e-7 off)
    model = Fn(
        lambda x: (F.interpolate(x, scale_factor=2, mode="bicubic"), F.interpolate(x, size=(3, 7), mode="bilinear"))
    )
    check_model(model, (X.to(dtype),), atol=tol, rtol=tol)


FLOAT64_MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True),
                 ("bicubic", False), ("bicubic", True)]


@pytest.mark.parametrize("how", [{"size": (7, 5)}, {"scale_factor": (1.7, 0.6)}, {"size": (6, 18)}],
                         ids=["size", "scales", "kept-doubled"])
@pytest.mark.parametrize("mode,align_corners", FLOAT64_MODES)
def test_interpolate_float64_is_not_rounded(mode, align_corners, how):
    """onnxruntime's Resize has no double kernel: a float64 input went through float32 (values 1e-7 off, the
    first convolution of a float64 Mask R-CNN already 1e-6 off); now the source indices and weights are
    PyTorch's, gathered in double. The input is not a multiple of a power of 2, so float32 would round it.
    Width 9 to 5 with scale 0.6 puts output 3 on source 5.0 in float (4.9999... in double)."""
    kw = {} if align_corners is None else {"align_corners": align_corners}
    model = Fn(lambda x: F.interpolate(x, mode=mode, **how, **kw))
    x = torch.rand(2, 3, 6, 9, dtype=torch.float64) + 1 / 3
    check_model(model, (x,), atol=1e-12, rtol=1e-12)
    dims = {0: torch.export.Dim.DYNAMIC, 2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC}
    other = torch.rand(1, 3, 11, 4, dtype=torch.float64) + 1 / 3
    check_model(model, (x,), dynamic_shapes=(dims,), more_inputs=[((other,), None)], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_interpolate_float64_1d_3d(mode):
    x1 = torch.rand(2, 3, 7, dtype=torch.float64) + 1 / 3
    check_model(Fn(lambda x: F.interpolate(x, size=11, mode=mode)), (x1,), atol=1e-12, rtol=1e-12)
    mode3 = "trilinear" if mode == "linear" else mode
    x3 = torch.rand(1, 2, 3, 4, 5, dtype=torch.float64) + 1 / 3
    check_model(Fn(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode3)), (x3,), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample(mode, padding_mode, align_corners):
    fn = lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)  # noqa: E731
    check_model(Fn(fn), (X, GRID), **TOL)


@pytest.mark.parametrize(
    "padding_mode, align_corners", [("zeros", False), ("border", True), ("reflection", False), ("reflection", True)]
)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding_mode, align_corners):
    fn = lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)  # noqa: E731
    check_model(Fn(fn), (X3, GRID3), target_opset=20, **TOL)


def test_grid_sample_3d_needs_opset_20():
    with pytest.raises(ConversionError, match="opset 20"):
        to_onnx(Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)), (X3, GRID3))


@pytest.mark.parametrize(
    "dtype, opset",
    [
        (torch.float16, 18),
        pytest.param(
            torch.float64,
            18,
            marks=pytest.mark.xfail(
                strict=True,
                raises=OrtNotImplemented,
                reason="float64 grid_sample at opset 18 is GridSample(16), which onnxruntime does not implement for "
                "double (NOT_IMPLEMENTED when the session is created); at opset 20 it runs",
            ),
        ),
        (torch.float64, 20),
    ],
)
def test_grid_sample_dtypes(dtype, opset):
    tol = 1e-2 if dtype == torch.float16 else 1e-8
    fn = Fn(lambda x, g: F.grid_sample(x, g, align_corners=True))
    check_model(fn, (X.to(dtype), GRID.to(dtype)), atol=tol, rtol=tol, target_opset=opset)


def test_grid_sample_dynamic():
    check_model(
        Fn(lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=False)),
        (X.expand(2, -1, -1, -1), GRID.expand(2, -1, -1, -1)),
        dynamic_shapes=({0: "batch", 2: "h", 3: "w"}, {0: "batch", 1: "gh", 2: "gw"}),
        more_inputs=[((torch.randn(3, 2, 6, 3), torch.rand(3, 2, 5, 2) * 2 - 1), None)],
        **TOL,
    )


def test_interpolate_dynamic_batch():
    check_dynamic(lambda x: F.interpolate(x, size=(3, 8), mode="bicubic", align_corners=True), rand(2, 2, 4, 5), **TOL)


@pytest.mark.xfail(strict=True, raises=UnsupportedOpError, reason="aten::affine_grid_generator has no converter")
def test_affine_grid():
    check_model(Fn(lambda t: F.affine_grid(t, [1, 2, 4, 5], align_corners=False)), (torch.randn(1, 2, 3),), **TOL)
