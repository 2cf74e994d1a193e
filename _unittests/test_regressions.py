"""Silent wrong results found by random programs: each test is the smallest program that showed one.

Each compares onnxruntime with eager PyTorch; before its fix, each of these exported without a word and
gave other numbers than PyTorch.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter.testing.check import Fn, check_model, op_types


def test_logcumsumexp_running_maximum():
    """One maximum per row underflowed the prefixes before it: [-200, -300, 100] gave [-inf, -inf, 100]."""
    x = torch.tensor([[-200.0, -300.0, 100.0], [1.0, 2.0, 3.0], [float("-inf"), 0.0, float("nan")]])
    check_model(Fn(lambda x: torch.logcumsumexp(x, 1)), (x,))
    check_model(Fn(lambda x: torch.logcumsumexp(x, 0)), (x.T.contiguous(),))


def test_logcumsumexp_dynamic_axis():
    check_model(
        Fn(lambda x: torch.logcumsumexp(x, 1)),
        (torch.randn(3, 5, 4) * 50,),
        dynamic_shapes=({0: "a", 1: "n"},),
        more_inputs=[((torch.randn(2, 7, 4) * 50,), None)],
        atol=1e-4,
    )


def test_atan2_signed_zeros_and_infinities():
    """atan2(1, -0.0) gave -pi/2 (eager +pi/2): the sign bit of a zero decides the quadrant."""
    inf, nan = float("inf"), float("nan")
    y = torch.tensor([1.0, -0.0, 0.0, -0.0, 0.0, inf, -inf, inf, 2.0, -2.0, -1.0])
    x = torch.tensor([-0.0, -1.0, -1.0, 0.0, 0.0, inf, inf, -inf, nan, 3.0, -0.0])
    check_model(Fn(torch.atan2), (y, x), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_clamp_of_relu(dtype):
    """clamp(relu(int), 1, 3): onnxruntime's optimizer fused Relu+Clip wrongly on integers."""
    x = torch.tensor([-3, 0, 1, 2, 5, 9], dtype=dtype)
    check_model(Fn(lambda x: torch.clamp(torch.relu(x), 1, 3)), (x,))  # optimized: one Clip, right
    onx = check_model(Fn(lambda x: torch.clamp(torch.relu(x), 1, 3)), (x,), optimize=False)
    assert "Clip" not in op_types(onx)


@pytest.mark.parametrize("size", [(5, 7), (6, 6)])
def test_adaptive_avg_pool_keeps_inf_and_nan_in_their_windows(size):
    """Non-divisible sizes were a MatMul by averaging matrices: inf * 0 put NaN in every other window."""
    x = torch.randn(1, 2, *size)
    x[0, 0, 0, 0] = float("inf")
    x[0, 1, -1, -1] = float("nan")
    check_model(Fn(lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (3, 4))), (x,))


@pytest.mark.parametrize("padding", [0, 1])
def test_max_pool_propagates_nan(padding):
    """onnxruntime's MaxPool skips NaN; a window of NaN and padding gave -3.4e38."""
    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 0, 0] = float("nan")
    x[0, 0, 2, 3] = float("nan")
    check_model(Fn(lambda x: torch.nn.functional.max_pool2d(x, 2, 2, padding)), (x,))
    check_model(Fn(lambda x: torch.nn.functional.max_pool1d(x[0], 3, 1, padding)), (x,))


class _DropoutThenWrite(torch.nn.Module):
    def forward(self, x):
        y = torch.nn.functional.dropout(x, 0.5, training=False)  # ATen returns x itself
        y.mul_(2)
        return x + 0


def test_write_through_eval_dropout_reaches_its_input():
    """The write into dropout's output was lost: the ONNX model returned x, eager 2 * x."""
    check_model(_DropoutThenWrite(), (torch.randn(3, 4),))


class _EinsumThenWrite(torch.nn.Module):
    def forward(self, x):
        y = torch.einsum("ij->ji", x)  # a view of x at run time, a new tensor by its schema
        y.mul_(3)
        return x + 0


def test_write_through_einsum_view_reaches_its_input():
    """einsum("ij->ji") is a view of x at run time: the write goes back through the same equation."""
    check_model(_EinsumThenWrite(), (torch.randn(3, 4),))


class _WriteThroughExpand(torch.nn.Module):
    def __init__(self, write):
        super().__init__()
        self.write = write

    def forward(self, x):
        x = x + 0
        y = x.unsqueeze(1).expand(-1, 3, -1)  # each element of x seen 3 times
        self.write(y)
        return x * 1, y + 0


@pytest.mark.parametrize(
    "write",
    [
        lambda y: y[:, 0].mul_(2),
        lambda y: y[:, 2].add_(1),
        lambda y: y.__setitem__((0, 1, 2), 5.0),
        lambda y: y[1].__setitem__(0, -1.0),
        lambda y: y.fill_(3.0),
    ],
    ids=["mul_row0", "add_row2", "setitem", "setitem_select", "fill"],
)
def test_write_through_expanded_view(write):
    """A write into one copy of an expanded row came back through the copies left unchanged
    (ScatterElements with repeated positions): the ONNX model returned x, eager 2 * x."""
    check_model(
        _WriteThroughExpand(write),
        (torch.randn(2, 4),),
        dynamic_shapes=({1: "n"},),
        more_inputs=[((torch.randn(2, 6),), None)],
    )


class _WriteThroughSameDtype(torch.nn.Module):
    def forward(self, x, z):
        v = x[1:]
        a = v.to(torch.float32)  # aten::to.dtype returns v itself
        a.add_(1)
        b = v.type_as(z)  # the same tensor again
        b.mul_(2)
        c = (x > 0)[1:].bool()
        c.fill_(True)
        return x + 0, c


def test_write_through_same_dtype_conversion():
    """``.to()`` of the same dtype is the view itself: its write used the converted positions (float)."""
    check_model(_WriteThroughSameDtype(), (torch.randn(3, 4), torch.randn(2)))


