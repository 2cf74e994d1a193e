"""Opsets older than the converters': the translation at :data:`~..opsets.MIN_OPSET` converted down by onnx's
version converter, as ``torch.onnx.export`` does for an older ``opset_version``; an op without an older version
(``LayerNormalization`` before 17, ``Attention``...) is refused with the project's error naming it."""

from __future__ import annotations

import logging
import re

import onnx
import onnx.version_converter
import onnx_ir as ir

from ..errors import OpsetError
from ..opsets import MIN_OPSET

logger = logging.getLogger(__name__)


def convert_down(model: ir.Model, opset: int, keyword: str = "target_opset") -> ir.Model:
    """``model`` (main domain at :data:`~..opsets.MIN_OPSET` or more) at opset ``opset`` of the main domain; its
    metadata kept.

    >>> import torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> onx = to_onnx(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), (torch.randn(1, 2),), as_ir=True)
    >>> convert_down(onx, 17).opset_imports[""]
    17
    """
    proto = ir.to_proto(model)
    try:
        converted = onnx.version_converter.convert_version(proto, opset)
    except Exception as e:  # noqa: BLE001  (the converter's C++ assertions come as RuntimeError, ValueError...)
        missing = re.search(r"No Previous Version of (\w+)", str(e))
        adapter = re.search(r"No Adapter From Version \$(\d+) for (\w+)", str(e))
        if missing:
            what = f"the ONNX op {missing.group(1)} has no version at opset {opset}"
        elif adapter:
            what = f"onnx's version converter cannot take {adapter.group(2)} below its version {adapter.group(1)}"
        else:
            what = str(e)[:300]
        raise OpsetError(
            f"{keyword}={opset}: the translation (opset {proto.opset_import[0].version if proto.opset_import else '?'}) "
            f"cannot be converted down: {what}; use {keyword}={MIN_OPSET} or more, or rewrite the model's use of it"
        ) from e
    del converted.metadata_props[:]
    converted.metadata_props.extend(proto.metadata_props)
    logger.info("converted down to opset %d", opset)
    return ir.from_proto(converted)
