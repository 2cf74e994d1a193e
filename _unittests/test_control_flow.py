import onnx
import pytest
import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ExportCaptureError
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types
from experimental.torch_interpreter.testing.models import CondModel, CountDown, Fn1, scan_cumsum


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """torch 2.13 traces scan/cond/while_loop through torch.compile of one wrapper function whose dynamo
    cache outlives an export: the next export checks the cached guards on its symbolic sizes and adds
    guards such as ``4 != d`` or specializes a nested scan's length. Reset it between models."""
    torch._dynamo.reset()


def _subgraphs(graph: onnx.GraphProto):
    """Every subgraph of ``graph``, recursively, with ``graph`` first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _subgraphs(attr.g)


def _all_op_types(onx: onnx.ModelProto) -> list[str]:
    return [n.op_type for g in _subgraphs(onx.graph) for n in g.node]


def _check(model, args, dynamic_shapes=None, more_inputs=(), **kwargs):
    onx = check_model(model, args, dynamic_shapes=dynamic_shapes, more_inputs=more_inputs, **kwargs)
    onnx.shape_inference.infer_shapes(onx, check_type=True, strict_mode=True)
    names = [i.name for g in _subgraphs(onx.graph) for i in g.input]
    names += [o for g in _subgraphs(onx.graph) for n in g.node for o in n.output]
    assert len(names) == len(set(names)), "value names are not unique across subgraphs"
    return onx


# -- scan ------------------------------------------------------------------------------------------------------





@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
def test_scan_dtypes(dtype):
    def fn(x):
        def combine(carry, xi):
            carry = carry | xi if dtype == torch.bool else carry + xi
            return carry, carry.clone()

        return scan(combine, torch.zeros_like(x[0]), x)

    x, x2 = torch.randint(0, 3, (4, 3)).to(dtype), torch.randint(0, 3, (6, 3)).to(dtype)
    _check(Fn1(fn), (x,), ({0: "n"},), [((x2,), None)])


def test_scan_size_closure():
    """The body reads a dynamic size of the outer graph."""

    def fn(x):
        n = x.shape[0]

        def combine(carry, xi):
            carry = carry + xi / n
            return carry, carry * n

        return scan(combine, torch.zeros_like(x[0]), x)

    _check(Fn1(fn), (torch.randn(3, 4),), ({0: "n"},), [((torch.randn(5, 4),), None)])


def test_scan_cumsum_dynamic():
    onx = _check(Fn1(scan_cumsum), (torch.randn(5, 3),), ({0: "seq", 1: "d"},), [((torch.randn(8, 2),), None)])
    assert op_types(onx).count("Scan") == 1
    torch.testing.assert_close(scan_cumsum(torch.ones(4, 2)), torch.ones(4, 2).cumsum(0))
    body = next(n for n in onx.graph.node if n.op_type == "Scan").attribute[0].g
    # the carry also returned as a scanned output: a distinct value through Identity
    assert "Identity" in [n.op_type for n in body.node]
    assert body.input[0].type.tensor_type.shape.dim[0].dim_param == "d"
    assert body.node[0].metadata_props  # provenance of the body's own FX nodes


class ScanMany(torch.nn.Module):
    """Two carries, two scanned inputs and outputs, a weight and a tensor closure read from the outer scope."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y, bias):
        def combine(carry, xs):
            a, b = carry
            xi, yi = xs
            a = torch.tanh(self.lin(xi) + a)
            b = b * yi + bias
            return [a, b], [a.clone(), (a * b).sum(-1)]

        return scan(combine, [torch.zeros(4), torch.ones(4)], [x, y])


def test_scan_several_carries_and_closures():
    args = (torch.randn(5, 4), torch.randn(5, 4), torch.randn(4))
    more = ((torch.randn(9, 4), torch.randn(9, 4), torch.randn(4)), None)
    onx = _check(ScanMany(), args, ({0: "seq"}, {0: "seq"}, None), [more])
    scan_node = next(n for n in onx.graph.node if n.op_type == "Scan")
    assert len(scan_node.input) == 4  # 2 carries + 2 scanned inputs, weights and bias are read from outer scope
    assert onx.graph.output[2].type.tensor_type.shape.dim[0].dim_param == "seq"


