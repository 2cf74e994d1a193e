"""``export``: :func:`~experimental.torch_interpreter.to_onnx` returning an :class:`OnnxProgram`, the object a user
of ``torch.onnx.export(..., dynamo=True)`` knows: ``.model_proto``, ``.model``, ``.save()``, ``.optimize()`` and a
call that runs the model on the inputs PyTorch's model takes.

``to_onnx`` keeps returning an ``onnx.ModelProto`` (or the ``onnx_ir.Model`` with ``as_ir=True``): code written for
it is unchanged; ``export`` is the second door, for code written for ``torch.onnx``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import onnx
import onnx_ir as ir
import torch

from .convert import to_onnx
from .errors import ArgumentError, InputMismatchError
from .investigate.engine import onnx_feeds
from .investigate.report import ExportReport
from .optimize import optimize_model
from .runtime import InferenceSession
from .saving import save


class OnnxProgram:
    """An exported model: the ONNX model (:attr:`model`, :attr:`model_proto`), the ``ExportedProgram`` it was
    translated from and the export's report; calling it runs the ONNX model with onnxruntime
    (:class:`~experimental.torch_interpreter.InferenceSession`: CUDA when present) on the inputs the PyTorch
    model takes, and returns torch tensors.

    >>> import torch
    >>> from experimental.torch_interpreter import export
    >>> program = export(torch.nn.Linear(4, 2), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},))
    >>> program
    OnnxProgram(inputs=['input'], outputs=['output'], 1 nodes: Gemm)
    >>> program(torch.randn(5, 4))[0].shape
    torch.Size([5, 2])
    """

    def __init__(self, model: ir.Model, exported_program: torch.export.ExportedProgram | None, report: ExportReport):
        #: the ONNX model, an ``onnx_ir.Model`` sharing its weights with the PyTorch model
        self.model = model
        #: the ``ExportedProgram`` the model was translated from (None when the capture was not kept)
        self.exported_program = exported_program
        #: what the export did: steps, timings, capture strategies, op histograms (``str()`` is markdown)
        self.report = report
        self._session: InferenceSession | None = None

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (a copy holding the weights)."""
        return ir.to_proto(self.model)

    def save(self, destination: str | os.PathLike, *, external_data: bool | None = None) -> list[str]:
        """Saves the model to ``destination``, weights above 1 KB in ``destination + '.data'`` when they total more
        than 1 MB (``external_data=True``/``False`` forces or forbids it); returns the paths written. Raises
        :class:`~experimental.torch_interpreter.SaveError`, which keeps the model, when a file cannot be
        written."""
        return save(self.model, destination, external_data=external_data)

    def optimize(self, level: bool | str = True) -> OnnxProgram:
        """Optimizes the model in place at ``level`` (``True``, ``"onnxruntime"``; see
        :func:`~experimental.torch_interpreter.optimize_model`) and returns the program."""
        optimize_model(self.model, level)
        self._session = None
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> list[torch.Tensor]:
        """Runs the ONNX model on the inputs the PyTorch model takes (the same structure as at export, other
        sizes where the axes are dynamic); returns the outputs as torch tensors (on the GPU for a CUDA session)."""
        if self.exported_program is None:
            raise InputMismatchError("this program kept no ExportedProgram: run program.model with InferenceSession")
        feeds = onnx_feeds(self.exported_program, self.model, args, kwargs)[0]
        if self._session is None:
            self._session = InferenceSession(self.model_proto)
        return self._session.run_torch(None, feeds)

    def __repr__(self) -> str:
        ops = sorted({n.op_type for n in self.model.graph})
        shown = ", ".join(ops[:8]) + (", ..." if len(ops) > 8 else "")
        return (
            f"OnnxProgram(inputs={[v.name for v in self.model.graph.inputs]}, "
            f"outputs={[v.name for v in self.model.graph.outputs]}, {len(self.model.graph)} nodes: {shown})"
        )


def export(
    model: torch.nn.Module,
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    **options: Any,
) -> OnnxProgram:
    """Exports ``model`` as :func:`~experimental.torch_interpreter.to_onnx` does (every option of ``to_onnx`` is
    accepted, ``torch.onnx.export``'s ``input_names``, ``output_names``, ``opset_version``, ``dynamic_axes`` too;
    ``report`` may be an ``ExportReport`` or a path, the program's :attr:`~OnnxProgram.report` holds it anyway)
    and returns an :class:`OnnxProgram`.

    >>> import torch
    >>> from experimental.torch_interpreter import export
    >>> program = export(torch.nn.ReLU(), (torch.randn(3),))
    >>> [n.op_type for n in program.model_proto.graph.node]
    ['Relu']
    """
    if "as_ir" in options:
        raise ArgumentError("export(..., as_ir=...): the program holds both forms (program.model, "
                            "program.model_proto); to_onnx takes as_ir")
    asked = options.pop("report", None)
    report = asked if isinstance(asked, ExportReport) else ExportReport()
    try:
        model_ir = to_onnx(model, args, kwargs, dynamic_shapes, as_ir=True, report=report, **options)
    finally:
        if asked is not None and not isinstance(asked, (ExportReport, bool)):
            report.save(asked)  # a path: written also when the export fails, as to_onnx does
    return OnnxProgram(model_ir, report.exported_program, report)


__all__: Sequence[str] = ("OnnxProgram", "export")
