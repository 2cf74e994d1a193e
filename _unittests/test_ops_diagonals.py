"""Diagonals and triangles (ops/diagonals.py)."""

from __future__ import annotations

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model, rand

X = torch.randn(3, 4)
X3 = torch.randn(2, 3, 4)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.diagonal(x), X),
        (lambda x: torch.diagonal(x, 1), X),
        (lambda x: torch.diagonal(x, -1), X),
        (lambda x: torch.diagonal(x, 5), X),  # beyond the matrix: empty
        (lambda x: torch.diagonal(x, -3), X),  # the last row only
        (lambda x: torch.diagonal(x, 0, 1, 2), X3),
        (lambda x: torch.diagonal(x, 1, -1, 0), X3),  # the diagonal becomes the last axis
        (lambda x: torch.diagonal(x, -1, 2, 1), X3),
        (lambda x: torch.linalg.diagonal(x, offset=1), X3),
        (lambda x: torch.diagonal_copy(x, -1), X),
        (lambda x: torch.diag(x), X),  # 2-D: extracts
        (lambda x: torch.diag(x, -2), X),
        (lambda x: torch.diag(x[0]), X),  # 1-D: builds
        (lambda x: torch.diag(x[0], -1), X),
        (lambda x: torch.diag(x[0, :1]), X),  # size 1
        (lambda x: torch.diagflat(x[:2]), X),
        (lambda x: torch.diagflat(x[0], 2), X),
        (lambda x: torch.diag_embed(x), X),
        (lambda x: torch.diag_embed(x, offset=1), X),
        (lambda x: torch.diag_embed(x, -1, 0, 2), X),
        (lambda x: torch.diag_embed(x, 0, -1, 0), X3),
    ],
)
def test_diagonals(fn, x):
    check_model(Fn(fn), (x,))


@pytest.mark.parametrize("diagonal", [0, 1, -1, 3, -5, 10])
@pytest.mark.parametrize("x", [X, X3, torch.randn(4, 3)], ids=["wide", "batched", "tall"])
def test_triangles(x, diagonal):
    check_model(Fn(lambda x: (torch.triu(x, diagonal), torch.tril(x, diagonal))), (x,))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float16])
def test_dtypes(dtype):
    x = rand(3, 4, dtype=dtype)
    check_model(Fn(lambda x: (torch.triu(x, 1), torch.tril(x, -1), torch.diagonal(x, 1), torch.diag_embed(x[0]))), (x,))


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda x, s: torch.diagonal_scatter(x, s), (X, torch.ones(3))),
        (lambda x, s: torch.diagonal_scatter(x, s, 1), (X, torch.ones(3))),
        (lambda x, s: torch.diagonal_scatter(x, s, -2), (X, torch.ones(1))),
        (lambda x, s: torch.diagonal_scatter(x, s, 0, 1, 2), (X3, torch.ones(2, 3))),
        (lambda x, s: torch.diagonal_scatter(x, s, 1, -1, 0), (X3, torch.ones(3, 1))),
    ],
)
def test_diagonal_scatter(fn, args):
    check_model(Fn(fn), args)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda a, b: torch.block_diag(a, b), (X, X[:2, :1])),
        (lambda a, b, c: torch.block_diag(a, b, c), (X[0], torch.tensor(5.0), X[:2])),  # 1-D and 0-D blocks
        (lambda a, b: torch.block_diag(a, b), (X, rand(2, 2, dtype=torch.int64))),  # promoted to float
        (lambda a: torch.block_diag(a), (X,)),
    ],
)
def test_block_diag(fn, args):
    check_model(Fn(fn), args)


def test_triangles_dynamic():
    check_model(
        Fn(lambda x: (torch.triu(x, 1), torch.tril(x, -2))),
        (X,),
        dynamic_shapes=({0: "rows", 1: "cols"},),
        more_inputs=[((torch.randn(5, 2),), None)],
    )


def test_diagonals_dynamic_batch():
    """The matrix axes static (the converters need them), the batch axis dynamic."""

    def fn(x):
        return torch.diagonal(x, -1, 1, 2), torch.diag_embed(x, 1), torch.diagonal_scatter(x, x[:, 0, :3], 0, 1, 2)

    check_model(Fn(fn), (X3,), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(5, 3, 4),), None)])
