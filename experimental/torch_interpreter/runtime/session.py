"""The low-level session: one ``onnxruntime.InferenceSession`` on a model without PythonOp nodes, the providers
chosen (CUDA when present, the CPU when a CUDA session cannot start), the feeds checked (:mod:`.feeds`), torch
tensors bound through DLPack without a copy.

:class:`~experimental.torch_interpreter.InferenceSession` runs a plain model with it, and
:class:`.python_op_session.PythonOpSession` each ONNX segment of a model cut at its PythonOp nodes.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from ..errors import ProviderError, ProviderWarning, RuntimeFeedError
from ..metadata import PROVIDERS
from ..metadata import read as read_metadata
from ..providers import decode as decode_providers
from ..providers import not_made_for
from .feeds import FeedChecks
from .guards import SizeChecks
from .model_loading import Model, refuse_external_function_defaults, serialized
from .ort_values import CPU, CUDA, default_providers, feed_to_ortvalue, ortvalue_to_numpy, ortvalue_to_torch

logger = logging.getLogger(__name__)


def _declared_inputs(model: Model, inputs: Sequence[Any]) -> list[Any]:
    """The inputs the feeds are checked against: onnxruntime's, whose ``shape`` is ``[]`` for a scalar and for an
    input declared without a shape alike; the second gets ``shape=None`` (its rank is not checked), read from the
    model when it is in memory (a segment of a PythonOp model reads values of an unknown rank computed before), and
    every ``[]`` is taken so for a file.

    >>> from onnx import TensorProto, helper
    >>> x = helper.make_empty_tensor_value_info("x")
    >>> x.type.tensor_type.elem_type = TensorProto.FLOAT
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [helper.make_empty_tensor_value_info("y")])
    >>> sess = ort.InferenceSession(helper.make_model(g).SerializeToString(), providers=["CPUExecutionProvider"])
    >>> sess.get_inputs()[0].shape, _declared_inputs(helper.make_model(g), sess.get_inputs())[0].shape is None
    ([], True)
    """
    graph = getattr(model, "graph", None)
    if graph is None:  # a file or bytes, not parsed twice: onnxruntime checks the rank of a true scalar itself
        unknown = {i.name for i in inputs if i.shape == []}
    elif isinstance(graph, onnx.GraphProto):
        unknown = {v.name for v in graph.input if not v.type.tensor_type.HasField("shape")}
    else:  # an onnx_ir.Model
        unknown = {v.name for v in graph.inputs if v.shape is None}
    return [SimpleNamespace(name=i.name, type=i.type, shape=None) if i.name in unknown else i for i in inputs]


def _raise_if_made_for_another_provider(content: str | bytes, chosen: Sequence[str], error: Exception) -> None:
    """A :class:`ProviderError` when onnxruntime's CPU has no kernel for a node of a model made for other
    providers only (a bfloat16 model made for CUDA runs bfloat16 arithmetic the CPU has no kernel for); returns
    otherwise."""
    if chosen[:1] != [CPU] or "Could not find an implementation" not in str(error):
        return
    made_for = decode_providers(read_metadata(content).get(PROVIDERS))
    if "cpu" in made_for:
        return
    first = str(error).splitlines()[0]
    raise ProviderError(
        f"the model was made for {', '.join(made_for)} only (to_onnx(..., providers=...)) and this session runs "
        f"on the CPU, which has no kernel for one of its nodes ({first}); run it where the "
        f"{', '.join(made_for)} provider is (onnxruntime-gpu and a GPU for cuda), or export it with "
        f"providers='any' to run it here"
    ) from error


class OrtSession:
    """An ``onnxruntime.InferenceSession`` taking numpy arrays, torch tensors or Python scalars as feeds.

    Without ``providers``, it chooses CUDA when onnxruntime-gpu and a GPU are present and falls back to the CPU
    when the CUDA session cannot be created.

    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    >>> OrtSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": torch.tensor([-1.0, 0.0, 2.0])})[0]
    array([0., 0., 2.], dtype=float32)
    """

    def __init__(
        self,
        model: Model,
        providers: Sequence[str] | None = None,
        sess_options: ort.SessionOptions | None = None,
    ):
        refuse_external_function_defaults(model)
        content = serialized(model)
        chosen = list(providers) if providers is not None else default_providers()
        try:
            try:
                self._sess = ort.InferenceSession(content, sess_options=sess_options, providers=chosen)
            except Exception as e:  # a CUDA provider that cannot start: run on the CPU instead
                if providers is not None or chosen == [CPU]:
                    raise
                logger.warning("could not create a CUDA session (%s), falling back to the CPU", e)
                chosen = [CPU]
                self._sess = ort.InferenceSession(content, sess_options=sess_options, providers=chosen)
        except Exception as e:
            _raise_if_made_for_another_provider(content, chosen, e)
            raise
        self._input_types = {i.name: i.type for i in self._sess.get_inputs()}
        # conditions on the input sizes the exported graph relies on (guards.py), scalars baked in at export
        meta = read_metadata(self._sess)
        self._checks = FeedChecks(_declared_inputs(model, self._sess.get_inputs()), SizeChecks(meta), meta)
        message = not_made_for(decode_providers(meta.get(PROVIDERS)), self._sess.get_providers())
        if message:  # guards left out by to_onnx(..., providers=...) that this provider needs
            warnings.warn(message, ProviderWarning, stacklevel=3)

    # -- onnxruntime's interface -------------------------------------------------------------------------------
    def get_inputs(self) -> list[Any]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self._sess.get_outputs()

    def get_providers(self) -> list[str]:
        return self._sess.get_providers()

    # -- running -----------------------------------------------------------------------------------------------
    def run(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[np.ndarray]:
        """Runs the model; returns numpy arrays, as onnxruntime does (bfloat16 as ``ml_dtypes.bfloat16``)."""
        return [ortvalue_to_numpy(v) for v in self.run_ortvalues(output_names, feeds, run_options)]

    def run_torch(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[torch.Tensor]:
        """Same as :meth:`run` but returns torch tensors sharing onnxruntime's buffers."""
        return [ortvalue_to_torch(v) for v in self.run_ortvalues(output_names, feeds, run_options)]

    def run_ortvalues(
        self,
        output_names: Sequence[str] | None,
        feeds: Mapping[str, Any],
        run_options: ort.RunOptions | None = None,
    ) -> list[ort.OrtValue]:
        """Runs the model on ``OrtValue``; torch feeds are passed through DLPack without a copy."""
        self._checks.check(feeds)
        known = [o.name for o in self._sess.get_outputs()]
        names = list(output_names) if output_names else known
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RuntimeFeedError(f"unknown output(s) {unknown}; the model outputs are {known}")
        binding = self._sess.io_binding()
        on_cuda = CUDA in self.get_providers()
        for name, value in feeds.items():
            binding.bind_ortvalue_input(name, feed_to_ortvalue(value, self._input_types[name], on_cuda))
        device = "cuda" if on_cuda else "cpu"
        for name in names:
            binding.bind_output(name, device)
        self._sess.run_with_iobinding(binding, run_options)
        return binding.get_outputs()
