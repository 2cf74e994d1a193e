"""Strategy ``transformers_dynamic_shapes``: the usual dynamic shapes of a transformers model given none.

A transformers ``PreTrainedModel`` given no ``dynamic_shapes`` gets the usual ones for its known inputs (see
:func:`transformers_dynamic_shapes`): ``batch``, ``seq``, ``past``, ``total`` (attention mask), ``encoder_seq``;
other inputs stay static. They are a guess: when the capture fails with them (every other strategy tried), the
model is exported static, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch.utils._pytree import tree_flatten_with_path

from ...errors import CaptureStrategyWarning
from ...logs import warn_at_user
from ..dynamic_shapes import DimSpec, bind_inputs, normalize
from ..failures import Failure
from ..report import CaptureReport
from ..strategy import Attempt, Outcome, Strategy
from ..transformers_inputs import is_cache, is_transformers_model

_DECODER_AXES = {
    "input_ids": {0: "batch", 1: "seq"},
    "inputs_embeds": {0: "batch", 1: "seq"},
    "position_ids": {0: "batch", 1: "seq"},
    "token_type_ids": {0: "batch", 1: "seq"},
    "attention_mask": {0: "batch", 1: "total"},
    "cache_position": {0: "seq"},
}
_ENCODER_DECODER_AXES = {
    "input_ids": {0: "batch", 1: "encoder_seq"},
    "inputs_embeds": {0: "batch", 1: "encoder_seq"},
    "attention_mask": {0: "batch", 1: "encoder_seq"},
    "decoder_input_ids": {0: "batch", 1: "seq"},
    "decoder_attention_mask": {0: "batch", 1: "total"},
    "decoder_position_ids": {0: "batch", 1: "seq"},
    "cache_position": {0: "seq"},
}


def _cache_spec(cache: Any, length: str) -> list[dict[int, str]] | None:
    layers = getattr(cache, "layers", None)
    if layers is None:
        return None
    return [{0: "batch", 2: length}] * (2 * len(layers))


def transformers_dynamic_shapes(model: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The dynamic shapes of a transformers model's known keyword inputs, or None when ``model`` is not a
    ``PreTrainedModel`` or takes positional inputs.

    Decoder-only: ``input_ids`` ``(batch, seq)``, ``attention_mask`` ``(batch, total)``, each cache tensor
    ``(batch, heads, past, dim)``; encoder-decoder: ``input_ids`` ``(batch, encoder_seq)``,
    ``decoder_input_ids`` ``(batch, seq)``, the cross-attention cache on ``encoder_seq``.

    >>> transformers_dynamic_shapes(torch.nn.Linear(2, 2), (), {"input_ids": torch.zeros(1, 3)}) is None
    True
    """
    if not is_transformers_model(model) or args:
        return None
    encdec = bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
    known = _ENCODER_DECODER_AXES if encdec else _DECODER_AXES
    spec: dict[str, Any] = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and name in known:
            spec[name] = {a: n for a, n in known[name].items() if a < value.dim()}
        elif is_cache(value) and hasattr(value, "self_attention_cache"):
            self_spec = _cache_spec(value.self_attention_cache, "past")
            cross_spec = _cache_spec(value.cross_attention_cache, "encoder_seq")
            spec[name] = [self_spec, cross_spec] if self_spec is not None and cross_spec is not None else None
        elif is_cache(value):
            spec[name] = _cache_spec(value, "past")
    return spec if any(v is not None for v in spec.values()) else None


def clear_dynamic_marks(inputs: Any) -> None:
    """Removes the marks torch.export leaves on the input tensors of a capture with dynamic shapes
    (``mark_dynamic``): a capture without them would still treat those axes as dynamic.

    >>> x = torch.zeros(2)
    >>> x._dynamo_dynamic_indices = {0}
    >>> clear_dynamic_marks(((x,), {}))
    >>> hasattr(x, "_dynamo_dynamic_indices")
    False
    """
    for _, leaf in tree_flatten_with_path(inputs)[0]:
        if isinstance(leaf, torch.Tensor):
            for attr in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices"):
                if hasattr(leaf, attr):
                    delattr(leaf, attr)


class TransformersDynamicShapes(Strategy):
    """Gives a transformers model without ``dynamic_shapes`` the usual ones; exports it static if they do not fit."""

    name = "transformers_dynamic_shapes"

    def prepare(self, attempt: Attempt, report: CaptureReport) -> Attempt:
        if attempt.spec.torch_spec is not None:  # the user gave dynamic_shapes
            return attempt
        spec = transformers_dynamic_shapes(attempt.model, attempt.args, attempt.kwargs)
        if spec is None:
            return attempt
        shown = ", ".join(
            f"{k}: {v}" if isinstance(v, dict) else f"{k}: {len(v)} cache tensors" for k, v in spec.items() if v
        )
        report.use(self.name, f"no dynamic_shapes given: used {shown}")
        warn_at_user(
            f"no dynamic_shapes given for this transformers model: the usual axes were made dynamic ({shown}); "
            "pass dynamic_shapes to choose them ({} keeps every axis static)",
            CaptureStrategyWarning,
        )
        bound = bind_inputs(attempt.model.forward, attempt.args, attempt.kwargs)
        inferred = normalize(bound, attempt.args, attempt.kwargs, spec)
        return replace(attempt, spec=inferred, torch_spec=inferred.torch_spec, active=attempt.active | {self.name})

    def fallback(
        self, attempt: Attempt, failure: Failure, run: Callable[[Attempt], Outcome], report: CaptureReport
    ) -> Outcome | None:
        if self.name not in attempt.active:
            return None
        # the user asked for nothing dynamic: the shapes inferred for a transformers model were a guess
        first = failure.error
        clear_dynamic_marks((attempt.args, attempt.kwargs))
        static = DimSpec(None)
        try:
            outcome = run(replace(attempt, spec=static, torch_spec=None, active=attempt.active - {self.name}))
        except Exception:
            raise first from first.__cause__  # static fails too: the first error is the one to read
        note = (
            f"the usual dynamic shapes of a transformers model do not fit this one ({failure.first_line}): "
            "exported static"
        )
        report.use(self.name, note)
        warn_at_user(f"{note}; pass dynamic_shapes to choose the dynamic axes", CaptureStrategyWarning)
        return outcome