class _EinsumViewThenWrite(torch.nn.Module):
    def __init__(self, equation):
        super().__init__()
        self.equation = equation

    def forward(self, x):
        y = torch.einsum(self.equation, x[1:])  # a view of a view of x at run time
        y.mul_(3)
        y[0].add_(1)
        return x + 0, y + 0


@pytest.mark.parametrize("equation", ["iij->ji", "iij->ij", "ijk->kji", "iii->i"])
def test_write_through_einsum_diagonal_or_permutation(equation):
    check_model(_EinsumViewThenWrite(equation), (torch.randn(4, 3, 3),))


def test_write_through_einsum_with_ellipsis_is_a_clear_error():
    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter.errors import ConversionError

    with pytest.raises(ConversionError, match="einsum.*clone"):
        to_onnx(_EinsumViewThenWrite("...ij->...ji"), (torch.randn(4, 3, 3),))


class _GridBesideInPlaceOp(torch.nn.Module):
    """RAFT's coords_grid: a meshgrid in a graph holding an in-place op."""

    def forward(self, x):
        gy, gx = torch.meshgrid(torch.arange(x.shape[0]), torch.arange(x.shape[1]), indexing="ij")
        return x.relu_() + gy + gx


def test_meshgrid_in_a_graph_with_an_in_place_op():
    """meshgrid returns a list of views of its inputs (its schema says new tensors): the runtime alias check read
    ``.shape`` of the list (AttributeError), which stopped torchvision's RAFT."""
    check_model(_GridBesideInPlaceOp(), (torch.randn(3, 4),))
    check_model(
        _GridBesideInPlaceOp(), (torch.randn(3, 4),), dynamic_shapes=({0: "h", 1: "w"},),
        more_inputs=[((torch.randn(5, 2),), None)],
    )


def _grid_then_scale(x, w):
    gy, gx = torch.meshgrid(x, w, indexing="xy")
    x.mul_(3)  # gy and gx expand x and w: they see it
    return gy + gx, torch.stack([gy, gx])


def _broadcast_then_write(x, y):
    row = x[0]
    a, b = torch.broadcast_tensors(x, y)  # a is x itself, b expands y
    a.add_(1)  # writes into x, seen through row
    return row * 2, a + b


@pytest.mark.parametrize(
    "fn, shapes", [(_grid_then_scale, [(3,), (4,)]), (_broadcast_then_write, [(3, 4), (4,)])],
    ids=["meshgrid_input_mutated", "broadcast_tensors_item_written"],
)
def test_list_of_views_follows_mutations(fn, shapes):
    """Each item of such a list is a view of one input: read after that input changes, it is recomputed (the
    meshgrid items kept x's old values before), and a write into an item that is the input itself reaches it."""
    check_model(Fn(lambda *args: fn(*(a.clone() for a in args))), tuple(torch.randn(*s) for s in shapes))
    check_model(Fn(fn), tuple(torch.randn(*s) for s in shapes))


class _WriteIntoEmptySlice(torch.nn.Module):
    def __init__(self, write):
        super().__init__()
        self.write = write

    def forward(self, x):
        y = x + 0
        self.write(y, x)  # y[:, 5:] has no column when x has 5
        return y


@pytest.mark.parametrize(
    "write",
    [
        lambda y, x: y.__setitem__((slice(None), slice(5, None)), x[:, :1]),
        lambda y, x: y.__setitem__((slice(None), slice(5, None)), 1.0),
        lambda y, x: y[:, 5:].add_(1),
        lambda y, x: y[:, 5:].copy_(x[:, :0]),
    ],
    ids=["broadcast_column", "scalar", "add_", "copy_empty"],
)
def test_write_into_empty_slice_is_a_no_op(write):
    """``y[:, 5:] = x[:, :1]`` on width 5: onnxruntime's optimizer removed the Expand of 1 to 0 columns,
    then ScatterElements refused the model (updates of 1 column, indices of 0)."""
    check_model(_WriteIntoEmptySlice(write), (torch.randn(3, 5),))
    check_model(
        _WriteIntoEmptySlice(write),
        (torch.randn(3, 5),),
        dynamic_shapes=({0: "b"},),
        more_inputs=[((torch.randn(4, 5),), None)],
    )


def test_expand_to_zero_length():
    check_model(Fn(lambda x: x[:, :1].expand(-1, 0) + 1), (torch.randn(3, 5),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda q, x: torch.nn.functional.scaled_dot_product_attention(q, x * 2, x * 2),
        lambda q, x: torch.nn.functional.scaled_dot_product_attention(x * 2, x * 2, x * 2, is_causal=True),
        lambda q, x: torch.nn.functional.scaled_dot_product_attention(q, x * 2, x * 2, scale=0.3),
    ],
    ids=["kv", "qkv_causal", "scale"],
)
def test_attention_on_scaled_key_survives_onnxruntime_optimizer(fn):
    """key = value = x * 2: onnxruntime's MatMulScaleFusion (extended level, on by default) rewrote
    Mul(Mul(x, 2), s) -> Transpose -> MatMul into a model it refused ("input 'mul' is not ...")."""
    import onnxruntime as ort

    q, x = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    onx = check_model(Fn(fn), (q, x))
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])  # default optimizations
    got = sess.run(None, {i.name: t.numpy() for i, t in zip(onx.graph.input, (q, x))})[0]
    torch.testing.assert_close(torch.from_numpy(got), fn(q, x), atol=1e-5, rtol=1e-4)


# -- found by the program fuzzer (testing/random_programs.py, issue 15)


