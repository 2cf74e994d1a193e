"""InferenceSession: onnxruntime's interface, torch tensors accepted as feeds, CUDA when available."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

from .errors import RuntimeFeedError

logger = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def default_providers() -> list[str]:
    """``[CUDAExecutionProvider, CPUExecutionProvider]`` when onnxruntime and the machine have CUDA, else CPU.

    >>> default_providers()[-1]
    'CPUExecutionProvider'
    """
    if CUDA in ort.get_available_providers() and torch.cuda.is_available():
        return [CUDA, CPU]
    return [CPU]


def to_numpy(value: Any) -> np.ndarray:
    """A feed as numpy: torch tensors (bfloat16 included) are moved to the CPU without changing values."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy().view(ir.DataType.BFLOAT16.numpy())
        return value.numpy()
    return np.asarray(value)


def _model_bytes_or_path(model: Any) -> str | bytes:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, ir.Model):
        model = ir.to_proto(model)
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    if isinstance(model, bytes):
        return model
    raise TypeError(f"InferenceSession takes a path, bytes, onnx.ModelProto or onnx_ir.Model, not {type(model)}")


class InferenceSession:
    """An ``onnxruntime.InferenceSession`` that also takes torch tensors as feeds.

    Without ``providers``, it chooses CUDA when onnxruntime-gpu and a GPU are present and falls back
    to the CPU when the CUDA session cannot be created.

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import InferenceSession, to_onnx
        >>> onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),))
        >>> sess = InferenceSession(onx)
        >>> sess.run(None, {"input": torch.tensor([-1.0, 0.0, 2.0])})[0]
        array([0., 0., 2.], dtype=float32)
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes | onnx.ModelProto | ir.Model,
        providers: Sequence[str] | None = None,
        sess_options: ort.SessionOptions | None = None,
    ):
        content = _model_bytes_or_path(model)
        chosen = list(providers) if providers is not None else default_providers()
        try:
            self._sess = ort.InferenceSession(content, sess_options=sess_options, providers=chosen)
        except Exception as e:  # a CUDA provider that cannot start: run on the CPU instead
            if providers is not None or chosen == [CPU]:
                raise
            logger.warning("could not create a CUDA session (%s), falling back to the CPU", e)
            self._sess = ort.InferenceSession(content, sess_options=sess_options, providers=[CPU])
        self._input_names = [i.name for i in self._sess.get_inputs()]

    def get_inputs(self) -> list[Any]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self._sess.get_outputs()

    def get_providers(self) -> list[str]:
        return self._sess.get_providers()

    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        missing = [n for n in self._input_names if n not in feeds]
        unknown = [n for n in feeds if n not in self._input_names]
        if missing or unknown:
            raise RuntimeFeedError(
                f"the feeds do not match the model inputs {self._input_names}: "
                + (f"missing {missing}" if missing else "")
                + (" ; " if missing and unknown else "")
                + (f"unknown {unknown}" if unknown else "")
            )

    def run(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[np.ndarray]:
        """Runs the model; ``feeds`` values may be numpy arrays, torch tensors or Python scalars."""
        self._check_feeds(feeds)
        if CUDA in self.get_providers() and any(
            isinstance(v, torch.Tensor) and v.is_cuda for v in feeds.values()
        ):
            return self._run_bound(output_names, feeds, run_options)
        np_feeds = {k: to_numpy(v) for k, v in feeds.items()}
        return self._sess.run(output_names, np_feeds, run_options)

    def _run_bound(self, output_names, feeds, run_options) -> list[np.ndarray]:
        """CUDA tensors are bound in place (no copy to the host); outputs come back as numpy."""
        binding = self._sess.io_binding()
        keep = []
        for name, value in feeds.items():
            if isinstance(value, torch.Tensor) and value.is_cuda:
                value = value.contiguous()
                keep.append(value)
                binding.bind_input(
                    name,
                    "cuda",
                    value.device.index or 0,
                    to_numpy(torch.empty(0, dtype=value.dtype)).dtype,
                    list(value.shape),
                    value.data_ptr(),
                )
            else:
                binding.bind_cpu_input(name, to_numpy(value))
        names = output_names or [o.name for o in self._sess.get_outputs()]
        for name in names:
            binding.bind_output(name, "cpu")
        self._sess.run_with_iobinding(binding, run_options)
        return binding.copy_outputs_to_cpu()
