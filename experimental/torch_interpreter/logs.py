"""What the user sees: ``verbose=`` arguments mapped to log levels of the package's loggers (nothing prints by
default), progress of long loops, warnings pointing at the user's line."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
import threading
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
    # verbose=1 reads as steps of one tool; verbose=2 is for whoever investigates: which module said it
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s" if verbose > 1 else "[aten2onnx] %(message)s"))
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


#: libraries whose INFO lines (one per pass, with stacks) would drown the package's under logging.INFO: WARNING
#: and above; their loggers whose WARNINGs are not a user's business either: ERROR only (onnxscript's folding logs
#: one for each node it tried to evaluate and could not, the node stays; onnx-ir's deduplication one for each
#: constant the graph outputs)
DEPENDENCY_LOGGERS = {"onnx_ir": logging.WARNING, "onnxscript": logging.WARNING, "onnxscript.optimizer": logging.ERROR,
                      "onnx_ir.passes.common.initializer_deduplication": logging.ERROR}


@contextlib.contextmanager
def quiet_dependencies() -> Iterator[None]:
    """Inside, onnx-ir's and onnxscript's loggers say only what :data:`DEPENDENCY_LOGGERS` lets through, unless the
    package itself logs at DEBUG (``verbose=2``): a user who sets ``logging.INFO`` sees the package's steps, not one
    line per pass, and the default level shows nothing when nothing is wrong.

    >>> with quiet_dependencies():
    ...     logging.getLogger("onnx_ir").isEnabledFor(logging.INFO)
    False
    """
    if logging.getLogger(PACKAGE_LOGGER).isEnabledFor(logging.DEBUG):
        yield
        return
    loggers = {logging.getLogger(name): level for name, level in DEPENDENCY_LOGGERS.items()}
    saved = {lg: lg.level for lg in loggers}
    for lg, level in loggers.items():
        lg.setLevel(max(level, lg.getEffectiveLevel()))
    try:
        yield
    finally:
        for lg, level in saved.items():
            lg.setLevel(level)


#: seconds an export runs before its progress line shows
PROGRESS_DELAY = 3.0


def _redraws_in_place(file) -> bool:
    """Whether ``file`` shows a line redrawn with carriage returns as one line: a terminal, or the output of a
    Jupyter kernel (whose stderr is no terminal, and where tqdm draws a widget)."""
    try:
        if file.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return "ipykernel" in sys.modules and file in (sys.stderr, sys.stdout)


class ExportProgress:
    """A progress line on stderr for an export that takes longer than :data:`PROGRESS_DELAY` seconds: the step
    running and the time spent (a tqdm bar where tqdm is installed and ``file`` is a terminal or a notebook's output,
    else one line per step: a log file or a CI job gets lines, not a bar redrawn with carriage returns), nothing for a
    short export, nor when ``enabled`` is False (``verbose`` logs the steps). A thread wakes each second to redraw it,
    so that a long capture shows it moves.

    >>> import io
    >>> out = io.StringIO()
    >>> with ExportProgress(("capture", "translation"), delay=0.0, file=out, use_tqdm=False) as progress:
    ...     progress.step("translation")
    >>> print(out.getvalue().strip())
    to_onnx: capture (1/2)
    to_onnx: translation (2/2)
    to_onnx: done after 0.0 s
    """

    def __init__(
        self, steps: tuple[str, ...], *, delay: float | None = None, file=None, use_tqdm: bool = True,
        enabled: bool = True,
    ):
        self.enabled = enabled
        self.steps, self.delay = steps, PROGRESS_DELAY if delay is None else delay
        self.file = file if file is not None else sys.stderr
        self.current, self.begin, self.shown = steps[0], time.perf_counter(), False
        self._bar = None
        if use_tqdm and enabled and _redraws_in_place(self.file):
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=len(steps), desc=f"to_onnx: {self.current}", delay=self.delay,
                                 file=self.file, bar_format="{desc} {n}/{total} [{elapsed}]", leave=True)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="aten2onnx-progress")

    def __enter__(self) -> ExportProgress:
        if not self.enabled:
            return self
        if self.delay <= 0:
            self._draw()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        self._thread.join()
        with self._lock:
            if self._bar is not None:
                if exc[0] is None:
                    self._bar.set_description_str("to_onnx: done", refresh=False)
                    self._bar.update(len(self.steps) - self._bar.n)
                elif self.shown:  # the bar stays, saying where the export stopped, and the error starts a line
                    self._bar.set_description_str(f"to_onnx: {self.current} failed")
                    self.file.write("\n")
                self._bar.close()
            elif self.shown:
                what = "done" if exc[0] is None else f"{self.current} failed"
                self.file.write(f"to_onnx: {what} after {time.perf_counter() - self.begin:.1f} s\n")
                self.file.flush()

    def step(self, name: str) -> None:
        """The export starts step ``name``."""
        if not self.enabled:
            return
        with self._lock:
            self.current = name
            if self._bar is not None:
                self._bar.set_description_str(f"to_onnx: {name}", refresh=False)
                self._bar.update(1)
            elif self.shown or time.perf_counter() - self.begin >= self.delay:
                self._draw_line()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            if time.perf_counter() - self.begin >= self.delay:
                self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.refresh()
                self.shown = True
            elif not self.shown:
                self._draw_line()

    def _draw_line(self) -> None:
        index = self.steps.index(self.current) + 1 if self.current in self.steps else len(self.steps)
        self.file.write(f"to_onnx: {self.current} ({index}/{len(self.steps)})\n")
        self.file.flush()
        self.shown = True
