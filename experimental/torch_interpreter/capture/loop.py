"""The capture loop: builds the dynamic-shape spec once, tries ``torch.export``, classifies each failure and asks
the strategies, in order, what to try next; records what they applied in a :class:`.report.CaptureReport`."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import DynamicShapeError, DynamicShapeWarning, ExportCaptureError
from . import export as torch_export
from .checks import check_outputs, constant_inputs, warn_constant_inputs, warn_training_mode
from ..logs import warn_at_user
from ..patches.base import active
from .dynamic_shapes import DimSpec, axis_symbols, bind_inputs, normalize, symbol_names
from .failures import Failure, FailureKind, classify, made_static_message
from .forward_signature import keywords_as_parameters
from .input_sets import AxisName, InferredShapes, final_names, infer_dynamic_shapes, renamed
from .report import CaptureReport
from .specializations import watch_specializations
from .strategies import select
from .strategies.transformers_dynamic_shapes import transformers_dynamic_shapes
from .strategy import Attempt, Outcome, Strategy

#: the failures the strategies answer; any other exception goes through
CAPTURE_FAILURES = (ExportCaptureError, DynamicShapeError)


@dataclass(frozen=True)
class Captured:
    """What :func:`capture_model` gives back: the program, the user's names of its symbols (``{"s0": "batch"}``),
    the dynamic-shape spec it was captured with, and the report of what the strategies did."""

    ep: torch.export.ExportedProgram
    names: dict[str, str]
    spec: DimSpec
    report: CaptureReport
    #: the inputs captured: the user's, or the chosen one of several input sets
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: the dynamic shapes inferred from several input sets, with the names the ONNX model gives the axes
    inferred: dict[str, Any] | None = None


class _Loop:
    """One capture: the strategies chosen and the report they fill."""

    def __init__(self, strategies: tuple[Strategy, ...], report: CaptureReport) -> None:
        self.strategies = strategies
        self.report = report

    def export(self, attempt: Attempt) -> torch.export.ExportedProgram:
        """One ``torch.export`` call for ``attempt``, inside what the strategies put around it."""
        with contextlib.ExitStack() as stack:
            for strategy in self.strategies:
                stack.enter_context(strategy.during(attempt))
            return torch_export.export(
                attempt.model, attempt.args, attempt.kwargs, attempt.torch_spec, attempt.strict, attempt.describe()
            )

    def retry(self, attempt: Attempt, failure: Failure) -> Attempt | None:
        """The new attempt of the first strategy answering ``failure``, or None."""
        for strategy in self.strategies:
            retried = strategy.retry(attempt, failure, self.report)
            if retried is not None:
                return retried
        return None

    def series(self, attempt: Attempt) -> Outcome:
        """Tries ``attempt``, then each new attempt a strategy answers a failure with, until one works or no
        strategy has anything to try."""
        for strategy in self.strategies:
            attempt = strategy.start(attempt, self.report)
        while True:
            try:
                ep = self.export(attempt)
            except CAPTURE_FAILURES as error:
                failure = classify(error)
                retried = self.retry(attempt, failure)
                if retried is not None:
                    attempt = retried
                    continue
                made_static = made_static_message(failure, attempt.spec, self.specializing_lines(attempt, failure))
                if made_static:
                    raise DynamicShapeError(f"{made_static}\n{error}") from error.__cause__
                raise
            for strategy in self.strategies:
                attempt, ep = strategy.check(attempt, ep, self.export, self.report)
            return attempt, ep

    def specializing_lines(self, attempt: Attempt, failure: Failure) -> dict[str, traceback.FrameSummary]:
        """``{torch's source of a size: the model's frame}`` for the sizes the model fixes, found by trying
        ``attempt`` once more while torch's shape log is watched (its cost is paid on this failure only)."""
        if FailureKind.MADE_STATIC not in failure.kinds or attempt.strict:  # dynamo shows the line itself
            return {}
        with watch_specializations(torch_export.model_frame_in_stack) as lines:
            try:
                self.export(attempt)
            except CAPTURE_FAILURES:
                pass
        return lines

    def run(self, attempt: Attempt, level: int = 0) -> Outcome:
        """:meth:`series` from ``attempt``, each strategy from ``level`` on offering a fallback when the
        strategies after it failed: the first strategy's fallback wraps all the others'."""
        if level == len(self.strategies):
            return self.series(attempt)
        try:
            return self.run(attempt, level + 1)
        except CAPTURE_FAILURES as error:
            outcome = self.strategies[level].fallback(
                attempt, classify(error), lambda new: self.run(new, level + 1), self.report
            )
            if outcome is None:
                raise
            return outcome


