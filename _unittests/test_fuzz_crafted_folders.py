"""The crafted checkpoint-folder fuzzer (``testing/crafted_folders.py``) at its smallest: 500 folders, each a
safetensors checkpoint with one to three mutations of its header, bytes, index or folder entries, read as
``to_onnx(weights=FOLDER)`` reads it: read, or refused with ``CheckpointError``; never another exception, a value
from outside the folder, or a second per folder. ``python benchmarks/fuzz_folders.py --n 10000`` is the long run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from experimental.torch_interpreter import CheckpointError
from experimental.torch_interpreter.checkpoint.safetensors_header import read_safetensors
from experimental.torch_interpreter.testing.crafted_folders import craft_folder, read_folder


def test_crafted_folders_are_read_or_refused(tmp_path):
    outcomes = set()
    for seed in range(500):
        folder = tmp_path / f"f{seed}" / "model"
        folder.mkdir(parents=True)
        mutations = craft_folder(np.random.default_rng(seed), str(folder))
        start = time.perf_counter()
        outcome, _ = read_folder(str(folder))
        assert time.perf_counter() - start < 1.0, (seed, mutations)
        outcomes.add(outcome)
    assert outcomes == {"read", "refused"}


@pytest.mark.parametrize("dtype", [[], {}, ["F32"], True, 3])
def test_entry_type_that_is_no_name_is_refused(tmp_path, dtype):
    """Seeds 121 and 151: a dtype given as a list or an object raised TypeError (unhashable) before its check."""
    import json
    import struct

    text = json.dumps({"w": {"dtype": dtype, "shape": [1], "data_offsets": [0, 4]}}).encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 4)
    with pytest.raises(CheckpointError, match="unknown type"):
        read_safetensors(str(path))