@pytest.mark.parametrize("value", [-1, 2.5, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_copy_of_a_python_number(value, dtype):
    """``y.copy_(-1)`` (torch takes the number as a 0-D tensor) failed with AttributeError (fuzz seed 118)."""

    def fn(x):
        y = x.clone()
        y.copy_(value)
        return y * 2

    check_model(Fn(fn), (torch.randn(2, 3).to(dtype),))


@pytest.mark.parametrize("fn", [lambda x: torch.std(x, 0, keepdim=True), lambda x: torch.var(x, 1)], ids=["std", "var"])
def test_var_std_of_bfloat16(fn):
    """onnxruntime has no bfloat16 ``Size``: var/std of bfloat16 gave a model onnxruntime refused (fuzz seed 159)."""
    check_model(Fn(fn), (torch.randn(4, 3).bfloat16(),), dynamic_shapes=({0: "n"},), atol=2e-2, rtol=2e-2,
                more_inputs=[((torch.randn(6, 3).bfloat16(),), None)])


class _AtLeastFive(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] >= 5)
        return x + 1


class _FirstFourRows(torch.nn.Module):
    def forward(self, x, y):
        return x[:4] * 2 + y[: x.shape[0]]  # exported with 3 rows: x[:4] is x only while x.shape[0] <= 3


def _narrowed(onx) -> list[dict]:
    import json

    from experimental.torch_interpreter.metadata import RANGE_CONSTRAINTS as METADATA_KEY

    props = {p.key: p.value for p in onx.metadata_props}
    return [r for r in json.loads(props[METADATA_KEY]) if r["narrowed"]]


def test_narrowed_lower_bound_warns_and_is_recorded():
    """torch._check(n >= 5) narrowed [2, int_oo] to [5, int_oo] without a word; the ONNX model dropped it."""
    from experimental.torch_interpreter import RangeConstraintWarning

    with pytest.warns(RangeConstraintWarning, match=r"input 'x' axis 0 \('batch'\) must be >= 5"):
        onx = check_model(
            _AtLeastFive(), (torch.randn(6, 3),), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(9, 3),), None)]
        )
    assert _narrowed(onx) == [
        {"input": "x", "axis": 0, "dim": "batch", "expr": "batch", "low": 5, "high": None, "narrowed": True}
    ]


def test_narrowed_upper_bound_warns_and_is_recorded():
    from experimental.torch_interpreter import RangeConstraintWarning

    # [1, 3]: torch's range starts at 2, the graph was checked at size 1 (it holds there)
    with pytest.warns(RangeConstraintWarning, match=r"input 'x' axis 0 \('n'\) must be in \[1, 3\]"):
        onx = check_model(
            _FirstFourRows(),
            (torch.randn(3, 2), torch.randn(4, 2)),
            dynamic_shapes=({0: "n"}, None),
            more_inputs=[((torch.randn(2, 2), torch.randn(4, 2)), None)],
        )
    assert [(r["input"], r["axis"], r["low"], r["high"]) for r in _narrowed(onx)] == [("x", 0, 1, 3)]


def test_default_and_declared_ranges_do_not_warn():
    import warnings

    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter import RangeConstraintWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", RangeConstraintWarning)
        onx = to_onnx(Fn(lambda x: x + 1), (torch.randn(3, 4),), dynamic_shapes=({0: "batch", 1: "n"},))
        assert _narrowed(onx) == []
        dim = torch.export.Dim("b", min=6, max=64)  # the user's own range, not a narrowing
        onx = to_onnx(_AtLeastFive(), (torch.randn(6, 3),), dynamic_shapes=({0: dim},))
        assert _narrowed(onx) == []


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b * b,
        lambda a, b: torch.exp(b) - a,
        lambda a, b: (b @ b.transpose(-1, -2)).float() + a[..., :1],
        lambda a, b: torch.softmax(b, -1).float() * a,
        lambda a, b: b.sum(-1, keepdim=True) + a,
    ],
    ids=["mul", "exp", "matmul", "softmax", "sum"],
)
def test_float16_result_read_in_float32_keeps_its_rounding(fn):
    """``float32 + float16 * float16``: onnxruntime's CPU computes the float16 product in float32 between
    casts it inserts, and drops the pair before our Cast to float32, so the sum read the unrounded product
    (half a float16 ulp off, ~3e-4; the issue's first mismatch, fuzz seed 528). Compared at float32 tolerance."""
    a, b = torch.randn(1, 5, 6) * 3, (torch.randn(6, 5, 6) * 3).half()
    check_model(Fn(fn), (a, b), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cumulative_extremum_over_dynamic_axis(fn):
    """cummax/cummin over a dynamic axis was refused: the [n, n] mask now comes from Range."""
    x = torch.tensor([[1.0, 3.0, 3.0, -1.0, 5.0], [2.0, float("nan"), 0.0, float("nan"), 1.0]])
    other = torch.randint(-3, 3, (3, 8)).float()  # ties: the last index, as PyTorch
    check_model(
        Fn(lambda x: fn(x, 1)), (x,), dynamic_shapes=({0: "b", 1: "n"},), more_inputs=[((other,), None)]
    )
    check_model(
        Fn(lambda x: fn(x, 0)), (x.T.contiguous(),), dynamic_shapes=({0: "n"},), more_inputs=[((other[:2].T.contiguous(),), None)]
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
        lambda x: torch.nn.functional.adaptive_max_pool2d(x, (2, 3)),
        lambda x: torch.nn.functional.adaptive_avg_pool1d(x[:, :, 0], 4),
        lambda x: torch.nn.functional.adaptive_max_pool1d(x[0, :, 1], 4),
    ],
    ids=["avg2d", "max2d", "avg1d", "max1d_unbatched"],
)
def test_adaptive_pool_over_dynamic_spatial_axes(fn):
    """Adaptive pooling over a dynamic spatial axis was refused: windows from Range and comparisons."""
    x = torch.randn(1, 2, 7, 6)
    x[0, 0, 1, 1] = float("inf")
    x[0, 1, 5, 0] = float("nan")
    check_model(
        Fn(fn),
        (x,),
        dynamic_shapes=({2: "h", 3: "w"},),
        more_inputs=[((torch.randn(1, 2, 5, 9),), None), ((torch.randn(1, 2, 3, 2),), None)],
    )


