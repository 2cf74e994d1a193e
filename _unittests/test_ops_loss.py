"""Loss converters (ops/loss.py): PyTorch's formulas, each reduction."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter.testing.check import Fn, check_model

torch.manual_seed(0)
X, Y = torch.randn(4, 3), torch.randn(4, 3)
P, T = torch.rand(4, 3) * 0.98 + 0.01, torch.rand(4, 3)  # probabilities, targets in [0, 1]
LABELS = torch.tensor([0, 2, 1, 1])
SIGNS = torch.tensor([1.0, -1.0, 1.0, -1.0])
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "loss",
    [
        F.mse_loss,
        F.l1_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        F.soft_margin_loss,
        lambda a, b, reduction: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
        lambda a, b, reduction: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.0),  # l1
        lambda a, b, reduction: F.huber_loss(a, b, reduction=reduction, delta=2.0),
    ],
    ids=["mse", "l1", "smooth_l1", "huber", "soft_margin", "smooth_l1_beta", "smooth_l1_beta0", "huber_delta"],
)
def test_pointwise_losses(loss, reduction):
    check_model(Fn(lambda a, b: loss(a, b, reduction=reduction)), (X, Y))


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda a, b: F.mse_loss(a, b), (X, Y[0])),  # broadcast target
        (lambda a, b: F.mse_loss(a, b), (torch.zeros(0, 3), torch.zeros(0, 3))),  # empty mean: NaN
        (lambda a, b: F.l1_loss(a, b, reduction="sum"), (X.half(), Y.half())),
    ],
    ids=["broadcast", "empty", "float16"],
)
def test_pointwise_edge_cases(fn, args):
    check_model(Fn(fn), args, atol=1e-2 if args[0].dtype == torch.float16 else 1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    w = torch.rand(3)
    check_model(Fn(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction)), (P, T))
    check_model(Fn(lambda a, b, w: F.binary_cross_entropy(a, b, weight=w, reduction=reduction)), (P, T, w))
    check_model(Fn(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction)), (X, T))
    check_model(
        Fn(lambda a, b, w: F.binary_cross_entropy_with_logits(a, b, pos_weight=w, reduction=reduction)),
        (X * 10, T, w + 0.5),
    )


def test_binary_cross_entropy_extremes():
    # log(0) is clamped to -100 by PyTorch; large logits must not overflow
    p, t = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5]), torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5])
    check_model(Fn(lambda a, b: F.binary_cross_entropy(a, b, reduction="none")), (p, t))
    logits = torch.tensor([-100.0, 100.0, -30.0, 30.0, 0.0])
    check_model(Fn(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none")), (logits, t))


@pytest.mark.parametrize("reduction", [*REDUCTIONS, "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    target = Y.log_softmax(1) if log_target else torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]] * 2)  # zeros
    check_model(Fn(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target)), (X.log_softmax(1), target))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_ignore_index(reduction):
    target = torch.tensor([0, 2, -100, 1])
    check_model(Fn(lambda a, b: F.cross_entropy(a, b, reduction=reduction, ignore_index=-100)), (X, target))
    check_model(Fn(lambda a, b: F.nll_loss(a, b, reduction=reduction)), (X.log_softmax(1), target.clamp(0)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "fn, args",
    [
        (
            lambda a, b, w, r: F.cross_entropy(a, b, weight=w, reduction=r, ignore_index=1),
            (X, LABELS, torch.rand(3) + 0.1),
        ),
        (lambda a, b, r: F.cross_entropy(a, b, reduction=r, label_smoothing=0.2), (X, LABELS)),
        (
            lambda a, b, w, r: F.cross_entropy(a, b, weight=w, reduction=r, label_smoothing=0.2, ignore_index=2),
            (X, LABELS, torch.rand(3) + 0.1),
        ),
        (lambda a, b, r: F.cross_entropy(a, b, reduction=r), (X, Y.softmax(1))),  # probabilities as targets
        (
            lambda a, b, w, r: F.cross_entropy(a, b, weight=w, reduction=r, label_smoothing=0.1),
            (X, Y.softmax(1), torch.rand(3)),
        ),
        (
            lambda a, b, r: F.cross_entropy(a, b, reduction=r, ignore_index=0),
            (torch.randn(2, 3, 4, 5), torch.randint(0, 3, (2, 4, 5))),
        ),
        (
            lambda a, b, w, r: F.nll_loss(a, b, weight=w, reduction=r),
            (torch.randn(2, 3, 5), torch.randint(0, 3, (2, 5)), torch.rand(3)),
        ),
    ],
    ids=[
        "weight_ignore",
        "smoothing",
        "smoothing_weight_ignore",
        "probabilities",
        "probabilities_weight",
        "spatial",
        "nll_3d_weight",
    ],
)
def test_cross_entropy_variants(fn, args, reduction):
    check_model(Fn(lambda *a: fn(*a, reduction)), args)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda a, b: F.cross_entropy(a, b, ignore_index=-100), (X, torch.full((4,), -100))),  # all ignored: NaN
        (lambda a, b: F.nll_loss(a, b, ignore_index=1, reduction="sum"), (X, torch.full((4,), 1))),  # all ignored: 0
        (lambda a, b: F.cross_entropy(a, b), (torch.randn(3), torch.tensor(1))),  # unbatched
        (
            lambda a, b: F.cross_entropy(a, b, reduction="none"),
            (torch.tensor([[1000.0, 0, -1000], [0, 0, 0]]), torch.tensor([2, 1])),
        ),
    ],
    ids=["all_ignored_mean", "all_ignored_sum", "unbatched", "large_logits"],
)
def test_cross_entropy_edge_cases(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "fn, args",
    [
        (
            lambda a, b, t, r: F.margin_ranking_loss(a, b, t, margin=0.3, reduction=r),
            (torch.randn(5), torch.randn(5), torch.tensor([1.0, -1, 1, -1, 1])),
        ),
        (lambda a, t, r: F.hinge_embedding_loss(a, t, margin=0.5, reduction=r), (X, torch.tensor([[1.0, -1, 1]] * 4))),
        (lambda a, b, t, r: F.cosine_embedding_loss(a, b, t, margin=0.2, reduction=r), (X, Y, SIGNS)),
        (lambda a, t, r: F.multi_margin_loss(a, t, reduction=r), (X, LABELS)),
        (
            lambda a, t, w, r: F.multi_margin_loss(a, t, p=2, margin=0.5, weight=w, reduction=r),
            (X, LABELS, torch.rand(3)),
        ),
        (
            lambda a, t, r: F.multilabel_margin_loss(a, t, reduction=r),
            (X, torch.tensor([[0, 2, -1], [1, -1, 0], [2, 1, 0], [-1, 0, 0]])),
        ),
        (
            lambda a, t, r: F.multilabel_soft_margin_loss(a, t, reduction=r),
            (X, torch.tensor([[1.0, 0, 1], [0, 0, 1]] * 2)),
        ),
        (lambda a, p, n, r: F.triplet_margin_loss(a, p, n, reduction=r), (X, Y, torch.randn(4, 3))),
        (
            lambda a, p, n, r: F.triplet_margin_loss(a, p, n, p=1, swap=True, margin=0.5, reduction=r),
            (X, Y, torch.randn(4, 3)),
        ),
        (lambda a, t, r: F.poisson_nll_loss(a, t, reduction=r), (X, T * 3)),
        (
            lambda a, t, r: F.poisson_nll_loss(a, t, log_input=False, full=True, reduction=r),
            (P, torch.tensor([[0.0, 1, 4]] * 4)),
        ),
    ],
    ids=[
        "margin_ranking",
        "hinge_embedding",
        "cosine_embedding",
        "multi_margin",
        "multi_margin_p2_weight",
        "multilabel_margin",
        "multilabel_soft_margin",
        "triplet",
        "triplet_p1_swap",
        "poisson",
        "poisson_full",
    ],
)
def test_margin_and_other_losses(fn, args, reduction):
    check_model(Fn(lambda *a: fn(*a, reduction)), args)


def test_losses_dynamic_batch():
    def fn(a, t, b):
        return (
            F.cross_entropy(a, t, label_smoothing=0.1),
            F.mse_loss(a, b),
            F.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"),
        )

    check_model(
        Fn(fn),
        (X, LABELS, Y),
        dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: "batch"}),
        more_inputs=[((torch.randn(7, 3), torch.randint(0, 3, (7,)), torch.randn(7, 3)), None)],
    )
