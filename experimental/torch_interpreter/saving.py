"""Saving an ``onnx_ir`` model: weights above a threshold go to one external data file.

The files are written in a temporary folder next to the target and moved into place only when
complete, so a failure never leaves a half-written model.
A failure raises :class:`~experimental.torch_interpreter.SaveError` naming the target path, the model
still in memory as its ``model`` attribute.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import onnx_ir as ir

from .errors import SaveError

#: tensors larger than this (bytes) are stored in the external data file
EXTERNAL_DATA_THRESHOLD = 1024


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
        total = sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)
        external_data = total > 2**20
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=folder)
    try:
        data_name = base + ".data" if external_data else None
        ir.save(
            model,
            os.path.join(tmp, base),
            external_data=data_name,
            size_threshold_bytes=EXTERNAL_DATA_THRESHOLD,
        )
        written = []
        for name in sorted(os.listdir(tmp)):
            os.replace(os.path.join(tmp, name), os.path.join(folder, name))
            written.append(os.path.join(folder, name))
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
