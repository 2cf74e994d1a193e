"""torchvision's own ops (``torch.ops.torchvision.*``, converters in ``ops/torchvision/``): ONNX Runtime against
torchvision's CPU kernels, on batches of several images, rois partly or wholly outside the image, no roi at all,
float16 and float64, and a number of boxes that changes from one input set to the next."""

import numpy as np
import pytest
import torch

from experimental.torch_interpreter import (
    ExportCaptureError,
    InferenceSession,
    RangeConstraintWarning,
    TorchInterpreterError,
    to_onnx,
)
from experimental.torch_interpreter.opsets import onnxruntime_max_opset
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types

try:
    torchvision = pytest.importorskip(
        "torchvision", reason="torchvision is not installed: pip install --no-deps 'torchvision==0.28.*' (README)"
    )
except RuntimeError as e:  # the CUDA wheel beside a CPU torch: its kernels do not load
    pytest.skip(f"torchvision is installed but its ops do not load ({e}); on a CPU build of torch run "
                "bash ../shared/vision/torchvision_cpu.sh", allow_module_level=True)

from torchvision import ops  # noqa: E402

X = torch.randn(2, 8, 10, 12, generator=torch.Generator().manual_seed(0))
X_OTHER = torch.randn(3, 8, 13, 9, generator=torch.Generator().manual_seed(1))  # another batch and image size
#: rois over X: a roi wholly outside the image, an empty one (a point), a flipped one, then random ones, many of them
#: crossing the image's border
FIXED = torch.tensor([[0, -20, -20, -15, -15], [1, 3, 3, 3, 3], [1, 6, 3, 1, 1], [0, 0.5, 1.5, 2.5, 3.5],
                      [1, -0.5, -1.5, 11.5, 9.5]])
DYNAMIC = ({0: "batch", 2: "h", 3: "w"}, {0: "rois"})


