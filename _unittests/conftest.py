"""pytest options of the unit tests: ``--opinfo-full`` selects the full OpInfo sweep (``test_opinfo.py``)."""

from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption(
        "--opinfo-full",
        action="store_true",
        default=False,
        help="also run the full OpInfo sweep: every sample of every op, for each dtype OpInfo supports",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "opinfo_full: the full OpInfo sweep, selected by --opinfo-full")


def pytest_collection_modifyitems(config, items):
    """Without ``--opinfo-full``, the tests marked ``opinfo_full`` are deselected (not skipped)."""
    if config.getoption("--opinfo-full"):
        return
    kept = [item for item in items if item.get_closest_marker("opinfo_full") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("opinfo_full")])
        items[:] = kept
