"""Strategy ``transformers_caches``: transformers caches registered as pytree nodes for the export only.

When an input is a transformers cache or the model a ``PreTrainedModel``, the cache classes (``DynamicCache``,
``EncoderDecoderCache``) are registered as pytree nodes (``patches/transformers_caches.py``) while capturing,
so that torch.export flattens them into tensors; the registration is undone after the capture.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ...patches import applied, select
from ..report import CaptureReport
from ..strategy import Strategy
from ..transformers_inputs import contains_cache, is_transformers_model


@contextlib.contextmanager
def caches_registered(model: torch.nn.Module, args: tuple, kwargs: dict) -> Iterator[list]:
    """Inside, the transformers caches are pytree nodes when ``(args, kwargs)`` hold one or ``model`` is a
    ``PreTrainedModel``; yields the patches applied (none otherwise). The capture uses it, and so does whatever
    flattens the same inputs or outputs later (the check of several input sets).

    >>> with caches_registered(torch.nn.Linear(2, 2), (), {}) as patches:
    ...     patches
    []
    """
    if not (contains_cache((args, kwargs)) or is_transformers_model(model)):
        yield []
        return
    with applied(select(families=["transformers_caches"])) as patches:
        yield list(patches)


class TransformersCaches(Strategy):
    """Registers the transformers caches as pytree nodes around the capture.

    >>> with TransformersCaches().scope(torch.nn.Linear(2, 2), (), {}, CaptureReport(strict=False)):
    ...     pass
    """

    name = "transformers_caches"

    @contextlib.contextmanager
    def scope(self, model: torch.nn.Module, args: tuple, kwargs: dict, report: CaptureReport) -> Iterator[None]:
        with caches_registered(model, args, kwargs) as patches:
            if patches:
                names = ", ".join(p.name for p in patches)
                report.use(self.name, f"registered as pytree nodes for the export: {names}")
            yield
