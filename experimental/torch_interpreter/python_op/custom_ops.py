"""Custom ops without a converter (``torch.library.custom_op``, ``triton_op``, C++ extensions, ``torch.ops.mylib.*``)
exported as one ``com.microsoft::PythonOp`` node, called back through ``torch.ops`` at run time.

Export side: :func:`with_custom_ops` returns the registry ``to_onnx`` translates with, completed by the
fallback converter (``ops/python_op.py``) for every custom op of the graph the policy sends to ``python_op``;
:func:`custom_call` describes one call the way :func:`.attributes.node_attributes` writes it.

Run side: :func:`resolve_op` finds the op from ``func_name`` (``torch.ops.mylib.op.default``) in the process
that runs the model, :func:`call_arguments` rebuilds its arguments.

The node keeps onnxruntime's ``PythonOp`` schema. What that schema cannot hold goes into its ``comment``
attribute, a JSON object: ``custom_op`` (the qualified name), ``module`` (the Python module that defined it,
when known), ``objects`` (the constants that are no numbers: None, strings, dtypes, devices...; the node's
``input_pointer_scalars`` are indices into this list instead of object ids, so the model runs in any
process), ``floats`` (float constants at full precision, the float attributes being float32) and
``tensor_lists`` (``Tensor[]`` arguments: one ``d`` per tensor in ``input_convention``, regrouped at run time).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConversionError, MissingCustomOpError
from ..provenance import target_key
from ..registry import Converter, Registry

logger = logging.getLogger(__name__)

#: what a custom op without converter becomes
PYTHON_OP = "python_op"
ERROR = "error"
MODES = (PYTHON_OP, ERROR)
#: the default mode: refuse, the message naming the option (see ``_doc/python_op.rst``, "Custom ops", for why)
DEFAULT = ERROR
#: ``func_name`` of a custom op's PythonOp node starts with this
PREFIX = "torch.ops."
#: namespaces that are torch's own operator sets, never a user's kernel
TORCH_NAMESPACES = frozenset({"aten", "prims", "aten2onnx"})

CustomOps = str | Mapping[Any, Any] | None


def is_custom_op(target: Any) -> bool:
    """Whether an FX target is an op of a non-aten namespace (``torch.ops.mylib.op.default``).

    >>> is_custom_op(torch.ops.aten.relu.default)
    False
    """
    return isinstance(target, torch._ops.OpOverload) and target.namespace not in TORCH_NAMESPACES


def op_key(op: Any) -> str:
    """The registry key (``mylib::op.default``) or packet key (``mylib::op``) of an op, a ``CustomOpDef`` or a
    name.

    >>> op_key(torch.ops.aten.relu.default), op_key(torch.ops.aten.relu), op_key("mylib::op")
    ('aten::relu.default', 'aten::relu', 'mylib::op')
    """
    if isinstance(op, str):
        return op
    if isinstance(op, torch._ops.OpOverload):
        return target_key(op)
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op._qualified_op_name
    qualname = getattr(op, "_qualname", None)  # torch.library.custom_op / triton_op
    if isinstance(qualname, str):
        return qualname
    raise TypeError(
        f"custom_ops keys are ops (torch.ops.mylib.op or .default, a torch.library.custom_op) or their names "
        f"('mylib::op', 'mylib::op.default'), not {op!r}"
    )


class Policy:
    """What ``to_onnx(..., custom_ops=...)`` asks: a mode for every custom op, or a dict whose entries (an op
    or its name, with or without overload) give a mode or a converter.

    >>> Policy({"mylib::op": "python_op"}).resolve("mylib::op.default"), Policy(None).resolve("mylib::other.default")
    ('python_op', 'error')
    """

    def __init__(self, policy: CustomOps = None):
        self.default = DEFAULT
        self.entries: dict[str, str | Converter] = {}
        if isinstance(policy, str):
            self.default = _check_mode(policy, "custom_ops")
        elif isinstance(policy, Mapping):
            for key, value in policy.items():
                if not callable(value):
                    _check_mode(value, f"custom_ops[{key!r}]")
                self.entries[op_key(key)] = value
        elif policy is not None:
            raise TypeError(
                f"custom_ops is 'python_op', 'error' or a dict {{op or name: mode or converter}}, not "
                f"{type(policy).__name__}"
            )

    def resolve(self, key: str) -> str | Converter:
        """The mode or converter for the overload ``key`` (``mylib::op.default``)."""
        packet = key.rpartition(".")[0]
        for k in (key, packet):
            if k in self.entries:
                return self.entries[k]
        return self.default


def _check_mode(mode: Any, where: str) -> str:
    if mode not in MODES:
        raise ValueError(f"{where} must be one of {MODES} or a converter (a callable), not {mode!r}")
    return mode


class CustomOpRegistry(Registry):
    """A registry seen through two layers: converters given in ``custom_ops`` (first), the base registry, then
    the PythonOp fallback (last: a registered converter always wins over it)."""

    def __init__(self, base: Registry, explicit: Mapping[str, Converter], fallback: Mapping[str, Converter]):
        super().__init__()
        self._base = base
        self._explicit = dict(explicit)
        self._fallback = dict(fallback)

    def get(self, target: Any) -> Converter | None:
        key = target if isinstance(target, str) else target_key(target)
        return self._explicit.get(key) or self._base.get(key) or self._fallback.get(key)

    def register(self, *keys: str) -> Callable[[Converter], Converter]:
        return self._base.register(*keys)

    def supported(self) -> list[str]:
        return sorted({*self._explicit, *self._base.supported(), *self._fallback})


def _call_functions(gm: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            yield node
        elif node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _call_functions(sub)


def with_custom_ops(registry: Registry, gm: torch.fx.GraphModule, custom_ops: CustomOps = None) -> Registry:
    """``registry`` completed for the custom ops of ``gm`` (subgraphs included): the converters ``custom_ops``
    gives, and the PythonOp fallback for the ops without converter whose mode is ``python_op``. Ops in mode
    ``error`` stay without converter (``to_onnx`` then reports them with the others)."""
    from ..ops.python_op import custom_op_python_op  # the converter, loaded with the others

    policy = Policy(custom_ops)
    explicit: dict[str, Converter] = {}
    fallback: dict[str, Converter] = {}
    for node in _call_functions(gm):
        if not is_custom_op(node.target):
            continue
        key = target_key(node.target)
        entry = policy.resolve(key)
        if callable(entry):
            explicit[key] = entry
        elif key not in registry and entry == PYTHON_OP:
            fallback[key] = custom_op_python_op
    if fallback:
        logger.info(
            "custom op(s) without converter exported as com.microsoft::PythonOp nodes, run by "
            "experimental.torch_interpreter.InferenceSession: %s; register a converter for a pure ONNX graph",
            ", ".join(sorted(fallback)),
        )
    if not explicit and not fallback:
        return registry
    return CustomOpRegistry(registry, explicit, fallback)


def missing_hint(keys: Sequence[str]) -> str | None:
    """The line an "operator(s) have no converter" error adds when some of ``keys`` are custom ops.

    >>> missing_hint(["aten::relu.default"]) is None
    True
    """
    custom = [k for k in keys if "::" in k and k.partition("::")[0] not in TORCH_NAMESPACES | {"higher_order"}]
    custom = [k for k in custom if k.partition("::")[0] not in ("operator", "math", "builtins")]
    if not custom:
        return None
    return (
        f"{', '.join(custom)} {'is a custom op' if len(custom) == 1 else 'are custom ops'}: "
        "to_onnx(..., custom_ops='python_op') exports each call as one com.microsoft::PythonOp node that "
        "experimental.torch_interpreter.InferenceSession runs by calling the op back (see _doc/python_op.rst)."
    )


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


def _decode(value: Any) -> Any:
    if value is None:
        return None
    if value.get("default"):
        return DEFAULT_ARGUMENT
    if "str" in value:
        return value["str"]
    if "torch" in value:
        return getattr(torch, value["torch"])
    if "device" in value:
        return torch.device(value["device"])
    raise ValueError(f"PythonOp: unknown constant encoding {value!r}")


def defining_module(op: torch._ops.OpOverload) -> str | None:
    """The Python module that defined the custom op (``torch.library.custom_op``, ``triton_op``, or a fake kernel
    registered in Python), None when unknown (an op from a C++ extension)."""
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


def custom_call(
    op: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any], is_tensor: Callable[[Any], bool], where: str
) -> tuple[CustomOpCall, list[Any]]:
    """The :class:`CustomOpCall` of ``op(*args, **kwargs)`` (the converter's arguments: ``is_tensor`` tells a
    graph value), and the tensor arguments in order. ``where`` names the node in errors."""
    key = target_key(op)
    convention, constants, tensors = "", [], []
    lists: dict[int, int] = {}
    arguments = op._schema.arguments
    written = [a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write]
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
        if not (value is None or value is DEFAULT_ARGUMENT or _numbers(value)):
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


def _numbers(value: Any) -> bool:
    from .attributes import constant_kind

    return constant_kind(value) != "pointer"


# -- run time ---------------------------------------------------------------------------------------------------
def resolve_op(func_name: str, comment: str, node_name: str = "") -> torch._ops.OpOverload:
    """The op a PythonOp node calls (``func_name`` = ``torch.ops.mylib.op.default``), found through ``torch.ops``
    in this process; :class:`MissingCustomOpError` names the module to import when the library is not loaded."""
    parts = func_name[len(PREFIX) :].split(".")
    if len(parts) != 3:
        raise ValueError(f"PythonOp {node_name!r}: {func_name!r} is not torch.ops.<namespace>.<op>.<overload>")
    namespace, name, overload = parts
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError):
        module = _metadata(comment).get("module")
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


def _metadata(comment: str) -> dict[str, Any]:
    try:
        data = json.loads(comment) if comment else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def object_table(comment: str) -> tuple[Callable[[int], Any], dict[int, Any]]:
    """From the ``comment`` attribute: the function resolving ``input_pointer_scalars`` (indices) and the float
    constants at full precision by position."""
    data = _metadata(comment)
    objects = [_decode(o) for o in data.get("objects", [])]

    def pointer(index: int) -> Any:
        if not 0 <= index < len(objects):
            raise ValueError(f"PythonOp: constant index {index} is not in the node's comment ({len(objects)} objects)")
        return objects[index]

    floats = {int(k): tuple(v) if isinstance(v, list) else v for k, v in data.get("floats", {}).items()}
    return pointer, floats


def tensor_lists(comment: str) -> dict[int, int]:
    """From the ``comment`` attribute: the ``Tensor[]`` arguments (schema index -> number of tensors)."""
    return {int(k): int(n) for k, n in _metadata(comment).get("tensor_lists", {}).items()}


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
