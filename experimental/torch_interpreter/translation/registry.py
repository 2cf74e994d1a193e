"""The converter registry, keyed by the aten overload (``aten::add.Tensor``).

Converters are plain functions ``fn(ctx, *args, **kwargs)`` registered with :func:`register`.
The registry is filled once per process when :mod:`experimental.torch_interpreter.ops` is imported.

Two more things live here so that the interpreter and the export policies need not know each other:
*fallback converters*, found by name rather than by an op's key (``python_op``: any custom op exported as a
PythonOp node, which the custom-ops policy hands out per export), and the *hints* an "operator(s) have no
converter" error adds (:func:`missing_hint`), installed by the policies that know an option to suggest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..provenance import target_key

Converter = Callable[..., Any]
#: a function returning one line of advice for the keys without a converter, or None
MissingHint = Callable[[Sequence[str]], str | None]
_MISSING_HINTS: list[MissingHint] = []


class Registry:
    """Maps registry keys to converters.

    >>> import torch
    >>> reg = Registry()
    >>> @reg.register("aten::relu.default")
    ... def relu(ctx, x):
    ...     return ctx.op("Relu", x)
    >>> reg.get(torch.ops.aten.relu.default) is relu
    True
    >>> reg.supported()
    ['aten::relu.default']
    """

    def __init__(self) -> None:
        self._converters: dict[str, Converter] = {}
        self._fallbacks: dict[str, Converter] = {}

    def register(self, *keys: str) -> Callable[[Converter], Converter]:
        """Decorator registering one converter under one or several keys."""

        def decorator(fn: Converter) -> Converter:
            for key in keys:
                if key in self._converters:
                    raise ValueError(
                        f"{key!r} is registered twice: {self._converters[key].__qualname__} "
                        f"and {fn.__qualname__}"
                    )
                self._converters[key] = fn
            return fn

        return decorator

    def get(self, target: Any) -> Converter | None:
        """The converter of an FX target, or None."""
        return self._converters.get(target if isinstance(target, str) else target_key(target))

    def __contains__(self, target: Any) -> bool:
        return self.get(target) is not None

    def supported(self) -> list[str]:
        """Sorted list of the covered keys."""
        return sorted(self._converters)

    def with_converter(self, key: str, converter: Converter) -> Registry:
        """A copy of this registry (its converters and fallbacks) where ``key`` has ``converter``, this one left as
        it is: to try a converter of one's own for one op, or to test the investigation tools with one wrong on
        purpose.

        >>> import torch
        >>> from experimental.torch_interpreter import default_registry, to_onnx
        >>> def relu_as_abs(ctx, x):
        ...     return ctx.op("Abs", x)
        >>> mine = default_registry.with_converter("aten::relu.default", relu_as_abs)
        >>> mine.get("aten::relu.default") is relu_as_abs, default_registry.get("aten::relu.default") is relu_as_abs
        (True, False)
        >>> [n.op_type for n in to_onnx(torch.nn.ReLU(), (torch.randn(3),), registry=mine).graph.node]
        ['Abs']
        """
        copy = Registry()
        copy._converters = {**self._converters, key: converter}
        copy._fallbacks = dict(self._fallbacks)
        return copy

    def register_fallback(self, name: str) -> Callable[[Converter], Converter]:
        """Decorator registering a converter found by ``name`` (:meth:`fallback`) instead of an op's key: one
        converter for ops that have no key of their own in the registry (custom ops exported as PythonOp).

        >>> reg = Registry()
        >>> @reg.register_fallback("python_op")
        ... def any_custom_op(ctx, *args, **kwargs):
        ...     pass
        >>> reg.fallback("python_op") is any_custom_op, reg.supported()
        (True, [])
        """

        def decorator(fn: Converter) -> Converter:
            if name in self._fallbacks:
                raise ValueError(
                    f"the fallback {name!r} is registered twice: {self._fallbacks[name].__qualname__} "
                    f"and {fn.__qualname__}"
                )
            self._fallbacks[name] = fn
            return fn

        return decorator

    def fallback(self, name: str) -> Converter | None:
        """The fallback converter registered under ``name``, or None."""
        return self._fallbacks.get(name)


def add_missing_hint(hint: MissingHint) -> None:
    """Installs ``hint``: :func:`missing_hint` asks it for a line each time operators have no converter."""
    if hint not in _MISSING_HINTS:
        _MISSING_HINTS.append(hint)


def missing_hint(keys: Sequence[str]) -> str | None:
    """The lines the installed hints add to an "operator(s) have no converter" error for ``keys``, None when
    none has anything to say.

    >>> missing_hint([]) is None
    True
    """
    lines = [line for line in (hint(keys) for hint in _MISSING_HINTS) if line]
    return "\n".join(lines) if lines else None


#: The process-wide registry used by :func:`to_onnx`.
default_registry = Registry()
register = default_registry.register
register_fallback = default_registry.register_fallback
