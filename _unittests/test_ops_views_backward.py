"""Gradients of views and index reads (ops/views_backward.py) and native_dropout (ops/random.py).

Each backward op is checked against eager PyTorch calling the same aten op, and against
``torch.autograd.grad`` of the forward op it differentiates (the same incoming gradient). Dropout draws its
mask from onnxruntime's generator: the exact cases (p=0, eval, p=1) are compared with eager, the random one
by the law of its mask and the exact value of the kept elements.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

A = torch.ops.aten
END = 9223372036854775807  # the end PyTorch writes for ``x[a:]``
#: tolerances of float16 and bfloat16 sums (PyTorch rounds after each addition, the model once)
HALF = {torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _run(onx, args):
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: a for i, a in zip(onx.graph.input, args)})
    return [g.astype(np.float32) if g.dtype.name == "bfloat16" else g for g in got]


def _check(backward, args, view=None, x=None, atol=1e-6, **kwargs):
    """``backward(*args)`` (``args[0]``: the incoming gradient) against eager PyTorch, then, with ``view``, the
    model's output against ``torch.autograd.grad(view(x), x, args[0])``."""
    onx = check_model(Fn(backward), args, atol=atol, rtol=atol, **kwargs)
    if view is not None:
        x = x.detach().requires_grad_()
        (expected,) = torch.autograd.grad(view(x), x, args[0])
        (got,) = _run(onx, args)
        np.testing.assert_allclose(got, expected.float().numpy(), atol=atol, rtol=atol)
    return onx


# -- select, slice -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sizes, dim, index",
    [([3, 4, 5], 1, 2), ([3, 4, 5], -1, -1), ([3, 4, 5], 0, -3), ([3, 4, 5], 2, 0), ([6], 0, 4), ([2, 1], 1, 0)],
)
def test_select_backward(sizes, dim, index):
    x = rand(*sizes)
    g = rand(*x.select(dim, index).shape)
    onx = _check(
        lambda g: A.select_backward.default(g, sizes, dim, index), (g,), lambda x: x.select(dim, index), x, atol=0
    )
    assert "ScatterElements" not in op_types(onx)


@pytest.mark.parametrize(
    "dim, start, end, step",
    [
        (1, 0, END, 1),  # x[:, :]
        (1, 1, END, 1),  # x[:, 1:]
        (1, 0, 3, 1),
        (1, -3, END, 1),  # x[:, -3:]
        (1, 2, -1, 1),  # x[:, 2:-1]
        (1, -20, 3, 1),  # clamped to 0
        (1, 9, END, 1),  # beyond the end: empty
        (0, 1, END, 2),
        (1, 1, END, 3),  # the last slot after the last element is cropped
        (1, 0, END, 2),
        (-1, -5, -1, 2),
        (1, 0, 7, 7),  # one element
        (1, 7, 8, 4),  # the last element only
    ],
)
def test_slice_backward(dim, start, end, step):
    x = rand(3, 8)
    g = rand(*A.slice.Tensor(x, dim, start, end, step).shape)
    _check(
        lambda g: A.slice_backward.default(g, [3, 8], dim, start, end, step),
        (g,),
        lambda x: A.slice.Tensor(x, dim, start, end, step),
        x,
        atol=0,
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64])
def test_select_slice_backward_dtypes(dtype):
    g = rand(3, 2, dtype=dtype)
    check_model(Fn(lambda g: A.select_backward.default(g, [3, 4, 2], 1, -2)), (g,), atol=0, rtol=0)
    check_model(Fn(lambda g: A.slice_backward.default(g, [3, 5], 1, 1, END, 3)), (g,), atol=0, rtol=0)


