import functools

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

DYN = torch.export.Dim.DYNAMIC


#: standard normal floats, integers in [-5, 4]
_x = functools.partial(rand, low=-5, high=4, normal=True)


def _i(high, *shape, dtype=torch.int64):
    """Indices in [0, high)."""
    return rand(*shape, dtype=dtype, low=0, high=high - 1)


# -- where, masked_fill ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int16, torch.bool])
def test_where_masked_fill_dtypes(dtype):
    x, y, m = _x(3, 4, dtype=dtype), _x(3, 4, dtype=dtype), _x(3, 4, dtype=torch.bool)
    onx = check_model(Fn(lambda m, x, y: torch.where(m, x, y)), (m, x, y))
    assert "Where" in op_types(onx)
    check_model(Fn(lambda x, m: x.masked_fill(m, 1)), (x, m[0]))
    check_model(Fn(lambda x, m, v: x.masked_fill(m, v)), (x, m, _x(dtype=dtype)))


def test_where_promotes_and_scalars():
    m = _x(3, 4, dtype=torch.bool)
    x, i = _x(3, 4), _x(4, dtype=torch.int64)
    check_model(Fn(lambda m, x, i: torch.where(m, i, x)), (m, x, i))
    check_model(Fn(lambda m, x: torch.where(m, x, 0.5)), (m, x))
    check_model(Fn(lambda m, i: torch.where(m, 2, i)), (m, i))
    check_model(Fn(lambda m, i: torch.where(m, 2.5, i)), (m, i))
    check_model(Fn(lambda m: torch.where(m, 1.0, 0.0)), (m,))


# -- gather family ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_gathers(dtype):
    x = _x(4, 5, dtype=dtype)
    check_model(Fn(lambda x, i: x.index_select(1, i)), (x, _i(5, 3)))
    check_model(Fn(lambda x, i: x.index_select(-2, i)), (x, _i(4, 6, dtype=torch.int32)))
    check_model(Fn(lambda x, i: x.index_select(0, i)), (x, torch.tensor(2)))
    check_model(Fn(lambda x, i: torch.gather(x, 1, i)), (x, _i(5, 4, 7)))
    check_model(Fn(lambda x, i: torch.gather(x, 0, i)), (x, _i(4, 2, 3)))
    check_model(Fn(lambda x, i: torch.take_along_dim(x, i, 1)), (x, _i(5, 4, 2)))
    check_model(Fn(lambda x, i: torch.take_along_dim(x, i, 0)), (x, _i(4, 3, 1)))
    check_model(Fn(lambda x, i: torch.take_along_dim(x, i)), (x, _i(20, 6)))


def test_embedding():
    model = torch.nn.Embedding(10, 4, padding_idx=0)
    idx = _i(10, 2, 3)
    onx = check_model(model, (idx,), dynamic_shapes=({0: "batch", 1: "seq"},), more_inputs=[((_i(10, 3, 5),), None)])
    assert op_types(onx) == ["Gather"]


def test_gather_dynamic():
    # (torch.export specializes the sizes take_along_dim broadcasts, so only gather here)
    check_model(
        Fn(lambda x, i: torch.gather(x, 1, i)),
        (_x(3, 5), _i(5, 3, 2)),
        dynamic_shapes=({0: DYN}, {0: DYN}),
        more_inputs=[((_x(4, 5), _i(5, 4, 2)), None)],
    )


# -- advanced indexing -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i: x[i],
        lambda x, i: x[:, i],
        lambda x, i: x[..., i],
        lambda x, i: x[i, i],
        lambda x, i: x[:, i, i],
        lambda x, i: x[i, :, i],
        lambda x, i: x[i[:, None], i],
        lambda x, i: x[:, i[:, None], i[:2]],
        lambda x, i: x[i[:1], :, i],
        lambda x, i: x[1:, i[:, None]],
        lambda x, i: x[-1, i],
        lambda x, i: x[i, -1],
        lambda x, i: x[-i - 1],
    ],
)
def test_index_tensor(fn):
    x, i = _x(4, 4, 4), torch.tensor([0, 3, 1])
    check_model(Fn(fn), (x, i))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: x[m],
        lambda x, m: x[m[:, 0, 0]],
        lambda x, m: x[:, m[0]],
        lambda x, m: x[:, m[0, :, 0], 1:],
        lambda x, m: x[m[:, :, 0]],
        lambda x, m: x[:, m[0, :, 0], torch.tensor([1])],
        lambda x, m: x[torch.tensor([0]), m[0, :, 0]],
    ],
)
def test_index_bool_mask(fn):
    x = _x(3, 4, 5)
    m = x > 0
    check_model(Fn(fn), (x, m))


