"""Crafted safetensors headers (``checkpoint/safetensors_header.py``): what safetensors itself refuses is refused
with CheckpointError too: duplicate names (JSON keeps the last one), overlapping tensors (two weights reading the
same bytes), gaps and trailing bytes. A file written by safetensors still reads."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from experimental.torch_interpreter import CheckpointError
from experimental.torch_interpreter.checkpoint.safetensors_header import read_safetensors


def _craft(path, header: bytes | dict, data: bytes) -> str:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


def _f32(begin: int, end: int, n: int = 2) -> dict:
    return {"dtype": "F32", "shape": [n], "data_offsets": [begin, end]}


def test_written_by_safetensors(tmp_path):
    path = str(tmp_path / "ok.safetensors")
    save_file({"a": torch.ones(2, 3), "b": torch.zeros(4, dtype=torch.float16), "empty": torch.zeros(0)}, path)
    assert sorted(read_safetensors(path)) == ["a", "b", "empty"]


@pytest.mark.parametrize("header, data, message", [
    ({"a": _f32(0, 8), "b": _f32(0, 8)}, b"\0" * 8, "overlap the previous tensor's"),
    ({"a": _f32(0, 8), "b": _f32(4, 12)}, b"\0" * 12, "overlap the previous tensor's"),
    ({"a": _f32(8, 16)}, b"\0" * 16, "leave a gap of 8 bytes"),
    ({"a": _f32(0, 8)}, b"\0" * 12, "4 bytes after the last tensor's"),
    (b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
     b'"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', b"\0" * 8, "names 'a' twice"),
])
def test_crafted_headers_are_refused(tmp_path, header, data, message):
    with pytest.raises(CheckpointError, match=message):
        read_safetensors(_craft(tmp_path / "crafted.safetensors", header, data))


@pytest.mark.parametrize("header, message", [
    (b'{"a": [' + b",".join([b"[]"] * 2_000_000) + b"]}", "nested lists"),  # 6 MB that parsed into 2 million lists
    (b'{"a": {"dtype": "F32", "shape": [[2]], "data_offsets": [0, 8]}}', "nested lists"),
    (b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": [], "y": [], "z": []}}', "5 lists for 2 objects"),
    (b'{"a": [{"dtype": "F32"}]}', "nested lists"),
], ids=["empty_lists_in_a_list", "nested_shape", "more_lists_than_tensors", "object_in_a_list"])
def test_headers_costly_to_parse_are_refused_before_parsing(tmp_path, header, message):
    """20 MB of nested empty lists took 481 MB and 8.5 s to parse before being refused; such a header cannot be a
    safetensors one (one object per tensor, two flat lists) and is refused from its bytes."""
    with pytest.raises(CheckpointError, match=message):
        read_safetensors(_craft(tmp_path / "crafted.safetensors", header, b""))


def test_brackets_inside_names_and_metadata_are_read(tmp_path):
    path = str(tmp_path / "ok.safetensors")
    save_file({"w[[0]]": torch.zeros(2, 3), "b{[": torch.ones(4)}, path, metadata={"note": '[[{"'})
    assert sorted(read_safetensors(path)) == ["b{[", "w[[0]]"]
