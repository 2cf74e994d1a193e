"""What torch.export's failures mean: the one place that reads torch's message text.

:func:`advice` and :func:`concerns_dynamic_shapes` read torch's exception when :mod:`.export` turns it into an
:class:`~experimental.torch_interpreter.ExportCaptureError` or a
:class:`~experimental.torch_interpreter.DynamicShapeError`; :func:`classify` reads that error into a
:class:`Failure`, the kinds of failure the capture strategies answer (an aliasing control-flow body, a 0/1 size
specialized, torch's suggested fixes...) with what they need (the fixes, the axes made static). A strategy
tests ``FailureKind.X in failure.kinds``, never the message.
"""

from __future__ import annotations

import enum
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import DynamicShapeError, ExportCaptureError
from .dynamic_shapes import DimSpec

# (text found in torch's message or exception type, advice)
_HINTS = [
    (
        "_set_grad_enabled",
        "the model changes the autograd state while exporting (e.g. it is called under torch.no_grad()); "
        "export outside no_grad() or patch the model with bypass_export_some_errors()",
    ),
    (
        "data-dependent",
        "the output shape depends on tensor values; add torch._check(...) on the value in the model, "
        "or avoid Python control flow on tensor values (use torch.cond); an `if` on a tensor value whose "
        "branches return can be rewritten into torch.cond by "
        "bypass_export_some_errors(rewrite_control_flow=[YourModule])",
    ),
    (
        "BuiltinVariable(NotImplementedError)",
        "strict mode met a Python construct it cannot trace; try strict=False",
    ),
    (
        "Observed exception",
        "the model raised an exception while being traced (see the source line in torch's message); "
        "with strict=False the Python exception itself is shown",
    ),
    ("torch._dynamo.exc.Unsupported", "strict mode (dynamo) cannot trace this code; try strict=False"),
    (
        "0/1 specialized",
        "an example input has size 0 or 1 on an axis declared dynamic, and torch.export specializes such "
        "sizes: give examples of size >= 2 on dynamic axes (e.g. a past length of 2 or more), or export under "
        "bypass_export_some_errors(backed_size_oblivious=True)",
    ),
    ("Unsupported input type", "an input type is not a registered pytree node; register it or flatten the inputs"),
    (
        "transformers.cache_utils",
        "a transformers cache is not a pytree node: let to_onnx register it (capture_strategies=True, the default, "
        "or a tuple naming 'transformers_caches'), or export under bypass_export_some_errors(patch_transformers=True)",
    ),
    (
        "must be bool, not SymBool",
        "the model branches on a dynamic size compared with 1 (e.g. transformers' sdpa `is_causal = q_length > 1`) "
        "while an example has size 1 on that axis: give examples of size >= 2 on dynamic axes (a sequence of 2 "
        "or more), or declare that axis static",
    ),
    (
        "Output-to-output aliasing",
        "a body of a control-flow operator (scan, cond, while_loop, map) returns the same tensor twice, "
        "e.g. a scan combine_fn `return [next_carry, next_carry]` (the carry also as scanned output); "
        "these operators forbid aliased outputs: return a copy, `return [next_carry, next_carry.clone()]`",
    ),
    (
        "Input-to-output aliasing",
        "a body of a control-flow operator (scan, cond, while_loop, map) returns one of its inputs unchanged; "
        "these operators forbid aliased outputs: return a copy, e.g. `x.clone()` instead of `x`",
    ),
    (
        "list index out of range",
        "torch.export raises this bare IndexError (in produce_guards) when the model changes the rank of an "
        "input in place, e.g. `x.unsqueeze_(0)`, `x.squeeze_()`, `x.t_()` on a forward argument: use the "
        "out-of-place form, `x = x.unsqueeze(0)`",
    ),
]
_DYNAMIC_MARKERS = (
    "Constraints violated",
    "dynamic_shapes",
    "specialized",
    "user-specified ranges",
    "dynamic shape",
    "Dim(",
)
_MADE_STATIC = re.compile(
    r"You marked L\['(\w+)'\]((?:\[[^\]]+\])*)\.size\(\)\[(\d+)\] as dynamic but your code "
    r"specialized it to be a constant \((\d+)\)"
)


#: a model line branching in Python (``if``, ``elif``, ``while``, a conditional expression, ``and``/``or``)
_BRANCH = re.compile(r"^\s*(if|elif|while|assert)\b|\bif\b.*\belse\b|\b(and|or|not)\b")

