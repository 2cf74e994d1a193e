"""The run side of a custom op exported as a ``com.microsoft::PythonOp`` node: the op found again from the
node's ``func_name`` in the process that runs the model (:func:`resolve_op`), its constants read and checked
against the op's schema (:func:`node_constants`), its arguments rebuilt from the node's inputs and constants
(:func:`call_arguments`). What the node holds is :mod:`experimental.torch_interpreter.python_op.encoding`'s
contract; what may be called, :mod:`.trust`'s policy: an op registered in this process, or defined in a module
the user allowed, never one of torch's own (aten...).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..errors import MalformedModelError, MissingCustomOpError, UntrustedCodeError
from ..provenance import is_torch_namespace
from ..python_op.attributes import decode_constants
from ..python_op.encoding import (
    DEFAULT_ARGUMENT,
    PREFIX,
    object_table,
    read_comment,
    tensor_lists,
    written_arguments,
)
from .trust import TrustPolicy, compiled_elsewhere, import_module, torch_owned

#: the type of ``torch.ops.<namespace>``, to tell a namespace from the other attributes of ``torch.ops``
_NAMESPACE_TYPE = type(torch.ops.aten)


def _op_parts(func_name: str, where: str) -> list[str]:
    parts = func_name[len(PREFIX) :].split(".")
    if len(parts) != 3 or not all(p.isidentifier() and not p.startswith("__") for p in parts):
        raise MalformedModelError(f"{where}: {func_name!r} is not torch.ops.<namespace>.<op>.<overload>")
    return parts


def registered_op(namespace: str, name: str, overload: str) -> torch._ops.OpOverload | None:
    """The op ``namespace::name.overload`` if it is registered in this process, else None; imports nothing.

    >>> registered_op("a2o_nowhere", "op", "default") is None, registered_op("aten", "relu", "default")
    (True, <OpOverload(op='aten.relu', overload='default')>)
    """
    static = inspect.getattr_static(torch.ops, namespace, None)
    if static is not None and not isinstance(static, _NAMESPACE_TYPE):  # torch.ops.load_library...
        return None
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError):
        return None
    return op if isinstance(op, torch._ops.OpOverload) and op.namespace == namespace else None


def _missing(where: str, qualname: str, module: str | None, imported: bool) -> MissingCustomOpError:
    if imported:
        what = f"importing {module} (the module that defined it at export) did not register it"
    elif module and module != "__main__":
        what = (
            f"import {module} (the module that defined it at export) before creating the session, or let the "
            f"session import it: InferenceSession(..., trusted_modules=({module!r},))"
        )
    elif module == "__main__":
        what = (
            "it was defined in the exporting script (__main__): move its definition to a module and import "
            "that module before creating the session"
        )
    else:
        what = (
            "import the library that registers it (its Python package, or torch.ops.load_library(...) for a "
            "C++ extension) before creating the session"
        )
    return MissingCustomOpError(
        f"{where} calls the custom op {qualname}, which is not registered in this process: {what}"
    )


def _module_of(comment: str) -> str | None:
    module = read_comment(comment).get("module")
    ok = isinstance(module, str) and module != "__main__" and all(p.isidentifier() for p in module.split("."))
    return module if ok else None


def _import_defining_module(module: str, policy: TrustPolicy, where: str, qualname: str) -> None:
    try:
        import_module(module, policy, f"{where} ({qualname})")
    except ModuleNotFoundError as e:
        raise MissingCustomOpError(
            f"{where} calls the custom op {qualname}: the module {module!r} that defined it at export is not found "
            f"({e})"
        ) from None


def resolve_op(
    func_name: str, comment: str, node_name: str = "", policy: TrustPolicy | None = None
) -> torch._ops.OpOverload:
    """The op a PythonOp node calls (``func_name`` = ``torch.ops.mylib.op.default``), registered in this process,
    or after importing the module that defined it at export (``comment``'s ``module``) when ``policy`` allows that
    module. Torch's own ops are refused (:class:`UntrustedCodeError`); :class:`MissingCustomOpError` names the
    module to import when the op is not registered.

    >>> resolve_op("torch.ops.aten.relu.default", "", "n0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.UntrustedCodeError: PythonOp node 'n0' calls aten::relu.default, ...
    """
    where = f"PythonOp node {node_name!r}"
    policy = policy or TrustPolicy()
    namespace, name, overload = _op_parts(func_name, where)
    qualname = f"{namespace}::{name}.{overload}"
    if is_torch_namespace(namespace):
        raise UntrustedCodeError(
            f"{where} calls {qualname}, an op of torch's own namespace {namespace!r}: a PythonOp node calls custom "
            "ops only and no option allows this (the exporter never writes it: the model was edited)"
        )
    op = registered_op(namespace, name, overload)
    if op is not None:
        return _callable(op, where, qualname, policy)
    module = _module_of(comment)
    imported = module is not None and policy.allows(module)
    if imported:
        _import_defining_module(module, policy, where, qualname)
        op = registered_op(namespace, name, overload)
    if op is None:
        in_main = read_comment(comment).get("module") == "__main__"
        raise _missing(where, qualname, "__main__" if in_main else module, imported)
    return _callable(op, where, qualname, policy)


def _callable(op: torch._ops.OpOverload, where: str, qualname: str, policy: TrustPolicy) -> torch._ops.OpOverload:
    if torch_owned(op):
        raise UntrustedCodeError(
            f"{where} calls {qualname}, an op registered by torch itself (namespace {op.namespace!r}): a PythonOp "
            "node calls the user's custom ops only and no option allows this (the exporter never writes it: the "
            "model was edited)"
        )
    library = compiled_elsewhere(op)
    if library is not None and not policy.allows_op(op.namespace, op._opname):
        raise UntrustedCodeError(
            f"{where} calls {qualname}, an op compiled into {os.path.basename(library)!r}: its kernel reads and writes "
            "memory as the node's inputs say, so a session calls it only when you name it: "
            f"InferenceSession(..., trusted_ops=({op.namespace + '::' + op._opname!r},)) or "
            f"({op.namespace + '::*'!r},) for the whole library"
        )
    written = written_arguments(op)
    if written:
        raise UntrustedCodeError(
            f"{where} calls {qualname}, which writes into its argument(s) {written}: the exporter never writes such "
            "a node (the runtime shares its tensors with the caller), the model was edited"
        )
    return op


def check_layout(op: torch._ops.OpOverload, convention: str, lists: Mapping[int, int], where: str = "") -> None:
    """Raises :class:`MalformedModelError` unless ``convention`` (one letter per node argument) fits ``op``'s
    schema, each ``Tensor[]`` argument of ``lists`` (schema index -> number of tensors) spanning that many ``d``.

    >>> check_layout(torch.ops.aten.add.Tensor, "dcc", {})
    >>> check_layout(torch.ops.aten.add.Tensor, "dc", {}, "node 'n'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MalformedModelError: node 'n': aten.add.Tensor takes 3 arguments ...
    """
    arguments = op._schema.arguments
    if any(not 0 <= i < len(arguments) or n < 0 for i, n in lists.items()):
        raise MalformedModelError(
            f"{where}: tensor_lists {dict(lists)} do not fit the {len(arguments)} arguments of {op}"
        )
    expected = len(arguments) + sum(n - 1 for n in lists.values())
    if expected != len(convention):
        raise MalformedModelError(
            f"{where}: {op} takes {len(arguments)} arguments ({expected} node inputs and "
            f"constants), the PythonOp node has {len(convention)} (convention {convention[:80]!r}): the op's schema "
            "changed since the export, or the node was edited"
        )
    position = 0
    for i in range(len(arguments)):
        span = lists.get(i, 1)
        if i in lists and set(convention[position : position + span]) - {"d"}:
            raise MalformedModelError(f"{where}: the Tensor[] argument {i} of {op} is not made of tensors (d)")
        position += span


def node_constants(
    attrs: Mapping[str, Any], op: torch._ops.OpOverload, where: str
) -> tuple[dict[int, Any], dict[int, int]]:
    """The constants of a custom op's node by position (``attrs``: :func:`.node_checks.node_attributes`) and its
    ``Tensor[]`` arguments, checked against ``op``'s schema; :class:`MalformedModelError` when they do not fit.

    >>> attrs = {"func_name": "torch.ops.aten.add.Tensor", "input_convention": "dcc", "input_float_scalars": [2.0],
    ...          "input_float_scalar_positions": [1], "input_pointer_scalars": [0],
    ...          "input_pointer_scalar_positions": [2], "comment": '{"objects": [{"default": true}]}'}
    >>> node_constants(attrs, torch.ops.aten.add.Tensor, "node 'n'")
    ({1: 2.0, 2: <default>}, {})
    """
    comment = attrs.get("comment", "")
    try:
        pointer, floats = object_table(comment)
        constants = decode_constants(attrs, pointer)
        lists = tensor_lists(comment)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as e:
        raise MalformedModelError(f"{where}: {e}") from None
    for position, value in floats.items():  # full precision, the attributes are float32
        if not _same_floats(constants.get(position), value):
            raise MalformedModelError(f"{where}: the comment's float {position} does not match the node's constants")
    constants.update(floats)
    check_layout(op, attrs["input_convention"], lists, where)
    return constants, lists


def _same_floats(stored: Any, value: Any) -> bool:
    if isinstance(stored, float):
        return isinstance(value, float)
    return (
        isinstance(stored, tuple)
        and isinstance(value, tuple)
        and len(stored) == len(value)
        and all(isinstance(v, float) for v in (*stored, *value))
    )


def call_arguments(
    op: torch._ops.OpOverload,
    convention: str,
    constants: Mapping[int, Any],
    tensors: Sequence[torch.Tensor],
    lists: Mapping[int, int] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments of ``op`` with ``tensors`` in the ``d`` positions (``lists``: the
    ``Tensor[]`` arguments by schema index, with their number of tensors); arguments left to their default at
    export are not passed.

    >>> call_arguments(torch.ops.aten.add.Tensor, "dcc", {1: 2.0, 2: DEFAULT_ARGUMENT}, [torch.tensor(1.0)])
    ([tensor(1.), 2.0], {})
    """
    lists = lists or {}
    arguments = op._schema.arguments
    check_layout(op, convention, lists, f"PythonOp calling {op}")
    it = iter(tensors)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    position = 0
    for i, arg in enumerate(arguments):
        if i in lists:
            value: Any = [next(it) for _ in range(lists[i])]
            position += lists[i]
        else:
            value = next(it) if convention[position] == "d" else constants[position]
            position += 1
        if value is DEFAULT_ARGUMENT:
            continue
        if arg.kwarg_only or kwargs or len(args) != i:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs
