"""Saving an ``onnx_ir`` model: weights above a threshold go to one external data file.

The weights are written one at a time: a lazy one (a transposed or converted weight) is computed, written and
released before the next, and a weight read from a file (a checkpoint's tensor) is unmapped once written, so that
saving a model larger than memory holds one weight at a time. A checkpoint's tensor marked :data:`IN_PLACE` is not
copied when its file lies in the model's folder (or below it): the model points into it. Elsewhere it is copied:
onnxruntime refuses external data outside the model's folder (symbolic links included), and onnx and onnx-ir
refuse a file with several hard links.

The files are written in a temporary folder next to the target and moved into place only when
complete, so a failure never leaves a half-written model.
A failure raises :class:`~experimental.torch_interpreter.SaveError` naming the target path, the model
still in memory as its ``model`` attribute.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile

import numpy as np
import onnx_ir as ir

from .errors import SaveError

#: tensors larger than this (bytes) are stored in the external data file
EXTERNAL_DATA_THRESHOLD = 1024
#: the key, in an ``onnx_ir.ExternalTensor``'s ``meta``, of a checkpoint's tensor the saved model points at in place
IN_PLACE = "aten2onnx.in_place"
#: the alignment of each weight in the external data file (a page: the runtime maps the file)
ALIGNMENT = 4096

logger = logging.getLogger(__name__)


def in_place(tensor: ir.TensorProtocol | None) -> bool:
    """Whether ``tensor`` is a checkpoint's tensor marked :data:`IN_PLACE` (the saved model may point at it)."""
    return isinstance(tensor, ir.ExternalTensor) and bool(tensor.meta.get(IN_PLACE))


def release_mapped(*tensors: ir.TensorProtocol) -> None:
    """Unmaps the files of the tensors read from one (their pages leave the process); the others are left."""
    for tensor in tensors:
        if isinstance(tensor, ir.ExternalTensor):
            tensor.release()


def staging_folder(parent: str, prefix: str) -> str:
    """A new empty folder under ``parent`` (named ``prefix`` and a random part) to write files into before they are
    moved where they belong, with the permissions any new folder gets: ``tempfile.mkdtemp`` makes it readable by its
    owner only, which a folder renamed into place and then read by another user (a service serving the model) must
    not keep.

    Example::

        >>> import os, stat, tempfile
        >>> folder = staging_folder(tempfile.mkdtemp(), ".tmp_")
        >>> mask = os.umask(0); _ = os.umask(mask)
        >>> stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~mask
        True
    """
    while True:
        folder = os.path.join(parent, prefix + secrets.token_hex(6))
        try:
            os.mkdir(folder)  # the default mode, less the process's umask
        except FileExistsError:
            continue
        return folder


def save(model: ir.Model, filename: str | os.PathLike, external_data: bool | None = None) -> list[str]:
    """Saves ``model`` to ``filename`` (and ``filename + '.data'`` when weights are external).

    ``external_data=None`` stores the weights larger than :data:`EXTERNAL_DATA_THRESHOLD` bytes
    externally when all weights together exceed 1 MB, so that small models stay one file.
    Returns the paths written; raises :class:`~experimental.torch_interpreter.SaveError` (``e.model``
    is ``model``) when the files cannot be written.

    >>> import os, tempfile, torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> model = to_onnx(torch.nn.ReLU(), (torch.randn(2),), as_ir=True)
    >>> folder = tempfile.mkdtemp()
    >>> [os.path.basename(p) for p in save(model, os.path.join(folder, "relu.onnx"))]
    ['relu.onnx']
    """
    filename = os.fspath(filename)
    try:
        return _save(model, filename, external_data)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise SaveError(
            f"could not save the ONNX model to {os.path.abspath(filename)!r}: {reason} "
            f"(errno {e.errno}); nothing was written there. The model is kept in memory: catch SaveError and "
            "save e.model elsewhere (onnx_ir.save(e.model, path)).",
            model=model,
            path=filename,
        ) from e


