"""In-place ops and mutations through views, translated as torch.export leaves them (no functionalization)."""

import functools

import pytest
import torch

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand
from experimental.torch_interpreter.translation.aliasing import needs_tracking
from experimental.torch_interpreter.translation.registry import default_registry


#: standard normal floats, integers in [-5, 4]
_x = functools.partial(rand, low=-5, high=4, normal=True)


def _cl(fn):
    """``fn`` applied to a clone of its first input: the graph mutates a local tensor, not an input."""
    return Fn(lambda x, *args: fn(x.clone(), *args))


# -- in-place elementwise ops -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_arithmetic_inplace(dtype):
    x, y = _x(3, 4, dtype=dtype), _x(4, dtype=dtype)

    def fn(x, y):
        z = x.add_(y, alpha=2)
        x.mul_(3).sub_(1)
        x.add_(2).mul_(y)
        return x, z

    tol = {"atol": 2e-2, "rtol": 1e-2} if dtype == torch.float16 else {}
    onx = check_model(_cl(fn), (x, y), **tol)
    assert op_types(onx).count("ScatterElements") == 0


def test_div_inplace_and_promotion():
    x, y = _x(3, 4), _x(4, dtype=torch.int64).abs() + 1
    check_model(_cl(lambda x, y: x.div_(y).div_(2.5)), (x, y))
    h = _x(3, 4, dtype=torch.float16)
    check_model(_cl(lambda h, x: h.add_(x)), (h, x), atol=1e-2)  # float16 += float32 stays float16


def test_copy_fill_zero():
    x, s, i = _x(3, 4), _x(4), _x(3, 1, dtype=torch.int64)
    check_model(_cl(lambda x, s: x.copy_(s) * 2), (x, s))
    check_model(_cl(lambda x, i: x.copy_(i) + 1), (x, i))
    check_model(_cl(lambda x: x.fill_(2.5)), (x,))
    check_model(_cl(lambda x, v: x.fill_(v)), (x, torch.tensor(3.0)))
    check_model(_cl(lambda x: x.zero_() + 1), (x,))
    check_model(_cl(lambda b: b.fill_(True)), (_x(3, 4, dtype=torch.bool),))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_(accumulate):
    x, i, v = _x(5, 4), torch.tensor([0, 3, 3]), _x(3, 4)
    if not accumulate:
        i = torch.tensor([0, 3, 1])
    check_model(_cl(lambda x, i, v: x.index_put_((i,), v, accumulate=accumulate)), (x, i, v))
    j = torch.tensor([1, 2, 1 if accumulate else 0])
    check_model(_cl(lambda x, i, j, v: x.index_put_((i, j), v[:, 0], accumulate=accumulate) * 2), (x, i, j, v))


def test_masked_fill_():
    x, m = _x(3, 4), _x(3, 4, dtype=torch.bool)
    check_model(_cl(lambda x, m: x.masked_fill_(m, -1.0)), (x, m))
    check_model(_cl(lambda x, m: x.masked_fill_(x > 0, torch.tensor(7.0))), (x, m))


def test_activation_inplace_through_view():
    """relu_ and friends used to be converted as functional ops: on a view they must reach the base."""
    x = _x(3, 4)

    def fn(x):
        x[:, :2].relu_()
        torch.nn.functional.hardtanh_(x[1], -0.5, 0.5)
        x[2].sigmoid_()
        return x

    check_model(_cl(fn), (x,))
    for key in ("aten::relu_.default", "aten::sigmoid_.default", "aten::hardtanh_.default"):
        assert default_registry.get(key).__module__.endswith("inplace")


# -- writes through views ---------------------------------------------------------------------------------------
def _setitem_ellipsis(x, idx, y):
    x[..., idx] = y
    return x


def _setitem_slice(x, v):
    x[:, 1:3] = v
    return x


def _setitem_select(x, v):
    x[0] = v
    x[-1] = 2 * v
    return x


def _iadd_select(x, v):
    x[:, 2] += 1
    x[1, :] *= v
    return x


def _setitem_step(x, v):
    x[::2, -2:] = v[:2, :2]
    x[:, 1::2] += 1
    return x


@pytest.mark.parametrize(
    "fn, args",
    [
        (_setitem_ellipsis, (_x(3, 4), torch.tensor([0, 2]), _x(3, 2))),
        (_setitem_slice, (_x(3, 4), _x(3, 2))),
        (_setitem_slice, (_x(3, 4), torch.tensor(1.5))),
        (_setitem_select, (_x(3, 4), _x(4))),
        (_iadd_select, (_x(3, 4), _x(4))),
        (_setitem_step, (_x(3, 4), _x(3, 4))),
    ],
)
def test_setitem(fn, args):
    onx = check_model(_cl(fn), args)
    assert "ScatterElements" in op_types(onx) or "ScatterND" in op_types(onx)


def test_brief_example():
    def fn(x, idx, y):
        x[..., idx] = y
        z = x.add_(1)
        x[:, 1:3].mul_(2)
        x.masked_fill_(x > 3, 0)
        return x, z

    check_model(_cl(fn), (2 * _x(3, 4), torch.tensor([0, 2]), _x(3, 2)))


def test_transposed_reshaped_views():
    def fn(x):
        x.t()[1].fill_(5)  # column 1 of x
        x.transpose(0, 1)[2:].mul_(-1)
        x.view(-1)[:5].zero_()
        x.reshape(2, 2, 3)[1, :, 0].add_(10)
        x.unsqueeze(0).permute(2, 0, 1)[2].sub_(100)
        return x.sum(0), x

    check_model(_cl(fn), (_x(4, 3),))


