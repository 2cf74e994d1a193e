"""InferenceSession: onnxruntime's interface, torch tensors accepted as feeds, CUDA when available; a model with
``com.microsoft::PythonOp`` nodes runs through :class:`.python_op_session.PythonOpSession`, any other through
the low-level :class:`.session.OrtSession`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from ..providers import session_providers
from .model_loading import Model
from .python_op_nodes import has_python_ops
from .python_op_session import PythonOpSession
from .session import OrtSession
from .trust import TrustPolicy


class InferenceSession:
    """An ``onnxruntime.InferenceSession`` that also takes torch tensors as feeds.

    ``providers`` takes the words ``to_onnx`` and the ``torch.compile`` backend take: ``"cpu"``, ``"cuda"``, or
    ``"any"`` (the default, None: CUDA when onnxruntime-gpu and a GPU are present, the CPU when the CUDA session
    cannot be created), and onnxruntime's own names and ``(name, options)`` pairs, or a list of them.

    A model with ``com.microsoft::PythonOp`` nodes names Python code. As ``torch.load(weights_only=True)``, the
    session imports nothing by default: an ``autograd.Function`` must be exported or registered in this process,
    a custom op registered (its library imported), torch's own ops are refused, and every node is checked when
    the session is created (:class:`~experimental.torch_interpreter.errors.UntrustedCodeError`,
    :class:`~experimental.torch_interpreter.errors.MalformedModelError`). ``trusted_modules`` (module names,
    their submodules included) lets the session import the modules a node names to find its code;
    ``trust_python_code=True`` any module, only for a model file trusted as much as code you run. An op compiled
    into another library (torchvision's...) is called only when ``trusted_ops`` names it (``"torchvision::nms"``,
    ``"torchvision::*"``).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import InferenceSession, to_onnx
        >>> onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),))
        >>> sess = InferenceSession(onx)
        >>> sess.run(None, {"input": torch.tensor([-1.0, 0.0, 2.0])})[0]
        array([0., 0., 2.], dtype=float32)
        >>> sess = InferenceSession(onx, trusted_modules=("mymodels",))  # may import mymodels and its submodules
    """

    def __init__(
        self,
        model: Model,
        providers: Sequence[str] | None = None,
        sess_options: ort.SessionOptions | None = None,
        *,
        trusted_modules: str | Sequence[str] = (),
        trust_python_code: bool = False,
        trusted_ops: str | Sequence[str] = (),
    ):
        policy = TrustPolicy.create(trusted_modules, trust_python_code, trusted_ops)
        providers = session_providers(providers)
        #: the session running a model with PythonOp nodes, None for a plain model
        self._python_ops = (
            PythonOpSession(model, providers, sess_options, policy) if has_python_ops(model) else None
        )
        self._sess: OrtSession | PythonOpSession = (
            self._python_ops if self._python_ops is not None else OrtSession(model, providers, sess_options)
        )

    def get_inputs(self) -> list[Any]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self._sess.get_outputs()

    def get_providers(self) -> list[str]:
        return self._sess.get_providers()

    def run(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[np.ndarray]:
        """Runs the model; ``feeds`` values may be numpy arrays, torch tensors or Python scalars.

        Returns numpy arrays, as onnxruntime does (bfloat16 as ``ml_dtypes.bfloat16``).
        """
        return self._sess.run(output_names, feeds, run_options)

    def run_torch(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[torch.Tensor]:
        """Same as :meth:`run` but returns torch tensors, shared with onnxruntime's buffers (no copy);
        on a CUDA session they stay on the GPU."""
        return self._sess.run_torch(output_names, feeds, run_options)

    def run_ortvalues(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[ort.OrtValue]:
        """Runs the model on ``OrtValue``; torch feeds are passed through DLPack without a copy."""
        return self._sess.run_ortvalues(output_names, feeds, run_options)
