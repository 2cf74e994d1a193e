"""What the Python code a model's ``PythonOp`` nodes name may be: the session's trust policy.

A model file names code: an ``autograd.Function`` by its qualified name (``func_name``), a custom op by
``torch.ops.<namespace>.<op>.<overload>`` and the module that defined it (``comment``). Like ``torch.load``'s
``weights_only``, :class:`~experimental.torch_interpreter.InferenceSession` imports and calls nothing the user
did not allow:

* an ``autograd.Function`` must be exported or registered in this process (``register_function``), or live in a
  module the user allowed (``trusted_modules``, or ``trust_python_code=True``), which is then imported;
* a custom op must be registered in this process (its library imported by the user) or defined in an allowed
  module, which is then imported; torch's own ops are refused whatever the options (:func:`torch_owned`: deny by
  default, an op is callable only when its registration is known to come from outside torch), and so are ops
  that write into their arguments (the exporter never writes them: the runtime shares tensors with the caller);
  an op compiled into another library (torchvision's, whose kernels read and write memory as the node's inputs
  say: transformers imports torchvision with any model class) only when the user names it (``trusted_ops``,
  ``"torchvision::nms"`` or ``"torchvision::*"``);
* anything else raises :class:`~experimental.torch_interpreter.errors.UntrustedCodeError` naming the node, the
  module or op and the option, before anything is imported.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import torch

from ..errors import MissingFunctionError, UntrustedCodeError
from ..provenance import is_torch_namespace
from ..python_op.encoding import defining_module

_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__))
#: the files a compiled registration names (the dispatcher records the C++ source of TORCH_LIBRARY blocks)
_COMPILED = (".cpp", ".cc", ".cxx", ".c", ".cu", ".h", ".hpp", ".so")


def registration_file(op: torch._ops.OpOverload) -> str | None:
    """The file that registered ``op``'s schema, as torch's dispatcher records it (``registered at FILE:LINE``):
    a Python file for an op defined with ``torch.library.Library``, a C++ source for a compiled one; None when
    the dispatcher does not say.

    >>> registration_file(torch.ops.aten.relu.default).endswith(".cpp")
    True
    """
    try:
        dump = torch._C._dispatch_dump(f"{op.namespace}::{op._opname}")
    except (RuntimeError, AttributeError):
        return None
    for line in dump.splitlines():
        if line.startswith("debug: registered at "):
            return line[len("debug: registered at ") :].rsplit(":", 1)[0]
    return None


def torch_owned(op: torch._ops.OpOverload) -> bool:
    """Whether ``op`` belongs to torch (deny by default): a namespace of torch's
    (:func:`~experimental.torch_interpreter.provenance.is_torch_namespace`), an op whose defining Python module is
    torch's (``torch.library.custom_op``, a fake kernel), whose schema was registered by a file of torch's package
    (``torch.library.Library`` in ``torch.distributed``, ``torch._dynamo``...), or whose origin is unknown. A user's op,
    defined in Python outside torch or compiled into an extension whose namespace torch does not use, is not.

    >>> torch_owned(torch.ops.aten.relu.default)
    True
    """
    if is_torch_namespace(op.namespace):
        return True
    module = defining_module(op)
    if module is not None:
        return module == "torch" or module.startswith("torch.")
    path = registration_file(op)
    if path is None:
        return True
    if path.endswith(".py"):  # torch/_library/custom_ops.py too: a custom_op whose module is unknown
        real = os.path.realpath(path)
        return real == _TORCH_DIR or real.startswith(_TORCH_DIR + os.sep)
    return False  # compiled: torch's compiled namespaces are all in TORCH_NAMESPACES (checked by the tests)


def _check_prefix(prefix: str) -> str:
    name = prefix.removesuffix(".") if isinstance(prefix, str) else ""
    if not name or not all(p.isidentifier() for p in name.split(".")):
        raise ValueError(
            f"trusted_modules holds module names or prefixes such as 'mypkg' or 'mypkg.layers', not {prefix!r} "
            "(trust_python_code=True allows every module)"
        )
    return name


@dataclass(frozen=True)
class TrustPolicy:
    """The modules a session may import to find a ``PythonOp`` node's code: those named in ``modules`` and their
    submodules, or every module with ``trust_all``.

    >>> policy = TrustPolicy.create(["mypkg"])
    >>> policy.allows("mypkg.layers"), policy.allows("mypkg_evil"), TrustPolicy().allows("mypkg")
    (True, False, False)
    """

    modules: tuple[str, ...] = ()
    trust_all: bool = False
    #: compiled ops the user allows by name (``namespace::op`` or ``namespace::*``)
    ops: tuple[str, ...] = ()

    @classmethod
    def create(
        cls,
        trusted_modules: str | Sequence[str] = (),
        trust_python_code: bool = False,
        trusted_ops: str | Sequence[str] = (),
    ) -> TrustPolicy:
        """The policy of ``InferenceSession(..., trusted_modules=..., trust_python_code=..., trusted_ops=...)``
        (a string is one module or op); raises ``ValueError`` for a name that is no module or op name.

        >>> TrustPolicy.create("mypkg.", trust_python_code=False)
        TrustPolicy(modules=('mypkg',), trust_all=False, ops=())
        >>> TrustPolicy.create(trusted_ops="torchvision::nms").allows_op("torchvision", "nms")
        True
        """
        if isinstance(trusted_modules, str):
            trusted_modules = (trusted_modules,)
        if isinstance(trusted_ops, str):
            trusted_ops = (trusted_ops,)
        if not isinstance(trust_python_code, bool):
            raise TypeError(f"trust_python_code is True or False, not {trust_python_code!r}")
        for op in trusted_ops:
            namespace, sep, name = op.partition("::") if isinstance(op, str) else ("", "", "")
            if not sep or not namespace.isidentifier() or not (name == "*" or name.isidentifier()):
                raise ValueError(f"trusted_ops holds names such as 'torchvision::nms' or 'torchvision::*', not {op!r}")
        return cls(tuple(_check_prefix(p) for p in trusted_modules), trust_python_code, tuple(trusted_ops))

    def allows_op(self, namespace: str, name: str) -> bool:
        """Whether the user named the compiled op ``namespace::name`` (or its whole namespace)."""
        return f"{namespace}::{name}" in self.ops or f"{namespace}::*" in self.ops

    def allows(self, module: str) -> bool:
        """Whether the session may import ``module`` (its parent packages come with it, as Python imports them)."""
        return self.trust_all or any(module == m or module.startswith(m + ".") for m in self.modules)


def compiled_elsewhere(op: torch._ops.OpOverload) -> str | None:
    """The source file of the compiled code that registered ``op``'s schema (a C++ extension: torchvision's
    ``roi_align.cpp``), or None for an op whose schema was defined in Python (its code is Python's and torch's); a
    fake kernel registered in Python beside it (torchvision's) does not make the op Python's.

    >>> compiled_elsewhere(torch.ops.aten.relu.default).endswith(".cpp")
    True
    """
    path = registration_file(op)
    if path is None or not path.endswith(_COMPILED):
        return None  # a .py file, <stdin>, a notebook cell: Python
    return path


def option_hint(module: str) -> str:
    """The options that let a session import ``module``, as refusals name them.

    >>> option_hint("mypkg.layers")
    "InferenceSession(..., trusted_modules=('mypkg.layers',)) lets the session import it, trust_python_code=True any module (only for a model file you trust as much as code you run)"
    """
    return (
        f"InferenceSession(..., trusted_modules=({module!r},)) lets the session import it, trust_python_code=True "
        "any module (only for a model file you trust as much as code you run)"
    )


def import_module(module: str, policy: TrustPolicy, where: str) -> ModuleType:
    """Imports ``module`` if ``policy`` allows it; raises :class:`UntrustedCodeError` (``where`` names the node
    and what it calls) before importing anything otherwise, ``ModuleNotFoundError`` when it does not exist and
    :class:`MissingFunctionError` when its import fails.

    >>> import_module("this", TrustPolicy(), "PythonOp node 'n'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.UntrustedCodeError: PythonOp node 'n': the module 'this' is not allowed...
    """
    if not policy.allows(module):
        raise UntrustedCodeError(
            f"{where}: the module {module!r} is not allowed, nothing was imported; {option_hint(module)}"
        )
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise
        raise MissingFunctionError(f"{where}: importing the allowed module {module!r} failed: {e}") from e
    except ImportError as e:
        raise MissingFunctionError(f"{where}: importing the allowed module {module!r} failed: {e}") from e
