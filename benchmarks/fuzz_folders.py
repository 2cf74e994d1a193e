"""The crafted checkpoint-folder fuzzer's long run (``testing/crafted_folders.py``): ``--n`` folders from ``--seed`` on,
each crafted (a safetensors checkpoint, one file or two shards and an index, then one to three mutations of its
header, bytes, index or folder entries) and read as ``to_onnx(weights=FOLDER)`` reads it, every value included.

Run: ``python benchmarks/fuzz_folders.py --n 10000 [--seed 0]``. Prints the outcomes (``read``, ``refused`` with the
project's ``CheckpointError``) and each bug (any other exception, a value read from outside the folder, a folder
taking more than ``--seconds``) with its seed and mutations; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np

from experimental.torch_interpreter.testing.crafted_folders import craft_folder, read_folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=5.0, help="the most one folder may take")
    args = parser.parse_args(argv)
    counts: collections.Counter = collections.Counter()
    bugs = []
    begin = time.perf_counter()
    for seed in range(args.seed, args.seed + args.n):
        root = tempfile.mkdtemp()
        try:
            folder = os.path.join(root, "model")
            os.mkdir(folder)
            mutations = craft_folder(np.random.default_rng(seed), folder)
            start = time.perf_counter()
            try:
                outcome = read_folder(folder)[0]
            except Exception as e:  # noqa: BLE001  (any other exception is what the fuzzer looks for)
                outcome = "bug"
                bugs.append(f"seed={seed} {mutations}: {type(e).__name__}: {str(e)[:200]}")
            if time.perf_counter() - start > args.seconds:
                bugs.append(f"seed={seed} {mutations}: {time.perf_counter() - start:.1f} s")
            counts[outcome] += 1
        finally:
            shutil.rmtree(root, ignore_errors=True)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{args.n} folders in {time.perf_counter() - begin:.0f} s (max RSS {rss} MB): {dict(counts)}")
    for bug in bugs:
        print(bug)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