def test_select_slice_backward_dynamic():
    g, g2 = rand(2, 5), rand(4, 5)
    dyn = ({0: "batch"},)
    check_model(
        Fn(lambda g: A.select_backward.default(g, [g.shape[0], 3, g.shape[1]], 1, -1)),
        (g,), dynamic_shapes=dyn, more_inputs=[((g2,), None)], atol=0,
    )
    check_model(
        Fn(lambda g: A.slice_backward.default(g, [g.shape[0], 11], 1, 1, END, 2)),
        (g,), dynamic_shapes=dyn, more_inputs=[((g2,), None)], atol=0,
    )
    check_model(  # the length of the gradient dynamic: its elements spread 2 apart
        Fn(lambda g: A.slice_backward.default(g, [2, g.shape[1] * 2 + 1], 1, 1, END, 2)),
        (g,), dynamic_shapes=({1: "n"},), more_inputs=[((rand(2, 8),), None)], atol=0,
    )
    # the sliced axis dynamic: the index of select and the start of slice count from a dynamic end
    x, x2 = rand(2, 6), rand(2, 9)
    dyn = ({}, {1: "t"})
    check_model(
        Fn(lambda g, x: A.select_backward.default(g[:, 0], x.shape, 1, -2)),
        (g, x), dynamic_shapes=dyn, more_inputs=[((g, x2), None)], atol=0,
    )
    check_model(
        Fn(lambda g, x: A.slice_backward.default(g[:, :3], x.shape, 1, -3, END, 1)),
        (g, x), dynamic_shapes=dyn, more_inputs=[((g, x2), None)], atol=0,
    )
    check_model(
        Fn(lambda g, x: A.slice_backward.default(g[:, :2], x.shape, 1, x.shape[1] - 4, END, 3)),
        (g, x), dynamic_shapes=dyn, more_inputs=[((g, x2), None)], atol=0,
    )


# -- embedding ---------------------------------------------------------------------------------------------------
INDICES = torch.tensor([[1, 3, 1, 5], [1, 0, 3, 3], [2, 1, 1, 0]])


@pytest.mark.parametrize("padding_idx", [None, 3, -1, 0])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_embedding_dense_backward(padding_idx, scale_grad_by_freq, index_dtype):
    """Repeated indices accumulate, the padding row gets no gradient (F.embedding passes -1 for none and
    ``num_weights - 1`` for -1)."""
    weight, indices = rand(7, 4), INDICES.to(index_dtype)
    pad = -1 if padding_idx is None else padding_idx % 7

    def view(w):
        return F.embedding(indices, w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)

    g = rand(3, 4, 4)
    _check(
        lambda g, i: A.embedding_dense_backward.default(g, i, 7, pad, scale_grad_by_freq),
        (g, indices),
        lambda w: view(w),
        weight,
        atol=1e-6,
    )
    if padding_idx is not None:
        got = _run(to_onnx(Fn(lambda g, i: A.embedding_dense_backward.default(g, i, 7, pad, False)), (g, indices)),
                   (g, indices))[0]
        assert (got[pad] == 0).all() and (got.sum(1) != 0).sum() == len(set(INDICES.flatten().tolist()) - {pad})


def test_embedding_dense_backward_rows_of_nan():
    """A padding row stays 0 even when its incoming gradients are NaN (PyTorch skips them)."""
    g = rand(3, 4, 2)
    g[INDICES == 3] = float("nan")
    check_model(Fn(lambda g, i: A.embedding_dense_backward.default(g, i, 6, 3, True)), (g, INDICES))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_embedding_dense_backward_dtypes(dtype):
    g = rand(3, 4, 5, dtype=dtype)
    tol = HALF.get(dtype, 1e-12)
    for padding_idx, scale_grad_by_freq in [(0, True), (-1, False)]:
        check_model(
            Fn(lambda g, i: A.embedding_dense_backward.default(g, i, 6, padding_idx, scale_grad_by_freq)),
            (g, INDICES),
            atol=tol,
            rtol=tol,
        )


def test_embedding_dense_backward_dynamic():
    i2 = torch.tensor([[4, 4, 0, 1], [2, 2, 2, 2], [0, 1, 2, 3], [5, 5, 5, 1], [3, 3, 0, 0]])
    check_model(
        Fn(lambda g, i: A.embedding_dense_backward.default(g, i, 6, 2, True)),
        (rand(3, 4, 5), INDICES),
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        more_inputs=[((rand(5, 4, 5), i2), None)],
    )
    # a 1-D batch of indices, num_weights from a dynamic weight
    check_model(
        Fn(lambda g, i, w: A.embedding_dense_backward.default(g, i, w.shape[0], -1, False)),
        (rand(8, 3), INDICES[0].repeat(2), rand(6, 3)),
        dynamic_shapes=({0: "n"}, {0: "n"}, {0: "w"}),
        more_inputs=[((rand(3, 3), torch.tensor([0, 7, 7]), rand(8, 3)), None)],
    )