def test_index_mask_compress_and_dtypes():
    for dtype in (torch.float16, torch.bfloat16, torch.int64, torch.bool):
        x = _x(3, 4, dtype=dtype)
        onx = check_model(Fn(lambda x, m: x[m]), (x, _x(3, 4, dtype=torch.bool)))
        assert "Compress" in op_types(onx)
        check_model(Fn(lambda x, i, j: x[i, j]), (x, torch.tensor([0, 2]), torch.tensor([[1], [3]], dtype=torch.int32)))


def test_index_dynamic():
    check_model(
        Fn(lambda x, i: x[:, i]),
        (_x(3, 5, 2), _i(5, 4)),
        dynamic_shapes=({0: "batch"}, {0: "n"}),
        more_inputs=[((_x(4, 5, 2), _i(5, 7)), None)],
    )
    check_model(
        Fn(lambda x, i: x[:, i, i]),
        (_x(3, 5, 5), _i(5, 4)),
        dynamic_shapes=({0: "batch"}, {0: "n"}),
        more_inputs=[((_x(4, 5, 5), _i(5, 7)), None)],
    )
    check_model(
        Fn(lambda x, m: x[m]),
        (_x(3, 5), _x(3, 5) > 0),
        dynamic_shapes=({0: "batch"}, {0: "batch"}),
        more_inputs=[((_x(6, 5), _x(6, 5) > 0), None)],
    )


# -- index_put -------------------------------------------------------------------------------------------------------
def _put(idx_fn, accumulate=False):
    def fn(x, v):
        return torch.ops.aten.index_put(x, idx_fn(x), v, accumulate)

    return fn


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize(
    "idx_fn, vshape",
    [
        (lambda x: [torch.tensor([0, 2])], (2, 4, 5)),
        (lambda x: [torch.tensor([0, 2])], (5,)),
        (lambda x: [torch.tensor([0, 2, 0])], (1,)),
        (lambda x: [None, torch.tensor([1, 3])], (3, 2, 5)),
        (lambda x: [None, torch.tensor([1, 3]), torch.tensor([0, 4])], (2,)),
        (lambda x: [torch.tensor([1, 2]), None, torch.tensor([0, 4])], (2, 4)),
        (lambda x: [torch.tensor([[1], [2]]), torch.tensor([0, 3, 3])], (2, 3, 5)),
        (lambda x: [None, torch.tensor([[1], [2]]), torch.tensor([0, 3, 3])], (3, 2, 3)),
        (lambda x: [x > 0], ()),
        (lambda x: [x[:, :, 0] > 0], (5,)),
        (lambda x: [None, x[0, :, 0] > 0], ()),
        (lambda x: [None, x[0, :, 0] > 0], (3, 1, 5)),
        (lambda x: [None, x[0] > 0], (3, 1)),
    ],
)
def test_index_put(idx_fn, vshape, accumulate):
    x = _x(3, 4, 5)
    v = _x(*vshape)
    if accumulate and vshape == (1,):
        v = torch.ones(3, 1, 1)  # duplicate indices accumulate
    check_model(Fn(_put(idx_fn, accumulate)), (x, v))


def test_index_put_setitem_and_dtypes():
    def setitem(x, m):
        return x.index_put((m,), torch.tensor(0).to(x.dtype))

    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool):
        x = _x(3, 4, dtype=dtype)
        onx = check_model(Fn(setitem), (x, _x(3, 4, dtype=torch.bool)))
        assert "ScatterND" not in op_types(onx)
        # duplicate indices: PyTorch rounds after each addition, onnxruntime once (float16 runs in float)
        atol = 2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
        check_model(Fn(_put(lambda x: [torch.tensor([1, 1])], True)), (x, _x(2, 4, dtype=dtype)), atol=atol, rtol=atol)


def test_index_put_dynamic():
    check_model(
        Fn(_put(lambda x: [None, torch.tensor([0, 2])])), (_x(3, 4), _x(3, 2)), dynamic_shapes=({0: "batch"}, {0: "batch"}), more_inputs=[((_x(5, 4), _x(5, 2)), None)]
    )


# -- scatter family --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_scatter(dtype):
    x = _x(3, 5, dtype=dtype)
    i = torch.tensor([[0, 1, 2], [2, 0, 1]])
    src = _x(2, 3, dtype=dtype)
    check_model(Fn(lambda x, s: x.scatter(0, i, s)), (x, src))
    check_model(Fn(lambda x, s: x.scatter(1, i, s)), (x, _x(3, 4, dtype=dtype)))  # src larger than index
    check_model(Fn(lambda x: x.scatter(-1, i, 2)), (x,))
    check_model(Fn(lambda x, s: x.scatter(0, i, s, reduce="add")), (x, src))
    check_model(Fn(lambda x, s: x.scatter(0, i, s, reduce="multiply")), (x, src))
    check_model(Fn(lambda x: x.scatter(0, i, 3, reduce="add")), (x,))
    check_model(Fn(lambda x, s: x.scatter_add(0, i, s)), (x, src))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_scatter_reduce(reduce, include_self):
    i = torch.tensor([[0, 1, 0], [0, 2, 1]])
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        x, src = _x(3, 3, dtype=dtype), _x(2, 3, dtype=dtype)
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
        fn = Fn(lambda x, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self))
        check_model(fn, (x, src), atol=tol, rtol=tol)


