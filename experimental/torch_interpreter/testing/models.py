"""Small models the tests and the benchmarks share (the GPU check runs them on CUDA): a tiny ResNet, control flow
(``torch.cond``, ``scan``, ``while_loop``) and a custom ``autograd.Function``.

Example::

    >>> import torch
    >>> model = randomize_batchnorm(TinyResNet())
    >>> model(images(2, 3, 32, 32)).shape
    torch.Size([2, 10])
"""

from __future__ import annotations

import torch
from torch import nn
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from .check import Fn

#: the dynamic axes of :func:`images`
IMAGE_AXES = ({0: "batch", 2: "height", 3: "width"},)


def images(batch, channels, height, width, seed=0):
    """Random images of the given size, the same for the same seed."""
    return torch.randn(batch, channels, height, width, generator=torch.Generator().manual_seed(seed))


def randomize_batchnorm(model):
    """Random running statistics and affine parameters, so that BatchNormalization is really checked."""
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
    return model.eval()


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock: conv3x3-bn-relu-conv3x3-bn + identity or downsample, relu."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    """Stem (conv, bn, relu, maxpool), a plain block, a downsampling block, global pooling and a classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        )
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Fn1(Fn):
    """One named input, so that ``dynamic_shapes=({0: "n"},)`` is one entry per argument."""

    def forward(self, x):
        return self.fn(x)


def scan_cumsum(x):
    """The running sum of ``x`` along its first axis, written with ``scan`` (a Scan node in ONNX)."""
    def combine(carry, xi):
        carry = carry + xi
        return carry, carry.clone()

    return scan(combine, torch.zeros_like(x[0]), x)[1]


class CondModel(torch.nn.Module):
    """Several inputs and outputs, a branch calling a submodule, an input returned unchanged, constants."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        def true_fn(x, y):
            return self.lin(x) + y, x.clone(), torch.ones(3)

        def false_fn(x, y):
            return x - y, torch.zeros_like(x), torch.arange(3).float()

        return torch.cond(x.mean() > y.mean(), true_fn, false_fn, (x, y))


class CountDown(torch.nn.Module):
    """``while_loop`` counting ``n`` down, a weight read in the body, three carried values."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3) * 0.5)

    def forward(self, n, x):
        def cond_fn(i, h, total):
            return i > 0

        def body_fn(i, h, total):
            h = torch.tanh(h @ self.w)
            return i - 1, h, total + h.sum()

        return while_loop(cond_fn, body_fn, (n.clone(), x.clone(), torch.zeros(())))


class ScalarAndTupleFunction(torch.autograd.Function):
    """An ``autograd.Function`` with Python scalars and a tuple among its arguments (one PythonOp node)."""

    @staticmethod
    def forward(ctx, input, alpha, beta, gamma):
        ctx.save_for_backward(input)
        ctx.alpha, ctx.beta, ctx.gamma = alpha, beta, gamma
        return alpha * beta[0] * beta[1] * gamma * input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return ctx.alpha * ctx.beta[0] * ctx.beta[1] * ctx.gamma * grad_input, None, None, None


class IssueModel(torch.nn.Module):
    """A linear layer then :class:`ScalarAndTupleFunction`."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return ScalarAndTupleFunction.apply(self.lin(x), 2.0, (2, 3), 0.5)
