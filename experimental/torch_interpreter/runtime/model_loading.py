"""The one place the runtime turns a model given as a path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model`` into
what it needs: what onnxruntime loads (a path or bytes), or an ``onnx.ModelProto``.

The metadata of a model is read by :func:`experimental.torch_interpreter.metadata.read`; :func:`load_contained`
gives the model with its external data read from its own folder only (:mod:`.tensor_data`).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import onnx
import onnx_ir as ir

from ..errors import MalformedModelError
from .tensor_data import check_declared_sizes, function_default_tensors, inline_external_data, model_tensors as _tensors

#: what the sessions accept as a model
Model = str | os.PathLike | bytes | onnx.ModelProto | ir.Model


def serialized(model: Any) -> str | bytes:
    """``model`` as onnxruntime loads it: a path stays a path (its external data next to it), anything else
    becomes bytes.

    >>> proto = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    >>> isinstance(serialized(proto), bytes), serialized("model.onnx")
    (True, 'model.onnx')
    """
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, ir.Model):
        model = ir.to_proto(model)
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString()
    if isinstance(model, bytes):
        return model
    raise TypeError(f"InferenceSession takes a path, bytes, onnx.ModelProto or onnx_ir.Model, not {type(model)}")


def refuse_external_function_defaults(model: Any) -> None:
    """Raises :class:`~experimental.torch_interpreter.errors.MalformedModelError` when a local function's attribute
    default is stored in an external file: onnxruntime resolves that file against the *working directory*, not the
    model's folder (the exporter never writes one). A path is parsed only when its bytes mention external data.

    >>> refuse_external_function_defaults(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [])))
    """
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(b"location") < 0:
                    return
        except (OSError, ValueError):  # missing or empty file: onnxruntime says what is wrong
            return
    elif isinstance(model, bytes) and b"location" not in model:
        return
    if isinstance(model, ir.Model):
        return  # built in this process: its functions' defaults are in memory
    proto = load(model, external_data=False)
    for tensor, what in function_default_tensors(proto):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise MalformedModelError(
                f"{what}: its data lies in an external file, which onnxruntime would read from the working "
                "directory, not the model's folder; store the default in the model")


def load(model: Any, external_data: bool = True) -> onnx.ModelProto:
    """``model`` as an ``onnx.ModelProto`` (a proto is returned as it is); ``external_data=False`` leaves the
    weights of a path in their files (enough to read the graph).

    >>> proto = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    >>> load(proto) is proto, load(proto.SerializeToString()).graph.name
    (True, 'g')
    """
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return ir.to_proto(model)
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model), load_external_data=external_data)
    raise TypeError(f"expected a path, bytes, onnx.ModelProto or onnx_ir.Model, not {type(model)}")


def _folder(model: Any) -> str | None:
    if isinstance(model, (str, os.PathLike)):
        return os.path.dirname(os.path.abspath(os.fspath(model)))
    if isinstance(model, ir.Model):  # an object built in this process: its external tensors say where they are
        folders = {
            os.path.abspath(v.const_value.base_dir)
            for v in model.graph.initializers.values()
            if isinstance(v.const_value, ir.ExternalTensor)
        }
        return folders.pop() if len(folders) == 1 else None
    return None


def load_contained(model: Any) -> onnx.ModelProto:
    """``model`` as an ``onnx.ModelProto`` holding all its data: tensors stored outside are read from files in
    the model's folder only (a path's folder, the one folder of an ``onnx_ir.Model``'s external tensors; none for
    bytes or a proto), each tensor's values checked against its shape, or refused with
    :class:`~experimental.torch_interpreter.errors.MalformedModelError`.
    A proto given with external references is copied, not changed.

    >>> proto = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    >>> load_contained(proto) is proto
    True
    """
    proto = load(model, external_data=False)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t, _ in _tensors(proto)):
        if proto is model:
            proto = onnx.ModelProto.FromString(proto.SerializeToString())
        inline_external_data(proto, _folder(model))
    check_declared_sizes(proto)
    return proto
