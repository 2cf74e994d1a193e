"""Several processes (gloo, CPU) for the tests and benchmarks of training across processes: a rank joins its group
through a file store (no port to race for) with a timeout (a rank that fails does not leave the others waiting 30
minutes), writes its result as JSON, and leaves without destructors once every rank is done.

Leaving with ``os._exit``: gloo's process group, kept alive by DDP's reducer after ``destroy_process_group``, joined
a thread waiting for the rank that had left (a hang seen in the suite).

Example (the worker runs in each spawned process)::

    def worker(rank, folder):
        join_gloo(rank, 2, folder)
        with left_on_error():
            result = {"sum": ...}
        finish(rank, folder, result)

    torch.multiprocessing.spawn(worker, args=(folder,), nprocs=2)
    results = read_results(folder, 2)
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Iterator
from typing import Any

import torch.distributed as dist


def store(folder: str) -> str:
    """The ``init_method`` of a group meeting in ``folder``: a file store."""
    return f"file://{os.path.join(folder, 'store')}"


def join_gloo(rank: int, world: int, folder: str, timeout_s: float = 120) -> None:
    """This process joins the gloo group of ``world`` ranks meeting in ``folder``."""
    dist.init_process_group("gloo", init_method=store(folder), rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


@contextlib.contextmanager
def left_on_error() -> Iterator[None]:
    """The group is destroyed when the body raises (the error then reaches ``spawn``)."""
    try:
        yield
    except BaseException:
        dist.destroy_process_group()
        raise


def finish(rank: int, folder: str, result: Any) -> None:
    """Writes ``result`` as ``rank<N>.json``, waits for every rank, and leaves the process without destructors."""
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    os._exit(0)


def read_results(folder: str, world: int) -> list[Any]:
    """Every rank's result, in rank order."""
    results = []
    for rank in range(world):
        with open(os.path.join(folder, f"rank{rank}.json")) as f:
            results.append(json.load(f))
    return results