@pytest.mark.parametrize("dim,reverse", [(0, True), (1, False), (1, True), (-1, True)])
def test_scan_dim_reverse(dim, reverse):
    def fn(x):
        def combine(carry, xi):
            carry = carry * 0.5 + xi
            return carry, carry.sin()

        init = torch.zeros_like(x.select(dim, 0))
        return scan(combine, init, x, dim=dim, reverse=reverse)

    x = torch.randn(3, 4, 5)
    _check(Fn1(fn), (x,), ({0: "a", 1: "b", 2: "c"},), [((torch.randn(2, 6, 7),), None)])


def _cdist(x, y):
    def dist(carry, xi):
        sub = carry - xi.reshape((1, -1))
        return carry.clone(), (sub * sub).sum(1).sqrt()

    return scan(dist, y, x)[1]


def test_scan_cdist_dynamic():
    args = (torch.randn(3, 4), torch.randn(5, 4))
    more = ((torch.randn(6, 4), torch.randn(2, 4)), None)
    onx = _check(Fn(_cdist), args, ({0: "n"}, {0: "m"}), [more])
    torch.testing.assert_close(_cdist(*args), torch.cdist(*args))
    assert "Scan" in op_types(onx)


def test_scan_nested():
    def fn(x):
        def outer(carry, row):
            def inner(c, v):
                c = c + v * carry.sum()
                return c, c.clone()

            _, cum = scan(inner, torch.zeros_like(row[0]), row)
            return carry + cum, cum * 2

        return scan(outer, torch.zeros_like(x[0]), x)

    onx = _check(Fn1(fn), (torch.randn(3, 4),), ({0: "n", 1: "m"},), [((torch.randn(5, 2),), None)])
    assert _all_op_types(onx).count("Scan") == 2


def test_scan_dynamic_batch_carry():
    """Carries of dynamic batch size, scanned over a dynamic sequence (a small RNN)."""
    rnn = torch.nn.Module()
    rnn.cell = torch.nn.Linear(6, 3)

    def fn(x):
        def step(h, xt):
            h = torch.tanh(rnn.cell(torch.cat([h, xt], dim=-1)))
            return h, h.clone()

        return scan(step, torch.zeros(x.shape[1], 3), x)

    model = Fn1(fn)
    model.rnn = rnn
    _check(model, (torch.randn(4, 2, 3),), ({0: "seq", 1: "batch"},), [((torch.randn(7, 5, 3),), None)])


# -- cond ------------------------------------------------------------------------------------------------------


def test_cond_one_output():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos() + 1, (x,))

    x = torch.rand(3, 4) + 0.1
    onx = _check(Fn1(fn), (x,), ({0: "b"},), [((-x[:2],), None)])
    assert op_types(onx)[-1] == "If"


def test_cond_several_outputs_submodule_constants():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    more = [((x + 5, y), None), ((x[:1] - 5, y[:1]), None)]
    onx = _check(CondModel(), (x, y), ({0: "b"}, {0: "b"}), more)
    node = next(n for n in onx.graph.node if n.op_type == "If")
    then_branch = node.attribute[0].g
    assert len(then_branch.input) == 0  # operands and weights come from the outer scope
    assert "Identity" in [n.op_type for n in then_branch.node]  # x returned unchanged


def test_cond_nested():
    def fn(x):
        def inner_true(x):
            return x * 2

        def inner_false(x):
            return x * 3

        def true_fn(x):
            return torch.cond(x.max() > 1, inner_true, inner_false, (x,))

        def false_fn(x):
            return -x

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))

    x = torch.rand(2, 3)
    onx = _check(Fn1(fn), (x,), ({0: "b"},), [((x + 1,), None), ((-x,), None)])
    assert _all_op_types(onx).count("If") == 2


