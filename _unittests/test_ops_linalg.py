"""Linear algebra converters (ops/linalg.py): products, norms, distances, determinants."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

torch.manual_seed(0)
r = torch.randn
A, B, BIAS = r(3, 4), r(4, 5), r(5)
TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.matmul, (r(2, 3, 4), r(4, 5))),
        (torch.matmul, (r(4), r(4))),
        (torch.matmul, (r(4), B)),
        (torch.matmul, (A, r(4))),
        (torch.matmul, (r(4), r(2, 4, 5))),
        (torch.matmul, (r(2, 1, 3, 4), r(5, 4, 2))),  # broadcast batch
        (torch.matmul, (r(3, 0), r(0, 4))),  # empty inner size: zeros
        (torch.mm, (A, B)),
        (torch.bmm, (r(2, 3, 4), r(2, 4, 5))),
        (torch.mv, (A, r(4))),
        (torch.dot, (r(4), r(4))),
        (torch.vdot, (r(4), r(4))),
        (torch.inner, (r(2, 4), r(3, 4))),
        (torch.outer, (r(3), r(4))),
        (torch.ger, (r(3), r(4))),
        (lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0), (A, B, BIAS)),
        (lambda a, b, c: torch.addmm(c, a, b, beta=0), (A, B, torch.full((3, 5), float("nan")))),  # beta=0 ignores NaN
        (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2), (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5))),
        (lambda c, a, b: torch.addbmm(c, a, b, alpha=0.5), (r(3, 5), r(2, 3, 4), r(2, 4, 5))),
        (lambda c, a, b: torch.addmv(c, a, b, beta=2), (r(3), A, r(4))),
        (lambda c, a, b: torch.addr(c, a, b, alpha=3), (r(3, 4), r(3), r(4))),
        (lambda a, b, c: torch.chain_matmul(a, b, c), (A, B, r(5, 2))),
        (lambda a, b, c: torch.linalg.multi_dot([a, b, c]), (r(4), B, r(5, 2))),
        (lambda a, b: torch.tensordot(a, b, dims=([1], [0])), (A, B)),
        (lambda a, b: torch.tensordot(a, b, dims=2), (r(2, 3, 4), r(3, 4, 5))),
        (lambda a, b: torch.tensordot(a, b, dims=0), (r(2, 3), r(2))),
        (torch.kron, (r(2, 2), r(3, 2))),
        (torch.kron, (r(2, 1, 2), r(2, 3))),
        (lambda a, b: torch.linalg.cross(a, b, dim=-1), (r(4, 3), r(4, 3))),
        (lambda a, b: torch.linalg.cross(a, b, dim=0), (r(3, 4), r(3, 4))),
        (lambda a, b: torch.cross(a, b), (r(3, 4), r(3, 4))),  # the first axis of size 3
        (lambda a, b: torch.linalg.vecdot(a, b, dim=0), (r(4, 3), r(4, 3))),
        (lambda a, b, w, c: F.bilinear(a, b, w, c), (r(2, 3), r(2, 4), r(5, 3, 4), r(5))),
        (lambda a, w: F.linear(a, w), (r(2, 3, 4), r(5, 4))),
        (lambda a, w, b: F.linear(a, w, b), (r(4), r(5, 4), r(5))),
        (torch.trace, (A,)),
    ],
)
def test_products(fn, args):
    check_model(Fn(fn), args, **TOL)


@pytest.mark.parametrize(
    "fn, args",
    [
        (torch.mm, (rand(3, 4, dtype=torch.int64), rand(4, 2, dtype=torch.int64))),
        (torch.matmul, (rand(2, 3, 4, dtype=torch.int32), rand(4, 2, dtype=torch.int32))),
        (torch.dot, (rand(4, dtype=torch.int64), rand(4, dtype=torch.int64))),
        (
            lambda c, a, b: torch.addr(c, a, b),
            (rand(3, 4, dtype=torch.int64), rand(3, dtype=torch.int64), rand(4, dtype=torch.int64)),
        ),
        (torch.outer, (rand(4, dtype=torch.int64), torch.tensor([True, False]))),  # promoted to int64
        (lambda a, b: torch.linalg.cross(a, b), (rand(2, 3, dtype=torch.int64), rand(2, 3, dtype=torch.int64))),
        (torch.trace, (rand(3, 4, dtype=torch.int64),)),
        (torch.mm, (A.double(), B.double())),
    ],
    ids=[
        "mm_int64",
        "matmul_int32",
        "dot_int64",
        "addr_int64",
        "outer_int_bool",
        "cross_int64",
        "trace_int64",
        "mm_float64",
    ],
)
def test_products_dtypes(fn, args):
    check_model(Fn(fn), args)


def test_products_float16():
    check_model(
        Fn(lambda a, b: (a @ b, torch.linalg.vector_norm(a, dim=1))), (A.half(), B.half()), atol=1e-2, rtol=1e-2
    )


@pytest.mark.parametrize(
    "eq, shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("ij->", [(3, 4)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ij,ij->i", [(3, 4), (3, 4)]),
        ("...ij->...ji", [(2, 3, 4)]),
        ("ijk->kji", [(2, 3, 4)]),
    ],
)
def test_einsum(eq, shapes):
    check_model(Fn(lambda *a: torch.einsum(eq, *a)), tuple(r(*s) for s in shapes), **TOL)


@pytest.mark.parametrize("k", [0, 1, 3])
def test_matrix_power(k):
    check_model(Fn(lambda x: torch.linalg.matrix_power(x, k)), (r(2, 3, 3),), **TOL)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), -float("inf"), 0, 3, -2, 2.5])
def test_vector_norm_with_nan_and_keepdim(ord):
    x = torch.randn(3, 5)
    x[1, 2] = float("nan")
    check_model(Fn(lambda x: torch.linalg.vector_norm(x, ord, dim=1, keepdim=True)), (x,), **TOL)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda x: torch.linalg.vector_norm(x, 2.5), A),
        (lambda x: torch.linalg.vector_norm(x, dim=(0, -1)), r(2, 3, 4)),
        (lambda x: torch.linalg.vector_norm(x, dim=1), r(3, 0)),  # empty: 0
        (lambda x: torch.linalg.norm(x, dim=-1), A),
        (lambda x: torch.linalg.norm(x), A),
        (lambda x: torch.linalg.norm(x, 1, dim=(-2, -1)), r(2, 3, 4)),
        (lambda x: x.norm(p=1, dim=0), A),
        (lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float64), A),
    ],
)
def test_norms(fn, x):
    check_model(Fn(fn), (x,), **TOL)


@pytest.mark.parametrize("ord", ["fro", 1, -1, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim, keepdim", [((-2, -1), False), ((0, 2), True)])
def test_matrix_norm(ord, dim, keepdim):
    check_model(Fn(lambda x: torch.linalg.matrix_norm(x, ord, dim=dim, keepdim=keepdim)), (r(2, 3, 4),), **TOL)


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda x: torch.linalg.matrix_norm(x, 2), "singular values"),
        (lambda x: torch.linalg.norm(x, "nuc"), "singular values"),
        (lambda x: torch.linalg.matrix_power(x, -1), "inverse"),
    ],
)
def test_unsupported_are_reported(fn, message):
    with pytest.raises(ConversionError, match=message):
        to_onnx(Fn(fn), (r(3, 3),))


@pytest.mark.parametrize(
    "fn, x",
    [
        (torch.linalg.det, r(3, 3)),
        (torch.linalg.det, r(2, 3, 3)),
        (torch.linalg.det, r(4, 4)),
        (torch.linalg.det, r(2, 1, 1)),
        (torch.linalg.det, torch.tensor([[1.0, 2.0], [2.0, 4.0]])),  # singular
        (torch.linalg.slogdet, torch.stack([r(3, 3), -torch.eye(3)])),  # negative sign
        (torch.logdet, r(3, 3) @ r(3, 3).T + torch.eye(3)),
        (torch.logdet, -torch.eye(3)),  # negative determinant: NaN
    ],
)
def test_determinants(fn, x):
    check_model(Fn(fn), (x,), **TOL)


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda a, b: torch.cdist(a, b), (r(4, 3), r(5, 3))),
        (lambda a, b: torch.cdist(a, b, p=1), (r(4, 3), r(5, 3))),
        (lambda a, b: torch.cdist(a, b, p=float("inf")), (r(2, 4, 3), r(2, 5, 3))),
        (lambda a, b: torch.cdist(a, b, p=0), (rand(4, 3, low=0, high=1).round(), rand(5, 3, low=0, high=1).round())),
        (lambda a, b: torch.cdist(a, b, p=3), (r(4, 3), r(5, 3))),
        (lambda a, b: torch.cdist(a, b), (A, A)),  # zero distances
        (lambda a: F.pdist(a), (r(4, 3),)),
        (lambda a: F.pdist(a, 1), (r(4, 3),)),
        (lambda a, b: F.pairwise_distance(a, b, keepdim=True), (r(4, 3), r(4, 3))),
        (lambda a, b: F.pairwise_distance(a, b, p=1), (r(4, 3), r(3))),
        (lambda a, b: torch.dist(a, b, 3), (r(4, 3), r(4, 3))),
        (lambda a, b: F.cosine_similarity(a, b), (r(4, 3), r(4, 3))),
        (lambda a, b: F.cosine_similarity(a, b, dim=0), (torch.zeros(3, 2), r(3, 2))),  # a zero vector
        (lambda a, b: F.cosine_similarity(a, b, dim=-1), (r(2, 1, 3), r(4, 3))),
        (lambda a: torch.linalg.vander(a, N=4), (r(3),)),
        (lambda a: torch.linalg.vander(a), (r(2, 3),)),
    ],
)
def test_distances(fn, args):
    check_model(Fn(fn), args, **TOL)


def test_matmul_dynamic_batch():
    check_model(
        Fn(torch.matmul),
        (torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        more_inputs=[((torch.randn(5, 3, 4), torch.randn(5, 4, 5)), None)],
        **TOL,
    )


def test_norm_and_cdist_dynamic():
    check_model(
        Fn(lambda a, b: (torch.cdist(a, b), torch.linalg.vector_norm(a, 3, dim=-1))),
        (r(4, 3), r(5, 3)),
        dynamic_shapes=({0: "n"}, {0: "m"}),
        more_inputs=[((r(6, 3), r(2, 3)), None)],
        **TOL,
    )


def _triangular(n, batch=(), dtype=torch.float32, seed=0):
    """A well-conditioned triangular-ish matrix (both triangles filled: the solver must read only one)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, n, generator=gen) * 0.3
    a = a + torch.eye(n) * (2.0 + torch.rand(n, generator=gen))
    return a.to(dtype)


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("unit", [False, True], ids=["diag", "unit"])
def test_solve_triangular(upper, left, unit):
    a = _triangular(7, (2,))
    b = torch.randn(2, 7, 3) if left else torch.randn(2, 3, 7)
    check_model(Fn(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)),
                (a, b), atol=1e-5, rtol=1e-4)


