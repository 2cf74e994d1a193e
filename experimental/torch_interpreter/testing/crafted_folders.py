"""Crafted checkpoint folders for the folder fuzzer: a folder ``save_file`` wrote (one file or two shards and their
index), then one to three mutations of what an attacker controls: the safetensors header (its length field, its
JSON, each field of an entry, ``__metadata__``), the file's bytes (truncated, extended, flipped), the index (wrong
types, names leading out of the folder, missing shards), and the folder's entries (links out of it, dangling links,
folders named like shards). :func:`read_folder` reads such a folder as ``to_onnx(weights=FOLDER)`` does, every
tensor's values included: the outcome is ``"read"`` or ``"refused"`` (the project's ``CheckpointError``), and any
other exception is a bug.

Example::

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> mutations = craft_folder(np.random.default_rng(3), folder)
    >>> read_folder(folder)[0] in ("read", "refused")
    True
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from ..checkpoint import Checkpoint
from ..dtypes import torch_dtype
from ..errors import CheckpointError

#: JSON values a mutation puts where a field was
ODD_VALUES: list[Any] = [None, True, -1, 0, 2**40, 2**64, 1.5, -0.0, "", "F32", "x" * 300, [], [[]], [1, -1], [2**62, 2],
                         {}, {"a": 1}, [0.5, 1], ["0", "8"], [[0], [8]]]


def _random_json(rng: np.random.Generator, depth: int = 0) -> Any:
    kind = rng.integers(0, 6 if depth < 3 else 3)
    if kind < 3:
        return ODD_VALUES[rng.integers(0, len(ODD_VALUES))]
    if kind == 3:
        return [_random_json(rng, depth + 1) for _ in range(rng.integers(0, 4))]
    return {str(rng.integers(0, 5)): _random_json(rng, depth + 1) for _ in range(rng.integers(0, 4))}


def _header(path: str) -> tuple[dict, bytes]:
    with open(path, "rb") as f:
        raw = f.read()
    length = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + length]), raw[8 + length:]


def _write(path: str, header: Any, data: bytes, length: int | None = None) -> None:
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length) + text + data)


def _mutate_header(rng: np.random.Generator, path: str) -> str:
    try:
        header, data = _header(path)
    except (ValueError, struct.error):  # an earlier mutation broke it: left as it is
        return "header already broken"
    if not isinstance(header, dict):
        return "header already replaced"
    names = [n for n in header if n != "__metadata__" and isinstance(header[n], dict)]
    what = rng.integers(0, 6)
    if what == 0 and names:
        name = names[rng.integers(0, len(names))]
        key = ["dtype", "shape", "data_offsets"][rng.integers(0, 3)]
        header[name][key] = _random_json(rng)
        _write(path, header, data)
        return f"entry {key}"
    if what == 1:
        header["__metadata__"] = _random_json(rng)
        _write(path, header, data)
        return "metadata"
    if what == 2:
        _write(path, _random_json(rng), data)
        return "whole header"
    if what == 3:
        text = json.dumps(header).encode()
        choices = [0, 1, len(text) - 1, len(text) + 1, len(text) + len(data), 2**63, int(rng.integers(0, 2**32))]
        _write(path, header, data, choices[rng.integers(0, len(choices))])
        return "length field"
    if what == 4 and names:
        name = names[rng.integers(0, len(names))]
        header[f"{name}.twin"] = dict(header[name])  # two names on the same bytes
        _write(path, header, data)
        return "aliased bytes"
    header[str(rng.integers(0, 9))] = {"dtype": "F32", "shape": [int(rng.integers(0, 4))],
                                        "data_offsets": [int(rng.integers(-4, 64)), int(rng.integers(-4, 64))]}
    _write(path, header, data)
    return "extra entry"


def _mutate_bytes(rng: np.random.Generator, path: str) -> str:
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if not raw:
        return "empty file left"
    what = rng.integers(0, 3)
    if what == 0:
        del raw[int(rng.integers(0, len(raw))):]
        label = "truncated"
    elif what == 1:
        raw += bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))
        label = "extended"
    else:
        for _ in range(int(rng.integers(1, 8))):
            raw[int(rng.integers(0, len(raw)))] = int(rng.integers(0, 256))
        label = "flipped"
    with open(path, "wb") as f:
        f.write(bytes(raw))
    return label


def _mutate_index(rng: np.random.Generator, folder: str, outside: str) -> str:
    path = os.path.join(folder, "model.safetensors.index.json")
    what = rng.integers(0, 5)
    if what == 0:
        content: Any = _random_json(rng)
    elif what == 1:
        content = {"weight_map": _random_json(rng)}
    else:
        shard = [os.path.relpath(outside, folder), outside, "missing.safetensors"][what - 2]
        content = {"weight_map": {"w0": shard}}
    with open(path, "w") as f:
        json.dump(content, f)
    return f"index {what}"


def _mutate_entries(rng: np.random.Generator, folder: str, outside: str) -> str:
    what = rng.integers(0, 3)
    target = os.path.join(folder, f"extra{len(os.listdir(folder))}.safetensors")
    if what == 0:
        os.symlink(outside, target)
        return "link out"
    if what == 1:
        os.symlink(os.path.join(folder, "gone.safetensors"), target)
        return "dangling link"
    os.mkdir(target)
    return "folder named like a shard"


def craft_folder(rng: np.random.Generator, folder: str) -> list[str]:
    """Writes a crafted checkpoint into ``folder`` (an empty folder; a valid file is written beside it, outside, for
    the mutations that lead out); returns the mutations applied."""
    outside = os.path.join(os.path.dirname(os.path.abspath(folder)), f"{os.path.basename(folder)}.outside.safetensors")
    save_file({"secret": torch.full((2,), 7.0)}, outside)
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
    tensors = {f"w{i}": torch.randn(tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))).to(
        dtypes[rng.integers(0, len(dtypes))]) for i in range(3)}
    sharded = bool(rng.integers(0, 2))
    if sharded:
        save_file({"w0": tensors["w0"]}, os.path.join(folder, "model-00001-of-00002.safetensors"))
        save_file({k: v for k, v in tensors.items() if k != "w0"},
                  os.path.join(folder, "model-00002-of-00002.safetensors"))
        weight_map = {k: f"model-0000{1 if k == 'w0' else 2}-of-00002.safetensors" for k in tensors}
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": weight_map}, f)
    else:
        save_file(tensors, os.path.join(folder, "model.safetensors"))
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".safetensors"))
    mutations = []
    for _ in range(int(rng.integers(1, 4))):
        kind = rng.integers(0, 4)
        file = files[rng.integers(0, len(files))]
        if kind == 0:
            mutations.append(_mutate_header(rng, file))
        elif kind == 1:
            mutations.append(_mutate_bytes(rng, file))
        elif kind == 2:
            mutations.append(_mutate_index(rng, folder, outside))
        else:
            mutations.append(_mutate_entries(rng, folder, outside))
    return mutations


def read_folder(folder: str) -> tuple[str, str]:
    """Reads ``folder`` as ``weights=FOLDER`` does, every tensor's values included: ``("read", "")`` or
    ``("refused", message)``; any exception other than the project's ``CheckpointError`` propagates (a bug). A
    value read from the file written outside the folder is a bug too (``AssertionError``)."""
    try:
        checkpoint = Checkpoint(folder)
        for name, entry in checkpoint.entries.items():
            values = checkpoint.tensor(name, entry.shape, torch_dtype(entry.dtype)).numpy()
            if name == "secret" or (values.size == 2 and values.dtype == np.float32 and (values == 7.0).all()):
                raise AssertionError(f"{folder}: the tensor {name!r} read the file outside the folder")
    except CheckpointError as e:
        return "refused", str(e)
    return "read", ""
