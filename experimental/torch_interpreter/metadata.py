"""The ``metadata_props`` keys that are the contract between the export and the runtime, and their read/write.

The export writes them (:func:`~experimental.torch_interpreter.to_onnx`), :class:`InferenceSession`, the
export report and :func:`find_discrepancies` read them. Nothing else in the package spells a key.

Model-level keys (``model.metadata_props``):

- ``aten2onnx.capture.*``: what the capture did (``mode``, ``strategies``, ``notes``, ``patches``,
  ``constant_inputs``);
- ``aten2onnx.range_constraints``: the ranges of the dynamic input axes (a JSON list);
- ``aten2onnx.shape_guards``: the conditions on the input sizes the graph relies on (a JSON list);
- ``aten2onnx.providers``: the onnxruntime providers the model was made for (``cpu,cuda``).

Node-level keys (``node.metadata_props``), the provenance of each ONNX node:
``pkg.torch.fx_node``, ``pkg.torch.target``, ``pkg.torch.module_scope``, ``pkg.torch.source``; and on a value,
``pkg.torch.fx_output``: the FX output it holds (``max:1`` for output 1 of ``max``).

>>> import onnx_ir as ir
>>> model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
>>> write(model, {CAPTURE_MODE: "strict"})
>>> read(model)[CAPTURE_MODE]
'strict'
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping
from typing import Any

import onnx
import onnx_ir as ir

# -- model-level keys ----------------------------------------------------------------------------------------
#: prefix of the keys the capture writes
CAPTURE_PREFIX = "aten2onnx.capture."
CAPTURE_MODE = CAPTURE_PREFIX + "mode"
CAPTURE_STRATEGIES = CAPTURE_PREFIX + "strategies"
CAPTURE_NOTES = CAPTURE_PREFIX + "notes"
#: the patches of ``bypass_export_some_errors`` applied while the model was captured (one name per line)
CAPTURE_PATCHES = CAPTURE_PREFIX + "patches"
#: the scalar inputs torch.export baked in as constants (a Python literal: ``{'alpha': 0.5}``)
CONSTANT_INPUTS = CAPTURE_PREFIX + "constant_inputs"
#: the dynamic shapes inferred from several input sets, with the axes' names in the model (a Python literal)
INFERRED_DYNAMIC_SHAPES = CAPTURE_PREFIX + "inferred_dynamic_shapes"
#: the ranges of the dynamic input axes (a JSON list)
RANGE_CONSTRAINTS = "aten2onnx.range_constraints"
#: the conditions on the input sizes the graph relies on (a JSON list)
SHAPE_GUARDS = "aten2onnx.shape_guards"
#: the onnxruntime providers the model was made for (``"cpu,cuda"``, see :mod:`.providers`)
PROVIDERS = "aten2onnx.providers"

# -- node-level keys -----------------------------------------------------------------------------------------
FX_NODE = "pkg.torch.fx_node"
FX_TARGET = "pkg.torch.target"
FX_MODULE_SCOPE = "pkg.torch.module_scope"
FX_SOURCE = "pkg.torch.source"
#: on a value: the FX output it holds, ``max:1`` for output 1 of ``max``
FX_OUTPUT = "pkg.torch.fx_output"


def read(model: Any) -> dict[str, str]:
    """The model-level ``metadata_props`` of a path, bytes, ``onnx.ModelProto``, ``onnx_ir.Model`` or
    ``onnxruntime.InferenceSession`` (anything else: ``{}``); a path is read without its external data."""
    if isinstance(model, ir.Model):
        return dict(model.metadata_props)
    if hasattr(model, "get_modelmeta"):
        return dict(model.get_modelmeta().custom_metadata_map)
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model), load_external_data=False)
    elif isinstance(model, bytes):
        model = onnx.load_from_string(model)
    return {p.key: p.value for p in model.metadata_props} if isinstance(model, onnx.ModelProto) else {}


def write(model: ir.Model, entries: Mapping[str, str]) -> None:
    """Adds ``entries`` to the ``metadata_props`` of an ``onnx_ir.Model``."""
    model.metadata_props.update(entries)


def write_json(model: ir.Model, key: str, value: Any) -> None:
    """``model.metadata_props[key] = json.dumps(value)``."""
    model.metadata_props[key] = json.dumps(value)


def read_json(meta: Mapping[str, str], key: str, default: Any = None) -> Any:
    """The JSON value of ``key`` in ``meta`` (as :func:`read` returns it), ``default`` when absent.

    >>> read_json({SHAPE_GUARDS: "[1, 2]"}, SHAPE_GUARDS)
    [1, 2]
    """
    text = meta.get(key)
    return default if not text else json.loads(text)


def constant_inputs(meta: Mapping[str, str]) -> dict[str, Any]:
    """The scalar inputs baked in as constants, ``{}`` when none.

    >>> constant_inputs({CONSTANT_INPUTS: "{'alpha': 0.5}"})
    {'alpha': 0.5}
    """
    text = meta.get(CONSTANT_INPUTS)
    return ast.literal_eval(text) if text else {}


def capture_entries(meta: Mapping[str, str]) -> dict[str, str]:
    """The capture's entries without their prefix (``{"mode": "strict", ...}``).

    >>> capture_entries({CAPTURE_MODE: "strict", SHAPE_GUARDS: "[]"})
    {'mode': 'strict'}
    """
    return {k[len(CAPTURE_PREFIX):]: v for k, v in meta.items() if k.startswith(CAPTURE_PREFIX)}
