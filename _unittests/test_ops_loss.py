"""Loss converters (ops/loss.py): PyTorch's formulas, each reduction."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import Fn, check_model

X, Y = torch.randn(4, 3), torch.randn(4, 3)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize(
    "loss", [F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.soft_margin_loss]
)
def test_pointwise_losses(loss, reduction):
    check_model(Fn(lambda a, b: loss(a, b, reduction=reduction)), (X, Y), atol=1e-5)


def test_binary_cross_entropy_and_kl_div():
    p, t = torch.rand(4, 3) * 0.98 + 0.01, torch.rand(4, 3)
    check_model(Fn(lambda a, b: F.binary_cross_entropy(a, b)), (p, t), atol=1e-5)
    check_model(Fn(lambda a, b: F.binary_cross_entropy_with_logits(a, b)), (X, t), atol=1e-5)
    check_model(Fn(lambda a, b: F.kl_div(a, b, reduction="batchmean")), (X.log_softmax(1), t), atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_with_ignore_index(reduction):
    target = torch.tensor([0, 2, -100, 1])
    check_model(
        Fn(lambda a, b: F.cross_entropy(a, b, reduction=reduction, ignore_index=-100)), (X, target), atol=1e-5
    )
    check_model(Fn(lambda a, b: F.nll_loss(a, b, reduction=reduction)), (X.log_softmax(1), target.clamp(0)), atol=1e-5)
