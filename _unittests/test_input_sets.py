"""``to_onnx(model, inputs=[set1, set2, ...])``: the dynamic shapes inferred from several real input sets, named,
shown, and every set checked against eager."""

from __future__ import annotations

import ast
import sys
import os
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

from experimental.torch_interpreter import (
    ArgumentError,
    DynamicShapeError,
    DynamicShapeWarning,
    InputMismatchError,
    VerificationError,
    export,
    to_onnx,
)
from experimental.torch_interpreter.testing.llm_models import decoder_inputs, decoder_model  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))


def _dims(onx) -> dict[str, list]:
    return {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onx.graph.input}


def _export(model, sets, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, inputs=sets, **kwargs)
    shown = [w for w in caught if issubclass(w.category, DynamicShapeWarning)]
    assert len(shown) == 1 and shown[0].filename == __file__, [str(w.message) for w in caught]
    return onx, str(shown[0].message)


class ScaledSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)

    def forward(self, x, mask=None):
        return self.linear(x).sum(-1) + mask


def test_axes_that_differ_become_dynamic_and_one_name_per_dimension():
    model = ScaledSum()
    sets = [((torch.randn(2, 5, 3),), {"mask": torch.randn(2, 5)}),
            ((torch.randn(4, 7, 3),), {"mask": torch.randn(4, 7)})]
    onx, shown = _export(model, sets)
    # the model adds mask to x's first two axes: one dimension each, named once
    assert _dims(onx) == {"x": ["batch", "x_1", 3], "mask": ["batch", "x_1"]}
    assert shown == ("dynamic shapes inferred from 2 input sets (set 2 exported): "
                     "dynamic_shapes={'x': {0: 'batch', 1: 'x_1'}, 'mask': {0: 'batch', 1: 'x_1'}}")
    meta = {p.key: p.value for p in onx.metadata_props}
    assert ast.literal_eval(meta["aten2onnx.capture.inferred_dynamic_shapes"]) == {
        "x": {0: "batch", 1: "x_1"}, "mask": {0: "batch", 1: "x_1"}}
    x, mask = torch.randn(6, 9, 3), torch.randn(6, 9)  # a third size, never seen
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": x.numpy(), "mask": mask.numpy()})[0]
    np.testing.assert_allclose(got, model(x, mask=mask).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_axes_that_do_not_differ_stay_static_and_a_size_of_one_is_not_exported():
    sets = [(torch.randn(1, 3),), (torch.randn(4, 3),)]
    onx, shown = _export(torch.nn.Linear(3, 2), sets)
    assert _dims(onx) == {"input": ["batch", 3]}
    assert "(set 2 exported)" in shown  # torch.export specializes a size of 1


def test_transformers_llm_names_its_usual_axes():
    """The closing note of this feature shows this spec: a Llama with a cache, two sets of other batch, sequence and
    past lengths."""
    model = decoder_model("llama")
    sets = [decoder_inputs(model, 2, 3, 5, seed=1), decoder_inputs(model, 3, 4, 7, seed=2)]
    onx, shown = _export(model, sets)
    layer = {0: "batch", 2: "past"}
    inferred = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
                "past_key_values": [layer] * 4}
    assert shown.endswith(f"dynamic_shapes={inferred!r}"), shown
    dims = _dims(onx)
    assert dims["input_ids"] == ["batch", "seq"] and dims["attention_mask"] == ["batch", "total"]
    assert dims["past_key_values.1.value"] == ["batch", 2, "past", 16]


def test_llm_sets_with_an_empty_cache_a_decode_step_and_a_batch_of_one():
    """The sets that describe an LLM's real calls: a prompt with an empty cache, a decode step (one token after a
    cache) at batch 1, a batch of 2: one graph, the usual axes, every set through onnxruntime equal to eager."""
    model = decoder_model("llama")
    sets = [decoder_inputs(model, 1, 5, 0, seed=1), decoder_inputs(model, 1, 1, 5, seed=2),
            decoder_inputs(model, 2, 3, 4, seed=3)]
    onx, _ = _export(model, sets)  # each set is checked against eager inside the export
    dims = _dims(onx)
    assert dims["input_ids"] == ["batch", "seq"] and dims["past_key_values.0.key"] == ["batch", 2, "past", 16]


class Branching(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 3:
            return x * 2
        return x * 3


def test_a_set_the_exported_graph_does_not_hold_for_is_named():
    with pytest.raises(VerificationError, match=r"^input set 1: the exported graph does not hold for its sizes .*to be >= 4, but got 2"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            to_onnx(Branching(), inputs=[(torch.randn(2, 3),), (torch.randn(5, 3),)])


def test_export_takes_input_sets_too():
    model = torch.nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DynamicShapeWarning)
        program = export(model, inputs=[(torch.randn(2, 3),), (torch.randn(5, 3),)])
    x = torch.randn(7, 3)
    torch.testing.assert_close(program(x)[0], model(x).detach(), rtol=1e-5, atol=1e-5)
    assert _dims(program.model_proto) == {"input": ["batch", 3]}


@pytest.mark.parametrize(
    "inputs, error, message",
    [
        ([(torch.randn(2, 3),)], InputMismatchError, r"two input sets or more"),
        ([(torch.randn(2, 3),), (torch.randn(2, 3, 1),)], DynamicShapeError, r"differ in input's rank \(set 1: 2"),
        ([(torch.randn(2, 3),), (torch.randn(4, 3).double(),)], DynamicShapeError, r"differ in input's type"),
        ([(torch.randn(2, 3),), "x"], InputMismatchError, r"input set 2 is a str"),
    ],
)
def test_bad_input_sets(inputs, error, message):
    with pytest.raises(error, match=message):
        to_onnx(torch.nn.Linear(3, 2), inputs=inputs)


class Scale(torch.nn.Module):
    def forward(self, x, alpha: float = 1.0):
        return x * alpha


def test_a_float_that_differs_between_sets_is_refused():
    with pytest.raises(DynamicShapeError, match=r"differ in alpha's value \(set 1: 0.5, set 2: 2.0\): only the sizes"):
        to_onnx(Scale(), inputs=[((torch.randn(2),), {"alpha": 0.5}), ((torch.randn(3),), {"alpha": 2.0})])


def test_different_inputs_between_sets_are_refused():
    with pytest.raises(InputMismatchError, match=r"input set 2 gives the inputs \['x'\] but set 1 gives \['x', 'alpha'\]"):
        to_onnx(Scale(), inputs=[((torch.randn(2),), {"alpha": 0.5}), (torch.randn(3),)])


def test_input_sets_replace_args_and_dynamic_shapes():
    with pytest.raises(ArgumentError, match=r"drop args, dynamic_shapes"):
        to_onnx(torch.nn.Linear(3, 2), (torch.randn(2, 3),), dynamic_shapes=({0: "b"},),
                inputs=[(torch.randn(2, 3),), (torch.randn(5, 3),)])


class Counting(torch.nn.Module):
    """Its output depends on how many times it ran: the graph keeps the count of the capture."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


def test_outputs_that_differ_from_eager_are_named():
    with pytest.raises(VerificationError, match=r"^input set \d: output 'output' differs from eager: values differ by up to 1 "):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            to_onnx(Counting(), inputs=[(torch.ones(2, 3),), (torch.ones(5, 3),)])