class _AdaptiveMaxWithIndices(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.nn.functional.adaptive_max_pool2d(x, (2, 3), return_indices=True)
        return values, indices


def test_adaptive_max_pool_indices_over_dynamic_axes():
    """Once a clear error, now computed (training graphs read the indices): equal to PyTorch on other sizes."""
    check_model(_AdaptiveMaxWithIndices(), (torch.randn(1, 2, 7, 6),), dynamic_shapes=({2: "h", 3: "w"},),
                more_inputs=[((torch.randn(1, 2, 9, 4),), None)])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rms_norm_with_weight_in_half_precision(dtype):
    """rms_norm of bfloat16 with a weight gave a bfloat16 Mul onnxruntime has no kernel for (fuzz seed 357)."""
    weight = torch.randn(3).to(dtype)
    check_model(Fn(lambda x: torch.nn.functional.rms_norm(x, (3,), weight)), (torch.randn(2, 4, 3).to(dtype),),
                atol=1e-2, rtol=1e-2)


class _DropoutInPlace(torch.nn.Module):
    def __init__(self, p, train, fn=torch.nn.functional.dropout):
        super().__init__()
        self.p, self.train_, self.fn = p, train, fn

    def forward(self, x):
        y = x * 3
        self.fn(y, self.p, training=self.train_, inplace=True)  # aten::dropout_ and its feature/alpha forms
        return y + 1, x + 0


@pytest.mark.parametrize(
    "fn",
    [
        torch.nn.functional.dropout,
        torch.nn.functional.dropout2d,
        torch.nn.functional.alpha_dropout,
        torch.nn.functional.feature_alpha_dropout,
    ],
    ids=["dropout_", "feature_dropout_", "alpha_dropout_", "feature_alpha_dropout_"],
)
def test_dropout_in_place(fn):
    """aten::dropout_ had no converter; eval mode writes nothing, p=1 in training zeroes y (NaN stays NaN)."""
    x = torch.randn(2, 3, 4, 5)
    check_model(_DropoutInPlace(0.5, False, fn), (x,))
    x[0, 0, 0, 0] = float("nan")
    check_model(_DropoutInPlace(1.0, True, fn), (x,))


def test_dropout_in_place_in_training_scales_what_it_keeps():
    import numpy as np

    from experimental.torch_interpreter import InferenceSession, to_onnx

    onx = to_onnx(_DropoutInPlace(0.25, True), (torch.ones(4000),))
    y, x = InferenceSession(onx).run(None, {"x": torch.ones(4000)})
    np.testing.assert_allclose(y[y != 1], 3 / 0.75 + 1, rtol=1e-6)
    assert abs((y == 1).mean() - 0.25) < 0.03


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_follows_pytorch_binary_search_with_nan(right):
    """NaN sorts last in PyTorch: a NaN value gave 0 (PyTorch len(boundaries)); with NaN boundaries the
    answer is where PyTorch's binary search stops (5 for 0.5 in [0, 1, nan, nan, nan]), not a count."""
    nan = float("nan")
    b = torch.tensor([[0.0, 1.0, nan, nan, nan], [-1.0, 0.0, 0.0, 2.0, nan]])
    v = torch.tensor([[0.5, nan, -3.0, 1.0], [0.0, 2.0, 5.0, nan]])
    check_model(Fn(lambda b, v: torch.searchsorted(b, v, right=right)), (b, v))
    check_model(Fn(lambda b, v: torch.bucketize(v, b[0], right=right)), (b, v))
    check_model(
        Fn(lambda b, v: torch.searchsorted(b, v, right=right)),
        (b[1:, :4], v[1:]),
        dynamic_shapes=({1: "m"}, {1: "k"}),  # a dynamic length: the count, the same without NaN boundaries
        more_inputs=[((torch.tensor([[-2.0, 0.0, 0.0, 1.0, 3.0, 3.0]]), torch.tensor([[0.0, 3.0, nan]])), None)],
    )


class _MetadataInPlace(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        y = x + 1
        row = y[0]  # a view taken before the metadata changes
        self.fn(y)
        y.mul_(2)  # written through the changed tensor: row and x's copy see it
        return y + 0, row + 0


@pytest.mark.parametrize(
    "fn",
    [
        lambda y: y.unsqueeze_(0),
        lambda y: y.unsqueeze_(-1),
        lambda y: y.t_(),
        lambda y: y.transpose_(0, 1),
        lambda y: y.unsqueeze_(1).squeeze_(1),
        lambda y: y[:, :2].unsqueeze_(0).mul_(-1),  # the write goes through a view of a view
    ],
    ids=["unsqueeze_", "unsqueeze_last", "t_", "transpose_", "squeeze_", "slice_unsqueeze_"],
)
def test_metadata_in_place_ops(fn):
    """unsqueeze_ had no converter; it changes a tensor's shape, not its data: tracked as a view."""
    check_model(_MetadataInPlace(fn), (torch.randn(3, 4),))


class _UnsqueezeInput(torch.nn.Module):
    def forward(self, x):
        x.unsqueeze_(0)
        return x * 2


def test_unsqueeze_in_place_on_an_input_gets_advice():
    """torch.export fails with a bare IndexError (produce_guards) when an input changes rank in place."""
    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter.errors import ExportCaptureError

    with pytest.raises(ExportCaptureError, match=r"IndexError(.|\n)*unsqueeze_\(0\)(.|\n)*x = x\.unsqueeze\(0\)"):
        to_onnx(_UnsqueezeInput(), (torch.randn(3, 4),), capture_strategies=False)


def test_one_hot():
    """aten::one_hot had no converter."""
    check_model(Fn(lambda x: torch.nn.functional.one_hot(x, 5)), (torch.tensor([[0, 3], [4, 1]]),))
    check_model(
        Fn(lambda x: torch.nn.functional.one_hot(x, 6) * 2),
        (torch.tensor([0, 3, 1]),),
        dynamic_shapes=({0: "n"},),
        more_inputs=[((torch.tensor([5, 0, 2, 2, 1]),), None)],
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.fft.fftn(x),
        lambda x: torch.fft.fftn(x, dim=(1, 2), norm="ortho"),
        lambda x: torch.fft.fftn(x, s=(6, 3)),
        lambda x: torch.fft.ifftn(torch.fft.fftn(x, dim=(0, 2)), dim=(0, 2)),
        lambda x: torch.fft.fft(x, n=7, norm="forward"),
        lambda x: torch.fft.ifft(torch.fft.fft2(x), dim=0),
        lambda x: torch.fft.fftn(x.double()),
    ],
    ids=["fftn", "fftn_dims_ortho", "fftn_s", "ifftn_of_fftn", "fft_n_forward", "ifft_of_fft2", "fftn_double"],
)
def test_complex_fft(fn):
    """fft_fftn had no converter: its complex result is carried as a real pair, read by view_as_real."""
    check_model(Fn(lambda x: torch.view_as_real(fn(x))), (torch.randn(3, 4, 5),), atol=1e-4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.fft.fftn(x),
        lambda x: torch.fft.fftn(x, dim=(1, 2), norm="ortho"),
        lambda x: torch.fft.ifftn(torch.fft.fftn(x, dim=(0, 2)), dim=(0, 2)),
        lambda x: torch.fft.fft(x, dim=0, norm="forward"),
        lambda x: torch.fft.fft(x, n=7),  # the static axis padded, the dynamic ones transformed at their length
    ],
    ids=["fftn", "fftn_dims_ortho", "ifftn_of_fftn", "fft_dim0_forward", "fft_n_static_axis"],
)
def test_complex_fft_over_dynamic_axes(fn):
    """FNet: the DFT matrices of a dynamic axis are computed in the graph (it was a ConversionError)."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    check_dynamic(lambda x: torch.view_as_real(fn(x)), torch.randn(3, 4, 5), dynamic=(0, 1), atol=1e-4)


def test_fft_resized_dynamic_axis_is_a_clear_error():
    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter.errors import ConversionError

    with pytest.raises(ConversionError, match=r"fft_fft.*axis 0 is dynamic and cut or padded to 6 points"):
        to_onnx(Fn(lambda x: torch.view_as_real(torch.fft.fft(x, n=6, dim=0))), (torch.randn(3, 4),),
                dynamic_shapes=({0: "n"},))


def test_dim_auto_axis_made_static_is_accepted():
    """``Dim.AUTO`` lets torch.export choose: an axis it made static (size 1, or fixed by the code) is no
    DynamicShapeError, unlike an axis named by the user; the others stay dynamic (the fuzzer's dynamic programs)."""
    auto = torch.export.Dim.AUTO
    x, y = torch.randn(1, 5), torch.randn(4, 5)
    onx = check_model(
        Fn(lambda x, y: x + y), (x, y), dynamic_shapes=({0: auto, 1: auto}, {0: auto, 1: auto}),
        more_inputs=[((torch.randn(1, 7), torch.randn(6, 7)), None)],
    )
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onx.graph.input]
    assert dims[0][0] == 1 and isinstance(dims[0][1], str) and isinstance(dims[1][0], str)


