"""``verbose=`` arguments map to log levels of the package's loggers; nothing prints."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

PACKAGE_LOGGER = "experimental.torch_interpreter"


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
