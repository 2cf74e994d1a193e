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
from .runtime_guards import SizeChecks

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


def _metadata(model: Any) -> dict[str, str]:
    """The ``metadata_props`` of a model given as a path, bytes, ModelProto or onnx_ir.Model."""
    if isinstance(model, ir.Model):
        return dict(model.metadata_props)
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model), load_external_data=False)
    elif isinstance(model, bytes):
        model = onnx.load_from_string(model)
    return {p.key: p.value for p in model.metadata_props} if isinstance(model, onnx.ModelProto) else {}


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
            self._size_checks = SizeChecks(_metadata(model))
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
        # conditions on the input sizes the exported graph relies on (runtime_guards.py)
        self._size_checks = SizeChecks(self._sess.get_modelmeta().custom_metadata_map)

    def get_inputs(self) -> list[Any]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self._sess.get_outputs()

    def get_providers(self) -> list[str]:
        return self._sess.get_providers()

    def _check_feeds(self, feeds: Mapping[str, Any]) -> None:
        if not isinstance(feeds, Mapping):
            raise RuntimeFeedError(
                f"feeds must be a dict {{input name: tensor}}, not a {type(feeds).__name__}"
                + (f" of {len(feeds)} elements" if isinstance(feeds, Sequence) else "")
                + f"; the model inputs are {self._input_names}, e.g. "
                "sess.run(None, dict(zip([i.name for i in sess.get_inputs()], tensors)))"
            )
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
        check_feed_types(self.get_inputs(), feeds)
        if self._size_checks:
            self._size_checks.check({name: feed_type(value)[1] for name, value in feeds.items()})

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


def feed_type(value: Any) -> tuple[str | None, tuple[int, ...] | None]:
    """The onnxruntime type string and the shape of a feed (None, None for a Python scalar or an unknown object).

    >>> feed_type(torch.zeros(2, 3, dtype=torch.float16))
    ('tensor(float16)', (2, 3))
    >>> feed_type(np.arange(4))
    ('tensor(int64)', (4,))
    """
    if isinstance(value, ort.OrtValue):
        return value.data_type(), tuple(value.shape())
    if isinstance(value, torch.Tensor):
        return _TYPE_OF_TORCH.get(value.dtype, f"torch.{value.dtype}"), tuple(value.shape)
    if isinstance(value, np.ndarray):
        if value.dtype.name == "bfloat16":
            return "tensor(bfloat16)", value.shape
        return _TYPE_OF_NUMPY.get(value.dtype.type, f"numpy.{value.dtype}"), value.shape
    if isinstance(value, (bool, int, float, np.generic)):
        return None, ()
    return None, None


def _describe(type_: str | None, shape: Sequence[Any] | None) -> str:
    dims = "?" if shape is None else "[" + ", ".join(repr(d) if isinstance(d, str) else str(d) for d in shape) + "]"
    return f"{type_ or 'a Python scalar'} of shape {dims}"


def check_feed_types(inputs: Sequence[Any], feeds: Mapping[str, Any]) -> None:
    """Raises :class:`RuntimeFeedError` when a feed has another element type, rank or static dimension than
    the model input of its name (``inputs``: ``sess.get_inputs()``), or when the feeds give two sizes to one
    named dynamic axis. Messages name the input, the expected and the given type and shape, never values.

    >>> from types import SimpleNamespace as NodeArg
    >>> inputs = [NodeArg(name="x", type="tensor(float)", shape=["batch", 3])]
    >>> check_feed_types(inputs, {"x": torch.zeros(5, 3)})
    >>> check_feed_types(inputs, {"x": torch.zeros(5, 3, dtype=torch.float64)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: input 'x' expects tensor(float) of shape ['batch', 3], ...
    """
    sizes: dict[str, tuple[str, int]] = {}
    for arg in inputs:
        if arg.name not in feeds:
            continue
        type_, shape = feed_type(feeds[arg.name])
        expected = list(getattr(arg, "shape", None) or [])
        where = f"input {arg.name!r} expects {_describe(arg.type, expected)}, got {_describe(type_, shape)}"
        if type_ is not None and type_ != arg.type:
            np_type = _NUMPY_OF.get(arg.type)
            torch_type = next((k for k, v in _TYPE_OF_TORCH.items() if v == arg.type), None)
            hint = f"x.to({torch_type}) or x.astype(np.{np_type.__name__})" if np_type and torch_type else None
            raise RuntimeFeedError(where + (f": cast it first, e.g. {hint}" if hint else ""))
        if shape is None or getattr(arg, "shape", None) is None:
            continue
        if type_ is None and not shape:
            continue  # a Python scalar is converted to the input's type; onnxruntime checks its rank
        if len(shape) != len(expected):
            raise RuntimeFeedError(f"{where}: rank {len(shape)} instead of {len(expected)}")
        for axis, (want, have) in enumerate(zip(expected, shape)):
            if isinstance(want, int) and want != have:
                raise RuntimeFeedError(f"{where}: axis {axis} must be {want}")
            if isinstance(want, str) and want:
                first = sizes.setdefault(want, (arg.name, have))
                if first[1] != have:
                    raise RuntimeFeedError(
                        f"{where}: the dynamic axis {want!r} is {have} here but {first[1]} in input {first[0]!r}; "
                        f"every input sharing the axis {want!r} must have the same size along it"
                    )


_TYPE_OF_TORCH = {
    torch.float32: "tensor(float)",
    torch.float64: "tensor(double)",
    torch.float16: "tensor(float16)",
    torch.bfloat16: "tensor(bfloat16)",
    torch.int64: "tensor(int64)",
    torch.int32: "tensor(int32)",
    torch.int16: "tensor(int16)",
    torch.int8: "tensor(int8)",
    torch.uint8: "tensor(uint8)",
    torch.bool: "tensor(bool)",
    torch.complex64: "tensor(complex64)",
    torch.complex128: "tensor(complex128)",
}

_TYPE_OF_NUMPY = {
    np.float32: "tensor(float)",
    np.float64: "tensor(double)",
    np.float16: "tensor(float16)",
    np.int64: "tensor(int64)",
    np.int32: "tensor(int32)",
    np.int16: "tensor(int16)",
    np.int8: "tensor(int8)",
    np.uint8: "tensor(uint8)",
    np.uint16: "tensor(uint16)",
    np.uint32: "tensor(uint32)",
    np.uint64: "tensor(uint64)",
    np.bool_: "tensor(bool)",
    np.complex64: "tensor(complex64)",
    np.complex128: "tensor(complex128)",
    np.str_: "tensor(string)",
    np.object_: "tensor(string)",
}

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