def test_index_fill_copy_add():
    x = _x(4, 5)
    i = torch.tensor([0, 3])
    check_model(Fn(lambda x: x.index_fill(1, i, -2.0)), (x,))
    check_model(Fn(lambda x, v: x.index_fill(0, i, v)), (x, torch.tensor(7.0)))
    check_model(Fn(lambda x, s: x.index_copy(1, i, s)), (x, _x(4, 2)))
    check_model(Fn(lambda x, s: x.index_add(0, i, s, alpha=2)), (x, _x(2, 5)))
    xb = x.to(torch.bfloat16)
    check_model(Fn(lambda x, s: x.index_add(1, i, s, alpha=-1)), (xb, _x(4, 2, dtype=torch.bfloat16)), atol=2e-2, rtol=2e-2)


def test_masked_scatter_select():
    x, m = _x(3, 4), _x(3, 4) > 0
    check_model(Fn(lambda x, m, s: x.masked_scatter(m, s)), (x, m, _x(12)))
    check_model(Fn(lambda x, m, s: x.masked_scatter(m, s)), (x, m[0], _x(3, 5)))
    check_model(Fn(lambda x, m: x.masked_select(m)), (x, m))
    check_model(Fn(lambda x, m: x.masked_select(m)), (x, m[1]))


# -- embedding_bag ---------------------------------------------------------------------------------------------------

#: the embedding_bag cases (ops/indexing.py)
_G = torch.Generator().manual_seed(0)
WEIGHT = torch.randn(10, 3, generator=_G)
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
OFFSETS = torch.tensor([0, 4])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    "kwargs, indices, offsets",
    [
        ({}, INDICES, OFFSETS),
        ({}, INDICES.reshape(2, 4), None),  # 2-D: one bag a row
        ({}, INDICES, torch.tensor([0, 0, 3, 8])),  # empty bags: zeros
        ({"include_last_offset": True}, INDICES, torch.tensor([0, 3, 8])),
        ({"padding_idx": 2}, INDICES, OFFSETS),  # index 2 left out of the bags
        ({}, INDICES.int(), OFFSETS.int()),
    ],
    ids=["offsets", "2d", "empty_bags", "include_last_offset", "padding_idx", "int32"],
)
def test_embedding_bag(mode, kwargs, indices, offsets):
    if offsets is None:
        check_model(Fn(lambda i, w: F.embedding_bag(i, w, mode=mode, **kwargs)), (indices, WEIGHT))
    else:
        check_model(Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode=mode, **kwargs)), (indices, offsets, WEIGHT))


def test_embedding_bag_weights_module_and_float16():
    fn = lambda i, o, w, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p)  # noqa: E731
    check_model(Fn(fn), (INDICES, OFFSETS, WEIGHT, torch.rand(8)))
    check_model(torch.nn.EmbeddingBag(10, 3, mode="mean"), (INDICES.reshape(2, 4),))
    check_model(Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode="mean")), (INDICES, OFFSETS, WEIGHT.half()), atol=1e-2)


def test_embedding_bag_dynamic_indices():
    """The number of indices changes, the number of bags (the size of offsets) is fixed."""
    check_model(
        Fn(lambda i, o, w: F.embedding_bag(i, w, o, mode="mean")),
        (INDICES, OFFSETS, WEIGHT),
        dynamic_shapes=({0: "n"}, None, None),
        more_inputs=[((torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9]), torch.tensor([0, 6]), WEIGHT), None)],
    )


def test_embedding_bag_dynamic_bags_is_reported():
    with pytest.raises(ConversionError, match="dynamic number of bags"):
        to_onnx(
            Fn(lambda i, o, w: F.embedding_bag(i, w, o)),
            (INDICES, OFFSETS, WEIGHT),
            dynamic_shapes=(None, {0: "bags"}, None),
        )


@pytest.mark.parametrize("shape", [(7,), (3, 5)])
def test_where_one_argument(shape):
    """``torch.where(cond)`` (``aten::where.default``, as torchvision's detection models call it): one tensor of
    coordinates per axis, of a data-dependent length, none when nothing holds."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    check_model(Fn(lambda t: torch.where(t > 0)), (x,))
    check_model(Fn(lambda t: torch.where(t > 10)[0] + 1), (x,))
