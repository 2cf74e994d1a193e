"""``find_discrepancies``: exports a model, then names the first FX node whose ONNX translation disagrees with
PyTorch (the comparison itself is :mod:`.engine`'s). The one module of the package below the front that imports
:func:`~experimental.torch_interpreter.to_onnx`.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from typing import Any

import onnx
import onnx_ir as ir
import torch

from ..convert import to_onnx
from ..errors import InvalidModelError
from ..translation.registry import Registry
from .discrepancy_report import DiscrepancyReport
from .engine import compare_exported
from .report import ExportReport

logger = logging.getLogger(__name__)


def find_discrepancies(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    *,
    onnx_model: onnx.ModelProto | ir.Model | str | os.PathLike | None = None,
    registry: Registry | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    **to_onnx_kwargs: Any,
) -> DiscrepancyReport:
    """Exports ``model`` (or takes ``onnx_model``), runs the exported program node by node in PyTorch and
    the ONNX model in onnxruntime with every FX-named value observable, and compares them in graph order.

    :param model: the model, or its ``ExportedProgram`` (``args``/``kwargs`` then default to its example inputs)
    :param args: positional inputs
    :param kwargs: keyword inputs
    :param dynamic_shapes: as for :func:`to_onnx`
    :param onnx_model: the ONNX model to check (made by :func:`to_onnx` from the same model);
        exported with ``registry`` when not given
    :param registry: converters to use for the export (default: the project's)
    :param atol: absolute tolerance (default: that of each value's type, 1e-4 for float32, 1e-2 for float16, 5e-2 for
        bfloat16, 0.25 and 0.5 for the float8 types)
    :param rtol: relative tolerance (``|onnx - torch| <= atol + rtol * |torch|``; default: that of each value's type,
        1e-3 for float32, as ``atol`` for the others); integers and booleans must be equal, NaN in both places is
        equal
    :param to_onnx_kwargs: other options given to :func:`to_onnx` (``strict``, ``target_opset``, ...)
    :return: a :class:`DiscrepancyReport`; ``report.first`` is the first FX node that differs, or None

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import find_discrepancies
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Softplus(beta=2.0))
        >>> report = find_discrepancies(model, (torch.randn(3, 4),))
        >>> print(report.first)
        None
        >>> [r.fx_node for r in report.rows]
        ['linear', 'softplus']
    """
    begin = time.perf_counter()
    export = ExportReport()
    if "optimize" in inspect.signature(to_onnx).parameters:
        # fusions and common subexpression elimination remove values named after FX nodes
        to_onnx_kwargs.setdefault("optimize", False)
    if isinstance(model, torch.export.ExportedProgram):
        if not args and not kwargs and model.example_inputs is not None:
            args, kwargs = model.example_inputs
        if onnx_model is None:
            onnx_model = to_onnx(model, registry=registry, as_ir=True, **to_onnx_kwargs)
        ep = model
    elif isinstance(model, torch.nn.Module):
        args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
        exported = to_onnx(
            model, args, kwargs, dynamic_shapes, registry=registry, as_ir=True, report=export, **to_onnx_kwargs
        )
        ep = export.exported_program
        onnx_model = exported if onnx_model is None else onnx_model
    else:
        raise InvalidModelError(
            f"find_discrepancies expects a torch.nn.Module or an ExportedProgram, not {type(model).__name__}"
        )
    exported_at = time.perf_counter()
    report = compare_exported(ep, _as_ir(onnx_model), args, kwargs, atol=atol, rtol=rtol)
    report.seconds = {"export": exported_at - begin, **report.seconds}
    logger.info("find_discrepancies: %s", report)
    return report


def _as_ir(model: Any) -> ir.Model:
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model)
    raise InvalidModelError(f"onnx_model must be an onnx.ModelProto, an onnx_ir.Model or a path, not {type(model)}")