def test_solve_triangular_broadcast_sizes_and_types():
    """Batch axes broadcast both ways, a chunk of 64 rows (Qwen3.5's gated delta rule), float64 (PyTorch's CPU has
    no float16 solve)."""
    a, b = _triangular(5, (3, 1)), torch.randn(2, 5, 4)
    check_model(Fn(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False)), (a, b), atol=1e-5, rtol=1e-4)
    a, b = _triangular(5), torch.randn(3, 5, 2)
    check_model(Fn(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True)), (a, b), atol=1e-5, rtol=1e-4)
    a, b = _triangular(64, (2,)), torch.randn(2, 64, 16)
    check_model(Fn(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True)), (a, b),
                atol=1e-4, rtol=1e-4)
    a, b = _triangular(6, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    check_model(Fn(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False)), (a, b), atol=1e-12, rtol=1e-12)


def test_solve_triangular_gradient():
    """Its backward graph solves triangular systems too (AOTAutograd's formula), checked through autograd."""
    from experimental.torch_interpreter.training import OrtBackend

    a, b = _triangular(6, (2,)), torch.randn(2, 6, 3)
    leaves = [t.clone().requires_grad_() for t in (a, b)]
    expected = torch.autograd.grad(torch.linalg.solve_triangular(*leaves, upper=False).square().sum(), leaves)
    backend = OrtBackend(providers="cpu", fallback="raise")
    fn = torch.compile(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), backend=backend)
    leaves = [t.clone().requires_grad_() for t in (a, b)]
    got = torch.autograd.grad(fn(*leaves).square().sum(), leaves)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
    assert [g.runs_in for g in backend.graphs] == ["onnxruntime", "onnxruntime"]


def test_linear_dynamic_batch():
    """Two linear layers (a dropout between them, eval mode): two Gemm nodes, the batch axis named in and out."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 3))
    onx = check_model(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},),
                      more_inputs=[((torch.randn(7, 4),), None)])
    assert op_types(onx) == ["Gemm", "Gemm"]
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert onx.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
