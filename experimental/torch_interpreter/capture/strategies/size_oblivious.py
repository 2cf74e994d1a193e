"""Strategy ``size_oblivious``: example sizes 0 or 1 on dynamic axes captured with ``backed_size_oblivious``.

An example size 0 or 1 on an axis declared dynamic (a batch of 1) makes torch.export specialize the axis. The
capture then runs under ``torch.fx.experimental._config.backed_size_oblivious`` (from the start when such a size
is seen, or as a retry when torch reports a 0/1 specialization), which keeps the axis dynamic. A size derived
from the dynamic axes that the example makes 0 or 1 (8 tokens cut into chunks of 8: one chunk) is fixed by
torch.export without an error, only a guard (:func:`pinned_small_sizes`): the capture is then retried the same
way, the first one kept if the retry fails.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace

import sympy
import torch
import torch.fx.experimental._config as fx_config
from torch.export.exported_program import _get_shape_env
from torch.utils._pytree import keystr, tree_flatten_with_path
from torch.utils._sympy.functions import Mod, PythonMod

from ...errors import CaptureStrategyWarning, DynamicShapeError, ExportCaptureError
from ...logs import warn_at_user
from ...torch_versions import backed_hints
from ..dynamic_shapes import DimSpec, normalize
from ..grown_example import differs_at, grown
from ..failures import Failure, FailureKind
from ..report import CaptureReport
from ..strategy import Attempt, Outcome, Strategy

logger = logging.getLogger(__name__)


def small_dynamic_sizes(spec: DimSpec, args: tuple, kwargs: dict) -> list[str]:
    """``x axis 0 = 1``: the axes declared dynamic whose example size is 0 or 1.

    >>> x = torch.zeros(1, 3)
    >>> spec = normalize(None, (x,), {}, ({0: "batch", 1: "n"},))
    >>> small_dynamic_sizes(spec, (x,), {})
    ['args_0 axis 0 = 1']
    """
    if not spec.axes:
        return []
    leaves = {keystr(path): leaf for path, leaf in tree_flatten_with_path((args, kwargs))[0]}
    found = []
    for path, (label, axes) in spec.axes.items():
        tensor = leaves.get(path)
        if not isinstance(tensor, torch.Tensor):
            continue
        for axis in axes:
            if tensor.shape[axis] in (0, 1):
                found.append(f"{label} axis {axis} = {tensor.shape[axis]}")
    return found


def pinned_small_sizes(ep: torch.export.ExportedProgram) -> list[str]:
    """The guards of ``ep`` fixing a size derived from the dynamic axes to 0 or 1 (``Eq((s1 + 7)//8, 1)``).

    The example gave that size 0 or 1, torch's meta functions branched on it (strides, broadcasting,
    ``reshape``) and the graph holds the constant instead of the expression: one chunk of a sequence cut into
    chunks, one window. torch.export does not refuse it (no axis is made static, the guard is only checked by
    ``ep.module()``), yet the graph is wrong on other sizes. backed_size_oblivious avoids these guards.
    Divisibility (``Eq(Mod(s, 8), 0)``) is not such a size.

    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.reshape(x.shape[0], -1, 4).cumsum(1)
    >>> ep = torch.export.export(M(), (torch.zeros(2, 4),), dynamic_shapes=({1: torch.export.Dim.DYNAMIC},))
    >>> [guard.endswith("//4), 1)") for guard in pinned_small_sizes(ep)]
    [True]
    """
    shape_env = _get_shape_env(ep.graph_module)
    if shape_env is None:
        return []
    hints = backed_hints(shape_env)
    found: list[str] = []
    for guard in shape_env.guards:
        expr = guard.expr
        if not isinstance(expr, sympy.Eq):
            continue
        for size, value in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            derived = size.free_symbols and not size.is_Symbol and not isinstance(size, (Mod, PythonMod, sympy.Mod))
            backed = all(s in hints for s in size.free_symbols)
            if value in (0, 1) and derived and backed and str(expr) not in found:
                found.append(str(expr))
    return found


class SizeOblivious(Strategy):
    """Captures with ``backed_size_oblivious`` when a dynamic axis has an example size 0 or 1.

    >>> x = torch.zeros(1, 3)
    >>> spec = normalize(None, (x,), {}, ({0: "batch"},))
    >>> attempt = Attempt(torch.nn.ReLU(), (x,), {}, strict=False, spec=spec, torch_spec=spec.torch_spec)
    >>> report = CaptureReport(strict=False)
    >>> sorted(SizeOblivious().start(attempt, report).active), report.applied
    (['size_oblivious'], ['size_oblivious'])
    """

    name = "size_oblivious"

    def start(self, attempt: Attempt, report: CaptureReport) -> Attempt:
        small = small_dynamic_sizes(attempt.spec, attempt.args, attempt.kwargs)
        if not small:
            return attempt
        report.use(
            self.name,
            f"example sizes 0/1 on axes declared dynamic ({', '.join(small)}): captured with backed_size_oblivious",
        )
        return replace(attempt, active=attempt.active | {self.name})

    def during(self, attempt: Attempt) -> AbstractContextManager:
        if self.name not in attempt.active:
            return contextlib.nullcontext()
        return fx_config.patch(backed_size_oblivious=True)

    def retry(self, attempt: Attempt, failure: Failure, report: CaptureReport) -> Attempt | None:
        if FailureKind.SMALL_SIZE_SPECIALIZED not in failure.kinds or self.name in attempt.active:
            return None
        report.use(self.name, "torch.export specialized a 0/1 size: retried with backed_size_oblivious")
        return replace(attempt, active=attempt.active | {self.name}, retries=(*attempt.retries, self.name))

    def check(
        self,
        attempt: Attempt,
        ep: torch.export.ExportedProgram,
        export: Callable[[Attempt], torch.export.ExportedProgram],
        report: CaptureReport,
    ) -> Outcome:
        if self.name in attempt.active:
            return self._grown_if_pinned(attempt, ep, export, report)
        pinned = pinned_small_sizes(ep)
        if not pinned:
            return attempt, ep
        note = (f"torch.export fixed sizes derived from the dynamic axes to their example value 0/1 "
                f"({', '.join(pinned[:3])}): retried with backed_size_oblivious")
        oblivious = replace(attempt, active=attempt.active | {self.name})
        try:
            retried = export(oblivious)
        except (ExportCaptureError, DynamicShapeError) as e:  # the first capture stands, with its guards
            logger.info("%s, which failed (%s): the first capture is kept", note, str(e).splitlines()[0])
            return attempt, ep
        report.use(self.name, note)
        return oblivious, retried

    def _grown_if_pinned(
        self,
        attempt: Attempt,
        ep: torch.export.ExportedProgram,
        export: Callable[[Attempt], torch.export.ExportedProgram],
        report: CaptureReport,
    ) -> Outcome:
        """The program captured under backed_size_oblivious, checked at size 2 on the small axes; where it does
        not hold there (a broadcast of the example fixed the axis), captured again from the example grown to 2 and
        checked at the example's own size, or refused."""
        bigger = grown(attempt.spec, attempt.args, attempt.kwargs)
        problem = differs_at(ep, attempt.model, *bigger) if bigger is not None else None
        if problem is None:
            return attempt, ep
        small = ", ".join(small_dynamic_sizes(attempt.spec, attempt.args, attempt.kwargs))
        advice = f"export with an example of size 2 or more on {small}"
        retry = replace(attempt, args=bigger[0], kwargs=bigger[1], active=attempt.active - {self.name})
        try:
            retried = export(retry)
        except (ExportCaptureError, DynamicShapeError) as e:
            raise ExportCaptureError(
                f"the graph captured from example sizes 1 ({small}) with backed_size_oblivious holds at that size "
                f"only (at size 2: {problem}), and the capture from the example grown to 2 failed "
                f"({str(e).splitlines()[0][:200]}): {advice}"
            ) from e
        back = differs_at(retried, attempt.model, attempt.args, attempt.kwargs, check_guards=False)
        if back is not None:
            raise ExportCaptureError(
                f"the graph captured from example sizes 1 ({small}) holds at that size only (at size 2: {problem}); "
                f"captured from the example grown to 2 it does not hold at size 1 ({back}): {advice}, and a "
                "second graph for size 1"
            )
        note = (f"example sizes 1 on dynamic axes ({small}): the graph captured with backed_size_oblivious held at "
                f"size 1 only ({problem}); captured again from the example repeated to size 2, checked against the "
                "model at sizes 1 and 2")
        report.use(self.name, note)
        warn_at_user(note, CaptureStrategyWarning)
        return retry, retried