def capture_model(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict[str, Any],
    dynamic_shapes: Any = None,
    *,
    strict: bool = False,
    strategies: bool | str | Strategy | Sequence[str | Strategy] | None = True,
    around_export: Callable[[], AbstractContextManager] = contextlib.nullcontext,
    input_sets: list[tuple[tuple, dict]] | None = None,
) -> Captured:
    """Captures ``model`` with ``torch.export``, trying the capture ``strategies`` when it refuses the model.

    ``strategies``: ``True`` all, ``False`` none, names, or :class:`~.strategy.Strategy` objects (see
    :func:`.strategies.select`); ``around_export()`` is entered around the tries (the PythonOp hook of
    ``to_onnx``). With ``input_sets`` (two or more ``(args, kwargs)``, see :mod:`.input_sets`), the axes whose size
    differs between them are dynamic, ``args`` and ``kwargs`` are not read and the set with the largest dynamic
    sizes is captured. Warns about a model in training mode and about Python scalars baked in as constants; raises
    :class:`~experimental.torch_interpreter.InvalidModelError` for a model returning no tensor.

    >>> x = torch.zeros(1, 4)
    >>> captured = capture_model(torch.nn.Linear(4, 2), (x,), {}, ({0: "batch"},))
    >>> captured.report.applied, list(captured.names.values())
    (['size_oblivious'], ['batch'])
    """
    warn_training_mode(model)
    report = CaptureReport(strict=strict)
    loop = _Loop(select(strategies), report)
    if input_sets is not None:
        args, kwargs = input_sets[0]
    with contextlib.ExitStack() as scope:
        for strategy in loop.strategies:
            scope.enter_context(strategy.scope(model, args, kwargs, report))
        report.patches = active()  # bypass_export_some_errors' and the strategies' own
        scope.enter_context(keywords_as_parameters(model, kwargs))  # the keywords' names: the same in every set
        inferred = None
        if input_sets is not None:  # the caches are pytree nodes now: the sets are compared leaf by leaf
            inferred = infer_dynamic_shapes(model.forward, input_sets, transformers_dynamic_shapes(model, args, kwargs))
            args, kwargs = input_sets[inferred.chosen]
            dynamic_shapes = inferred.spec
        spec = normalize(bind_inputs(model.forward, args, kwargs), args, kwargs, dynamic_shapes)
        attempt = Attempt(model, args, kwargs, strict=strict, spec=spec, torch_spec=spec.torch_spec)
        for strategy in loop.strategies:
            attempt = strategy.prepare(attempt, report)
        with around_export():
            attempt, ep = loop.run(attempt)
            for strategy in loop.strategies:
                ep = strategy.after(attempt, ep, report)
            check_outputs(ep)
            report.strict = attempt.strict
            report.constants = constant_inputs(ep)
            warn_constant_inputs(report.constants)
        if inferred is None:
            return Captured(ep, symbol_names(ep, attempt.spec, args, kwargs), attempt.spec, report, args, kwargs)
        names, shown = _inferred_names(ep, attempt.spec, args, kwargs, inferred)
        report.inferred = shown
        warn_at_user(
            f"dynamic shapes inferred from {len(input_sets)} input sets (set {inferred.chosen + 1} exported): "
            f"dynamic_shapes={shown!r}", DynamicShapeWarning)
    return Captured(ep, names, attempt.spec, report, args, kwargs, shown)


def _inferred_names(
    ep: torch.export.ExportedProgram, spec: DimSpec, args: tuple, kwargs: dict, inferred: InferredShapes
) -> tuple[dict[str, str], dict[str, Any]]:
    """The names of the symbols for the ONNX model, and the inferred spec with them: one name for the axes the
    model makes one dimension, distinct names for the others (see :func:`.input_sets.final_names`)."""
    axes = axis_symbols(ep, spec, args, kwargs)
    final = final_names([(name, symbol) for _, _, name, symbol in axes if isinstance(name, AxisName)])
    names: dict[str, str] = {}
    for _, _, name, symbol in axes:
        if name and symbol is not None:
            names.setdefault(symbol, final.get(id(name), name))
    return names, renamed(inferred.spec, final)
