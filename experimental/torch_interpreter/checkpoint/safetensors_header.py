"""The table of contents of a safetensors file, read from its header and checked against the file's size.

A safetensors file is an 8-byte little-endian header length ``n``, ``n`` bytes of JSON
(``{name: {"dtype": "BF16", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}``), then the
tensors' raw little-endian bytes, ``begin`` and ``end`` counted from the end of the header. Nothing but the header
is read here: a tensor's bytes are read (mapped) when its value is needed.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass

import onnx_ir as ir

from ..errors import CheckpointError

#: safetensors' type names -> ONNX element types
DTYPES = {
    "F64": ir.DataType.DOUBLE, "F32": ir.DataType.FLOAT, "F16": ir.DataType.FLOAT16, "BF16": ir.DataType.BFLOAT16,
    "I64": ir.DataType.INT64, "I32": ir.DataType.INT32, "I16": ir.DataType.INT16, "I8": ir.DataType.INT8,
    "U64": ir.DataType.UINT64, "U32": ir.DataType.UINT32, "U16": ir.DataType.UINT16, "U8": ir.DataType.UINT8,
    "BOOL": ir.DataType.BOOL, "F8_E4M3": ir.DataType.FLOAT8E4M3FN, "F8_E5M2": ir.DataType.FLOAT8E5M2,
}
#: a header larger than this is refused (safetensors' own limit is 100 MB)
MAX_HEADER_BYTES = 100 * 2**20


@dataclass(frozen=True)
class StoredTensor:
    """Where one tensor lies: its file, type, shape, and the absolute ``offset`` and ``length`` of its bytes."""

    path: str
    name: str
    dtype: ir.DataType
    shape: tuple[int, ...]
    offset: int
    length: int


def read_safetensors(path: str | os.PathLike) -> dict[str, StoredTensor]:
    """The tensors of the safetensors file ``path`` by name; raises
    :class:`~experimental.torch_interpreter.CheckpointError` naming the file (and the tensor) when the header is
    not one, a type is unknown, or a tensor's bytes do not fit its shape or lie past the end of the file.

    Example::

        >>> import os, tempfile, torch
        >>> from safetensors.torch import save_file
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> save_file({"w": torch.zeros(2, 3, dtype=torch.bfloat16)}, path)
        >>> stored = read_safetensors(path)["w"]
        >>> stored.dtype.name, stored.shape, stored.length
        ('BFLOAT16', (2, 3), 12)
    """
    path = os.path.abspath(os.fspath(path))
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            if length is None or length > min(MAX_HEADER_BYTES, size - 8):
                raise CheckpointError(f"{path!r} is not a safetensors file (no header of a possible length)",
                                      path=path)
            text = f.read(length)
            _check_layout(path, text)
            header = json.loads(text, object_pairs_hook=_no_duplicates)
    except OSError as e:
        raise CheckpointError(f"cannot read the checkpoint file {path!r}: {e.strerror or e}", path=path) from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path!r} is not a safetensors file (its header is not JSON: {e})", path=path) from e
    except _Duplicate as e:
        raise CheckpointError(f"{path!r} is not a safetensors file: its header names {str(e)!r} twice", path=path,
                              tensor=str(e)) from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path!r} is not a safetensors file (its header is not a JSON object)", path=path)
    start = 8 + length
    entries = {name: _entry(path, name, info, start, size) for name, info in header.items() if name != "__metadata__"}
    _check_contiguous(path, entries, start, size)
    return entries


#: a JSON string (its escapes included), replaced by ``""`` before the brackets of a header are counted
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _check_layout(path: str, text: bytes) -> None:
    """Refuses, before parsing, a header that cannot be a safetensors one and whose parsing would cost far more than
    its bytes: outside strings, a header holds one object per tensor with two flat lists (``shape``,
    ``data_offsets``); a list in a list, or more lists than twice the objects, is not one (20 MB of nested empty
    lists made 481 MB of Python objects)."""
    bare = _STRING.sub(b'""', text)
    lists, objects = bare.count(b"["), bare.count(b"{")
    nested = re.search(rb"\[\s*\[|\[[^\[\]{}]*[{]", bare) is not None
    if nested or lists > 2 * objects:
        what = "nested lists" if nested else f"{lists} lists for {objects} objects"
        raise CheckpointError(
            f"{path!r} is not a safetensors file: its header holds {what} (a safetensors header has one object per "
            "tensor with two flat lists)",
            path=path,
        )


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def _check_contiguous(path: str, entries: dict[str, StoredTensor], start: int, size: int) -> None:
    """As safetensors validates a header: the tensors' bytes follow each other from the start of the data, none
    overlapping another, and end where the file does (two names on the same bytes would alias two weights)."""
    end = 0
    for entry in sorted(entries.values(), key=lambda e: (e.offset, e.length)):
        begin = entry.offset - start
        if begin != end:
            why = "overlap the previous tensor's" if begin < end else f"leave a gap of {begin - end} bytes before them"
            raise CheckpointError(f"tensor {entry.name!r} of {path!r}: its bytes {why} (safetensors refuses such a "
                                  "header)", tensor=entry.name, path=path)
        end = begin + entry.length
    if end != size - start:
        raise CheckpointError(f"{path!r}: {size - start - end} bytes after the last tensor's (safetensors refuses such "
                              "a file)", path=path)


def _entry(path: str, name: str, info: object, start: int, size: int) -> StoredTensor:
    def wrong(why: str) -> CheckpointError:
        return CheckpointError(f"tensor {name!r} of {path!r}: {why}", tensor=name, path=path)

    dtype_name = info.get("dtype") if isinstance(info, dict) else None
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:  # a list or a dict is no key (TypeError)
        raise wrong(f"unknown type {str(dtype_name)[:80]!r} (known: {', '.join(DTYPES)})")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):  # noqa: E721 (bool is no size)
        raise wrong(f"the shape {str(shape)[:80]} is not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)  # noqa: E721
            and 0 <= offsets[0] <= offsets[1]):
        raise wrong(f"the data offsets {offsets!r} are not [begin, end]")
    dtype = DTYPES[dtype_name]
    expected = int(math.prod(shape) * dtype.itemsize)
    if offsets[1] - offsets[0] != expected:
        raise wrong(f"{offsets[1] - offsets[0]} bytes stored for a {dtype_name} tensor of shape {shape} "
                    f"({expected} bytes)")
    if start + offsets[1] > size:
        raise wrong(f"the file is truncated: the tensor's bytes end at byte {start + offsets[1]}, the file has "
                    f"{size}")
    return StoredTensor(path, name, dtype, tuple(shape), start + offsets[0], expected)