class _WriteThroughDynamicExpand(torch.nn.Module):
    def forward(self, x):
        x = x + 0
        y = x[:1].expand(x.shape[0], -1)  # the first row seen once per row, a dynamic number of times
        y[0].mul_(2)
        return x * 1, y + 0


def test_write_through_expand_of_a_dynamic_length():
    check_model(
        _WriteThroughDynamicExpand(),
        (torch.randn(3, 4),),
        dynamic_shapes=({0: "b", 1: "n"},),
        more_inputs=[((torch.randn(5, 2),), None)],
    )


def test_write_through_expand_of_bfloat16():
    """The write-back numbered the elements with ``Size``, which onnxruntime lacks for bfloat16: a model it
    refused to load (NOT_IMPLEMENTED)."""
    check_model(
        _WriteThroughDynamicExpand(),
        (torch.randn(3, 4).bfloat16(),),
        dynamic_shapes=({0: "b", 1: "n"},),
        more_inputs=[((torch.randn(5, 2).bfloat16(),), None)],
        atol=1e-2,
        rtol=1e-2,
    )


def test_one_hot_of_data_dependent_width_is_a_clear_error():
    """num_classes=-1: the width is the largest value plus one; torch.export refuses it, with advice."""
    from experimental.torch_interpreter import to_onnx
    from experimental.torch_interpreter.errors import ExportCaptureError

    with pytest.raises(ExportCaptureError, match=r"data-dependent(.|\n)*What to try: the output shape depends"):
        to_onnx(Fn(lambda x: torch.nn.functional.one_hot(x)), (torch.tensor([0, 3, 1]),), capture_strategies=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_adaptive_avg_pool_of_half_precision_with_dynamic_axes(dtype):
    """adaptive_avg_pool2d of bfloat16 with dynamic axes failed (TypeError: 'NoneType' object is not iterable):
    the input cast to float32 had lost its shape (fuzz seed 856)."""
    check_model(
        Fn(lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 3)), (torch.randn(3, 6, 1, 6).to(dtype),),
        dynamic_shapes=({0: "batch", 3: "w"},), more_inputs=[((torch.randn(4, 6, 1, 8).to(dtype),), None)],
        atol=1e-2, rtol=1e-2,
    )


@pytest.mark.parametrize("dynamic", [False, True])
def test_linear_of_transposed_bfloat16(dynamic):
    """F.linear(x.transpose(1, 0)) in bfloat16: onnxruntime (all optimizations) segfaulted creating the
    session for Transpose(bfloat16) -> Cast -> MatMul; the cast now comes before the transpose (fuzz seed 1346)."""
    import onnxruntime as ort

    w = torch.randn(4, 6).bfloat16()
    fn = Fn(lambda x: torch.nn.functional.linear(x.transpose(1, 0), w))
    ds = ({0: "a", 1: "b"},) if dynamic else None
    onx = check_model(fn, (torch.randn(5, 6, 6).bfloat16(),), dynamic_shapes=ds, atol=1e-2, rtol=1e-2)
    ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])  # default: all optimizations


