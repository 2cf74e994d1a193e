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

from .capture_checks import constant_feeds
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
        # -- PythonOp hook: com.microsoft::PythonOp nodes run through runtime_python_op.PythonOpSession
        from .runtime_python_op import PythonOpSession, has_python_ops

        self._python_ops = PythonOpSession(model, providers, sess_options) if has_python_ops(model) else None
        if self._python_ops is not None:
            self._sess = self._python_ops
            self._input_names = [i.name for i in self._sess.get_inputs()]
            self._input_types = {i.name: i.type for i in self._sess.get_inputs()}
            return
        # -- end of the PythonOp hook
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
        self._input_types = {i.name: i.type for i in self._sess.get_inputs()}

    def get_inputs(self) -> list[Any]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self._sess.get_outputs()

    def get_providers(self) -> list[str]:
        return self._sess.get_providers()

    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        missing = [n for n in self._input_names if n not in feeds]
        unknown = [n for n in feeds if n not in self._input_names]
        constant_feeds(self._sess, unknown)
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
        """Runs the model; ``feeds`` values may be numpy arrays, torch tensors or Python scalars.

        Returns numpy arrays, as onnxruntime does (bfloat16 as ``ml_dtypes.bfloat16``).
        """
        if self._python_ops is not None:  # PythonOp hook
            self._check_feeds(feeds)
            return self._python_ops.run(output_names, feeds, run_options)
        return [_ortvalue_to_numpy(v) for v in self.run_ortvalues(output_names, feeds, run_options)]

    def run_torch(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[torch.Tensor]:
        """Same as :meth:`run` but returns torch tensors, shared with onnxruntime's buffers (no copy);
        on a CUDA session they stay on the GPU."""
        if self._python_ops is not None:  # PythonOp hook
            self._check_feeds(feeds)
            return self._python_ops.run_torch(output_names, feeds, run_options)
        return [_ortvalue_to_torch(v) for v in self.run_ortvalues(output_names, feeds, run_options)]

    def run_ortvalues(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[ort.OrtValue]:
        """Runs the model on ``OrtValue``; torch feeds are passed through DLPack without a copy."""
        self._check_feeds(feeds)
        if self._python_ops is not None:  # PythonOp hook
            return self._python_ops.run_ortvalues(output_names, feeds, run_options)
        names = list(output_names) if output_names else [o.name for o in self._sess.get_outputs()]
        binding = self._sess.io_binding()
        for name, value in feeds.items():
            binding.bind_ortvalue_input(name, self._to_ortvalue(name, value))
        device = "cuda" if CUDA in self.get_providers() else "cpu"
        for name in names:
            binding.bind_output(name, device)
        self._sess.run_with_iobinding(binding, run_options)
        return binding.get_outputs()

    def _to_ortvalue(self, name: str, value: Any) -> ort.OrtValue:
        if isinstance(value, ort.OrtValue):
            return value
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.device.type != "cpu" and CUDA not in self.get_providers():
                value = value.cpu()  # a CPU session reads host memory only
            if value.dtype != torch.bool:  # DLPack's bool is not read by onnxruntime
                return ort.OrtValue.from_dlpack(value.contiguous())
            value = value.cpu().numpy()
        if not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=_NUMPY_OF.get(self._input_types[name]))
        # np.ascontiguousarray makes 0-D arrays 1-D
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value).reshape(value.shape))


_NUMPY_OF = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def _ortvalue_to_torch(value: ort.OrtValue) -> torch.Tensor:
    tensor = torch.from_dlpack(value)
    return tensor.view(torch.bool) if value.data_type() == "tensor(bool)" else tensor


def _ortvalue_to_numpy(value: ort.OrtValue) -> np.ndarray:
    if value.data_type() == "tensor(bfloat16)":
        return to_numpy(_ortvalue_to_torch(value))
    if value.device_name().lower() != "cpu":
        return to_numpy(_ortvalue_to_torch(value))
    return value.numpy()
