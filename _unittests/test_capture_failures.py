"""The capture loop's parts: torch's failures classified (on real torch.export failures), and a strategy added by
one class and one line, asked by the loop and recorded in the model."""

import contextlib
from dataclasses import replace

import pytest
import torch
import torch.fx.experimental._config as fx_config
from torch.export import Dim

from experimental.torch_interpreter import DynamicShapeError, ExportCaptureError, to_onnx
from experimental.torch_interpreter.capture import STRATEGIES, Strategy, capture_model, strategies
from experimental.torch_interpreter.capture.dynamic_shapes import normalize
from experimental.torch_interpreter.capture.export import export
from experimental.torch_interpreter.capture.failures import FailureKind, SuggestedFix, classify

# -- classify: real failures of torch.export -----------------------------------------------------------------


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x)


class Static(torch.nn.Module):
    def forward(self, x):
        return x.reshape(2, 4) * 2


class CondAlias(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x, lambda x: x * 2, (x,))


class NumpyInside(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(x.numpy() * 2)


def _failure(model, args, dynamic_shapes=None, strict=False):
    spec = normalize(None, args, {}, dynamic_shapes)
    with pytest.raises((ExportCaptureError, DynamicShapeError)) as info:
        export(model, args, {}, spec.torch_spec, strict, spec.describe())
    return classify(info.value)


def test_classify_small_size_specialized():
    failure = _failure(Linear(), (torch.randn(1, 4),), ({0: "batch"},))
    assert failure.kinds == {FailureKind.DYNAMIC_SHAPES, FailureKind.SMALL_SIZE_SPECIALIZED}
    assert "0/1 specialized" in str(failure.error)


def test_classify_suggested_fixes_keeping_the_axis_dynamic():
    failure = _failure(Conv(), (torch.randn(2, 3, 8, 8),), ({2: Dim("h")},))
    assert FailureKind.SUGGESTED_FIXES in failure.kinds and FailureKind.MADE_STATIC not in failure.kinds
    assert [fix.name for fix in failure.fixes] == ["h"] and not failure.fixes[0].static
    assert failure.fixes[0].fix.startswith("Dim('h', min=")


def test_classify_suggested_fix_making_the_axis_static():
    failure = _failure(Static(), (torch.randn(8),), ({0: Dim("a")},))
    assert FailureKind.SUGGESTED_FIXES in failure.kinds
    assert failure.fixes == (SuggestedFix("a", "8"),) and failure.fixes[0].static


def test_classify_made_static():
    failure = _failure(Static(), (torch.randn(8),), ({0: "a"},))
    assert FailureKind.MADE_STATIC in failure.kinds
    assert [tuple(m) for m in failure.made_static] == [("x", "0", "8")]


def test_classify_aliasing():
    failure = _failure(CondAlias(), (torch.randn(3, 4),), ({0: "b"},))
    assert failure.kinds == {FailureKind.CAPTURE, FailureKind.ALIASING}


def test_classify_other_capture_failure():
    failure = _failure(NumpyInside(), (torch.randn(3),))
    assert failure.kinds == {FailureKind.CAPTURE}
    assert failure.first_line.startswith("torch.export.export (non-strict) failed")


# -- a new strategy: one class, one line ---------------------------------------------------------------------


class BatchOfOne(Strategy):
    """What ``size_oblivious`` does on a 0/1 specialization, written again as a new strategy."""

    name = "batch_of_one"

    def during(self, attempt):
        if self.name not in attempt.active:
            return contextlib.nullcontext()
        return fx_config.patch(backed_size_oblivious=True)

    def retry(self, attempt, failure, report):
        if FailureKind.SMALL_SIZE_SPECIALIZED not in failure.kinds or self.name in attempt.active:
            return None
        report.use(self.name, "retried with backed_size_oblivious")
        return replace(attempt, active=attempt.active | {self.name}, retries=(*attempt.retries, self.name))


class Counter(Strategy):
    """Changes nothing: counts the programs captured."""

    name = "counter"

    def after(self, attempt, ep, report):
        report.use(self.name, f"{len(ep.graph.nodes)} nodes")
        return ep


def test_new_strategy_answers_a_failure():
    captured = capture_model(Linear(), (torch.randn(1, 4),), {}, ({0: "batch"},), strategies=(BatchOfOne(),))
    assert captured.report.applied == ["batch_of_one"]
    assert captured.report.metadata()["aten2onnx.capture.notes"] == "retried with backed_size_oblivious"
    assert list(captured.names.values()) == ["batch"]
    with pytest.raises(DynamicShapeError, match="0/1 specialized"):
        capture_model(Linear(), (torch.randn(1, 4),), {}, ({0: "batch"},), strategies=(Counter(),))


def test_new_strategy_in_the_tuple_is_used_by_to_onnx(monkeypatch):
    monkeypatch.setattr(strategies, "STRATEGIES", (*STRATEGIES, Counter()))
    onx = to_onnx(Linear(), (torch.randn(1, 4),), dynamic_shapes=({0: "batch"},))
    meta = {p.key: p.value for p in onx.metadata_props}
    assert meta["aten2onnx.capture.strategies"] == "size_oblivious,counter"
    assert meta["aten2onnx.capture.notes"].endswith("nodes")


def test_strategies_by_name_keep_their_order():
    assert [s.name for s in strategies.select(["other_mode", "size_oblivious"])] == ["size_oblivious", "other_mode"]
    with pytest.raises(ValueError, match=r"unknown capture strategies \['magic'\]; the strategies are \["):
        strategies.select(["magic"])
