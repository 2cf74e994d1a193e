"""The converter registry, keyed by the aten overload (``aten::add.Tensor``).

Converters are plain functions ``fn(ctx, *args, **kwargs)`` registered with :func:`register`.
The registry is filled once per process when :mod:`experimental.torch_interpreter.ops` is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .provenance import target_key

Converter = Callable[..., Any]


class Registry:
    """Maps registry keys to converters.

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


#: The process-wide registry used by :func:`to_onnx`.
default_registry = Registry()
register = default_registry.register
