"""Where the model's code fixes a size: the model line that made torch specialize an axis declared dynamic.

torch.export reports "you marked L['x'].size()[0] as dynamic but your code specialized it to be a constant (4)" and,
without dynamo, no line of the model. torch's shape environment logs each symbol it creates
(``create_symbol s77 = 4 for L['x'].size()[0]``) and each one it replaces by a constant (``set_replacement s77 = 4``)
on its public logger, from inside the model's call: :func:`watch_specializations` listens to these two records while
a capture runs again (only after such a failure: the log costs time) and keeps the innermost frame of the model's
code at each replacement.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Callable, Iterator

import sympy

#: torch's shape environment logs on this (public) logger
SHAPE_LOGGER = "torch.fx.experimental.symbolic_shapes"
_CREATED = "create_symbol %s = %s for %s"
_REPLACED = "set_replacement %s = %s"


class _Watcher(logging.Handler):
    """Maps each symbol to its source (``L['x'].size()[0]``), each source made constant to the model's frame."""

    def __init__(self, model_frame: Callable[[list[traceback.FrameSummary]], traceback.FrameSummary | None]) -> None:
        super().__init__(logging.INFO)
        self.model_frame = model_frame
        self.sources: dict[str, str] = {}
        self.lines: dict[str, traceback.FrameSummary] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.msg, str) or not isinstance(record.args, tuple) or len(record.args) < 3:
            return
        symbol = str(record.args[0])
        if record.msg.startswith(_CREATED):
            self.sources.setdefault(symbol, str(record.args[2]))
        elif record.msg.startswith(_REPLACED) and isinstance(record.args[1], (int, sympy.Integer)):
            source = self.sources.get(symbol)
            frame = self.model_frame(traceback.extract_stack()) if source not in self.lines else None
            if source is not None and frame is not None:
                self.lines[source] = frame


@contextlib.contextmanager
def watch_specializations(
    model_frame: Callable[[list[traceback.FrameSummary]], traceback.FrameSummary | None],
) -> Iterator[dict[str, traceback.FrameSummary]]:
    """Inside, the returned dict fills with ``{torch's source of a size: frame of the model's code}`` for every size
    torch replaces by a constant; ``model_frame(stack)`` picks the model's frame in the stack (outermost first) or
    None.

    >>> import torch
    >>> class Add(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.bias = torch.nn.Parameter(torch.zeros(4, 3))
    ...     def forward(self, x):
    ...         return x + self.bias
    >>> def innermost_doctest_frame(stack):
    ...     return next((f for f in reversed(stack) if f.filename.startswith("<doctest")), None)
    >>> with watch_specializations(innermost_doctest_frame) as lines:
    ...     try:
    ...         _ = torch.export.export(Add(), (torch.zeros(4, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    ...     except Exception:
    ...         pass
    >>> [(source, frame.line) for source, frame in lines.items()]
    [("L['x'].size()[0]", 'return x + self.bias')]
    """
    logger = logging.getLogger(SHAPE_LOGGER)
    watcher = _Watcher(model_frame)
    saved = logger.level
    logger.addHandler(watcher)
    logger.setLevel(logging.INFO)
    try:
        yield watcher.lines
    finally:
        logger.removeHandler(watcher)
        logger.setLevel(saved)