_BRANCH_ADVICE = (
    "this line branches in Python on a tensor's value, which an exported graph cannot do (it holds one path): "
    "write the branch as torch.cond(pred, true_fn, false_fn, operands) (ONNX If), compute both sides and pick "
    "with torch.where, or let bypass_export_some_errors(rewrite_control_flow=[YourModule]) rewrite an `if` whose "
    "branches return into torch.cond"
)


def advice(error: BaseException, source_line: str = "") -> list[str]:
    """What to try, for each known cause found in torch's exception (its message or its type); ``source_line``,
    the model's line that failed, tells a branch on a tensor value from a size that depends on values.

    >>> advice(RuntimeError("Encountered aliasing: Input-to-output aliasing detected"))[0][:45]
    'a body of a control-flow operator (scan, cond'
    >>> advice(RuntimeError("Could not guard on data-dependent expression"), "if x.sum() > 0:")[0][:40]
    'this line branches in Python on a tensor'
    """
    message = str(error)
    qualified = f"{type(error).__module__}.{type(error).__name__}"
    hints = [text for marker, text in _HINTS if marker in message or marker in qualified]
    branching = "Data-dependent branching" in message or (
        "data-dependent" in message and _BRANCH.search(source_line) is not None
    )
    if branching:
        hints = [_BRANCH_ADVICE] + [h for h in hints if not h.startswith("the output shape depends")]
    return hints


def concerns_dynamic_shapes(error: BaseException) -> bool:
    """Whether torch's exception is about the dynamic shapes (a :class:`DynamicShapeError` when some were given).

    >>> concerns_dynamic_shapes(RuntimeError("Constraints violated (batch)!")), concerns_dynamic_shapes(KeyError())
    (True, False)
    """
    message = str(error)
    return any(m in message for m in _DYNAMIC_MARKERS)


class FailureKind(enum.Enum):
    """What went wrong, as far as a capture strategy is concerned; a failure has one or more kinds."""

    #: torch.export refused the model (:class:`ExportCaptureError`): its code, the strict mode, a missing patch
    CAPTURE = "capture"
    #: the dynamic shapes do not fit what the model does (:class:`DynamicShapeError`)
    DYNAMIC_SHAPES = "dynamic shapes"
    #: a control-flow body (``torch.cond``, ``while_loop``, ``scan``) returns an input unchanged
    ALIASING = "aliasing"
    #: an example size 0 or 1 on an axis declared dynamic was specialized, or guarded ``!= 1``
    SMALL_SIZE_SPECIALIZED = "0/1 size specialized"
    #: torch suggests fixes to the dynamic shapes ("Suggested fixes:")
    SUGGESTED_FIXES = "suggested fixes"
    #: the model's code specializes an axis declared dynamic to a constant
    MADE_STATIC = "made static"
    #: sympy could not solve an inequality of torch's guards ("The inequality ... cannot be solved")
    UNSOLVED_GUARDS = "unsolved guards"


class SuggestedFix(NamedTuple):
    """One line of torch's "Suggested fixes:" block: ``name = fix``."""

    name: str
    fix: str

    @property
    def static(self) -> bool:
        """The fix makes the dimension a constant (``a = 8``) instead of bounding or relating it.

        >>> SuggestedFix("a", "8").static, SuggestedFix("a", "b + 1").static
        (True, False)
        """
        return re.fullmatch(r"-?\d+", self.fix) is not None


class MadeStatic(NamedTuple):
    """An axis torch reports as specialized to a constant: ``x[0] axis 1 = 8`` (``label`` as in the inputs)."""

    label: str
    axis: str
    value: str

    @property
    def source(self) -> str:
        """torch's name of the size: ``L['x'][0].size()[1]``.

        >>> MadeStatic("x[0]", "1", "8").source
        "L['x'][0].size()[1]"
        """
        name, bracket, rest = self.label.partition("[")
        return f"L[{name!r}]{bracket}{rest}.size()[{self.axis}]"


@dataclass(frozen=True)
class Failure:
    """A failed capture, classified: the error to raise if no strategy answers, its kinds, what they need."""

    error: ExportCaptureError | DynamicShapeError
    kinds: frozenset[FailureKind]
    fixes: tuple[SuggestedFix, ...] = ()
    made_static: tuple[MadeStatic, ...] = ()

    @property
    def first_line(self) -> str:
        """The first line of the error's message, for notes and warnings.

        >>> Failure(ExportCaptureError("failed\\nModel code: ..."), frozenset()).first_line
        'failed'
        """
        return str(self.error).splitlines()[0]


