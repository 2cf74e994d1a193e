"""What the user sees: ``verbose=`` arguments mapped to log levels of the package's loggers (nothing prints by
default), progress of long loops, warnings pointing at the user's line."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import time
import warnings
from collections.abc import Iterator

PACKAGE_LOGGER = "experimental.torch_interpreter"
#: the package's folder and the module running its ``with`` blocks (the end of ``to_onnx``'s): frames a warning
#: does not point at
_INTERNAL = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.abspath(contextlib.__file__))


def warn_at_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` pointing at the first frame outside the package: the user's line calling
    ``to_onnx`` (or ``export``...), however deep in the package the warning is raised (a capture strategy's depth
    varies with the strategies chosen, so a fixed ``stacklevel`` would not do).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_user("a note", UserWarning)
    >>> str(caught[0].message), caught[0].filename.endswith("logs.py")
    ('a note', False)
    """
    frame = inspect.currentframe()
    level = 1  # warnings.warn's stacklevel of ``frame``: 1 is this function
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


@contextlib.contextmanager
def verbosity(verbose: int) -> Iterator[None]:
    """While inside, the package logs to stderr: INFO for ``verbose=1``, DEBUG for ``verbose>=2``."""
    if not verbose:
        yield
        return
    package_logger = logging.getLogger(PACKAGE_LOGGER)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    saved = package_logger.level
    package_logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    package_logger.addHandler(handler)
    try:
        yield
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(saved)


class Progress:
    """Logs ``<what> i/n <unit> (p%)`` at INFO level at most every ``every`` seconds, so that a long loop
    (translating a large model) shows it moves, in a terminal or a notebook, and a short one says nothing.

    >>> progress = Progress("translated", 3, "nodes")
    >>> for _ in range(3):
    ...     progress.tick()
    >>> progress.done
    3
    """

    def __init__(self, what: str, total: int, unit: str, every: float = 2.0) -> None:
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.done = 0
        self._last = time.perf_counter()
        self._logger = logging.getLogger(PACKAGE_LOGGER)

    def tick(self) -> None:
        """One more item done."""
        self.done += 1
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            self._logger.info(
                "%s %d/%d %s (%d%%)", self.what, self.done, self.total, self.unit, 100 * self.done // max(self.total, 1)
            )