def _save(model: ir.Model, filename: str, external_data: bool | None) -> list[str]:
    folder = os.path.dirname(os.path.abspath(filename))
    os.makedirs(folder, exist_ok=True)
    base = os.path.basename(filename)
    if external_data is None:
        tensors = [v.const_value for v in model.graph.initializers.values() if v.const_value is not None]
        external_data = any(in_place(t) for t in tensors) or sum(t.nbytes for t in tensors) > 2**20
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=folder)
    try:
        kept = _write_weights(model, tmp, base + ".data", folder) if external_data else _read_weights(model)
        try:
            ir.save(model, os.path.join(tmp, base))  # the weights written above stay external, the others inline
        finally:
            for value, tensor in kept:
                value.const_value = tensor
        written = []
        for name in sorted(os.listdir(tmp)):
            os.replace(os.path.join(tmp, name), os.path.join(folder, name))
            written.append(os.path.join(folder, name))
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_weights(model: ir.Model, tmp: str, data_name: str, folder: str) -> list[tuple[ir.Value, ir.TensorProtocol]]:
    """Writes the weights above the threshold of every graph of ``model`` to ``tmp/data_name`` one at a time (the
    :data:`IN_PLACE` ones lying under ``folder``, where the model goes, are pointed at instead) and makes the
    initializers point there; returns ``(value, original tensor)`` pairs to restore the model as it was."""
    kept: list[tuple[ir.Value, ir.TensorProtocol]] = []
    copied = set()
    with open(os.path.join(tmp, data_name), "wb") as f:
        for graph in model.graphs():
            for value in graph.initializers.values():
                tensor = value.const_value
                if tensor is None or tensor.nbytes <= EXTERNAL_DATA_THRESHOLD:
                    if isinstance(tensor, ir.ExternalTensor):  # a small tensor of a checkpoint: in the model
                        value.const_value = _in_memory(tensor, value.name)
                        kept.append((value, tensor))
                    continue
                location = _in_place_location(tensor, folder)
                if location is not None:
                    offset = tensor.offset or 0
                else:
                    location, offset = data_name, -f.tell() % ALIGNMENT + f.tell()
                    f.seek(offset)
                    tensor.tofile(f) if hasattr(tensor, "tofile") else f.write(tensor.tobytes())
                    if in_place(tensor):
                        copied.add(tensor.path)
                    release_mapped(tensor)  # its file's pages leave the process once copied
                value.const_value = ir.ExternalTensor(location, offset, tensor.nbytes, tensor.dtype,
                                                      shape=ir.Shape(tensor.shape), name=value.name, base_dir=tmp)
                kept.append((value, tensor))
        empty = f.tell() == 0
    if empty:
        os.remove(os.path.join(tmp, data_name))
    if copied:
        logger.info("the tensors of %d checkpoint files outside %r were copied into %s (a model saved in the "
                    "checkpoint's folder points into its files instead)", len(copied), folder, data_name)
    return kept


def _in_place_location(tensor: ir.TensorProtocol, folder: str) -> str | None:
    """The location, relative to ``folder``, of a checkpoint's tensor the model may point at (its file under
    ``folder``); None when it is to be copied."""
    if not in_place(tensor):
        return None
    relative = os.path.relpath(os.path.realpath(tensor.path), os.path.realpath(folder))
    return None if relative.startswith(os.pardir) else relative.replace(os.sep, "/")


def _read_weights(model: ir.Model) -> list[tuple[ir.Value, ir.TensorProtocol]]:
    """Makes the initializers whose values lie in a file hold them in memory, for a model saved as one file;
    returns ``(value, original tensor)`` pairs to restore the model as it was."""
    kept = []
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                value.const_value = _in_memory(tensor, value.name)
                kept.append((value, tensor))
    return kept


def _in_memory(tensor: ir.ExternalTensor, name: str) -> ir.Tensor:
    """A copy in memory of a tensor read from a file, the file unmapped."""
    copy = ir.Tensor(np.array(tensor.numpy()), name=name)
    release_mapped(tensor)
    return copy
