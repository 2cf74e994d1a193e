"""How one call of a custom op is written into a ``com.microsoft::PythonOp`` node and read back: the contract
between the converter that writes the node (``ops/python_op.py``) and the runtime that calls the op back
(``runtime/custom_op_calls.py``).

The node keeps onnxruntime's ``PythonOp`` schema (:mod:`.attributes`); its ``func_name`` is
``torch.ops.<namespace>.<op>.<overload>``. What that schema cannot hold goes into its ``comment`` attribute, a
JSON object: ``custom_op`` (the qualified name), ``module`` (the Python module that defined it, when known),
``objects`` (the constants that are no numbers: None, strings, dtypes, devices...; the node's
``input_pointer_scalars`` are indices into this list instead of object ids, so the model runs in any process),
``floats`` (float constants at full precision, the float attributes being float32) and ``tensor_lists``
(``Tensor[]`` arguments: one ``d`` per tensor in ``input_convention``, regrouped at run time).

>>> call, tensors = custom_call(torch.ops.aten.add.Tensor, ["x", 2.0], {}, lambda v: v == "x", "node 'add'")
>>> call.name, call.convention, call.arguments, tensors
('torch.ops.aten.add.Tensor', 'dcc', (None, 2.0, <default>), ['x'])
>>> read_comment(call.comment())["floats"]
{'1': 2.0}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConversionError
from ..provenance import target_key
from .attributes import constant_kind

#: ``func_name`` of a custom op's PythonOp node starts with this
PREFIX = "torch.ops."


# -- one call ---------------------------------------------------------------------------------------------------
@dataclass
class CustomOpCall:
    """One call of a custom op, as :func:`.attributes.node_attributes` reads it: every schema argument in
    order, tensors replaced by None (``d`` in ``convention``), constants (``c``) as given."""

    name: str
    qualname: str
    convention: str
    arguments: tuple
    requires_grads: tuple[int, ...]
    module: str | None
    training_mode: int = 0
    objects: list[Any] = field(default_factory=list)
    #: schema argument index -> number of tensors, for ``Tensor[]`` arguments (one ``d`` per tensor)
    lists: dict[int, int] = field(default_factory=dict)

    def pointer_id(self, value: Any) -> int:
        """Index of a non-number constant in :attr:`objects` (what ``input_pointer_scalars`` holds)."""
        self.objects.append(value)
        return len(self.objects) - 1

    def comment(self) -> str:
        """The JSON held by the ``comment`` attribute (call after the attributes are made)."""
        floats = {
            str(i): a
            for i, (c, a) in enumerate(zip(self.convention, self.arguments))
            if c == "c" and (isinstance(a, float) or (isinstance(a, (tuple, list)) and a and isinstance(a[0], float)))
        }
        return json.dumps(
            {
                "custom_op": self.qualname,
                "module": self.module,
                "objects": [_encode(o) for o in self.objects],
                "floats": {k: list(v) if isinstance(v, (tuple, list)) else v for k, v in floats.items()},
                **({"tensor_lists": {str(k): n for k, n in self.lists.items()}} if self.lists else {}),
            },
            sort_keys=True,
        )


class _Default:
    """An argument left to its default value: not passed at run time."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT_ARGUMENT = _Default()


