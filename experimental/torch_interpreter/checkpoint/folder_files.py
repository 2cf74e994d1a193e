"""The folder rule: a file the project reads on a user's behalf from a folder they named (a checkpoint's shards,
its index, a tokenizer's files) is a regular file whose resolved path stays inside that folder, of a bounded size.

A name from a file of the folder (``model.safetensors.index.json``'s ``weight_map``) may say ``../other/x`` or an
absolute path, and a file may be a link out of the folder, a FIFO (reading it waits forever) or a device
(``/dev/zero`` never ends): each is refused before anything is read.
"""

from __future__ import annotations

import os
import stat

from ..errors import TorchInterpreterError


def file_in_folder(folder: str, name: str, error: type[TorchInterpreterError], what: str,
                   max_bytes: int | None = None, **details: str) -> str | None:
    """The resolved path of ``folder``'s file ``name``, None when there is no such entry; ``error`` (the
    caller's exception type, with ``details``) when the name or the link leads out of the folder, when it is not a
    regular file (a FIFO, a device, a folder, a dangling link) or when it holds more than ``max_bytes``.

    >>> import tempfile
    >>> from experimental.torch_interpreter.errors import CheckpointError
    >>> folder = tempfile.mkdtemp()
    >>> file_in_folder(folder, "absent.json", CheckpointError, "the index") is None
    True
    >>> file_in_folder(folder, "../elsewhere.safetensors", CheckpointError, "the shard")
    Traceback (most recent call last):
        ...
    experimental.torch_interpreter.errors.CheckpointError: the shard '../elsewhere.safetensors' leads out of the folder ...
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise error(f"{what} {name!r} is not a file name", **details)
    path = os.path.join(folder, name)
    root, real = os.path.realpath(folder), os.path.realpath(path)
    if os.path.isabs(name) or os.path.commonpath([root, real]) != root:
        raise error(f"{what} {name!r} leads out of the folder {folder!r} (to {real!r}): only the folder's own "
                    "files are read", **details)
    if not os.path.lexists(path):
        return None
    try:
        info = os.stat(real)
    except OSError as e:  # a dangling link
        raise error(f"{what} {path!r} cannot be read: {e}", **details) from e
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} {path!r} is not a regular file (a FIFO, a device or a folder)", **details)
    if max_bytes is not None and info.st_size > max_bytes:
        raise error(f"{what} {path!r} holds {info.st_size} bytes, more than {max_bytes}", **details)
    return real