def test_cond_shape_predicate():
    def fn(x):
        return torch.cond(x.shape[0] > 4, lambda x: x * 2, lambda x: x + 1, (x,))

    onx = _check(Fn1(fn), (torch.randn(6, 3),), ({0: "b"},), [((torch.randn(2, 3),), None)])
    assert "If" in op_types(onx)


def test_cond_inside_scan():
    """If branches reading values of the Scan body that contains them."""

    def fn(x):
        def combine(carry, xi):
            carry = torch.cond(xi.sum() > 0, lambda c, v: c + v, lambda c, v: c - v, (carry, xi))
            return carry, carry * 2

        return scan(combine, torch.zeros_like(x[0]), x)

    onx = _check(Fn1(fn), (torch.randn(6, 3),), ({0: "n", 1: "d"},), [((torch.randn(9, 2),), None)])
    assert _all_op_types(onx).count("If") == 1


# -- while_loop ------------------------------------------------------------------------------------------------


def test_while_loop_counter_up():
    def fn(x):
        def cond_fn(i, acc):
            return i < x.shape[0]

        def body_fn(i, acc):
            return i + 1, acc + x.index_select(0, i.reshape(1)).squeeze(0) * i

        return while_loop(cond_fn, body_fn, (torch.tensor(0), torch.zeros(x.shape[1])))

    onx = _check(Fn1(fn), (torch.randn(3, 4),), ({0: "n", 1: "d"},), [((torch.randn(6, 2),), None)])
    assert "Loop" in op_types(onx)


def test_while_loop_counter_down_weights():
    more = [((torch.tensor(0), torch.randn(4, 3)), None), ((torch.tensor(7), torch.randn(1, 3)), None)]
    _check(CountDown(), (torch.tensor(3), torch.randn(2, 3)), (None, {0: "b"}), more)


def test_while_loop_int_carry():
    def fn(x):
        def cond_fn(i, y):
            return i < 3

        def body_fn(i, y):
            return i + 1, y * 2

        return while_loop(cond_fn, body_fn, (0, x))[1]

    _check(Fn1(fn), (torch.randn(3, 4),), ({0: "n"},), [((torch.randn(5, 4),), None)])


# -- map -------------------------------------------------------------------------------------------------------


def test_map():
    def fn(xs, y):
        return hop_map(lambda x, y: (x * y + 1, x.sum()), xs, y)

    more = [((torch.randn(5, 4), torch.randn(4)), None)]
    onx = _check(Fn(fn), (torch.randn(3, 4), torch.randn(4)), ({0: "n"}, None), more)
    assert op_types(onx) == ["Scan"]


# -- Python loops and errors -------------------------------------------------------------------------------------


def test_python_loop_unrolled():
    def fn(x):
        for i in range(3):
            x = x * 2 + i
        return x

    onx = _check(Fn1(fn), (torch.randn(2, 3),), ({0: "b"},), [((torch.randn(5, 3),), None)])
    assert "Loop" not in op_types(onx) and op_types(onx).count("Mul") == 3


def _scan_same_tensor_twice(x):
    def combine(carry, xi):
        next_carry = carry + xi
        return [next_carry, next_carry]

    return scan(combine, torch.zeros_like(x[0]), x)


def _cond_returns_input(x):
    return torch.cond(x.sum() > 0, lambda x: x, lambda x: x * 2, (x,))


@pytest.mark.parametrize(
    "fn,expected",
    [
        (_scan_same_tensor_twice, ["returns the same tensor twice", "return [next_carry, next_carry.clone()]"]),
        (_cond_returns_input, ["returns one of its inputs unchanged", "x.clone()"]),
    ],
)
def test_aliasing_error(fn, expected):
    with pytest.raises(ExportCaptureError) as info:
        to_onnx(Fn(fn), (torch.randn(4, 2),), capture_strategies=False)  # the strategy would clone the output
    hint = str(info.value).split("What to try:")[1]
    assert all(e in hint for e in expected), hint
