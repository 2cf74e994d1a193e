import functools

import pytest
import torch

from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

B = torch.export.Dim("batch", min=2)


#: standard normal floats, integers in [-5, 4]
_x = functools.partial(rand, low=-5, high=4, normal=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.view(6, 4),
        lambda x: x.reshape(-1),
        lambda x: x.view(2, -1, 2),
        lambda x: x.reshape(3, 8).view(24),
        lambda x: x.flatten(),
        lambda x: x.flatten(1),
        lambda x: x.flatten(0, 1),
        lambda x: x.flatten(-2, -1),
        lambda x: x.ravel(),
        lambda x: x.unflatten(2, (2, 2)),
        lambda x: x.unflatten(-1, (-1, 2)),
        lambda x: x.reshape_as(torch.empty(4, 6)),
        lambda x: x.permute(2, 0, 1),
        lambda x: x.permute(-1, -2, 0),
        lambda x: x.transpose(0, 2),
        lambda x: x.transpose(-1, 1),
        lambda x: x.swapaxes(0, 1),
        lambda x: x.mT,
        lambda x: x.movedim(0, 2),
        lambda x: x.movedim((0, 1), (2, 0)),
        lambda x: x.moveaxis(-1, 0),
        lambda x: x[0].t(),
        lambda x: x[0, 0].t(),
        lambda x: x.permute(2, 1, 0).T,
        lambda x: x.swapdims(0, 1),
        lambda x: x.mH,
        lambda x: x.adjoint(),
        lambda x: torch.concat([x, x], 1),
        lambda x: torch.concatenate([x, x], -1),
        lambda x: torch.dsplit(x, 2),
        lambda x: torch.hsplit(x, [1]),
        lambda x: x.unsafe_chunk(2, 2),
        lambda x: x.unsafe_split_with_sizes([1, 3], 2),
    ],
)
def test_views_static(fn):
    check_model(Fn(fn), (_x(2, 3, 4),))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_views_dtypes(dtype):
    check_model(Fn(lambda x: x.transpose(0, 1).reshape(4, 6).unsqueeze(0).expand(2, -1, -1)), (_x(2, 3, 4, dtype=dtype),))


def test_view_noop_and_single_node():
    onx = check_model(Fn(lambda x: x.view(2, 3, 4).reshape(6, 4)), (_x(2, 3, 4),))
    assert op_types(onx).count("Reshape") == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.reshape(x.shape[0], -1),
        lambda x: x.view(-1, 4),
        lambda x: x.view(x.shape[0] * 3, 4),
        lambda x: x.flatten(),
        lambda x: x.flatten(1),
        lambda x: x.unflatten(1, (1, 3, 1)),
        lambda x: x.reshape(x.shape[0], 2, x.shape[1] * 2),
        lambda x: x.permute(2, 0, 1).reshape(4, -1),
        lambda x: x.unsqueeze(1).expand(-1, 5, -1, -1),
        lambda x: x[:, :1].expand(x.shape[0], 3, 4),
        lambda x: x[:1].expand(x.shape[0] + 1, -1, -1),
        lambda x: x.expand_as(torch.empty(2, x.shape[0], 3, 4)),
        lambda x: x.repeat(x.shape[0], 1, 2),
        lambda x: x[:, :1].squeeze(),
        lambda x: x[:, :1].squeeze(1),
    ],
)
def test_views_dynamic(fn):
    check_model(Fn(fn), (_x(2, 3, 4),), dynamic_shapes=({0: B},), more_inputs=[((_x(5, 3, 4),), None)])


def test_reshape_two_dynamic_dims():
    onx = check_model(
        Fn(lambda x: x.reshape(x.shape[0], x.shape[1], -1)),
        (_x(2, 3, 4, 2),),
        dynamic_shapes=({0: "batch", 1: "seq"},),
        more_inputs=[((_x(3, 5, 4, 2),), None)],
    )
    assert "Reshape" in op_types(onx)


def test_reshape_static_is_constant():
    onx = check_model(Fn(lambda x: x.reshape(x.shape[0], -1)), (_x(2, 3, 4),), dynamic_shapes=({0: "batch"},))
    # the sym_size node may leave a Shape, the new shape is a constant with -1
    assert "Concat" not in op_types(onx) and op_types(onx).count("Reshape") == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.unsqueeze(0),
        lambda x: x.unsqueeze(-1),
        lambda x: x.unsqueeze(2),
        lambda x: x.squeeze(),
        lambda x: x.squeeze(1),
        lambda x: x.squeeze(0).unsqueeze(0),
        lambda x: x.squeeze(-1).unsqueeze(0),
        lambda x: x.squeeze((1, 3)),
        lambda x: x.squeeze((0, 1)),
        lambda x: x.expand(2, 3, 5, 4),
        lambda x: x.expand(7, -1, -1, 5, -1),
        lambda x: x.expand_as(torch.empty(3, 2, 3, 5, 4)),
        lambda x: x.repeat(2, 1, 3, 1),
        lambda x: x.repeat(2, 1, 1, 3, 1),
        lambda x: x.repeat(1, 1, 1, 1).squeeze(),
        lambda x: x.tile((2,)),
        lambda x: x.tile((2, 1, 1, 1, 1)),
    ],
)
def test_squeeze_expand_repeat(fn):
    check_model(Fn(fn), (_x(2, 1, 1, 4),))


