"""A translated graph run by onnxruntime with torch tensors in and out: the inputs are bound through DLPack (no copy;
on a GPU they stay there), the outputs come back as torch tensors sharing onnxruntime's buffers; an input the graph
returns as it is, a view of an input (replayed by PyTorch, :mod:`.view_outputs`), ``None`` and Python numbers never
cross onnxruntime; a complex tensor crosses as its real pair (``torch.view_as_real``, ``view_as_complex``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from ..providers import ONNXRUNTIME_NAMES
from ..runtime import InferenceSession
from .graph_translation import TranslatedGraph

logger = logging.getLogger(__name__)


class OrtGraph:
    """Runs ``translated`` with onnxruntime's ``provider`` (``"cpu"`` or ``"cuda"``); called with the graph's
    inputs as a list (AOTAutograd's boxed convention: the list is emptied, so that inputs can be freed as soon as
    onnxruntime holds them).

    ``calls`` counts the runs.
    """

    _boxed_call = True

    def __init__(self, translated: TranslatedGraph, provider: str, name: str):
        self.translated = translated
        self.name = name
        self.provider = provider
        options = ort.SessionOptions()
        # PyTorch runs between two graphs (the loss, the optimizer): onnxruntime's threads must not spin then
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # the outputs go to PyTorch, which keeps them (activations for the backward): an arena would hold a second
        # pool beside PyTorch's; without it the peak memory of a medium Llama step fell from 1.93x to 1.50x eager's,
        # at the same speed (benchmarks/bench_training.py)
        options.enable_cpu_mem_arena = False
        # a graph that only hands back its inputs, None or numbers has no output to compute: no session
        self.session = (
            InferenceSession(translated.model, providers=[ONNXRUNTIME_NAMES[provider]], sess_options=options)
            if translated.model.graph.output
            else None
        )
        self._names = [i.name for i in self.session.get_inputs()] if self.session is not None else []
        self.calls = 0

    @property
    def model(self) -> onnx.ModelProto:
        return self.translated.model

    def save(self, folder: str | os.PathLike) -> str:
        """Saves the model as ``<folder>/<name>.onnx``; returns the path."""
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(os.fspath(folder), f"{self.name}.onnx")
        onnx.save(self.model, path)
        return path

    def feeds(self, args: Sequence[Any]) -> dict[str, Any]:
        """The session's feeds from the graph's inputs."""
        feeds: dict[str, Any] = {}
        for name, index in zip(self._names, self.translated.inputs):
            value = args[index]
            if isinstance(value, torch.Tensor):
                value = torch.view_as_real(value.detach().resolve_conj()) if value.is_complex() else value.detach()
                feeds[name] = value if value.is_contiguous() else value.contiguous()
            else:
                feeds[name] = np.array(int(value), dtype=np.int64)
        return feeds

    def __call__(self, args: list[Any]) -> list[Any]:
        inputs = list(args)
        args.clear()
        self.calls += 1
        outs = self.session.run_torch(None, self.feeds(inputs)) if self.session is not None else []
        views = self.translated.views(inputs)
        result: list[Any] = []
        for slot in self.translated.outputs:
            if slot.kind == "onnx":
                out = outs[slot.index]
                result.append(
                    int(out.reshape(-1)[0]) if slot.as_int else torch.view_as_complex(out) if slot.as_complex else out
                )
            elif slot.kind == "input":
                result.append(inputs[slot.index])
            elif slot.kind == "view":
                result.append(views[slot.index])
            else:
                result.append(slot.value)
        return result
