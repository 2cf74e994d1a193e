"""What the sessions check of the feeds before a run, so that a wrong feed fails with a message naming the input
instead of onnxruntime's: the feeds are a dict of the model's inputs, no scalar baked in at export is given, each
feed has the input's element type, rank and static dimensions, and the size conditions of the model hold
(:mod:`.guards`). Messages name inputs, types and shapes, never values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from ..errors import RuntimeFeedError
from ..metadata import CONSTANT_INPUTS, constant_inputs
from .guards import SizeChecks
from .ort_values import NUMPY_OF, TYPE_OF_NUMPY, TYPE_OF_TORCH


def feed_type(value: Any) -> tuple[str | None, tuple[int, ...] | None]:
    """The onnxruntime type string and the shape of a feed (None, None for a Python scalar or an unknown object).

    >>> feed_type(torch.zeros(2, 3, dtype=torch.float16))
    ('tensor(float16)', (2, 3))
    >>> feed_type(np.arange(4))
    ('tensor(int64)', (4,))
    """
    if isinstance(value, ort.OrtValue):
        return value.data_type(), tuple(value.shape())
    if isinstance(value, torch.Tensor):
        return TYPE_OF_TORCH.get(value.dtype, f"torch.{value.dtype}"), tuple(value.shape)
    if isinstance(value, np.ndarray):
        if value.dtype.name == "bfloat16":
            return "tensor(bfloat16)", value.shape
        return TYPE_OF_NUMPY.get(value.dtype.type, f"numpy.{value.dtype}"), value.shape
    if isinstance(value, (bool, int, float, np.generic)):
        return None, ()
    return None, None


def _describe(type_: str | None, shape: Sequence[Any] | None) -> str:
    dims = "?" if shape is None else "[" + ", ".join(repr(d) if isinstance(d, str) else str(d) for d in shape) + "]"
    return f"{type_ or 'a Python scalar'} of shape {dims}"


def check_feed_types(inputs: Sequence[Any], feeds: Mapping[str, Any]) -> None:
    """Raises :class:`RuntimeFeedError` when a feed has another element type, rank or static dimension than
    the model input of its name (``inputs``: ``sess.get_inputs()``), or when the feeds give two sizes to one
    named dynamic axis. Messages name the input, the expected and the given type and shape, never values.

    >>> from types import SimpleNamespace as NodeArg
    >>> inputs = [NodeArg(name="x", type="tensor(float)", shape=["batch", 3])]
    >>> check_feed_types(inputs, {"x": torch.zeros(5, 3)})
    >>> check_feed_types(inputs, {"x": torch.zeros(5, 3, dtype=torch.float64)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: input 'x' expects tensor(float) of shape ['batch', 3], ...
    """
    sizes: dict[str, tuple[str, int]] = {}
    for arg in inputs:
        if arg.name not in feeds:
            continue
        type_, shape = feed_type(feeds[arg.name])
        expected = list(getattr(arg, "shape", None) or [])
        where = f"input {arg.name!r} expects {_describe(arg.type, expected)}, got {_describe(type_, shape)}"
        if type_ is not None and type_ != arg.type:
            np_type = NUMPY_OF.get(arg.type)
            torch_type = next((k for k, v in TYPE_OF_TORCH.items() if v == arg.type), None)
            hint = f"x.to({torch_type}) or x.astype(np.{np_type.__name__})" if np_type and torch_type else None
            raise RuntimeFeedError(where + (f": cast it first, e.g. {hint}" if hint else ""))
        if shape is None or getattr(arg, "shape", None) is None:
            continue
        if type_ is None and not shape:
            continue  # a Python scalar is converted to the input's type; onnxruntime checks its rank
        if len(shape) != len(expected):
            raise RuntimeFeedError(f"{where}: rank {len(shape)} instead of {len(expected)}")
        for axis, (want, have) in enumerate(zip(expected, shape)):
            if isinstance(want, int) and want != have:
                raise RuntimeFeedError(f"{where}: axis {axis} must be {want}")
            if isinstance(want, str) and want:
                first = sizes.setdefault(want, (arg.name, have))
                if first[1] != have:
                    raise RuntimeFeedError(
                        f"{where}: the dynamic axis {want!r} is {have} here but {first[1]} in input {first[0]!r}; "
                        f"every input sharing the axis {want!r} must have the same size along it"
                    )


#: the longest text of the scalars baked in at export read from a model's metadata, in characters
MAX_CONSTANT_INPUTS = 100_000


def _constant_inputs(meta: Mapping[str, str]) -> dict[str, Any]:
    """The scalars baked in at export (a Python literal, never evaluated as code), ``{}`` when the entry is too
    long, nests too deeply or is no dict: it only improves a message.

    >>> from experimental.torch_interpreter.metadata import CONSTANT_INPUTS
    >>> _constant_inputs({CONSTANT_INPUTS: "[" * 100_000}), _constant_inputs({CONSTANT_INPUTS: "{'a': 1}"})
    ({}, {'a': 1})
    """
    if len(meta.get(CONSTANT_INPUTS) or "") > MAX_CONSTANT_INPUTS:
        return {}
    try:
        constants = constant_inputs(meta)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return {}
    return constants if isinstance(constants, dict) else {}


def check_constant_feeds(meta: Mapping[str, str], names: Sequence[str]) -> None:
    """Raises :class:`RuntimeFeedError` when ``names`` (feeds the model has no input for) are scalars that the
    export baked in as constants (``metadata.CONSTANT_INPUTS`` in the model's metadata ``meta``).

    >>> from experimental.torch_interpreter.metadata import CONSTANT_INPUTS
    >>> check_constant_feeds({CONSTANT_INPUTS: "{'alpha': 0.5}"}, ["beta"])
    >>> check_constant_feeds({CONSTANT_INPUTS: "{'alpha': 0.5}"}, ["alpha"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: the model has no input for 'alpha' (exported as the constant 0.5): ...
    """
    if not names:
        return
    constants = _constant_inputs(meta)
    baked = {n: constants[n] for n in names if n in constants}
    if baked:
        shown = ", ".join(f"{n!r} (exported as the constant {v!r})" for n, v in baked.items())
        raise RuntimeFeedError(
            f"the model has no input for {shown}: this scalar was baked into the graph at export, so another "
            "value would be ignored. Export again with the value wanted, pass it as a tensor, or declare an int "
            "dynamic in dynamic_shapes."
        )


class FeedChecks:
    """Every check of the feeds of one model, in the order a run makes them (see the module's docstring).

    ``inputs`` are the model's inputs (``sess.get_inputs()``), ``size_checks`` its size conditions,
    ``baked`` the metadata the scalars baked in at export are read from (``{}``: not looked at).

    >>> from types import SimpleNamespace as NodeArg
    >>> checks = FeedChecks([NodeArg(name="x", type="tensor(float)", shape=[2])], SizeChecks({}), {})
    >>> checks.check({"x": torch.zeros(2)})
    >>> checks.check({"y": torch.zeros(2)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: the feeds do not match ...: missing ['x'] ; unknown ['y']
    """

    def __init__(self, inputs: Sequence[Any], size_checks: SizeChecks, baked: Mapping[str, str]):
        self.inputs = list(inputs)
        self.names = [i.name for i in self.inputs]
        self.size_checks = size_checks
        self.baked = baked

    def check(self, feeds: Mapping[str, Any]) -> None:
        """Raises :class:`RuntimeFeedError` naming the first feed that does not fit the model."""
        if not isinstance(feeds, Mapping):
            raise RuntimeFeedError(
                f"feeds must be a dict {{input name: tensor}}, not a {type(feeds).__name__}"
                + (f" of {len(feeds)} elements" if isinstance(feeds, Sequence) else "")
                + f"; the model inputs are {self.names}, e.g. "
                "sess.run(None, dict(zip([i.name for i in sess.get_inputs()], tensors)))"
            )
        missing = [n for n in self.names if n not in feeds]
        unknown = [n for n in feeds if n not in self.names]
        check_constant_feeds(self.baked, unknown)
        if missing or unknown:
            raise RuntimeFeedError(
                f"the feeds do not match the model inputs {self.names}: "
                + (f"missing {missing}" if missing else "")
                + (" ; " if missing and unknown else "")
                + (f"unknown {unknown}" if unknown else "")
            )
        check_feed_types(self.inputs, feeds)
        if self.size_checks:
            self.size_checks.check({name: feed_type(value)[1] for name, value in feeds.items()})