def test_squeeze_scalar():
    check_model(Fn(lambda x: x[0, 0].squeeze().squeeze(0)), (_x(2, 3),))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_cat_stack(dim, dtype):
    x, y = _x(2, 3, dtype=dtype), _x(2, 3, dtype=dtype)
    onx = check_model(Fn(lambda x, y: torch.cat([x, y, x], dim)), (x, y))
    assert op_types(onx) == ["Concat"]
    check_model(Fn(lambda x, y: torch.stack([x, y], dim)), (x, y))


def test_cat_promotes_and_skips_empty():
    check_model(Fn(lambda x, y, e: torch.cat([x, e, y], 0)), (_x(2, 3), _x(1, 3, dtype=torch.int64), torch.empty(0)))
    check_model(Fn(lambda x, e: torch.cat([e, x], 1).t()), (_x(2, 3), torch.empty(0)))
    check_model(Fn(lambda x: torch.stack([x])), (_x(2, 3),))


def test_cat_dynamic():
    check_model(
        Fn(lambda x, y: torch.cat([x, y, x], 1)),
        (_x(2, 3), _x(2, 4)),
        dynamic_shapes=({0: "batch", 1: "a"}, {0: "batch", 1: "b"}),
        more_inputs=[((_x(4, 1), _x(4, 5)), None)],
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.split(2, 1),
        lambda x: x.split(4, -1),
        lambda x: [t.t() for t in x.split(7)],
        lambda x: x.split([1, 0, 4], 1),
        lambda x: x.chunk(3, 1),
        lambda x: x.chunk(4, 1),
        lambda x: x.chunk(2, 0),
        lambda x: x.unbind(1),
        lambda x: x.unbind(0),
        lambda x: x[:1].unbind(0),
        lambda x: x.tensor_split(4, 1),
        lambda x: x.tensor_split([1, 3], 1),
        lambda x: x.tensor_split([-2, 9], 1),
        lambda x: x.tensor_split([4, 2], 1),
        lambda x: torch.hsplit(x, 5),
        lambda x: torch.vsplit(x, [1]),
        lambda x: x.unsafe_split(2, 1),
    ],
)
def test_split_static(fn):
    check_model(Fn(fn), (_x(2, 5),))


DYN = torch.export.Dim.DYNAMIC


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.split([x.shape[1] - 2, 2], 1),
        lambda x: x.split([2, x.shape[1] - 3, 1], -1),
        lambda x: x.tensor_split([1, 3], 1),
        lambda x: x.tensor_split(3, 1),
    ],
)
def test_split_dynamic(fn):
    # the number of outputs is fixed by the export, the sizes on the split axis change
    check_model(Fn(fn), (_x(3, 7),), dynamic_shapes=({0: DYN, 1: DYN},), more_inputs=[((_x(4, 10),), None)])


def test_split_dynamic_other_axis():
    check_model(Fn(lambda x: x.split(2, 1)), (_x(3, 5),), dynamic_shapes=({0: "batch"},), more_inputs=[((_x(6, 5),), None)])


def test_tensor_split_sections_dynamic():
    check_model(
        Fn(lambda x: x.tensor_split(3, 0)),
        (_x(7, 2),),
        dynamic_shapes=({0: DYN},),
        more_inputs=[((_x(8, 2),), None), ((_x(10, 2),), None)],
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[1:3],
        lambda x: x[:, ::2],
        lambda x: x[:, 1::3],
        lambda x: x[-2:, -3:-1],
        lambda x: x[:, :100].t(),
        lambda x: x[:, 5:],
        lambda x: x[..., 2:1],
        lambda x: x[:, :].t(),
        lambda x: x[1],
        lambda x: x[-1, -2],
        lambda x: x[:, None, 1:],
        lambda x: x.narrow(1, 1, 3),
        lambda x: x.narrow(1, -3, 2),
        lambda x: x.narrow(0, torch.tensor(1), 2),
        lambda x: x.flip(0),
        lambda x: x.flip(-1, 0),
        lambda x: x.roll(1, 0),
        lambda x: x.roll(-2, 1),
        lambda x: x.roll(7, 1),
        lambda x: x.roll(5, 1).t(),
        lambda x: x.roll((1, 2), (0, 1)),
        lambda x: x.roll(3),
    ],
)
def test_slicing_static(fn):
    check_model(Fn(fn), (_x(4, 5),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:, : x.shape[1] - 1],
        lambda x: x[:, x.shape[1] // 2 :],
        lambda x: x[1:, 2 : x.shape[1] : 2],
        lambda x: x[:, -3:],
        lambda x: x[x.shape[0] - 1],
        lambda x: x.narrow(1, 1, x.shape[1] - 2),
        lambda x: x.flip(1),
        lambda x: x.roll(2, 1),
        lambda x: x.roll(-1),
    ],
)
def test_slicing_dynamic(fn):
    check_model(
        Fn(fn),
        (_x(3, 6),),
        dynamic_shapes=({0: DYN, 1: DYN},),
        more_inputs=[((_x(5, 9),), None)],
    )


def test_slice_noop_and_select_dtypes():
    onx = check_model(Fn(lambda x: x[:, : x.shape[1]].t()), (_x(3, 6),), dynamic_shapes=({1: "b"},))
    assert "Slice" not in op_types(onx)
    for dtype in (torch.float16, torch.int64, torch.bool):
        check_model(Fn(lambda x: x[1, 1:].flip(0)), (_x(3, 6, dtype=dtype),))
