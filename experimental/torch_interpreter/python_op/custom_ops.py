"""Custom ops without a converter (``torch.library.custom_op``, ``triton_op``, C++ extensions, ``torch.ops.mylib.*``):
the export policy that decides which become one ``com.microsoft::PythonOp`` node, called back through
``torch.ops`` at run time.

:func:`with_custom_ops` returns the registry ``to_onnx`` translates with, completed by the fallback converter
(``ops/python_op.py``, found in the registry under :data:`PYTHON_OP` with
:meth:`~experimental.torch_interpreter.translation.registry.Registry.fallback`) for every custom op of the graph the
policy sends to ``python_op``; :func:`missing_hint`, installed in the registry, names the option when a custom op has no
converter. How one call is written into the node and read back is :mod:`.encoding`'s; the runtime side is
``runtime/custom_op_calls.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from ..provenance import is_torch_namespace, target_key
from ..translation.registry import Converter, Registry, add_missing_hint, default_registry

logger = logging.getLogger(__name__)

#: what a custom op without converter becomes
PYTHON_OP = "python_op"
ERROR = "error"
MODES = (PYTHON_OP, ERROR)
#: the default mode: refuse, the message naming the option (see ``_doc/python_op.rst``, "Custom ops", for why)
DEFAULT = ERROR

CustomOps = str | Mapping[Any, Any] | None


def is_custom_op(target: Any) -> bool:
    """Whether an FX target is an op of a namespace that is not torch's (``torch.ops.mylib.op.default``).

    >>> is_custom_op(torch.ops.aten.relu.default)
    False
    """
    return isinstance(target, torch._ops.OpOverload) and not is_torch_namespace(target.namespace)


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
            fallback[key] = default_registry.fallback(PYTHON_OP)
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
    python = ("operator", "math", "builtins", "complex")  # Python's operators and the project's complex pairs
    custom = [k for k in keys if "::" in k and not is_torch_namespace(k.partition("::")[0])]
    custom = [k for k in custom if k.partition("::")[0] not in python]
    if not custom:
        return None
    return (
        f"{', '.join(custom)} {'is a custom op' if len(custom) == 1 else 'are custom ops'}: "
        "to_onnx(..., custom_ops='python_op') exports each call as one com.microsoft::PythonOp node that "
        "experimental.torch_interpreter.InferenceSession runs by calling the op back (see _doc/python_op.rst)."
    )


add_missing_hint(missing_hint)
