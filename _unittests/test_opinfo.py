"""OpInfo sweep: every op of PyTorch's OpInfo database with float32 CPU support, converted by ``to_onnx``,
run with onnxruntime and compared with eager PyTorch (see ``testing/opinfo_sweep.py``).

* ``test_opinfo``: the first float32 sample of each op (the default run);
* ``test_opinfo_full``: every sample, for each dtype of ``opinfo_sweep.DTYPES`` the op supports, selected
  with ``pytest --opinfo-full`` (deselected otherwise).

Failures expected are listed with their reason in ``testing/opinfo_expected_failures.py``: a listed op must fail
the way its reason says (strict: a listed op that passes fails the test, remove it from the list).
"""

from __future__ import annotations

import re

import pytest
import torch

from experimental.torch_interpreter.testing import opinfo_sweep as sweep
from experimental.torch_interpreter.testing.opinfo_expected_failures import (
    EXPECTED_FAILURES,
    VALUES_NOT_COMPARED,
    expected_category,
    reason_for,
)

KEYS = list(sweep.ops_by_key())
FULL = [
    (key, str(dtype).replace("torch.", "")) for key in KEYS for dtype in sweep.supported_dtypes(sweep.ops_by_key()[key])
]


def check_outcome(key: str, outcome: sweep.Outcome, reason: str | None) -> None:
    """Fails unless ``outcome`` is a pass and ``reason`` None, or the failure ``reason`` announces (xfail)."""
    if reason is None:
        if outcome.category == sweep.PASS:
            return
        pytest.fail(
            f"{key}: {outcome.short()}\n{outcome.message[:3000]}\n"
            "Fix the converter, or list the op in opinfo_expected_failures.py with the reason."
        )
    expected = expected_category(reason)
    if outcome.category == sweep.PASS:
        pytest.fail(f"{key} passes now: remove it from EXPECTED_FAILURES (it was listed as {reason!r})")
    if outcome.category != expected:
        pytest.fail(f"{key} fails with {outcome.short()!r}, not as listed: {reason!r}\n{outcome.message[:3000]}")
    if expected == sweep.NO_CONVERTER:
        listed = set(re.findall(r"\w+::[\w.]+", reason))
        if listed != set(outcome.missing):
            pytest.fail(f"{key} misses converters {sorted(outcome.missing)}, the list says {sorted(listed)}")
    pytest.xfail(reason)


@pytest.mark.parametrize("key", KEYS)
def test_opinfo(key):
    """The first float32 sample."""
    op = sweep.ops_by_key()[key]
    sample = sweep.samples(op, torch.float32, 1)
    if not sample:
        outcome = sweep.Outcome(sweep.NOT_COMPARED, "no float32 sample")
    else:
        outcome = sweep.check_sample(op, sample[0], torch.float32, compare_values=key not in VALUES_NOT_COMPARED)[
            "ours"
        ]
    check_outcome(key, outcome, EXPECTED_FAILURES.get(key))


@pytest.mark.opinfo_full
@pytest.mark.parametrize(("key", "dtype"), FULL, ids=[f"{k}-{d}" for k, d in FULL])
def test_opinfo_full(key, dtype):
    """Every sample of one dtype: the first failure counts, samples torch.export rejects do not."""
    outcomes = [
        o["ours"]
        for _, _, _, o in sweep.sweep([key], (getattr(torch, dtype),), None, ("ours",), frozenset(VALUES_NOT_COMPARED))
    ]
    reason = reason_for(key, dtype)
    check_outcome(f"{key}[{dtype}]", sweep.summarize(outcomes), reason)


def test_expected_failures_are_opinfo_ops():
    """Every key of the list names an OpInfo entry (and a dtype of the sweep), every reason a category."""
    dtypes = {str(d).replace("torch.", "") for d in sweep.DTYPES}
    for key, reason in EXPECTED_FAILURES.items():
        name, _, dtype = key.partition("[")
        assert name in sweep.ops_by_key(), f"{key!r} is not an OpInfo entry"
        assert not dtype or dtype.rstrip("]") in dtypes, f"{key!r}: unknown dtype"
        assert reason is not None or dtype, f"{key!r}: None only overrides a dtype"
        if reason is not None:
            expected_category(reason)
    assert set(VALUES_NOT_COMPARED) <= set(sweep.ops_by_key())
