"""The opsets the installed ``onnx`` and ``onnxruntime`` can handle: an opset they cannot run is a
:class:`~experimental.torch_interpreter.errors.OpsetError` at the call, not a failure when the model is loaded."""

from __future__ import annotations

import functools
from typing import Any

import onnx

from .errors import OpsetError

#: the ONNX IR version every model of the package is written with (onnxruntime 1.31 reads up to 13, onnx 1.23
#: writes 14 by default)
IR_VERSION = 10
#: the lowest opset of the main domain the converters write, and the one a model gets unless told otherwise
MIN_OPSET = 18
DEFAULT_OPSET = 18
#: the oldest opset ``to_onnx`` writes: below :data:`MIN_OPSET`, the translation at that opset converted down by onnx's
#: version converter (:mod:`.optimize.opset_conversion`), which refuses an op without an older version
OLDEST_OPSET = 11


@functools.lru_cache(maxsize=8)
def onnxruntime_max_opset() -> int | None:
    """The highest opset of the main domain the installed onnxruntime loads (probed once), or None
    without onnxruntime.

    >>> onnxruntime_max_opset() >= 18
    True
    """
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    best = None
    for opset in range(18, onnx.defs.onnx_opset_version() + 3):
        if not _ort_loads(ort, opset):
            break
        best = opset
    return best


def _ort_loads(ort: Any, opset: int) -> bool:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime refuses opsets it does not know
        return False
    return True


def check_opset(target_opset: int, keyword: str = "target_opset", convertible: bool = False) -> None:
    """Raises :class:`OpsetError` when the converters (opset :data:`MIN_OPSET` or more), the installed onnx or
    onnxruntime cannot handle ``target_opset``; ``keyword`` is the name the user gave it (``opset_version`` for
    torch.onnx's); ``convertible``: an opset from :data:`OLDEST_OPSET` on is taken (the export converts its
    translation down to it).

    >>> check_opset(18)
    >>> check_opset(17, "opset_version")
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.OpsetError: opset_version=17: the converters need opset 18 or more (opset_version=18 or leave it out: the default is 18)
    """
    oldest = OLDEST_OPSET if convertible else MIN_OPSET
    if not isinstance(target_opset, int) or isinstance(target_opset, bool) or target_opset < oldest:
        raise OpsetError(
            f"{keyword}={target_opset!r}: the converters need opset {oldest} or more ({keyword}={DEFAULT_OPSET} "
            f"or leave it out: the default is {DEFAULT_OPSET})"
        )
    onnx_max = onnx.defs.onnx_opset_version()
    if target_opset > onnx_max:
        raise OpsetError(
            f"{keyword}={target_opset} but the installed onnx {onnx.__version__} knows opsets up to {onnx_max}; "
            f"use {keyword} <= {onnx_max}"
        )
    ort_max = onnxruntime_max_opset()
    if ort_max is not None and target_opset > ort_max:
        import onnxruntime as ort

        raise OpsetError(
            f"{keyword}={target_opset} but the installed onnxruntime {ort.__version__} runs opsets up to "
            f"{ort_max}; the model could not be loaded. Use {keyword} <= {ort_max}"
        )