def _specializes_small_size(message: str) -> bool:
    """torch reports a 0/1 specialization of an input size, or a guard ``... != 1`` on a size derived from
    a dynamic axis (the output of a pooling of size 1), which backed_size_oblivious avoids."""
    if "0/1 specialized" in message:
        return True
    return "Constraints violated" in message and re.search(r"generated guard .*\) != [01]\.", message) is not None


def _suggested_fixes(message: str) -> tuple[SuggestedFix, ...]:
    """The fixes read from the "Suggested fixes:" block of torch's message."""
    if "Suggested fixes:" not in message:
        return ()
    block = message.split("Suggested fixes:", 1)[1].strip().split("\n\n")[0]
    fixes = []
    for line in block.splitlines():
        match = re.match(r"\s*(\w+) = (.+)$", line)
        if match is None:
            break
        fixes.append(SuggestedFix(match.group(1), match.group(2).strip()))
    return tuple(fixes)


#: sympy's message when torch.export's simplification of the guards meets an inequality it cannot solve
_UNSOLVED = re.compile(r"NotImplementedError: The inequality, .* cannot be solved", re.S)


def classify(error: ExportCaptureError | DynamicShapeError) -> Failure:
    """The kinds of a capture failure, read from the error (its cause, torch's own message, for dynamic shapes).

    >>> cause = RuntimeError("Constraints violated (h)! ...\\nSuggested fixes:\\n  h = Dim('h', min=3)")
    >>> error = DynamicShapeError("torch.export.export (non-strict) failed")
    >>> error.__cause__ = cause
    >>> failure = classify(error)
    >>> sorted(kind.name for kind in failure.kinds), failure.fixes
    (['DYNAMIC_SHAPES', 'SUGGESTED_FIXES'], (SuggestedFix(name='h', fix="Dim('h', min=3)"),))
    >>> classify(ExportCaptureError("Encountered aliasing during higher order op tracing")).kinds == {
    ...     FailureKind.CAPTURE, FailureKind.ALIASING}
    True
    """
    if not isinstance(error, DynamicShapeError):
        # the whole text of the error is read, as it was: torch's message, the model's line and the advice
        kinds = {FailureKind.CAPTURE}
        if "aliasing" in str(error):
            kinds.add(FailureKind.ALIASING)
        if _UNSOLVED.search(str(error)):
            kinds.add(FailureKind.UNSOLVED_GUARDS)
        return Failure(error, frozenset(kinds))
    message = str(error.__cause__ or error)
    kinds = {FailureKind.DYNAMIC_SHAPES}
    if _specializes_small_size(message):
        kinds.add(FailureKind.SMALL_SIZE_SPECIALIZED)
    if "Suggested fixes:" in message:
        kinds.add(FailureKind.SUGGESTED_FIXES)
    made_static = tuple(
        MadeStatic(name + sub, axis, value) for name, sub, axis, value in _MADE_STATIC.findall(message)
    )
    if made_static:
        kinds.add(FailureKind.MADE_STATIC)
    return Failure(error, frozenset(kinds), _suggested_fixes(message), made_static)


def made_static_message(failure: Failure, spec: DimSpec, lines: Mapping[str, traceback.FrameSummary] = {}) -> str:
    """``axes declared dynamic are fixed by the model: input x axis 0 ('a') would become static (8)...``: the
    axes torch reports as specialized to a constant, in the user's words, with the model's line that fixes each
    when ``lines`` (``{source: frame}``, see :mod:`.specializations`) knows it ("" when there is none).

    >>> spec = DimSpec({}, {"[0][0]": ("x", {0: "a"})})
    >>> failure = Failure(DynamicShapeError(""), frozenset(), made_static=(MadeStatic("x", "0", "8"),))
    >>> made_static_message(failure, spec)[:90]
    "axes declared dynamic are fixed by the model: input x axis 0 ('a') would become static (8)"
    """
    parts = []
    for made in failure.made_static:
        names = next((axes for lab, axes in spec.axes.values() if lab == made.label), {})
        user = names.get(int(made.axis))
        part = f"input {made.label} axis {made.axis}{f' ({user!r})' if user else ''} would become static ({made.value})"
        frame = lines.get(made.source)
        if frame is not None:
            part += f", fixed by the model at {frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
        parts.append(part)
    if not parts:
        return ""
    return (
        f"axes declared dynamic are fixed by the model: {'; '.join(parts)}"
        + (f" (inputs left out of dynamic_shapes are static: {', '.join(spec.left_out)})" if spec.left_out else "")
        + ". aten2onnx does not silently drop a "
        "dynamic axis: declare the axis static (remove it from dynamic_shapes) or change the model's code that "
        "fixes this size (a reshape to constants, a slice of a fixed length, an operation with a parameter of "
        "that size)."
    )
