"""torchvision-style CNN blocks written here (ResNet basic block, depthwise separable convolution, upsampling
with F.interpolate, a tiny U-Net): dynamic batch and spatial size, eval mode, against eager PyTorch; then
torchvision's own models where torchvision loads (RAFT)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from experimental.torch_interpreter.testing.check import check_model, op_types
from experimental.torch_interpreter.testing.models import (
    IMAGE_AXES,
    BasicBlock,
    TinyResNet,
    images,
    randomize_batchnorm,
)

class DepthwiseSeparable(nn.Module):
    """MobileNet: depthwise 3x3 (groups=channels), bn, relu6, pointwise 1x1, bn, relu6; then a strided one."""

    def __init__(self, cin=4, cout=12):
        super().__init__()

        def block(i, o, stride):
            return nn.Sequential(
                nn.Conv2d(i, i, 3, stride, 1, groups=i, bias=False), nn.BatchNorm2d(i), nn.ReLU6(inplace=True),
                nn.Conv2d(i, o, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU6(inplace=True),
            )

        self.blocks = nn.Sequential(block(cin, cout, 1), block(cout, cout, 2))

    def forward(self, x):
        return self.blocks(x)


class Upsample(nn.Module):
    def __init__(self, mode, align_corners=None, scale_factor=2.0, by_size=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.mode, self.align_corners, self.scale_factor, self.by_size = mode, align_corners, scale_factor, by_size

    def forward(self, x):
        y = self.conv(x)
        if self.by_size:  # the size of another tensor: a U-Net skip connection
            size = (x.shape[2] * 2, x.shape[3] * 2)
            return F.interpolate(y, size=size, mode=self.mode, align_corners=self.align_corners)
        return F.interpolate(y, scale_factor=self.scale_factor, mode=self.mode, align_corners=self.align_corners)


class TinyUNet(nn.Module):
    """Down (conv, maxpool), up (bilinear interpolate to the skip's size), concat with the skip, conv."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.dec = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        skip = self.enc(x)
        up = F.interpolate(self.mid(skip), size=skip.shape[-2:], mode="bilinear", align_corners=False)
        return self.dec(torch.cat([up, skip], dim=1))


def test_resnet_basic_blocks():
    torch.manual_seed(0)
    model = randomize_batchnorm(TinyResNet())
    onx = check_model(
        model, (images(2, 3, 32, 32),), dynamic_shapes=IMAGE_AXES,
        more_inputs=[((images(3, 3, 48, 40, seed=1),), None)], atol=1e-4,
    )
    ops = op_types(onx)
    # the MaxPool sits in the branches of its exactness guard: If(the input holds no NaN nor -inf, MaxPool, exact)
    in_branches = [n.op_type for node in onx.graph.node if node.op_type == "If" for a in node.attribute for n in a.g.node]
    assert ops.count("Conv") == 6 and "MaxPool" in in_branches
    assert [d.dim_param or d.dim_value for d in onx.graph.output[0].type.tensor_type.shape.dim] == ["batch", 10]


@pytest.mark.parametrize("stride, planes", [(1, 8), (2, 16)], ids=["identity", "downsample"])
def test_basic_block(stride, planes):
    torch.manual_seed(0)
    model = randomize_batchnorm(BasicBlock(8, planes, stride))
    onx = check_model(
        model, (images(2, 8, 12, 12),), dynamic_shapes=IMAGE_AXES,
        more_inputs=[((images(1, 8, 9, 15, seed=1),), None)], atol=1e-4,
    )
    assert op_types(onx).count("Conv") == (2 if stride == 1 else 3)


def test_depthwise_separable():
    torch.manual_seed(0)
    model = randomize_batchnorm(DepthwiseSeparable())
    onx = check_model(
        model, (images(2, 4, 16, 16),), dynamic_shapes=IMAGE_AXES,
        more_inputs=[((images(3, 4, 11, 20, seed=1),), None)], atol=1e-4,
    )
    groups = [a.i for n in onx.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    assert 4 in groups and 12 in groups


@pytest.mark.parametrize(
    "mode, align_corners, scale_factor, by_size",
    [
        ("nearest", None, 2.0, False),
        ("nearest", None, 2.0, True),
        ("bilinear", False, 2.0, False),
        ("bilinear", True, 2.0, False),
        ("bilinear", False, 0.5, False),
        ("bilinear", False, 2.0, True),
    ],
    ids=["nearest", "nearest-size", "bilinear", "bilinear-align_corners", "bilinear-down", "bilinear-size"],
)
def test_upsample(mode, align_corners, scale_factor, by_size):
    torch.manual_seed(0)
    model = Upsample(mode, align_corners, scale_factor, by_size)
    onx = check_model(
        model, (images(2, 3, 8, 8),), dynamic_shapes=IMAGE_AXES,
        more_inputs=[((images(1, 3, 6, 10, seed=1),), None)], atol=1e-5,
    )
    assert "Resize" in op_types(onx)


def test_tiny_unet():
    torch.manual_seed(0)
    model = randomize_batchnorm(TinyUNet())
    # odd sizes: the pooled map is smaller than half, interpolate goes back to the skip's exact size
    check_model(
        model, (images(2, 3, 16, 16),), dynamic_shapes=IMAGE_AXES,
        more_inputs=[((images(1, 3, 13, 22, seed=1),), None)], atol=1e-4,
    )


def _torchvision():
    try:
        return pytest.importorskip("torchvision", reason="torchvision is not installed (README)")
    except RuntimeError as e:  # the CUDA wheel beside a CPU torch: its kernels do not load
        pytest.skip(f"torchvision is installed but does not load ({e}): bash ../shared/vision/torchvision_cpu.sh")


def _raft_images(batch, height, width, seed):
    return images(batch, 3, height, width, seed=seed), images(batch, 3, height, width, seed=seed + 1)


@pytest.mark.filterwarnings("ignore:The tensor attributes self.corr_block")  # RAFT assigns its pyramid in forward
def test_raft_small():
    """torchvision's RAFT (a meshgrid in a graph with in-place ops; 12 flow predictions, each refining the one
    before): every prediction equal to eager."""
    torch.manual_seed(0)
    model = _torchvision().models.optical_flow.raft_small(weights=None).eval()
    check_model(model, _raft_images(1, 128, 128, 0), atol=1e-3)


@pytest.mark.heavy
@pytest.mark.filterwarnings("ignore:The tensor attributes self.corr_block")
def test_raft_small_dynamic():
    """RAFT with dynamic batch, height and width (about 13 s here); the meshgrid crash over dynamic sizes is also
    checked by test_regressions.py::test_meshgrid_in_a_graph_with_an_in_place_op."""
    torch.manual_seed(0)
    model = _torchvision().models.optical_flow.raft_small(weights=None).eval()
    axes = {0: "batch", 2: "height", 3: "width"}
    check_model(
        model, _raft_images(1, 128, 128, 0), dynamic_shapes=(axes, axes),
        more_inputs=[(_raft_images(2, 136, 192, 2), None)], atol=1e-3,
    )
