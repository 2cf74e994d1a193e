"""The tensors of a model run by the PythonOp path: their bytes checked against what they declare, their external
data read from the model's folder only.

onnx leaves some tensors in their files when it loads a model (a ``Constant``'s ``sparse_value``, a model given as
bytes or a proto), and its helpers then resolve a ``location`` against the *working directory*. The PythonOp path
evaluates constants, cuts the graph into segments given to onnxruntime as bytes and runs control flow in onnx's
reference evaluator: each would read such a file wherever it is. :func:`inline_external_data` reads every tensor
still stored outside the model before any of that, from a file inside the model's folder only (no absolute path,
no ``..``, no link leading out of it, offset and length within the file and matching the tensor's declared size),
and puts the bytes in the model; a model without a folder (bytes, a proto) may not name external files at all.
:func:`check_declared_sizes` checks that each tensor holds as many values as its shape says, before the runtime
converts one. Anything else raises :class:`~experimental.torch_interpreter.errors.MalformedModelError` naming
the tensor.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from ..errors import MalformedModelError

#: the most bytes one external tensor may declare (a larger one is refused before anything is read)
MAX_EXTERNAL_BYTES = 1 << 40


def _graph_tensors(graph: onnx.GraphProto, where: str) -> Iterator[tuple[onnx.TensorProto, str]]:
    for t in graph.initializer:
        yield t, f"initializer {t.name!r}"
    for s in graph.sparse_initializer:
        yield s.values, f"sparse initializer {s.values.name!r} (values)"
        yield s.indices, f"sparse initializer {s.values.name!r} (indices)"
    yield from _node_tensors(graph.node, where)


def _attribute_tensors(a: onnx.AttributeProto, name: str) -> Iterator[tuple[onnx.TensorProto, str]]:
    if a.HasField("t"):
        yield a.t, name
    yield from ((t, name) for t in a.tensors)
    sparse = [a.sparse_tensor] if a.HasField("sparse_tensor") else []
    for s in [*sparse, *a.sparse_tensors]:
        yield s.values, f"{name} (values)"
        yield s.indices, f"{name} (indices)"
    if a.HasField("g"):
        yield from _graph_tensors(a.g, f"the body {a.g.name!r}")
    for g in a.graphs:
        yield from _graph_tensors(g, f"the body {g.name!r}")


def _node_tensors(nodes: Iterator[onnx.NodeProto], where: str) -> Iterator[tuple[onnx.TensorProto, str]]:
    for node in nodes:
        at = f"attribute {{}} of node {node.name!r} ({node.op_type}) in {where}"
        for a in node.attribute:
            yield from _attribute_tensors(a, at.format(repr(a.name)))


def model_tensors(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    """Every tensor of ``model`` with a description: initializers, sparse initializers, tensors held by node
    attributes (``Constant``'s ``value`` and ``sparse_value``...), in bodies and local functions, and the defaults
    of local functions' attributes (``FunctionProto.attribute_proto``).

    >>> node = onnx.helper.make_node("Constant", [], ["c"], value=onnx.helper.make_tensor("c", 7, [], [3]))
    >>> [w for _, w in model_tensors(onnx.helper.make_model(onnx.helper.make_graph([node], "g", [], [])))]
    ["attribute 'value' of node '' (Constant) in the graph"]
    """
    yield from _graph_tensors(model.graph, "the graph")
    yield from function_default_tensors(model)
    for f in model.functions:
        yield from _node_tensors(f.node, f"the function {f.name!r}")


def function_default_tensors(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    """The tensors of the defaults of local functions' attributes (``FunctionProto.attribute_proto``).

    >>> list(function_default_tensors(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))))
    []
    """
    for f in model.functions:
        for a in f.attribute_proto:
            yield from _attribute_tensors(a, f"the default of attribute {a.name!r} of the function {f.name!r}")


def _dtype(tensor: onnx.TensorProto, what: str) -> ir.DataType:
    try:
        return ir.DataType(tensor.data_type)
    except ValueError:
        raise MalformedModelError(f"{what}: unknown element type {tensor.data_type}") from None


def _declared_bytes(tensor: onnx.TensorProto, what: str) -> int:
    size = math.ceil(_element_count(tensor, what) * _dtype(tensor, what).itemsize)
    if size > MAX_EXTERNAL_BYTES:
        raise MalformedModelError(f"{what}: declares more than {MAX_EXTERNAL_BYTES} bytes of external data")
    return size


def _inside(folder: str, location: str, what: str) -> str:
    if not location or os.path.isabs(location) or os.path.splitdrive(location)[0] or "\0" in location:
        raise MalformedModelError(f"{what}: the external data location {location[:200]!r} is not a relative path")
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        raise MalformedModelError(f"{what}: the external data location {location[:200]!r} leaves the model's folder")
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise MalformedModelError(
            f"{what}: the external data location {location[:200]!r} leads out of the model's folder (a link)"
        )
    if not os.path.isfile(path):
        raise MalformedModelError(f"{what}: the external data file {location[:200]!r} is not in the model's folder")
    return path


def _read(tensor: onnx.TensorProto, folder: str | None, what: str) -> bytes:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    if folder is None:
        raise MalformedModelError(
            f"{what}: its data lies in the external file {location[:200]!r}, and a model given as bytes or a proto "
            "has no folder to read it from: give the model's path"
        )
    path = _inside(folder, location, what)
    size = _declared_bytes(tensor, what)
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else size
    except ValueError:
        raise MalformedModelError(f"{what}: the external data offset or length is not an integer") from None
    if offset < 0 or length != size:
        raise MalformedModelError(
            f"{what}: the external data (offset {offset}, length {length}) does not hold the {size} bytes its type "
            "and shape declare"
        )
    if offset + length > os.path.getsize(path):
        raise MalformedModelError(f"{what}: the external data runs past the end of {location[:200]!r}")
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def inline_external_data(model: onnx.ModelProto, folder: str | None) -> int:
    """Reads every tensor of ``model`` stored in an external file into the model (see the module's docstring);
    ``folder`` is the model's folder, None for a model given as bytes or a proto. Returns how many were read.

    >>> t = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[2],
    ...                      data_location=onnx.TensorProto.EXTERNAL)
    >>> t.external_data.add(key="location", value="../secret.bin")  # doctest: +ELLIPSIS
    key: "location"...
    >>> inline_external_data(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], [t])), "/tmp")
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MalformedModelError: initializer 'w': the external data location '../secret.bin' leaves the model's folder
    """
    count = 0
    for tensor, what in model_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        data = _read(tensor, folder, what)
        tensor.raw_data = data
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
        count += 1
    return count


_T = onnx.TensorProto
#: the typed fields of a TensorProto, each holding one value per element (complex: two, 4-bit types: half)
_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _element_count(tensor: onnx.TensorProto, what: str) -> int:
    count = 1
    for d in tensor.dims:
        if d < 0:
            raise MalformedModelError(f"{what}: negative dimension {d}")
        count *= d
        if count > MAX_EXTERNAL_BYTES:
            raise MalformedModelError(f"{what}: declares more than {MAX_EXTERNAL_BYTES} elements")
    return count


def check_declared_sizes(model: onnx.ModelProto) -> None:
    """Raises :class:`MalformedModelError` naming the tensor when a tensor of ``model`` stored in it (not in an
    external file) holds another number of values than its shape declares.

    >>> t = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[10**6], float_data=[1.0])
    >>> check_declared_sizes(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [], [t])))
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MalformedModelError: initializer 'w': holds 1 value(s) for a shape of 1000000 element(s)
    """
    for tensor, what in model_tensors(model):
        if tensor.data_location == _T.EXTERNAL or tensor.data_type == _T.UNDEFINED:
            continue
        count = _element_count(tensor, what)
        dtype = _dtype(tensor, what)
        if tensor.data_type == _T.STRING:
            held, expected = len(tensor.string_data), count
        elif tensor.HasField("raw_data"):
            held, expected = len(tensor.raw_data), math.ceil(count * dtype.itemsize)
            if held != expected:
                raise MalformedModelError(f"{what}: holds {held} bytes for a shape of {count} element(s) ({expected} bytes)")
            continue
        else:
            held = sum(len(getattr(tensor, f)) for f in _FIELDS)
            per = {_T.COMPLEX64: 2, _T.COMPLEX128: 2}.get(tensor.data_type, 1)
            expected = count * per
            if dtype.bitwidth == 4:
                expected = (count + 1) // 2
        if held != expected:
            raise MalformedModelError(f"{what}: holds {held} value(s) for a shape of {count} element(s)")