def rois(k: int, images: int = 2, height: int = 10, width: int = 12, seed: int = 0) -> torch.Tensor:
    """``k`` random rois ``[batch index, x1, y1, x2, y2]`` over ``images`` maps of ``height x width``, from 4 pixels
    before the image to 4 after it, at most 8 pixels wide."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(k, 2, generator=g) * torch.tensor([width + 8.0, height + 8.0]) - 4
    index = torch.randint(0, images, (k, 1), generator=g).float()
    return torch.cat([index, corner, corner + torch.rand(k, 2, generator=g) * 8], 1)


ROIS = torch.cat([FIXED, rois(35)])
#: another batch, other rois, then no roi at all
OTHER_INPUTS = [((X_OTHER, rois(7, 3, 13, 9, seed=1)), None), ((X, ROIS[:0]), None)]


def _check_rois(fn, x=X, r=ROIS, more=OTHER_INPUTS, **kwargs):
    """``fn(x, rois)`` exported with a dynamic batch, image size and number of rois, compared on other inputs."""
    return check_model(Fn(fn), (x, r), dynamic_shapes=DYNAMIC, more_inputs=more, **kwargs)


# -- roi_align, roi_pool ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2])
@pytest.mark.parametrize("aligned", [True, False])
def test_roi_align(aligned, sampling_ratio):
    onx = _check_rois(lambda x, r: ops.roi_align(x, r, (3, 4), 0.5, sampling_ratio, aligned), atol=1e-6)
    assert "RoiAlign" in op_types(onx)


def test_roi_align_list_of_boxes():
    """torchvision.ops.roi_align with one [K, 4] tensor of boxes per image: the rois are made by aten ops."""
    def fn(x, a, b):
        return ops.roi_align(x, [a, b], 3, 1.0, 2, True)

    a, b = ROIS[:20, 1:], ROIS[20:, 1:]
    check_model(Fn(fn), (X, a, b), dynamic_shapes=({0: "batch"}, {0: "a"}, {0: "b"}),
                more_inputs=[((X, b[:3], a), None)], atol=1e-6)


def test_roi_pool():
    onx = _check_rois(lambda x, r: ops.roi_pool(x, r, (3, 4), 0.5), atol=0)
    assert op_types(onx) == ["MaxRoiPool"]


# -- position-sensitive pools ----------------------------------------------------------------------------------------

X_PS = torch.randn(2, 24, 10, 12, generator=torch.Generator().manual_seed(2))  # 4 output channels of 2 x 3 bins


@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_ps_roi_align(sampling_ratio):
    """With adaptive sampling, the empty and the flipped rois of FIXED have an empty grid: NaN, as torchvision."""
    more = [((torch.randn(1, 24, 7, 9), rois(6, 1, 7, 9, seed=3)), None), ((X_PS, ROIS[:0]), None)]
    _check_rois(lambda x, r: ops.ps_roi_align(x, r, (2, 3), 0.5, sampling_ratio), X_PS, more=more, atol=1e-6)
    if sampling_ratio < 0:
        assert torch.isnan(ops.ps_roi_align(X_PS, ROIS, (2, 3), 1.0, -1)).any(), "no roi checks the NaN of 0 / 0"


def test_ps_roi_pool():
    more = [((torch.randn(1, 24, 7, 9), rois(6, 1, 7, 9, seed=3)), None), ((X_PS, ROIS[:0]), None)]
    _check_rois(lambda x, r: ops.ps_roi_pool(x, r, (2, 3), 0.5), X_PS, more=more, atol=1e-6)


@pytest.mark.parametrize("op", ["ps_roi_align", "ps_roi_pool"])
def test_ps_roi_channel_mapping(op):
    """The second output (the input channel of each output element), read directly from torch.ops."""
    extra = (2,) if op == "ps_roi_align" else ()
    fn = getattr(torch.ops.torchvision, op)
    more = [((X_PS, ROIS[:4]), None), ((X_PS, ROIS[:0]), None)]
    _check_rois(lambda x, r: fn(x, r, 1.0, 2, 3, *extra), X_PS, more=more, atol=1e-6)


# -- float16 and float64 ---------------------------------------------------------------------------------------------

#: torchvision computes float16 in float16, the converters in float32: rounding differences of float16's size
TOLERANCE = {torch.float16: 2e-2, torch.float64: 1e-6}
ROI_OPS = {
    "roi_align": (X, lambda x, r: ops.roi_align(x, r, (3, 4), 0.5, -1, True)),
    "roi_align_unaligned": (X, lambda x, r: ops.roi_align(x, r, (2, 2), 1.0, 2, False)),
    "roi_pool": (X, lambda x, r: ops.roi_pool(x, r, (3, 4), 0.5)),
    "ps_roi_align": (X_PS, lambda x, r: ops.ps_roi_align(x, r, (2, 3), 0.5, 2)),
    "ps_roi_pool": (X_PS, lambda x, r: ops.ps_roi_pool(x, r, (2, 3), 0.5)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("name", sorted(ROI_OPS))
def test_roi_ops_dtypes(name, dtype):
    """Rois on quarter pixels (exact in float16: the rounded corners and bins are the same in both types)."""
    x, fn = ROI_OPS[name]
    r = torch.cat([ROIS[:, :1], (ROIS[:, 1:] * 4).round() / 4], 1)
    tol = TOLERANCE[dtype]
    one_image = torch.cat([torch.zeros(5, 1), r[5:10, 1:]], 1)
    check_model(Fn(fn), (x.to(dtype), r.to(dtype)), dynamic_shapes=({0: "batch"}, {0: "rois"}),
                more_inputs=[((x[:1].to(dtype), one_image.to(dtype)), None)], atol=tol, rtol=tol)


# -- nms -------------------------------------------------------------------------------------------------------------


def boxes(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` boxes ``x1, y1, x2, y2`` on a 40 x 40 image and their scores, one of 4 values (many equal scores); the
    first two overlap by an IoU of exactly 1/3."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * 40
    b = torch.cat([corner, corner + 1 + torch.rand(n, 2, generator=g) * 15], 1)
    b[:2] = torch.tensor([[0.0, 0, 2, 1], [1, 0, 3, 1]])
    scores = torch.randint(0, 4, (n,), generator=g).float()
    scores[:2] = torch.tensor([3.0, 2.0])
    return b, scores


@pytest.mark.parametrize("threshold", [0.0, 0.3, 1 / 3, 0.7, 1.0, 1.5])
def test_nms(threshold):
    """Equal scores come out by increasing index, as torchvision's kernel orders them; an IoU equal to the threshold
    (1/3, not a float32) suppresses as torchvision's float-against-double comparison does."""
    b, s = boxes(60)
    more = [(boxes(25, seed=1), None), ((b[:0], s[:0]), None), ((b[:1], s[:1]), None)]
    onx = check_model(Fn(lambda b, s: ops.nms(b, s, threshold)), (b, s), dynamic_shapes=({0: "n"}, {0: "n"}),
                      more_inputs=more)
    assert "NonMaxSuppression" in op_types(onx)


def test_nms_equal_scores():
    """5000 boxes of one score, none overlapping: torchvision keeps them in index order."""
    b = torch.arange(20000.0).reshape(5000, 4) * 10
    b[:, 2:] = b[:, :2] + 1
    check_model(Fn(lambda b, s: ops.nms(b, s, 0.5)), (b, torch.zeros(5000)))


