"""nn.LSTM, nn.GRU and nn.RNN as ONNX LSTM, GRU and RNN, one node per layer, sequence and batch dynamic."""

import contextlib

import pytest
import torch

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.capture.kernels import shape_only_rnn_kernels
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types, rand

# nn.RNNBase re-assigns its _flat_weights while torch.export traces it
pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")

RNNS = {
    "lstm": (torch.nn.LSTM, {}, "LSTM"),
    "gru": (torch.nn.GRU, {}, "GRU"),
    "rnn_tanh": (torch.nn.RNN, {"nonlinearity": "tanh"}, "RNN"),
    "rnn_relu": (torch.nn.RNN, {"nonlinearity": "relu"}, "RNN"),
}


def _check(model, inputs, batch_first, more, **kwargs):
    """check_model with the sequence and batch axes of every input dynamic (states: batch only)."""
    seq_batch = {0: "batch", 1: "seq"} if batch_first else {0: "seq", 1: "batch"}
    dynamic = (seq_batch,) + tuple({1: "batch"} for _ in inputs[1:])
    # the capture keeps the sequence dynamic only with the shape-only kernels (see ops/rnn.py)
    with shape_only_rnn_kernels():
        return check_model(model, inputs, dynamic_shapes=dynamic, more_inputs=[(more, None)], **kwargs)


def _x(batch_first, seq, batch, size=4, seed=0):
    """A standard normal sequence, laid out as the RNN reads it."""
    shape = (batch, seq, size) if batch_first else (seq, batch, size)
    return rand(*shape, seed=seed, normal=True)


@pytest.mark.parametrize(
    "num_layers, batch_first, bidirectional",
    [(1, False, False), (1, True, True), (2, False, True), (2, True, False)],
    ids=["1-seq_first-uni", "1-batch_first-bi", "2-seq_first-bi", "2-batch_first-uni"],
)
@pytest.mark.parametrize("kind", list(RNNS))
def test_rnn_layers(kind, num_layers, batch_first, bidirectional):
    cls, kwargs, op_type = RNNS[kind]
    torch.manual_seed(0)
    model = cls(4, 5, num_layers=num_layers, batch_first=batch_first, bidirectional=bidirectional, **kwargs)
    # optimize=False: the translation of the converter (the optimizer folds the weight layouts)
    onx = _check(model, (_x(batch_first, 7, 2),), batch_first, (_x(batch_first, 3, 5, seed=1),), optimize=False)
    assert op_types(onx).count(op_type) == num_layers
    seq_axis = 1 if batch_first else 0
    assert onx.graph.output[0].type.tensor_type.shape.dim[seq_axis].dim_param == "seq"
    # the reordered weights replace the parameters: one W, R, B per layer
    assert len(onx.graph.initializer) == 3 * num_layers


@pytest.mark.parametrize(
    "batch_first, bias", [(False, True), (True, False)], ids=["seq_first-bias", "batch_first-no_bias"]
)
@pytest.mark.parametrize("kind", list(RNNS))
def test_rnn_initial_states(kind, batch_first, bias):
    cls, kwargs, _ = RNNS[kind]
    torch.manual_seed(0)
    rnn = cls(4, 6, num_layers=2, batch_first=batch_first, bidirectional=True, bias=bias, **kwargs)

    if kind == "lstm":

        def forward(x, h0, c0):
            y, (h, c) = rnn(x, (h0, c0))
            return y, h, c

        states = (torch.randn(4, 2, 6), torch.randn(4, 2, 6))
        more_states = (torch.randn(4, 3, 6), torch.randn(4, 3, 6))
    else:

        def forward(x, h0):
            return rnn(x, h0)

        states = (torch.randn(4, 2, 6),)
        more_states = (torch.randn(4, 3, 6),)
    model = Fn(forward)
    model.rnn = rnn  # a submodule: its weights are parameters, not lifted constants
    _check(model, (_x(batch_first, 5, 2), *states), batch_first, (_x(batch_first, 8, 3, seed=1), *more_states))


