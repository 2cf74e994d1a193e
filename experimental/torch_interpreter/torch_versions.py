"""The torch releases the package supports, and every torch feature that differs between them.

The package is tested on torch :data:`MINIMUM` to :data:`NEWEST_TESTED` (``benchmarks/torch_matrix.py`` runs
the smoke set on each release; the pinned release runs the whole suite). What moves between releases is read
here and only here, by **feature detection** (does this attribute, this overload, this option exist), never by
comparing version strings: a new release needs changes in this module, and in the converters for new or renamed
ops only. The package root calls :func:`check_torch_version` before importing anything else, so that a torch
outside the range gets a message naming the range instead of an error deep inside an import.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import torch

from .errors import UnsupportedTorchError, UntestedTorchWarning

#: the oldest torch release supported (a ``major.minor`` prefix)
MINIMUM = "2.11"
#: the first release beyond the supported range (``pyproject.toml``: ``torch>=MINIMUM,<BEYOND``)
BEYOND = "2.15"
#: the newest release the smoke set passed on
NEWEST_TESTED = "2.14.1"
#: the range as a requirement, the one ``pyproject.toml`` states
SUPPORTED = f"torch>={MINIMUM},<{BEYOND}"


def release(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a torch version string; local and pre-release parts are ignored.

    >>> release("2.14.1+cu130"), release("2.15.0.dev20260101"), release("2.11")
    ((2, 14, 1), (2, 15, 0), (2, 11, 0))
    """
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def check_torch_version(version: str | None = None) -> str | None:
    """Checks that ``version`` (default: the installed torch) is in the supported range.

    Older than :data:`MINIMUM`: raises :class:`~experimental.torch_interpreter.UnsupportedTorchError` (an
    ``ImportError``), the package does not import. Newer than the range: emits
    :class:`~experimental.torch_interpreter.UntestedTorchWarning` and returns its message. In the range: returns
    None.

    >>> check_torch_version("2.13.0+cpu") is None
    True
    >>> try:
    ...     check_torch_version("2.10.0")
    ... except ImportError as e:
    ...     print(str(e).split(":")[0])
    aten2onnx supports torch>=2.11,<2.15 (tested from 2.11 to 2.14.1) but torch 2.10.0 is installed
    """
    version = torch.__version__ if version is None else version
    found = release(version)
    if found[:2] < release(MINIMUM)[:2]:
        raise UnsupportedTorchError(
            f"aten2onnx supports {SUPPORTED} (tested from {MINIMUM} to {NEWEST_TESTED}) but torch {version} is "
            f'installed: pip install "{SUPPORTED}"'
        )
    if found[:2] >= release(BEYOND)[:2]:
        message = (
            f"aten2onnx supports {SUPPORTED} (tested from {MINIMUM} to {NEWEST_TESTED}) and torch {version} is "
            "newer: the package may work, but torch.export's internals move with each release; "
            f'pip install "{SUPPORTED}" for a tested release'
        )
        warnings.warn(message, UntestedTorchWarning, stacklevel=2)
        return message
    return None


# -- torch.autograd.Function ----------------------------------------------------------------------------------
#: ``Function.apply`` as the class holds it, put back after a capture replaced it: a Python ``classmethod``
#: (torch <= 2.13) or a ``classmethod_descriptor`` of torch's C extension (2.14)
FUNCTION_APPLY: Any = torch.autograd.Function.__dict__["apply"]


_APPLY_FUNCTION = getattr(FUNCTION_APPLY, "__func__", None)  # a classmethod's function takes the class first


def original_apply(cls: type, *args: Any, **kwargs: Any) -> Any:
    """Runs torch's own ``Function.apply`` for the ``autograd.Function`` class ``cls``, whatever
    ``Function.apply`` holds at the time (the capture of PythonOp replaces it).

    >>> class Double(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    >>> original_apply(Double, torch.ones(2))
    tensor([2., 2.])
    """
    if _APPLY_FUNCTION is not None:
        return _APPLY_FUNCTION(cls, *args, **kwargs)
    return FUNCTION_APPLY.__get__(None, cls)(*args, **kwargs)


def uses_setup_context(cls: type) -> bool:
    """Whether the ``autograd.Function`` class ``cls`` defines ``setup_context`` (its ``forward`` then takes no
    ``ctx``).

    >>> class Double(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    >>> uses_setup_context(Double)
    False
    """
    return cls.setup_context is not torch.autograd.Function.setup_context  # type: ignore[attr-defined]


# -- symbolic shapes --------------------------------------------------------------------------------------------
def backed_hints(shape_env: Any) -> Any:
    """The example values of a ``ShapeEnv``'s backed symbols, a mapping symbol -> value: ``backed_var_to_val``
    (every release of the range has it), else ``var_to_val`` (deprecated: reading it warns).

    >>> from torch.fx.experimental.symbolic_shapes import ShapeEnv
    >>> len(backed_hints(ShapeEnv()))
    0
    """
    hints = getattr(shape_env, "backed_var_to_val", None)
    return shape_env.var_to_val if hints is None else hints


# -- dynamo ---------------------------------------------------------------------------------------------------
def dynamo_allowed_callable_ids() -> Any:
    """The set-like registry of callables dynamo puts in the graph as they are (``allow_in_graph``), keyed by
    ``id()``: ``add`` and ``remove`` an id.

    >>> ids = dynamo_allowed_callable_ids()
    >>> callable(ids.add) and callable(ids.remove)
    True
    """
    from torch._dynamo import trace_rules

    return trace_rules._allowed_callable_ids


def has_mark_static_address() -> bool:
    """Whether ``torch._dynamo.mark_static_address`` exists (the patch of strict export replaces it).

    >>> has_mark_static_address()
    True
    """
    import torch._dynamo

    return hasattr(torch._dynamo, "mark_static_address")