def test_optimizer_keeps_the_bounds_of_the_clips_it_makes():
    """Two integer clamps of one value (Inkling2's relative distances, transformers zoo): onnxscript's optimizer
    made Clip nodes whose bounds no graph held, and onnxruntime refused the model."""

    def fn(x):
        d = x[:, None] - x[None, :]
        return d.clamp(0, 4) + d.clamp(0, 4) * 2, (d < 0) | (d >= 5)

    check_model(Fn(fn), (torch.arange(6),), dynamic_shapes=({0: "n"},),
                more_inputs=[((torch.arange(9) * 3 % 7,), None)])


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.clamp(x, min=0.5), lambda x: torch.clamp(x, max=0.5), lambda x: torch.clamp(x.half(), min=-1)],
    ids=["min", "max", "float16_min"],
)
def test_clamp_with_one_bound_keeps_infinities(fn):
    """``clamp(reciprocal(relu6(x)), min=0.5)`` gave 3.4e38 for inf (fuzz seed 4848): ONNX Clip without a max
    clips at the largest finite value."""
    inf, nan = float("inf"), float("nan")
    check_model(Fn(fn), (torch.tensor([[inf, -inf, nan, 0.25, 1.0, -2.0]]),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.max_pool1d(x, 2, stride=2, padding=1, ceil_mode=True),
        lambda x: F.max_pool1d(x, 3, stride=1),
        lambda x: F.max_pool2d(x.unsqueeze(1), 2, padding=1),
        lambda x: F.max_pool1d(x.half(), 2, stride=1, padding=1),
        lambda x: F.adaptive_max_pool1d(x, 1),
        lambda x: F.adaptive_max_pool2d(x.reshape(2, 1, 3, 3).bfloat16(), 1),
    ],
    ids=["padded_ceil", "no_padding", "2d", "float16", "global", "global_bfloat16"],
)
def test_max_pool_of_minus_infinity(fn):
    """A window of -inf gave -3.4e38 (fuzz seed 3687): onnxruntime's MaxPool starts from the lowest float."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[[-inf, -inf, -inf, 1.0, nan, -inf, 2.0, -inf, -inf]], [[0.0, -inf, inf, -inf, -inf, -inf, 3, 4, 5]]])
    check_model(Fn(fn), (x,))


def test_group_norm_of_no_channel_with_a_dynamic_batch():
    """``group_norm`` of a ``[N, 0]`` tensor (a ``tensor_split`` piece) with N dynamic: onnxruntime refused
    the model (a Reshape to ``[0, 1, -1]``: fuzz seed 5275)."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    check_dynamic(lambda x: F.group_norm(torch.tensor_split(x, 2, 1)[1], 1), torch.randn(7, 1))
    check_dynamic(lambda x: F.group_norm(x, 2), torch.randn(3, 4, 5), dynamic=(0, 2))