def test_nms_float16():
    """torchvision's CPU kernel has no float16: the ONNX model (in float32) gives its answer on the float32 boxes."""
    b, s = boxes(60)
    b, s = (b * 4).round().half() / 4, s.half()
    onx = to_onnx(Fn(lambda b, s: ops.nms(b, s, 0.5)), (b, s), dynamic_shapes=({0: "n"}, {0: "n"}))
    got = InferenceSession(onx).run(None, {i.name: t for i, t in zip(onx.graph.input, (b, s))})[0]
    np.testing.assert_array_equal(got, ops.nms(b.float(), s.float(), 0.5).numpy())


def test_nms_float64():
    """torchvision computes the IoU of float64 boxes in float64, the ONNX model in float32: the same boxes unless an
    IoU is within float32's rounding of the threshold."""
    b, s = boxes(60)
    check_model(Fn(lambda b, s: ops.nms(b, s, 0.5)), (b.double(), s.double()))


def test_batched_nms():
    """batched_nms offsets the boxes of each class by the largest coordinate + 1 (aten ops), then calls nms. Its
    Python takes that path for 1000 boxes or fewer (on the CPU), a loop over the classes above: torch.export keeps the
    first and says so."""
    b, s = boxes(60)
    classes = torch.randint(0, 3, (60,), generator=torch.Generator().manual_seed(0))
    b2, s2 = boxes(20, seed=2)
    with pytest.warns(RangeConstraintWarning, match=r"must be in \[2, 1000\]"):
        check_model(Fn(lambda b, s, c: ops.batched_nms(b, s, c, 0.4)), (b, s, classes),
                    dynamic_shapes=({0: "n"}, {0: "n"}, {0: "n"}), more_inputs=[((b2, s2, classes[:20]), None)])


# -- deform_conv2d ---------------------------------------------------------------------------------------------------

DEFORM = {  # in channels, out channels, kernel, stride, padding, dilation, groups, offset groups, mask, bias
    "plain": (4, 6, (3, 3), 1, 0, 1, 1, 1, True, True),
    "groups": (4, 6, (3, 2), (2, 1), (1, 2), (1, 2), 2, 2, True, True),
    "offset_groups_no_mask": (6, 4, (2, 3), (1, 2), 1, (2, 1), 2, 3, False, False),
}