def test_lstm_head_and_unbatched():
    """An LSTM feeding a linear head, dropout between layers (eval), and an unbatched input."""

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 8)
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True, dropout=0.3)
            self.head = torch.nn.Linear(32, 5)

        def forward(self, ids):
            return self.head(self.lstm(self.embed(ids))[0]).log_softmax(-1)

    torch.manual_seed(0)
    ids, ids2 = torch.randint(0, 50, (2, 9)), torch.randint(0, 50, (4, 3))
    with shape_only_rnn_kernels():
        check_model(Tagger(), (ids,), dynamic_shapes=({0: "batch", 1: "seq"},), more_inputs=[((ids2,), None)])
        gru = torch.nn.GRU(4, 5)
        check_model(gru, (torch.randn(6, 4),), dynamic_shapes=({0: "seq"},), more_inputs=[((torch.randn(2, 4),), None)])


def test_rnn_shared_module_and_float64():
    """The same GRU called twice shares one copy of the reordered weights; float64 and float16 run in float32."""

    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(4, 4, batch_first=True)

        def forward(self, x):
            return self.gru(self.gru(x)[0])[0]

    torch.manual_seed(0)
    onx = _check(Twice(), (_x(True, 6, 2),), True, (_x(True, 2, 3, seed=1),), optimize=False)
    assert op_types(onx).count("GRU") == 2
    assert len(onx.graph.initializer) == 3
    lstm = torch.nn.LSTM(4, 3).double()
    _check(lstm, (_x(False, 5, 2).double(),), False, (_x(False, 3, 4, seed=1).double(),), atol=1e-5)
    gru = torch.nn.GRU(4, 3, batch_first=True).half()
    _check(gru, (_x(True, 5, 2).half(),), True, (_x(True, 3, 4, seed=1).half(),), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_weights_as_inputs(kind):
    """Weights that are graph inputs are reordered by ONNX ops (Split, Concat)."""
    torch.manual_seed(0)
    hidden = 3
    gates = 4 if kind == "lstm" else 3
    weights = [torch.randn(gates * hidden, 4), torch.randn(gates * hidden, hidden)]
    weights += [torch.randn(gates * hidden), torch.randn(gates * hidden)]
    weights += [w + 1 for w in weights]  # the reverse direction

    def forward(x, w_ih, w_hh, b_ih, b_hh, w_ih_r, w_hh_r, b_ih_r, b_hh_r):
        params = [w_ih, w_hh, b_ih, b_hh, w_ih_r, w_hh_r, b_ih_r, b_hh_r]
        h0 = x.new_zeros(2, x.shape[1], hidden)
        if kind == "lstm":
            return torch.ops.aten.lstm.input(x, [h0, h0], params, True, 1, 0.0, False, True, False)
        return torch.ops.aten.gru.input(x, h0, params, True, 1, 0.0, False, True, False)

    x, x2 = _x(False, 5, 2), _x(False, 3, 3, seed=1)
    dynamic = ({0: "seq", 1: "batch"},) + (None,) * 8
    with shape_only_rnn_kernels():
        onx = check_model(Fn(forward), (x, *weights), dynamic_shapes=dynamic, more_inputs=[((x2, *weights), None)])
    assert "Split" in op_types(onx)


def test_lstm_projection_is_reported():
    model = torch.nn.LSTM(4, 6, proj_size=3)
    with pytest.raises(ConversionError, match="proj_size"):
        to_onnx(model, (torch.randn(5, 2, 4),))


def test_shape_only_kernels_restore_and_eager():
    """Outside the context the default kernels are back; inside it real tensors still compute."""
    ops = [torch.ops.aten.lstm.input, torch.ops.aten.gru.input, torch.ops.aten.rnn_tanh.input]
    before = [dict(op.py_kernels) for op in ops]
    lstm = torch.nn.LSTM(3, 2)
    x = torch.randn(4, 1, 3)
    expected = lstm(x)[0]
    with contextlib.ExitStack() as stack:
        stack.enter_context(shape_only_rnn_kernels())
        stack.enter_context(shape_only_rnn_kernels())  # nesting is safe
        torch.testing.assert_close(lstm(x)[0], expected)
    assert [dict(op.py_kernels) for op in ops] == before