def test_copies_are_not_views():
    def fn(x):
        x.t().reshape(-1).zero_()  # reshape of a transposed tensor copies: x is unchanged
        x.t().contiguous().mul_(5)
        x.reshape(-1)[0].fill_(1.0)  # this reshape is a view
        return x

    check_model(_cl(fn), (_x(3, 4),))


def test_two_views_of_one_base():
    def fn(x):
        row, col, y = x[0], x[:, 1], x.view(3, 4)
        row.add_(1)  # col and y read after it see it
        col.mul_(10)
        return row * 1, col + 0, y * 1, x

    check_model(_cl(fn), (_x(4, 3),))


def test_views_read_after_mutation():
    def fn(x):
        s = x[:, 0]  # computed before the mutation
        e = x[0:1].expand(3, 3)
        z = x.add_(1)
        x.mul_(2)
        return s, e, z

    check_model(_cl(fn), (_x(3, 3),))


def test_chain_of_views():
    def fn(x):
        x.view(4, 6)[1:3].t()[1::2].narrow(1, 1, 1).unsqueeze(0).fill_(7)
        x[1][:, 2][1:].mul_(-3)
        return x

    check_model(_cl(fn), (_x(2, 3, 4),))


def test_split_unbind_views():
    def fn(x):
        a, b = x.split([1, 2], dim=1)
        b.mul_(2)
        x.unbind(0)[1].fill_(0)
        return a * 1, b, x

    check_model(_cl(fn), (_x(3, 3),))


def test_loop_unrolled():
    def fn(x, y):
        for i in range(3):
            x[:, i] += i * y[:, i]
            x[i].mul_(1.5)
        return x

    check_model(_cl(fn), (_x(4, 3), _x(4, 3)))


# -- dynamic shapes ---------------------------------------------------------------------------------------------
def _dynamic(x, v, i):
    x[:, 1:3] = v
    x[:, -1] += x[:, 0]
    x[: x.shape[0] // 2].mul_(2)
    x[1:].narrow(0, 0, 1).fill_(-1)
    x[..., i] = 0.0
    return x, x.sum()


def test_dynamic_shapes():
    args = (_x(4, 5), _x(4, 2), torch.tensor([0, 4]))
    more = [((_x(7, 5), _x(7, 2), torch.tensor([3])), None)]
    check_model(_cl(_dynamic), args, dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: "n"}), more_inputs=more)


def test_dynamic_slice_axis():
    def fn(x, v):
        x[:, 2:].copy_(v)
        x[:, -1] = 5
        x.t()[1:].add_(1)
        return x

    args = (_x(3, 6), _x(3, 4))
    more = [((_x(2, 9), _x(2, 7)), None)]
    dyn = ({0: "b", 1: "n"}, {0: "b", 1: "m"})
    check_model(_cl(fn), args, dynamic_shapes=dyn, more_inputs=more)


# -- mutated inputs and buffers -----------------------------------------------------------------------------------
def test_mutated_input():
    def fn(x, v):
        x[:, 0] = v
        x.add_(1)
        return x * 2

    onx = check_model(
        Fn(fn), (_x(3, 4), _x(3)), dynamic_shapes=({0: "b"}, {0: "b"}), more_inputs=[((_x(5, 4), _x(5)), None)]
    )
    assert [o.name for o in onx.graph.output] == ["output"]  # the mutated input is not an output


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("last", torch.ones(2, 4))

    def forward(self, x):
        self.total.add_(x.sum(0))
        self.last[0].copy_(x[0])
        return x + self.total, self.last * 1


def test_mutated_buffer():
    model = Counter()
    onx = to_onnx(model, (_x(3, 4),))
    assert torch.equal(model.total, torch.zeros(4))  # export does not run the mutation
    assert len(onx.graph.output) == 2
    check_model(model, (_x(3, 4),))  # one eager run: the next one would start from the mutated buffers


def test_no_tracking_without_mutation():
    ep = torch.export.export(Fn(lambda x: x[:, 1:].t() * 2), (_x(3, 4),))
    assert not needs_tracking(ep.graph)
    ep = torch.export.export(_cl(lambda x: x[:, 1:].mul_(2)), (_x(3, 4),))
    assert needs_tracking(ep.graph)


def test_explicit_mutate():
    """A converter may say what it wrote with ctx.mutate; the interpreter does not write it twice."""
    def add_(ctx, self, other, alpha=1):
        new = ctx.op("Add", self, ctx.operand(other, self.dtype))
        ctx.mutate(0, new)
        return new

    registry = default_registry.with_converter("aten::add_.Tensor", add_)

    def fn(x):
        x[:, 1].add_(1)
        return x

    onx = check_model(_cl(fn), (_x(3, 4),), registry=registry)
    assert op_types(onx).count("ScatterElements") == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_copy_into_an_empty_slice_broadcasts_to_it(dtype):
    """fuzz seed 9613: ``copy_`` of a (1,) tensor into an empty (0,) one; onnxruntime's optimizer dropped the
    Expand of 1 to 0 and the model returned shape (1,)."""

    def fn(x):
        y = (x <= 1.5)[1:].clone()
        y.copy_(x.abs())
        return y, torch.zeros(0, 3, dtype=dtype).copy_(x.unsqueeze(1))

    check_model(Fn(fn), (torch.tensor([0.7], dtype=dtype),))
