"""pytest options of the unit tests: ``--opinfo-full`` selects the full OpInfo sweep (``test_opinfo.py``),
``--heavy`` the tests of large models and of the benchmark scripts' real runs (each one 10 s or more on a 2-core
machine, and what it checks is also checked by a smaller test that runs by default)."""

from __future__ import annotations

#: marker -> the option that selects the tests it marks (deselected without it, not skipped)
OPTIONAL = {
    "opinfo_full": ("--opinfo-full", "the full OpInfo sweep: every sample of every op, for each dtype OpInfo "
                                     "supports"),
    "heavy": ("--heavy", "large models and the benchmark scripts' real runs, checked in smaller form by default"),
}


def pytest_addoption(parser):
    for option, text in OPTIONAL.values():
        parser.addoption(option, action="store_true", default=False, help=f"also run {text}")


def pytest_configure(config):
    for marker, (option, text) in OPTIONAL.items():
        config.addinivalue_line("markers", f"{marker}: {text}, selected by {option}")


def pytest_collection_modifyitems(config, items):
    """Each marker of :data:`OPTIONAL` whose option is not given deselects the tests it marks."""
    left_out = [marker for marker, (option, _) in OPTIONAL.items() if not config.getoption(option)]
    deselected = [item for item in items if any(item.get_closest_marker(m) is not None for m in left_out)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        gone = {id(item) for item in deselected}
        items[:] = [item for item in items if id(item) not in gone]