@pytest.mark.parametrize(
    "fn",
    [lambda x: x[:, 5:].reshape(x.shape[0], 0, 1) + 1, lambda x: (x[:, 5:] * 2).unsqueeze(1).flatten(1, 2)],
    ids=["reshape", "flatten"],
)
def test_reshape_of_an_empty_tensor_with_a_dynamic_batch(fn):
    """onnxscript's optimizer made the shape ``[-1, 0, 1]`` (its MaterializeReshapeShape rule): onnxruntime
    refused the model, -1 cannot be inferred next to a 0; the optimized model takes the batch size back."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    check_dynamic(fn, torch.randn(4, 3))


def test_softmax_of_an_empty_bool_tensor():
    """Eager takes ``softmax`` of an empty bool tensor (bool result); the model had a Softmax of int64,
    refused by onnxruntime (fuzz seeds 6898, 7416)."""
    check_model(Fn(lambda x: (torch.softmax(x[:0] > 0, -1), torch.softmax(x[:, :0] > 0, 0))), (torch.randn(3, 2),))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.interpolate(x, size=(8,), mode="linear", align_corners=False),
        lambda x: F.interpolate(x, size=(7,), mode="linear", align_corners=True),
        lambda x: F.interpolate(x.unsqueeze(1), size=(3, 9), mode="bilinear", align_corners=False),
        lambda x: F.interpolate(x.unsqueeze(1), size=(5, 7), mode="bicubic", align_corners=True),
        lambda x: F.interpolate(x[None, None], scale_factor=1.5, mode="trilinear"),
    ],
    ids=["linear", "linear_same_size", "bilinear", "bicubic", "trilinear"],
)
def test_interpolate_of_infinities(fn):
    """``F.interpolate(x, size=(8,), mode='linear')`` of a tensor with -inf gave NaN where eager gives -inf
    (fuzz seed 6782): onnxruntime's Resize computes ``x0 + w * (x1 - x0)`` where PyTorch computes
    ``w0 * x0 + w1 * x1``, also NaN for an infinity on a tap of weight 0 (a kept size, a clamped border)."""
    from experimental.torch_interpreter.testing.check import check_dynamic

    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, -inf, -inf, 2.0, inf, inf, 3.0], [nan, 4.0, -inf, inf, 5.0, -inf, 6.0]]).repeat(3, 1, 1)
    check_model(Fn(fn), (x,))
    other = torch.tensor([[-inf, -inf, 0.5, inf, 7.0, 1.0, -2.0, nan, inf]]).repeat(2, 2, 1)
    check_dynamic(fn, x, dynamic=(0, 2), other=other)


def test_optimizer_keeps_tiny_constants():
    """onnxscript's no-op rules matched constants within 1e-8: ``x + 1e-12`` became ``x`` (``1 / (x + 1e-12)``
    gave inf at 0) and ``poisson_nll_loss(log_input=False)`` lost its eps (OpInfo dtype sweep, int64)."""

    def fn(x, t):
        loss = F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none")
        return loss, 1 / (x.float() + 1e-12), x.float() * 1.000001, x.float() - 1e-9

    check_model(Fn(fn), (torch.tensor([8, 6, 9, 0, 0]), torch.tensor([3, 1, 4, 2, 3])), rtol=1e-6)


#: constant rows, and one row of values close to each other, for the normalizations below
_CONSTANT_ROWS = [-3.3, 0.3, 5.123, 1000.1]


def test_group_norm_of_a_constant_group_is_zero():
    """``F.group_norm(v, 1)`` of a constant tensor gave 2.4e-4 everywhere where eager gives 0 (fuzz, derandomized
    run of test_fuzz.py: ``v = torch.where(x2 > 0, x2, x1)`` broadcast one value): onnxruntime's
    InstanceNormalization (and GroupNormalization-21) sums then divides, its mean of a constant is off by an ulp,
    and ``(x - mean) / sqrt(var + eps)`` turns the ulp into up to 3e-2. The rows are now shifted by their first
    value, which the normalization does not see, and which makes a constant row exactly 0."""
    for c in _CONSTANT_ROWS:
        x = torch.full((5, 6, 6, 6), c)
        for opset in (18, 21):
            check_model(Fn(lambda x: F.group_norm(x, 1)), (x,), atol=0, rtol=0, target_opset=opset)
        check_model(Fn(lambda x: F.group_norm(x, 3)), (x,), atol=0, rtol=0)
    mixed = torch.cat([torch.full((2, 3, 4, 4), 7.3), torch.randn(2, 3, 4, 4)], 1)  # one constant group of two
    check_model(Fn(lambda x: F.group_norm(x, 2)), (mixed,), atol=1e-5)


def test_var_and_std_of_a_constant_row_are_zero():
    """``x.std(-1)`` of a constant row gave 2.4e-4 (eager 0): the same ulp of the mean, squared and summed."""
    for c in _CONSTANT_ROWS:
        x = torch.full((5, 216), c)
        check_model(Fn(lambda x: (x.var(-1), x.std(-1), *torch.var_mean(x, dim=(0, 1)))), (x,), atol=0, rtol=0)
    x = torch.randn(4, 6, 5) + 100.0
    check_model(Fn(lambda x: (x.var((0, 2)), x.std(1, keepdim=True), *torch.std_mean(x))), (x,), atol=1e-4)


@pytest.mark.parametrize("norm", ["instance_norm", "batch_norm_training"])
def test_instance_and_batch_norm_of_constant_planes_are_exact(norm):
    """Instance and batch normalization (training mode) of constant planes gave up to 2.7e-2 where the exact
    result is 0; eager PyTorch gives up to 7e-3 there (its mean is a sum divided too), so the graph is compared
    with the exact value: shifted by their first value, the planes give 0."""
    from experimental.torch_interpreter import InferenceSession, to_onnx

    fn = {"instance_norm": lambda x: F.instance_norm(x),
          "batch_norm_training": lambda x: F.batch_norm(x, None, None, training=True)}[norm]
    for c in _CONSTANT_ROWS:
        x = torch.full((5, 6, 6, 6), c)
        got = InferenceSession(to_onnx(Fn(fn), (x,))).run(None, {"args_0": x})[0]
        assert float(abs(got).max()) == 0.0, (c, float(abs(got).max()))
    x = torch.randn(3, 4, 5, 5) * 3 + 50.0
    check_model(Fn(fn), (x,), atol=1e-4)


def test_layer_norm_over_no_element():
    """A layer norm over a normalized shape of size 0: onnxruntime's LayerNormalization refuses to run (the empty
    input comes back, as in PyTorch; its statistics are 0 and NaN, checked by the training fuzzer's seed 60276)."""
    w, b = torch.randn(0), torch.randn(0)
    check_model(Fn(lambda x: F.layer_norm(x, (0,), w, b, eps=1e-3) + 1), (torch.randn(7, 2, 2, 0),))
    check_model(Fn(lambda x: F.layer_norm(x, (2, 0))), (torch.randn(3, 2, 0),))


class _TwoNarrowed(torch.nn.Module):
    def forward(self, x, y):
        torch._check(x.shape[0] >= 5)
        torch._check(y.shape[0] >= 6)
        return x.sum() + y.sum()


def test_narrowed_axes_one_short_warning_at_the_users_line():
    """Two narrowed axes: one warning naming both (it was one long warning per input), attributed to the line
    calling to_onnx (it pointed into the package)."""
    import warnings

    from experimental.torch_interpreter import RangeConstraintWarning, to_onnx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        to_onnx(_TwoNarrowed(), (torch.randn(6, 3), torch.randn(7, 2)), dynamic_shapes=({0: "a"}, {0: "b"}))
    said = [w for w in caught if issubclass(w.category, RangeConstraintWarning)]
    assert len(said) == 1, [str(w.message) for w in said]
    text = str(said[0].message)
    assert "narrowed 2 dynamic axes" in text and "input 'x' axis 0" in text and "input 'y' axis 0" in text, text
    assert len(text) < 450, len(text)
    assert said[0].filename == __file__, said[0].filename


class _EightRowsBranching(torch.nn.Module):
    """``x[:8]`` narrows the rows to [2, 8]; at 1 row the model takes another branch than the graph holds."""

    def forward(self, x):
        y = x[:8] * 2
        return y * 2 if x.shape[0] > 1 else y


def test_size_one_runs_where_the_graph_holds_there():
    """torch's range of a dynamic axis starts at 2 (it specializes 0 and 1): a BERT exported with a dynamic sequence
    was refused at sequence 1 by InferenceSession. The graph is checked at size 1 at export (the program against the
    model): BERT runs at sequence 1 and equals eager; a model whose code branches at size 1 keeps the refusal."""
    import transformers

    from experimental.torch_interpreter import InferenceSession, RuntimeFeedError, to_onnx

    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    onx = to_onnx(model, (torch.randint(0, 100, (2, 5)),), dynamic_shapes=({0: "b", 1: "s"},))
    sess = InferenceSession(onx)
    for batch, seq in [(1, 1), (2, 1), (3, 64)]:
        ids = torch.randint(0, 100, (batch, seq))
        got = sess.run(None, {"input_ids": ids.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), model(ids).last_hidden_state, atol=1e-5, rtol=1e-4)
    onx = to_onnx(_EightRowsBranching(), (torch.randn(4, 3),), dynamic_shapes=({0: "n"},))
    with pytest.raises(RuntimeFeedError, match=r"is 1, the exported graph needs it in \[2, \d+\]"):
        InferenceSession(onx).run(None, {"x": torch.randn(1, 3).numpy()})


