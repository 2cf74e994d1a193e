"""Warnings of the capture attributed to the code that called it, however deep in the capture they are raised.

The strategies run at varying depths (a fallback restarts the strategies after it), so a fixed ``stacklevel``
would point at a different line for each choice of strategies: :func:`warn_at_caller` counts the frames.
"""

from __future__ import annotations

import inspect
import os
import warnings

_CAPTURE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_caller(message: str, category: type[Warning], above: int = 0) -> None:
    """``warnings.warn(message, category)`` pointing at the first frame outside the capture package (``to_onnx``),
    or ``above`` frames further up (1: the line calling ``to_onnx``).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_caller("a note", UserWarning)
    >>> str(caught[0].message), caught[0].filename.endswith("caller.py")
    ('a note', False)
    """
    frame = inspect.currentframe()
    level = 1  # warnings.warn's stacklevel of ``frame``: 1 is this function
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_CAPTURE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + above)
