"""The run side of a custom op exported as a ``com.microsoft::PythonOp`` node: the op found again from the
node's ``func_name`` in the process that runs the model (:func:`resolve_op`), and its arguments rebuilt from
the node's inputs and constants (:func:`call_arguments`). What the node holds is
:mod:`experimental.torch_interpreter.python_op.encoding`'s contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..errors import MissingCustomOpError
from ..python_op.encoding import DEFAULT_ARGUMENT, PREFIX, read_comment


def resolve_op(func_name: str, comment: str, node_name: str = "") -> torch._ops.OpOverload:
    """The op a PythonOp node calls (``func_name`` = ``torch.ops.mylib.op.default``), found through ``torch.ops``
    in this process; :class:`MissingCustomOpError` names the module to import when the library is not loaded.

    >>> resolve_op("torch.ops.aten.relu.default", "")
    <OpOverload(op='aten.relu', overload='default')>
    """
    parts = func_name[len(PREFIX) :].split(".")
    if len(parts) != 3:
        raise ValueError(f"PythonOp {node_name!r}: {func_name!r} is not torch.ops.<namespace>.<op>.<overload>")
    namespace, name, overload = parts
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError):
        module = read_comment(comment).get("module")
        if module and module != "__main__":
            what = f"import {module} (the module that defined it at export) before creating the session"
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
        raise MissingCustomOpError(
            f"PythonOp node {node_name!r} calls the custom op {namespace}::{name}.{overload}, which is not "
            f"registered in this process: {what}"
        ) from None


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
    expected = len(arguments) + sum(n - 1 for n in lists.values())
    if expected != len(convention):
        raise ValueError(
            f"{op} takes {len(arguments)} arguments ({expected} node inputs and constants), the PythonOp node has "
            f"{len(convention)} (convention {convention!r}): the op's schema changed since the export"
        )
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
