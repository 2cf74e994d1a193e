"""The protocol of a capture strategy: an immutable :class:`Attempt` and the hooks the loop calls.

An :class:`Attempt` is one try of ``torch.export``: the model, its inputs, the strict mode, the dynamic-shape
spec, and the strategies whose change is on. It is frozen: a strategy answers with a new one
(``dataclasses.replace``), so every try can be read on its own and nothing changes behind the loop's back.

A :class:`Strategy` overrides the hooks it needs; the others leave everything as it is. The loop
(:mod:`.loop`) calls them in the order of :data:`~.strategies.STRATEGIES`:

========================= =============================================================================
hook                      called
========================= =============================================================================
``scope``                 around the whole capture (patches of the libraries the model calls)
``prepare``               once, on the first attempt (a dynamic-shape spec when none was given)
``start``                 at the start of each series of tries (the first one, and after a ``fallback``)
``during``                around each ``torch.export`` call (a torch option, patches)
``retry``                 when a try failed: a new attempt answering the :class:`.failures.Failure`, or None
``check``                 after a try worked: the program kept, or a better one tried once more
``fallback``              when a series failed: restarts the strategies after this one from a new attempt
``after``                 on the program captured (lowering what the translation cannot read)
========================= =============================================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from .dynamic_shapes import DimSpec
from .failures import Failure
from .report import CaptureReport


@dataclass(frozen=True)
class Attempt:
    """One try of ``torch.export``: everything a strategy may change between two tries.

    >>> from dataclasses import replace
    >>> first = Attempt(torch.nn.ReLU(), (torch.zeros(2),), {}, strict=False, spec=DimSpec(None), torch_spec=None)
    >>> second = replace(first, strict=True)
    >>> first.strict, second.strict
    (False, True)
    """

    model: torch.nn.Module
    args: tuple
    kwargs: dict[str, Any]
    strict: bool
    #: the dynamic-shape spec: the user's normalized (or a strategy's), for torch.export, the messages, the names
    spec: DimSpec
    #: what torch.export receives this try: ``spec.torch_spec``, or torch's suggested fixes applied to it
    torch_spec: Any
    #: the strategies whose change is on for this try (``during`` applies it)
    active: frozenset[str] = frozenset()
    #: the strategies that answered a failure in this series, in order (one entry per retry)
    retries: tuple[str, ...] = ()

    def describe(self) -> str:
        """The axes declared dynamic, for messages (``x axis 0 ('batch')``).

        >>> Attempt(torch.nn.ReLU(), (), {}, strict=False, spec=DimSpec(None), torch_spec=None).describe()
        ''
        """
        return self.spec.describe()


#: an attempt that worked, and the program it captured
Outcome = tuple[Attempt, torch.export.ExportedProgram]


class Strategy:
    """A capture strategy: a ``name`` (what ``to_onnx(capture_strategies=...)`` takes, what the model's metadata
    records) and the hooks it overrides; each hook records what it changed with ``report.use(name, note)``.

    >>> class Nothing(Strategy):
    ...     name = "nothing"
    >>> Nothing().retry(None, None, None) is None
    True
    """

    name: str = ""

    def scope(
        self, model: torch.nn.Module, args: tuple, kwargs: dict, report: CaptureReport
    ) -> AbstractContextManager:
        """Entered around the whole capture, before the spec is built (registering pytree nodes, patches)."""
        return contextlib.nullcontext()

    def prepare(self, attempt: Attempt, report: CaptureReport) -> Attempt:
        """The first attempt, as this strategy wants it."""
        return attempt

    def start(self, attempt: Attempt, report: CaptureReport) -> Attempt:
        """The first attempt of a series of tries (the first series, or the one a fallback starts)."""
        return attempt

    def during(self, attempt: Attempt) -> AbstractContextManager:
        """Entered around ``torch.export`` for this attempt."""
        return contextlib.nullcontext()

    def retry(self, attempt: Attempt, failure: Failure, report: CaptureReport) -> Attempt | None:
        """A new attempt answering ``failure`` (record it), or None when this strategy has nothing to try."""
        return None

    def check(
        self,
        attempt: Attempt,
        ep: torch.export.ExportedProgram,
        export: Callable[[Attempt], torch.export.ExportedProgram],
        report: CaptureReport,
    ) -> Outcome:
        """After a try worked: the outcome kept, possibly from one more ``export(new attempt)``."""
        return attempt, ep

    def fallback(
        self, attempt: Attempt, failure: Failure, run: Callable[[Attempt], Outcome], report: CaptureReport
    ) -> Outcome | None:
        """When everything after this strategy failed from ``attempt`` with ``failure``: the outcome of
        ``run(new attempt)`` (which tries the strategies after this one again), or None to let the failure go."""
        return None

    def after(
        self, attempt: Attempt, ep: torch.export.ExportedProgram, report: CaptureReport
    ) -> torch.export.ExportedProgram:
        """The captured program, changed if this strategy needs to."""
        return ep