def _deform(case, dtype=torch.float32, batch=2, seed=0):
    """(model, inputs): inputs of 9 x 8 images whose offsets move the samples up to 3 pixels, on half pixels (exact
    positions on the image's border: -1, 0, H - 1, H), the mask in [0, 1]."""
    c, co, (kh, kw), stride, pad, dil, groups, offset_groups, use_mask, use_bias = DEFORM[case]
    s, p, d = (v if isinstance(v, tuple) else (v, v) for v in (stride, pad, dil))
    out = [(n + 2 * p[i] - d[i] * (k - 1) - 1) // s[i] + 1 for i, (n, k) in enumerate(((9, kh), (8, kw)))]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, c, 9, 8, generator=g)
    offset = (torch.randn(batch, 2 * offset_groups * kh * kw, *out, generator=g) * 6).round() / 2
    mask = torch.rand(batch, offset_groups * kh * kw, *out, generator=g)
    weight = torch.randn(co, c // groups, kh, kw, generator=g).to(dtype)
    bias = torch.randn(co, generator=g).to(dtype) if use_bias else None

    def fn(x, offset, mask):
        return ops.deform_conv2d(x, offset, weight, bias, s, p, d, mask if use_mask else None)

    return fn, tuple(t.to(dtype) for t in (x, offset, mask))


@pytest.mark.parametrize("opset", [18, 19])
@pytest.mark.parametrize("case", sorted(DEFORM))
def test_deform_conv2d(case, opset):
    """Opset 19 has ONNX DeformConv; at opset 18 the samples are gathered and multiplied by the weight."""
    fn, inputs = _deform(case)
    one_image = _deform(case, batch=1, seed=1)[1]
    onx = check_model(Fn(fn), inputs, dynamic_shapes=({0: "batch"},) * 3, more_inputs=[(one_image, None)], atol=1e-5,
                      target_opset=opset)
    assert ("DeformConv" in op_types(onx)) == (opset >= 19)


@pytest.mark.parametrize("opset", [18, 19])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=str)
def test_deform_conv2d_dtypes(dtype, opset):
    fn, inputs = _deform("groups", dtype)
    tol = TOLERANCE[dtype]
    check_model(Fn(fn), inputs, atol=tol, rtol=tol, target_opset=opset)


# -- errors ----------------------------------------------------------------------------------------------------------

# models of their own, whose forward line torch.export records (a lambda's line is not)


class RoiAlign3dInput(torch.nn.Module):
    def forward(self, x, r):
        return ops.roi_align(x, r, 2)


class RoiPoolArgmax(torch.nn.Module):
    def forward(self, x, r):
        return torch.ops.torchvision.roi_pool(x, r, 1.0, 2, 2)[1]


class NmsNegativeThreshold(torch.nn.Module):
    def forward(self, b, s):
        return ops.nms(b, s, -0.5)


class DeformConvOffsetGroups(torch.nn.Module):  # torchvision.ops.deform_conv2d infers offset_groups: the op itself
    def forward(self, x, o):
        return torch.ops.torchvision.deform_conv2d(x, torch.ones(6, 4, 3, 3), o, torch.ones(1), torch.zeros(6), 1, 1,
                                                   0, 0, 1, 1, 1, 1, False)


class DeformConvOutputSize(torch.nn.Module):
    def forward(self, x, o):
        return ops.deform_conv2d(x, o, torch.ones(6, 4, 3, 3))


BAD = [  # what the converters refuse: model, inputs, op, what the message says
    (RoiAlign3dInput, (X[0], ROIS), "roi_align", "input must be a batch of feature maps"),
    (RoiPoolArgmax, (X, ROIS), "roi_pool", "the argmax output"),
    (NmsNegativeThreshold, boxes(10), "nms", "iou_threshold=-0.5"),
    (DeformConvOffsetGroups, (X[:, :4], torch.randn(2, 36, 8, 10)), "deform_conv2d",
     "offset.shape[1] (2 * offset_groups * kh * kw) is 36, expected 18"),
    (DeformConvOutputSize, (X[:, :4], torch.randn(2, 18, 8, 9)), "deform_conv2d",
     "offset.shape[3] (the output size) is 9, expected 10"),
]


@pytest.mark.parametrize("model, inputs, op, said", BAD, ids=[b[0].__name__ for b in BAD])
def test_bad_inputs_name_the_op_and_the_line(model, inputs, op, said):
    with pytest.raises(TorchInterpreterError) as info:
        to_onnx(model(), inputs)
    message = str(info.value)
    assert f"torchvision::{op}.default" in message and said in message, message
    assert "test_ops_torchvision.py" in message and "forward: return" in message, message  # the model's line


@pytest.mark.parametrize(
    "fn, inputs, said",
    [(lambda b, s: ops.nms(b[None], s, 0.5), boxes(10), "boxes should be a 2d tensor"),
     (lambda x, r: torch.ops.torchvision.roi_align(x, r, 1.0, -2, 3, 2, False), (X, ROIS), "negative dimension -2")],
    ids=["nms_3d_boxes", "roi_align_negative_size"],
)
def test_bad_inputs_torchvision_checks_at_capture(fn, inputs, said):
    """What torchvision's meta functions check fails while torch.export runs: the capture error names the line."""
    with pytest.raises(ExportCaptureError) as info:
        to_onnx(Fn(fn), inputs)
    assert said in str(info.value) and "test_ops_torchvision.py" in str(info.value), str(info.value)


# -- opsets ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ROI_OPS))
def test_roi_ops_at_the_latest_opset(name):
    """onnxruntime 1.32 has no RoiAlign nor MaxRoiPool kernel for their version 22: an export at a later opset says so
    (naming the opset to use) instead of writing a model onnxruntime does not load; ps_roi_pool has neither."""
    top = onnxruntime_max_opset()
    x, fn = ROI_OPS[name]
    if name == "ps_roi_pool":
        check_model(Fn(fn), (x, ROIS), target_opset=top, atol=1e-6)
        return
    with pytest.raises(TorchInterpreterError, match=r"no (RoiAlign|MaxRoiPool) kernel at opset \d+ \(its last is 21\)"):
        to_onnx(Fn(fn), (x, ROIS), target_opset=top)
    check_model(Fn(fn), (x, ROIS), target_opset=21, atol=1e-6)


def test_nms_deform_conv2d_at_the_latest_opset():
    b, s = boxes(60)
    check_model(Fn(lambda b, s: ops.nms(b, s, 0.5)), (b, s), target_opset=onnxruntime_max_opset())
    fn, inputs = _deform("groups")
    check_model(Fn(fn), inputs, atol=1e-5, target_opset=onnxruntime_max_opset())