def _encode(value: Any) -> Any:
    if value is None:
        return None
    if value is DEFAULT_ARGUMENT:
        return {"default": True}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return {"torch": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    raise TypeError(type(value).__name__)


#: the dtypes, layouts and memory formats a constant may name (``float32``, ``strided``, ``contiguous_format``)
_TORCH_CONSTANTS = {
    str(v).removeprefix("torch."): v
    for v in vars(torch).values()
    if isinstance(v, (torch.dtype, torch.layout, torch.memory_format))
}


def _decode(value: Any) -> Any:
    if value is None:
        return None
    if value.get("default"):
        return DEFAULT_ARGUMENT
    if "str" in value:
        return value["str"]
    if "torch" in value:  # looked up in a table, never getattr(torch, ...): a model attribute imports nothing
        if value["torch"] not in _TORCH_CONSTANTS:
            raise ValueError(f"PythonOp: {value['torch']!r} is no torch dtype, layout or memory format")
        return _TORCH_CONSTANTS[value["torch"]]
    if "device" in value:
        return torch.device(value["device"])
    raise ValueError(f"PythonOp: unknown constant encoding {value!r}")


def defining_module(op: torch._ops.OpOverload) -> str | None:
    """The Python module that defined the custom op (``torch.library.custom_op``, ``triton_op``, or a fake kernel
    registered in Python), None when unknown (an op from a C++ extension).

    >>> defining_module(torch.ops.aten.relu.default) is None
    True
    """
    qualname = f"{op.namespace}::{op._opname}"
    try:
        from torch._library.custom_ops import OPDEFS

        opdef = OPDEFS.get(qualname)
        if opdef is not None:
            return opdef._init_fn.__module__
    except (ImportError, AttributeError):  # torch's private tables moved: the module is then unknown
        pass
    try:
        from torch._library.simple_registry import singleton

        kernel = singleton.find(qualname).fake_impl.kernel
        func = getattr(kernel, "func", kernel)
        return getattr(func, "__module__", None)
    except (ImportError, AttributeError):
        return None


def _is_tensor_type(arg: Any) -> bool:
    return arg.type.isSubtypeOf(torch._C.OptionalType.ofTensor())


def written_arguments(op: torch._ops.OpOverload) -> list[str]:
    """The arguments ``op`` writes into (``Tensor(a!)`` in its schema): a PythonOp node never calls such an op.

    >>> written_arguments(torch.ops.aten.add_.Tensor), written_arguments(torch.ops.aten.add.Tensor)
    (['self'], [])
    """
    return [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def custom_call(
    op: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any], is_tensor: Callable[[Any], bool], where: str
) -> tuple[CustomOpCall, list[Any]]:
    """The :class:`CustomOpCall` of ``op(*args, **kwargs)`` (the converter's arguments: ``is_tensor`` tells a
    graph value), and the tensor arguments in order. ``where`` names the node in errors (see the module's
    docstring for an example)."""
    key = target_key(op)
    convention, constants, tensors = "", [], []
    lists: dict[int, int] = {}
    arguments = op._schema.arguments
    written = written_arguments(op)
    if written:
        raise ConversionError(
            f"{where}: {key} modifies its argument(s) {written} in place (mutates_args): a PythonOp node cannot "
            f"write into its inputs; register a converter for {key!r} or make the op return new tensors"
        )
    for i, arg in enumerate(arguments):
        if not arg.kwarg_only and i < len(args):
            value = args[i]
        elif arg.name in kwargs:
            value = kwargs[arg.name]
        elif arg.has_default_value():
            value = DEFAULT_ARGUMENT
        else:
            raise ConversionError(f"{where}: {key} is called without its argument {arg.name!r}")
        hint = f"register a converter for {key!r} (experimental.torch_interpreter.register) to export this call"
        if _is_tensor_type(arg) and is_tensor(value):
            convention += "d"
            constants.append(None)
            tensors.append(value)
            continue
        if is_tensor(value):
            raise ConversionError(
                f"{where}: argument {arg.name!r} ({arg.type}) of {key} is a dynamic value: PythonOp constants are "
                f"fixed at export; pass it as a tensor argument of the op, or {hint}"
            )
        if arg.type.isSubtypeOf(torch._C.ListType.ofTensors()) and isinstance(value, (list, tuple)):
            if not all(is_tensor(v) for v in value):
                raise ConversionError(f"{where}: argument {arg.name!r} of {key} is a Tensor[] holding {value!r}")
            lists[i] = len(value)  # one input per tensor, regrouped at run time
            convention += "d" * len(value)
            constants.extend([None] * len(value))
            tensors.extend(value)
            continue
        if isinstance(value, (list, tuple)) and any(is_tensor(v) for v in value):
            raise ConversionError(
                f"{where}: argument {arg.name!r} ({arg.type}) of {key} is a list holding tensors or dynamic sizes: "
                f"the PythonOp fallback passes tensors as separate arguments only; {hint}"
            )
        if isinstance(value, (list, tuple)):
            value = tuple(value)  # FX's immutable_list: the op receives a tuple at run time
        if not (value is None or value is DEFAULT_ARGUMENT or constant_kind(value) != "pointer"):
            try:
                _encode(value)
            except TypeError:
                raise ConversionError(
                    f"{where}: argument {arg.name!r} of {key} is a {type(value).__name__} ({value!r}), which a "
                    f"PythonOp node cannot store; {hint}"
                ) from None
        convention += "c"
        constants.append(value)
    call = CustomOpCall(
        name=PREFIX + f"{op.namespace}.{op._opname}.{op._overloadname}",
        qualname=key,
        convention=convention,
        arguments=tuple(constants),
        requires_grads=(0,) * len(convention),
        module=defining_module(op),
        lists=lists,
    )
    return call, tensors


# -- reading the comment back -------------------------------------------------------------------------------------
def read_comment(comment: str) -> dict[str, Any]:
    """The JSON object of a ``comment`` attribute, ``{}`` when it holds none.

    >>> read_comment('{"module": "mylib"}'), read_comment("not json")
    ({'module': 'mylib'}, {})
    """
    try:
        data = json.loads(comment) if comment else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def object_table(comment: str) -> tuple[Callable[[int], Any], dict[int, Any]]:
    """From the ``comment`` attribute: the function resolving ``input_pointer_scalars`` (indices) and the float
    constants at full precision by position.

    >>> pointer, floats = object_table('{"objects": [{"str": "tanh"}, null], "floats": {"2": 0.1}}')
    >>> pointer(0), pointer(1), floats
    ('tanh', None, {2: 0.1})
    """
    data = read_comment(comment)
    objects = [_decode(o) for o in data.get("objects", [])]

    def pointer(index: int) -> Any:
        if not 0 <= index < len(objects):
            raise ValueError(f"PythonOp: constant index {index} is not in the node's comment ({len(objects)} objects)")
        return objects[index]

    floats = {int(k): tuple(v) if isinstance(v, list) else v for k, v in data.get("floats", {}).items()}
    return pointer, floats


def tensor_lists(comment: str) -> dict[int, int]:
    """From the ``comment`` attribute: the ``Tensor[]`` arguments (schema index -> number of tensors).

    >>> tensor_lists('{"tensor_lists": {"0": 3}}')
    {0: 3}
    """
    return {int(k): int(n) for k, n in read_comment(comment).get("tensor_lists", {}).items()}
