"""Dynamic shapes written with other habits, and axes the model fixes: what ``to_onnx`` answers.

An input left out of a dict spec is static (as in ``dynamic_axes``); a list of axis numbers (``[0]``, the
``dynamic_axes`` habit) is refused with the spelling that works; an axis the model fixes is named with the model's
line; two names the model makes one dimension are reported.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

from experimental.torch_interpreter import DynamicShapeError, DynamicShapeWarning, to_onnx


def _run(onx, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.numpy() for k, v in feeds.items()})


def _dims(onx) -> list[list]:
    return [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onx.graph.input]


class ScaleAndPass(torch.nn.Module):
    def forward(self, x, y):
        return x * 2, y + 1


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class AddParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        return x + self.bias


def _line_of(cls: type, text: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_input_left_out_of_a_dict_spec_is_static():
    x, y = torch.randn(2, 3), torch.randn(5, 3)
    onx = to_onnx(ScaleAndPass(), (x, y), dynamic_shapes={"x": {0: "batch"}})
    assert _dims(onx) == [["batch", 3], [5, 3]]
    x3 = torch.randn(7, 3)
    got = _run(onx, {"x": x3, "y": y})
    expected = ScaleAndPass()(x3, y)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-6)


def test_input_left_out_that_fixes_a_dynamic_axis_is_named():
    with pytest.raises(DynamicShapeError) as info:
        to_onnx(Add(), (torch.randn(2, 3), torch.randn(2, 3)), dynamic_shapes={"x": {0: "batch"}})
    message = str(info.value)
    line = _line_of(Add, "return x + y")
    assert "input x axis 0 ('batch') would become static (2)" in message, message
    assert f"fixed by the model at {__file__}:{line} in forward: return x + y" in message, message
    assert "inputs left out of dynamic_shapes are static: y" in message, message
    assert "suggested fixes" not in message, message


def test_dynamic_axes_habit_in_dynamic_shapes_is_refused_with_the_spelling():
    with pytest.raises(DynamicShapeError) as info:
        to_onnx(Add(), (torch.randn(2, 3), torch.randn(2, 3)), dynamic_shapes=([0], [0]))
    message = str(info.value)
    assert message.startswith("the dynamic shape of input x is [0]: a list gives one entry per axis"), message
    assert "{0: 'batch'}" in message and "dynamic_axes=" in message, message
    assert "strict" not in message, message  # refused before any capture, no other mode tried


def test_a_size_in_a_dict_spec_that_differs_is_refused():
    with pytest.raises(DynamicShapeError, match=r"fixes axis 0 to size 3 while the input has 2; .*\{0: 'batch'\}"):
        to_onnx(Add(), (torch.randn(2, 3), torch.randn(2, 3)), dynamic_shapes=({0: 3}, None))


def test_axis_fixed_by_a_parameter_names_the_model_line():
    with pytest.raises(DynamicShapeError) as info:
        to_onnx(AddParameter(), (torch.randn(4, 8),), dynamic_shapes=({0: "batch"},))
    message = str(info.value)
    line = _line_of(AddParameter, "return x + self.bias")
    assert message.startswith("axes declared dynamic are fixed by the model: input x axis 0 ('batch') would "
                              f"become static (4), fixed by the model at {__file__}:{line} in forward: "
                              "return x + self.bias."), message
    assert "suggested fixes above" not in message, message


def test_two_names_made_one_dimension_warn_at_the_user_line():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(Add(), (x, y), dynamic_shapes=({0: "a"}, {0: "b"}))
    found = [w for w in caught if issubclass(w.category, DynamicShapeWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert str(found[0].message).startswith(
        "the model makes axes named differently equal: y axis 0 ('b') is x axis 0 ('a')"), found[0].message
    assert found[0].filename == __file__
    assert _dims(onx) == [["a", 3], ["a", 3]]
    x5, y5 = torch.randn(5, 3), torch.randn(5, 3)
    np.testing.assert_allclose(_run(onx, {"x": x5, "y": y5})[0], (x5 + y5).numpy(), rtol=1e-6)
