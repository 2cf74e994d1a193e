"""Linear algebra converters (ops/linalg.py): products, norms, distances, determinants."""

from __future__ import annotations

import pytest
import torch
from helpers import Fn, check_model

A, B, BIAS = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.matmul, (torch.randn(2, 3, 4), torch.randn(4, 5))),
        (torch.mv, (A, torch.randn(4))),
        (torch.dot, (torch.randn(4), torch.randn(4))),
        (torch.outer, (torch.randn(3), torch.randn(4))),
        (lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0), (A, B, BIAS)),
        (lambda a, b: torch.tensordot(a, b, dims=([1], [0])), (A, B)),
        (lambda a, b: torch.einsum("ij,jk->ik", a, b), (A, B)),
        (torch.kron, (torch.randn(2, 2), torch.randn(3, 2))),
        (lambda a, b: torch.linalg.cross(a, b, dim=-1), (torch.randn(4, 3), torch.randn(4, 3))),
    ],
)
def test_products(fn, args):
    check_model(Fn(fn), args, atol=1e-4)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3])
def test_vector_norm_with_nan_and_keepdim(ord):
    x = torch.randn(3, 5)
    x[1, 2] = float("nan")
    check_model(Fn(lambda x: torch.linalg.vector_norm(x, ord, dim=1, keepdim=True)), (x,), atol=1e-4)


@pytest.mark.parametrize("ord", ["fro", 1, -1, float("inf")])
def test_matrix_norm(ord):
    check_model(Fn(lambda x: torch.linalg.matrix_norm(x, ord)), (torch.randn(2, 3, 3),), atol=1e-4)


def test_distances_and_det():
    x, y = torch.randn(4, 3), torch.randn(5, 3)
    check_model(Fn(lambda a, b: torch.cdist(a, b)), (x, y), atol=1e-4)
    check_model(Fn(lambda a, b: torch.nn.functional.cosine_similarity(a, b)), (x, torch.randn(4, 3)), atol=1e-5)
    check_model(Fn(torch.linalg.det), (torch.randn(2, 3, 3),), atol=1e-4)


def test_matmul_dynamic_batch():
    check_model(
        Fn(torch.matmul),
        (torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        more_inputs=[((torch.randn(5, 3, 4), torch.randn(5, 4, 5)), None)],
        atol=1e-4,
    )