class _ParityBranch(torch.nn.Module):
    """A Python branch on a size: torch.export keeps the branch of the example and a guard ``h % 2 == 0``."""

    def forward(self, x):
        h = x.shape[1]
        pairs = x[:, : h // 2 * 2].reshape(x.shape[0], h // 2, 2).sum(-1)
        return pairs * (1 if h % 2 == 0 else 2)


def test_guard_of_the_models_code_on_a_size_is_checked():
    """Exported with an even width, the graph returned half of eager's values on an odd width: the guard torch.export
    made from ``if h % 2 == 0`` was checked by ``ExportedProgram.module()`` only. It is now kept with the model and
    InferenceSession refuses the odd width."""
    from experimental.torch_interpreter import InferenceSession, RuntimeFeedError, to_onnx

    model, dyn = _ParityBranch(), torch.export.Dim.DYNAMIC
    with pytest.warns(Warning, match=r"shape\('x', 1\) % 2\) == 0"):
        onx = to_onnx(model, (torch.randn(2, 8),), dynamic_shapes=({0: dyn, 1: dyn},))
    sess = InferenceSession(onx)
    for width in (6, 10):
        x = torch.randn(3, width)
        torch.testing.assert_close(torch.from_numpy(sess.run(None, {"x": x})[0]), model(x))
    with pytest.raises(RuntimeFeedError, match=r"% 2\) == 0.*if h % 2 == 0"):
        sess.run(None, {"x": torch.randn(3, 7)})


@pytest.mark.parametrize("mode", ["reflect", "replicate", "constant"])
def test_pad_after_transpose_on_a_dynamic_axis(mode):
    """Fuzz seed 200662: a Pad with an ``axes`` input after a Transpose: onnxruntime's transpose optimizer permuted
    its amounts as if they covered every axis (a Gather out of bounds at run time); the amounts cover every axis."""
    def fn(x):
        y = F.pad(torch.cummax(x, -2).values, (1, 2), mode=mode)
        return y @ y.transpose(-1, -2)

    A = torch.export.Dim.AUTO
    check_model(Fn(fn), (torch.randn(2, 3),), dynamic_shapes=({0: A, 1: A},), more_inputs=[((torch.randn(3, 5),), {})])


@pytest.mark.parametrize("perm", [(1, 0, 2), (1, 2, 0), (1, 2, 0, 3), (1, 2, 3, 0)])
def test_float16_matmul_of_a_batch_transpose_by_a_constant(perm):
    """Fuzz seed 205178: a float16 MatMul by a constant reading a Transpose that moves a batch axis crashed
    onnxruntime's CPU session creation (a segfault); computed in float32 and rounded once, as PyTorch's kernel."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.randn(4, 3, generator=torch.Generator().manual_seed(1)).half())

        def forward(self, x):
            return x.permute(*perm) @ self.w

    check_model(Model(), (torch.randn(*[4] * len(perm)).half(),), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_hardswish_is_pytorchs_for_every_value(dtype):
    """Fuzz seed 209313: onnxruntime's float16 HardSwish is an ulp off on 7,711 of the 63,488 finite float16 values;
    a layer_norm of a near-constant row made that ulp 3%. Every finite value of the type, the infinities and NaN."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    values = bits.view(dtype)
    check_model(Fn(F.hardswish), (values,), atol=0, rtol=0)
    row = torch.tensor([[-0.56787109375, -1.7705078125, -0.697265625, -2.189453125]], dtype=torch.float16)
    check_model(Fn(lambda x: F.layer_norm(F.hardswish(x), x.shape[-1:])), (row,), atol=1e-3, rtol=1e-3)


def test_meshgrid_of_two_dynamic_sizes_holds_for_a_square_input():
    """RT-DETR's anchors: the translation compared a meshgrid output's symbolic shape with its input's with
    ``==``, which added the example's answer ``h != w`` to the shape environment as a guard of the model's code:
    ``InferenceSession`` then refused every square input (RuntimeFeedError naming aliasing.py)."""

    class Grid(torch.nn.Module):
        def forward(self, x):
            h, w = x.shape
            gy, gx = torch.meshgrid(torch.arange(end=h).float(), torch.arange(end=w).float(), indexing="ij")
            g = torch.stack([gx, gy], -1).unsqueeze(0) + 0.5
            g[..., 0] /= w
            g[..., 1] /= h
            return g.reshape(-1, h * w, 2) + x.reshape(1, -1, 1)

    check_model(Grid(), (torch.randn(3, 4),), dynamic_shapes=({0: "h", 1: "w"},),
                more_inputs=[((torch.randn(5, 5),), {}), ((torch.randn(2, 6),), {})])


def test_interpolated_constant_leaves_no_dead_nodes():
    """ViT's position embeddings interpolated to a dynamic image size: the If choosing onnxruntime's Resize or the
    exact taps for non-finite values had a constant input, so onnxscript's folding kept the Resize branch, but the
    ~60 nodes computing the other branch's taps stayed (the removed branch still counted as their reader): ViT was
    234 nodes where 117 remain."""

    class Interpolated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(1, 4, 6, 6))

        def forward(self, x):
            h, w = x.shape[-2:]
            return x + F.interpolate(self.table, size=(h, w), mode="bicubic", align_corners=False)

    onx = check_model(Interpolated(), (torch.randn(2, 4, 8, 10),), dynamic_shapes=({2: "h", 3: "w"},),
                      more_inputs=[((torch.randn(2, 4, 5, 7),), {})])
    read = {name for node in onx.graph.node for name in node.input} | {o.name for o in onx.graph.output}
    assert all(any(o in read for o in node.output) for node in onx.graph.node), [n.op_type for n in onx.graph.node]
    assert len(onx.graph.node) < 20, len(onx.graph.node)