# -- diagonal, unfold, index_select --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sizes, offset, dim1, dim2",
    [
        ([3, 4], 0, 0, 1),
        ([3, 4], 1, 0, 1),
        ([3, 4], -2, 0, 1),
        ([3, 4], 6, 0, 1),  # beyond the matrix: no gradient
        ([4, 3], -3, 0, 1),  # the last row only
        ([2, 3, 4], 1, 2, 0),  # dim1 > dim2
        ([2, 3, 4], -1, -1, 1),
        ([2, 3, 4, 2], 0, 1, 2),
    ],
)
def test_diagonal_backward(sizes, offset, dim1, dim2):
    x = rand(*sizes)
    g = rand(*torch.diagonal(x, offset, dim1, dim2).shape)
    _check(
        lambda g: A.diagonal_backward.default(g, sizes, offset, dim1, dim2),
        (g,),
        lambda x: torch.diagonal(x, offset, dim1, dim2),
        x,
        atol=0,
    )


@pytest.mark.parametrize(
    "sizes, dim, size, step",
    [
        ([2, 7, 3], 1, 3, 2),  # overlapping windows: sums
        ([2, 7, 3], 1, 2, 3),  # a gap between windows, the last element in none
        ([9], 0, 3, 3),
        ([3, 5], -1, 5, 1),  # one window
        ([4, 3], 0, 2, 1),
        ([], 0, 1, 1),  # 0-D: one window of the value
    ],
)
def test_unfold_backward(sizes, dim, size, step):
    x = rand(*sizes)
    g = rand(*x.unfold(dim, size, step).shape)
    _check(
        lambda g: A.unfold_backward.default(g, sizes, dim, size, step),
        (g,),
        lambda x: x.unfold(dim, size, step),
        x,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "sizes, dim, index",
    [
        ([4, 3], 0, [1, 3, 1]),  # repeated: sums
        ([4, 3], 1, [2, 2, 2, 0]),
        ([2, 3, 4], -1, [3]),
        ([2, 5], 1, 4),  # a 0-D index
        ([5], 0, [0, 4, 4]),
    ],
)
def test_index_select_backward(sizes, dim, index):
    x, index = rand(*sizes), torch.tensor(index)
    g = rand(*torch.index_select(x, dim, index).shape)
    _check(
        lambda g, i: A.index_select_backward.default(g, sizes, dim, i),
        (g, index),
        lambda x: torch.index_select(x, dim, index),
        x,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_diagonal_unfold_index_select_dtypes(dtype):
    tol = HALF[dtype]
    check_model(Fn(lambda g: A.diagonal_backward.default(g, [2, 3, 4], 1, 1, 2)), (rand(2, 3, dtype=dtype),), atol=0)
    check_model(
        Fn(lambda g: A.unfold_backward.default(g, [2, 7], 1, 3, 2)), (rand(2, 3, 3, dtype=dtype),), atol=tol, rtol=tol
    )
    check_model(
        Fn(lambda g, i: A.index_select_backward.default(g, [4, 3], 0, i)),
        (rand(3, 3, dtype=dtype), torch.tensor([1, 3, 1])),
        atol=tol,
        rtol=tol,
    )


def test_diagonal_unfold_index_select_dynamic():
    g, g2 = rand(2, 3), rand(5, 3)
    dyn = ({0: "batch"},)
    check_model(
        Fn(lambda g: A.diagonal_backward.default(g, [g.shape[0], 3, 4], 0, 1, 2)),
        (g,), dynamic_shapes=dyn, more_inputs=[((g2,), None)], atol=0,
    )
    check_model(
        Fn(lambda g: A.unfold_backward.default(g, [g.shape[0], 7], 1, 3, 2)),
        (rand(2, 3, 3),), dynamic_shapes=dyn, more_inputs=[((rand(4, 3, 3),), None)],
    )
    check_model(
        Fn(lambda g, i: A.index_select_backward.default(g, [g.shape[0], 5], 1, i)),
        (g, torch.tensor([4, 0, 4])), dynamic_shapes=({0: "batch", 1: "k"}, {0: "k"}),
        more_inputs=[((g2, torch.tensor([1, 1, 1])), None), ((rand(3, 1), torch.tensor([2])), None)],
    )


# -- native_dropout ------------------------------------------------------------------------------------------------
def _special(dtype=torch.float32):
    return torch.tensor([1.5, -0.0, 0.0, float("inf"), float("-inf"), float("nan"), -2.25], dtype=dtype)


@pytest.mark.parametrize("p, train", [(0.0, True), (0.0, None), (0.3, False), (1.0, False), (0.0, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_native_dropout_identity(p, train, dtype):
    """``p == 0`` in training and every ``p`` in eval mode: the input bit for bit (NaN, -0.0) and an all-true
    bool mask."""
    x = torch.cat([_special(dtype), rand(5, dtype=dtype)])
    onx = check_model(Fn(lambda x: A.native_dropout.default(x, p, train)), (x,))
    assert "RandomUniformLike" not in op_types(onx)
    out, mask = InferenceSession(onx, providers=["CPUExecutionProvider"]).run(None, {onx.graph.input[0].name: x})
    assert mask.dtype == np.bool_ and mask.all()
    bits, torch_bits = (np.int32, torch.int32) if dtype == torch.float32 else (np.int16, torch.int16)
    np.testing.assert_array_equal(out.view(bits), x.view(torch_bits).numpy())


def test_native_dropout_all_dropped():
    """``p == 1``: ``input * 0`` as PyTorch (NaN where the input is infinite or NaN), an all-false mask."""
    for dtype in (torch.float32, torch.bfloat16):
        onx = check_model(Fn(lambda x: A.native_dropout.default(x, 1.0, True)), (_special(dtype),))
        (_, mask) = _run(onx, (_special(dtype),))
        assert mask.dtype == np.bool_ and not mask.any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("train", [True, None])  # None trains, as PyTorch reads it
def test_native_dropout_law(dtype, train):
    """About 70% kept for p=0.3, each kept element exactly PyTorch's ``x * (1 / (1 - p))`` (the factor rounded to
    the input's type), the dropped ones 0, and a new mask at each run."""
    p, n = 0.3, 20000
    x = rand(n, dtype=dtype, nonzero=True)
    onx = to_onnx(Fn(lambda x: A.native_dropout.default(x, p, train)), (x,))
    assert "Dropout" not in op_types(onx)
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    (out, mask), (_, mask2) = (sess.run(None, {onx.graph.input[0].name: x}) for _ in range(2))
    assert mask.dtype == np.bool_ and mask.shape == (n,)
    assert abs(mask.mean() - (1 - p)) < 0.02  # 6 standard deviations
    assert (mask != mask2).mean() > 0.3  # two independent masks differ on 2 * 0.7 * 0.3 = 42% of the elements
    scale = torch.tensor(1 / (1 - p), dtype=torch.float64).to(dtype)
    expected = (x * scale).numpy() if dtype != torch.bfloat16 else (x * scale).float().numpy()
    eager, eager_mask = A.native_dropout.default(x, p, train)  # the reference formula is PyTorch's
    np.testing.assert_array_equal(eager[eager_mask].float().numpy(), expected[eager_mask.numpy()].astype(np.float32))
    out = out.astype(np.float32) if out.dtype.name == "bfloat16" else out
    np.testing.assert_array_equal(out[mask], expected[mask])
    assert (out[~mask] == 0).all() and (out[mask] != 0).all()


def test_native_dropout_dynamic_and_rank():
    onx = to_onnx(
        Fn(lambda x: A.native_dropout.default(x, 0.5, True)), (rand(4, 3, 5),), dynamic_shapes=({0: "batch", 2: "w"},)
    )
    x = rand(7, 3, 9, nonzero=True)
    out, mask = _run(onx, (x,))
    assert out.shape == mask.shape == (7, 3, 9) and mask.dtype == np.bool_
    np.testing.assert_array_equal(out[mask], (x * 2).numpy()[mask])
    assert 0 < mask.mean() < 1
    onx = to_onnx(Fn(lambda x: A.native_dropout.default(x, 0.0, True)), (rand(4, 3),), dynamic_shapes=({0: "batch"},))
    out, mask = _run(onx, (x[:, :, 0],))
    assert mask.shape == (7, 3) and mask.all() and (out == x[:, :, 0].numpy()).all()


def test_slice_backward_after_a_transpose_of_rank_8():
    """The Pad of slice_backward lists an amount for every axis: with an ``axes`` input, onnxruntime's transpose
    optimizer permuted its two amounts as eight and failed at run time (a Gather out of bounds; Mamba's backward)."""
    g = torch.randn(2, 2, 1, 1, 3, 2, 1, 2)
    perm = (1, 0, 2, 3, 5, 4, 6, 7)
    check_model(
        Fn(lambda g: A.slice_backward.default(g.permute(*perm), [2, 2, 1, 1, 2, 3, 1, 9], 7, 0, 2, 1).permute(*perm) * 2),
        (g,),
    )
