"""Process-wide tables: the captured ``Function.apply`` calls (what the custom op's ``key`` stands for), the
Function classes by qualified name, and the Python objects passed to them by reference.

Nothing here imports a module by itself: :func:`resolve_function` finds a class exported or registered in this
process, and looks further only through the importer its caller gives (the runtime's, which imports only what
the user allowed, ``runtime/trust.py``).
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import MalformedModelError, MissingFunctionError, UntrustedCodeError
from .attributes import constant_kind

_LOCK = threading.Lock()
_CALLS: dict[str, Call] = {}
_SIGNATURES: dict[tuple, str] = {}
_COUNTER = itertools.count()
#: func_name -> Function class, filled at export time (classes defined in a function cannot be imported back)
_FUNCTIONS: dict[str, type] = {}
#: id(obj) -> obj for the arguments stored by reference (``input_pointer_scalars``); kept alive for the process
_POINTERS: dict[int, Any] = {}
#: id(obj) -> the func_names of the classes that received it at export
_POINTER_OWNERS: dict[int, set[str]] = {}


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
    #: dtypes and ranks of the tensor arguments, for a call that is differentiated (``python_op/training``)
    tensor_dtypes: tuple[torch.dtype, ...] = ()
    tensor_ranks: tuple[int, ...] = ()

    def tensor_requires_grads(self) -> list[int]:
        """``requires_grads`` of the tensor arguments only."""
        return [r for c, r in zip(self.convention, self.requires_grads) if c == "d"]

    def split_sizes(self, sizes: Sequence[Any]) -> list[list[Any]]:
        """The shapes of the tensor arguments that get a gradient, from their sizes concatenated."""
        shapes, start = [], 0
        for rank, r in zip(self.tensor_ranks, self.tensor_requires_grads()):
            if r:
                shapes.append(list(sizes[start : start + rank]))
                start += rank
        return shapes

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
    tensors: Sequence[torch.Tensor] = (),
) -> str:
    """Stores one call and returns its key; the same call (class, constants, layout, rule; and for a call
    that is differentiated, the dtypes and ranks of its ``tensors``) gets the same key."""
    dtypes = tuple(t.dtype for t in tensors)
    ranks = tuple(t.dim() for t in tensors)
    signature = (
        id(cls),
        convention,
        tuple(_freeze(a) for a in arguments),
        tuple(requires_grads),
        id(rule),
        training_mode,
        dtypes,
        ranks,
    )
    with _LOCK:
        key = _SIGNATURES.get(signature)
        if key is not None and _CALLS[key].cls is cls:
            return key
        name = func_name(cls)
        key = f"{name}#{next(_COUNTER)}"
        _CALLS[key] = Call(
            cls, name, convention, tuple(arguments), tuple(requires_grads), rule, training_mode,
            tensor_dtypes=dtypes, tensor_ranks=ranks,
        )
        _SIGNATURES[signature] = key
        _FUNCTIONS[name] = cls
        for c, a in zip(convention, arguments):
            if c == "c" and constant_kind(a) == "pointer":
                _POINTERS.setdefault(id(a), a)
                _POINTER_OWNERS.setdefault(id(a), set()).add(name)
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


def pointer(address: int, owner: str | None = None) -> Any:
    """The object stored by reference at export time (``input_pointer_scalars``); with ``owner`` (a
    ``func_name``), only an object that class received at export: a node cannot hand one class's argument to
    another. The address is a key of this table, never read as memory.

    >>> pointer(0)
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MissingFunctionError: the PythonOp argument passed by reference (0x0) is unknown in this process: arguments that are not bools, ints, floats or tuples of them live only in the process that exported the model
    """
    if address in _POINTERS and (owner is None or owner in _POINTER_OWNERS.get(address, ())):
        return _POINTERS[address]
    raise MissingFunctionError(
        f"the PythonOp argument passed by reference ({address:#x}) is unknown in this process: arguments that "
        "are not bools, ints, floats or tuples of them live only in the process that exported the model"
    )


def registered_function(name: str) -> type | None:
    """The ``torch.autograd.Function`` class named ``name`` if it was exported in this process or registered
    with :func:`register_function`, else None.

    >>> registered_function("a2o_nowhere.Function") is None
    True
    """
    return _FUNCTIONS.get(name)


def check_function_name(name: str, where: str = "PythonOp") -> list[str]:
    """The dotted parts of a ``func_name``; raises :class:`MalformedModelError` (``where`` names the node) unless
    each is a Python identifier that is not a dunder name (``__class__``...).

    >>> check_function_name("mypkg.layers.MyFunction")
    ['mypkg', 'layers', 'MyFunction']
    """
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) < 2 or not all(p.isidentifier() and not p.startswith("__") for p in parts):
        raise MalformedModelError(
            f"{where}: func_name {name[:200]!r} is not the qualified name of a class (module.Class, Python identifiers)"
        )
    return parts


def resolve_function(name: str, import_module: Callable[[str], Any] | None = None, where: str = "PythonOp") -> type:
    """The ``torch.autograd.Function`` class named ``name``: exported or registered in this process; otherwise,
    when ``import_module`` is given, looked up in the longest module of ``name`` it imports (it raises to refuse a
    module, ``ModuleNotFoundError`` for a module that does not exist), by exact name: the class must be defined
    there under that qualified name (``func_name(cls) == name``), found in the objects' dictionaries without
    running any ``__getattr__``. Without it nothing is imported; ``where`` names the node in errors.

    >>> resolve_function("torch.autograd.function.Function")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.UntrustedCodeError: PythonOp: the autograd.Function ... is not registered in this process...
    """
    cls = _FUNCTIONS.get(name)
    if cls is not None:
        return cls
    parts = check_function_name(name, where)
    if import_module is None:
        raise UntrustedCodeError(
            f"PythonOp: the autograd.Function {name!r} is not registered in this process and nothing may be "
            "imported: register the class (from experimental.torch_interpreter.python_op.table import "
            "register_function; register_function(cls))"
        )
    not_found: ModuleNotFoundError | None = None
    for i in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj: Any = import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
                not_found = e
                continue  # that module does not exist: the name may go on with a class inside a shorter module
            raise
        obj = _defined_in(obj, parts[i:])
        if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) and func_name(obj) == name:
            return obj
        break
    else:  # not even the first part imports
        raise MissingFunctionError(
            f"{where}: the autograd.Function {name!r} cannot be found: its module {parts[0]!r} was allowed but "
            f"importing it failed ({not_found}); Python looks for it in sys.path {sys.path[:4]}... (the working "
            f"directory is {os.getcwd()!r}): install its package, add its folder to sys.path, or import it "
            "yourself before creating the session"
        )
    raise MissingFunctionError(
        f"{where}: cannot find the autograd.Function {name!r}: no module of that name defines a class of that "
        "qualified name in this process (a class is found where it is defined, not through what a module imports)"
    )


def _defined_in(obj: Any, names: Sequence[str]) -> Any:
    """The attribute path ``names`` of ``obj`` read from the objects' dictionaries only: no ``__getattr__``
    (torch's lazy submodules, a module's hooks) and no property runs."""
    for attr in names:
        obj = inspect.getattr_static(obj, attr, None)
    return obj


def register_function(cls: type, name: str | None = None) -> None:
    """Makes ``cls`` callable by PythonOp nodes whose ``func_name`` is ``name`` (default: its qualified name),
    e.g. for a class defined inside a function, in a process that did not export the model.

    >>> class Twice(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    >>> register_function(Twice, "mymodels.Twice")
    >>> registered_function("mymodels.Twice") is Twice
    True
    """
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise TypeError(f"register_function expects a torch.autograd.Function subclass, not {cls!r}")
    _FUNCTIONS[name or func_name(cls)] = cls
