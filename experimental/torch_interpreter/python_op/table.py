"""Process-wide tables: the captured ``Function.apply`` calls (what the custom op's ``key`` stands for), the
Function classes by qualified name, and the Python objects passed to them by reference."""

from __future__ import annotations

import importlib
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .attributes import constant_kind

_LOCK = threading.Lock()
_CALLS: dict[str, Call] = {}
_SIGNATURES: dict[tuple, str] = {}
_COUNTER = itertools.count()
#: func_name -> Function class, filled at export time (classes defined in a function cannot be imported back)
_FUNCTIONS: dict[str, type] = {}
#: id(obj) -> obj for the arguments stored by reference (``input_pointer_scalars``); kept alive for the process
_POINTERS: dict[int, Any] = {}


def func_name(cls: type) -> str:
    """The fully qualified name of a class, as ``PythonOp``'s ``func_name`` attribute holds it.

    >>> func_name(torch.autograd.Function)
    'torch.autograd.function.Function'
    """
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass
class Call:
    """One captured ``Function.apply`` call.

    ``arguments`` holds every argument of ``forward`` after ``ctx``, tensors replaced by None; ``convention``
    says which ones are tensors (``d``) and which constants (``c``).
    """

    cls: type
    name: str
    convention: str
    arguments: tuple
    requires_grads: tuple[int, ...]
    rule: Callable[..., Any] | None
    training_mode: int
    #: "tensor" when ``apply`` returns one tensor, "tuple" or "list" otherwise (set by the first run)
    output_kind: str | None = field(default=None)

    def bind(self, tensors: Sequence[torch.Tensor]) -> list[Any]:
        """The arguments of ``forward`` (after ``ctx``) with ``tensors`` in the ``d`` positions."""
        if len(tensors) != self.convention.count("d"):
            raise ValueError(
                f"{self.name} expects {self.convention.count('d')} tensors (convention {self.convention!r}), "
                f"got {len(tensors)}"
            )
        it = iter(tensors)
        return [next(it) if c == "d" else a for c, a in zip(self.convention, self.arguments)]

    def outputs(self, result: Any) -> list[torch.Tensor]:
        """The tensors ``apply`` returned, as a list; records whether it returned one tensor or a sequence."""
        if isinstance(result, torch.Tensor):
            kind, outs = "tensor", [result]
        elif isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
            kind, outs = ("list" if isinstance(result, list) else "tuple"), list(result)
        else:
            raise TypeError(
                f"{self.name}.forward returned {type(result).__name__}: a PythonOp node returns tensors only "
                "(one tensor or a non-empty tuple of tensors)"
            )
        self.output_kind = kind
        return outs

    def structure(self, outs: Sequence[Any]) -> Any:
        """What ``apply`` returns for the outputs ``outs`` of the custom op."""
        if self.output_kind == "tensor":
            return outs[0]
        return list(outs) if self.output_kind == "list" else tuple(outs)


def _freeze(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    return ("id", id(value))


def register(
    cls: type,
    arguments: Sequence[Any],
    convention: str,
    requires_grads: Sequence[int],
    rule: Callable[..., Any] | None,
    training_mode: int,
) -> str:
    """Stores one call and returns its key; the same call (class, constants, layout, rule) gets the same key."""
    signature = (
        id(cls),
        convention,
        tuple(_freeze(a) for a in arguments),
        tuple(requires_grads),
        id(rule),
        training_mode,
    )
    with _LOCK:
        key = _SIGNATURES.get(signature)
        if key is not None and _CALLS[key].cls is cls:
            return key
        name = func_name(cls)
        key = f"{name}#{next(_COUNTER)}"
        _CALLS[key] = Call(cls, name, convention, tuple(arguments), tuple(requires_grads), rule, training_mode)
        _SIGNATURES[signature] = key
        _FUNCTIONS[name] = cls
        for c, a in zip(convention, arguments):
            if c == "c" and constant_kind(a) == "pointer":
                _POINTERS.setdefault(id(a), a)
    return key


def get(key: str) -> Call:
    """The call a custom op's key stands for."""
    try:
        return _CALLS[key]
    except KeyError:
        raise KeyError(
            f"no captured autograd.Function call has the key {key!r} in this process: the key is valid only in the "
            "process that captured the model"
        ) from None


def pointer(address: int) -> Any:
    """The object stored by reference at export time (``input_pointer_scalars``)."""
    try:
        return _POINTERS[address]
    except KeyError:
        raise LookupError(
            f"the PythonOp argument passed by reference ({address:#x}) is unknown in this process: arguments that "
            "are not bools, ints, floats or tuples of them live only in the process that exported the model"
        ) from None


def resolve_function(name: str) -> type:
    """The ``torch.autograd.Function`` class named ``name``: exported in this process, or imported by name."""
    cls = _FUNCTIONS.get(name)
    if cls is not None:
        return cls
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
            _FUNCTIONS[name] = obj
            return obj
        break
    raise LookupError(
        f"PythonOp: cannot find the autograd.Function {name!r}: import the module that defines it, or register "
        "the class with experimental.torch_interpreter.python_op.register_function(cls)"
    )


def register_function(cls: type, name: str | None = None) -> None:
    """Makes ``cls`` callable by PythonOp nodes whose ``func_name`` is ``name`` (default: its qualified name),
    e.g. for a class defined inside a function, in a process that did not export the model."""
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"register_function expects a torch.autograd.Function subclass, not {cls!r}")
    _FUNCTIONS[name or func_name(cls)] = cls
