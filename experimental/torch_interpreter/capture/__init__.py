"""Capture: ``torch.export`` and what :func:`~experimental.torch_interpreter.to_onnx` retries when it refuses a model.

:func:`capture_model` builds the dynamic-shape spec once and tries ``torch.export``; a failure is classified
once (:func:`.failures.classify`: aliasing, a 0/1 size specialized, suggested fixes...) and the strategies of
:data:`.strategies.STRATEGIES` are asked in order: a ``retry`` answers it with a new, immutable
:class:`.strategy.Attempt` (another spec, a torch option, patches), a ``fallback`` restarts the strategies after
it (the other strict mode), ``after`` changes the program captured. What they applied is recorded in a
:class:`.report.CaptureReport`, written into the model's ``metadata_props`` (``aten2onnx.capture.*``).

How to add a capture strategy: one file in ``capture/strategies/`` with a :class:`.strategy.Strategy` overriding
the hooks it needs, and one line in the tuple ``STRATEGIES`` of ``capture/strategies/__init__.py``::

    class BatchOfOne(Strategy):  # capture/strategies/batch_of_one.py
        name = "batch_of_one"

        def retry(self, attempt, failure, report):
            if FailureKind.SMALL_SIZE_SPECIALIZED not in failure.kinds or self.name in attempt.active:
                return None  # not this strategy's failure, or already tried
            report.use(self.name, "retried with ...")  # recorded in the model's metadata
            return replace(attempt, active=attempt.active | {self.name})  # `during` then applies the change
"""

from .input_sets import read_input_sets
from .loop import Captured, capture_model
from .report import CaptureReport
from .strategies import NAMES, STRATEGIES
from .strategies.transformers_caches import caches_registered
from .strategy import Attempt, Strategy

__all__ = [
    "NAMES",
    "STRATEGIES",
    "Attempt",
    "CaptureReport",
    "Captured",
    "Strategy",
    "caches_registered",
    "capture_model",
    "read_input_sets",
]
