"""The attributes of a ``com.microsoft::PythonOp`` node, read and checked before the runtime resolves, allocates
or calls anything for it: each attribute the runtime reads has its type, the convention matches the node's inputs,
output types and ranks match its outputs and stay within bounds, the ``comment`` is bounded JSON.

Nothing of a node is evaluated, unpickled or read as a memory address: ``input_pointer_scalars`` are keys of a
table (an autograd.Function's objects in the exporting process) or indices into the ``comment``'s list (a custom
op's); the sizes a node gives (ranks, counts) are checked here first. A failed check raises
:class:`~experimental.torch_interpreter.errors.MalformedModelError` naming the node and the attribute.
"""

from __future__ import annotations

import json
from typing import Any

import onnx
import onnx_ir as ir

from ..errors import MalformedModelError

#: the largest rank of a PythonOp output (``output_tensor_ranks``)
MAX_RANK = 128
#: the longest ``func_name``, in characters
MAX_NAME = 1024
#: the longest ``comment`` (a custom op's JSON) or ``input_convention``, in bytes
MAX_COMMENT = 1 << 20

_A = onnx.AttributeProto
#: the type of each attribute the runtime reads (ONNX Runtime's schema); other attributes are not read
EXPECTED = {
    "func_name": _A.STRING,
    "input_convention": _A.STRING,
    "comment": _A.STRING,
    "output_tensor_types": _A.INTS,
    "output_tensor_ranks": _A.INTS,
    "training_mode": _A.INT,
    "input_requires_grads": _A.INTS,
    "input_pointer_scalars": _A.INTS,
    "input_pointer_scalar_positions": _A.INTS,
    **{f"input_{k}_scalars": _A.FLOATS if k == "float" else _A.INTS for k in ("bool", "int", "float")},
    **{f"input_{k}_tuples": _A.FLOATS if k == "float" else _A.INTS for k in ("bool", "int", "float")},
    **{f"input_{k}_{p}": _A.INTS for k in ("bool", "int", "float") for p in ("scalar_positions", "tuple_positions")},
    **{f"input_{k}_tuple_begins": _A.INTS for k in ("bool", "int", "float")},
}
_TENSOR_TYPES = {int(t) for t in ir.DataType if t != ir.DataType.UNDEFINED}
#: the attributes of a PythonOpGrad node the runtime reads
GRAD_EXPECTED = {
    "func_name": _A.STRING,
    "output_convention": _A.STRING,
    "output_tensor_requires_grads": _A.INTS,
    "output_tensor_types": _A.INTS,
    "output_tensor_ranks": _A.INTS,
    "input_tensor_types": _A.INTS,
    "input_tensor_ranks": _A.INTS,
}


def _where(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node {node.name!r}"


def _value(node: onnx.NodeProto, attr: onnx.AttributeProto, expected: dict[str, int] = EXPECTED) -> Any:
    if attr.type != expected[attr.name]:
        raise MalformedModelError(
            f"{_where(node)}: attribute {attr.name!r} is a {_A.AttributeType.Name(attr.type)}, the schema says "
            f"{_A.AttributeType.Name(expected[attr.name])}"
        )
    if attr.type == _A.INT:
        return int(attr.i)
    if attr.type != _A.STRING:
        return list(onnx.helper.get_attribute_value(attr))
    limit = MAX_NAME if attr.name == "func_name" else MAX_COMMENT
    if len(attr.s) > limit:
        raise MalformedModelError(
            f"{_where(node)}: attribute {attr.name!r} holds {len(attr.s)} bytes, more than {limit}"
        )
    try:
        return attr.s.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedModelError(f"{_where(node)}: attribute {attr.name!r} is not UTF-8 text") from None


def _check_convention(node: onnx.NodeProto, convention: str) -> None:
    if set(convention) - {"c", "d"}:
        raise MalformedModelError(f"{_where(node)}: input_convention {convention[:80]!r} holds other letters than c, d")
    if convention.count("d") != len(node.input) or not all(node.input):
        raise MalformedModelError(
            f"{_where(node)}: input_convention {convention[:80]!r} has {convention.count('d')} tensor argument(s), "
            f"the node {len(node.input)} input(s) {list(node.input)[:8]}"
        )


def _check_outputs(node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    if not node.output:
        raise MalformedModelError(f"{_where(node)}: no output (output 0 is the context)")
    count = len(node.output) - 1
    for name in ("output_tensor_types", "output_tensor_ranks"):
        if name in attrs and len(attrs[name]) != count:
            raise MalformedModelError(f"{_where(node)}: {name} has {len(attrs[name])} entries for {count} output(s)")
    _check_types_and_ranks(node, attrs)


def _check_types_and_ranks(node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    for side in ("input", "output"):
        # a PythonOpGrad's input type 0: that output of the forward gets no gradient
        known = _TENSOR_TYPES | {0} if side == "input" else _TENSOR_TYPES
        wrong = [t for t in attrs.get(f"{side}_tensor_types", []) if t not in known]
        if wrong:
            raise MalformedModelError(f"{_where(node)}: {side}_tensor_types holds unknown element types {wrong[:8]}")
        wrong = [r for r in attrs.get(f"{side}_tensor_ranks", []) if not 0 <= r <= MAX_RANK]
        if wrong:
            raise MalformedModelError(f"{_where(node)}: {side}_tensor_ranks {wrong[:8]} out of [0, {MAX_RANK}]")


def _check_training(node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    mode = attrs.get("training_mode", 0)
    if mode not in (0, 1):
        raise MalformedModelError(f"{_where(node)}: training_mode is {mode}, not 0 or 1")
    grads = attrs.get("input_requires_grads")
    if grads is None:
        if mode == 1:
            raise MalformedModelError(f"{_where(node)}: training_mode=1 without input_requires_grads")
        return
    if len(grads) != len(attrs["input_convention"]) or set(grads) - {0, 1}:
        raise MalformedModelError(
            f"{_where(node)}: input_requires_grads {grads[:8]} is not one 0 or 1 per argument of input_convention "
            f"{attrs['input_convention'][:80]!r}"
        )


def _check_comment(node: onnx.NodeProto, comment: str) -> None:
    if not comment.lstrip().startswith(("{", "[")):
        return
    try:
        json.loads(comment)
    except RecursionError:
        raise MalformedModelError(f"{_where(node)}: the comment attribute nests too deeply") from None
    except ValueError:  # not JSON: an autograd.Function's free text, read as no entry (encoding.read_comment)
        pass


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The attributes of a PythonOp node the runtime reads, as Python values (strings decoded), checked (see
    the module's docstring); other attributes are left out.

    >>> node = onnx.helper.make_node("PythonOp", ["x"], ["ctx", "y"], domain="com.microsoft", func_name="m.F",
    ...                              input_convention="d", output_tensor_types=[1], output_tensor_ranks=[2])
    >>> node_attributes(node)["output_tensor_ranks"]
    [2]
    >>> node_attributes(onnx.helper.make_node("PythonOp", ["x"], ["ctx", "y"], func_name="m.F",
    ...                                       input_convention="dd"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MalformedModelError: PythonOp node '': input_convention 'dd' has 2 tensor argument(s), the node 1 input(s) ['x']
    """
    attrs = {a.name: _value(node, a) for a in node.attribute if a.name in EXPECTED}
    for name in ("func_name", "input_convention"):
        if name not in attrs:
            raise MalformedModelError(f"{_where(node)}: the attribute {name!r} is missing")
    _check_convention(node, attrs["input_convention"])
    _check_training(node, attrs)
    _check_outputs(node, attrs)
    _check_comment(node, attrs.get("comment", ""))
    return attrs


def grad_node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The attributes of a PythonOpGrad node the runtime reads, checked: input 0 is the context, one output per
    tensor input of the forward (``output_convention``), ``output_tensor_requires_grads`` one entry per output.

    >>> node = onnx.helper.make_node("PythonOpGrad", ["ctx", "dy"], ["dx"], domain="com.microsoft", func_name="m.F",
    ...                              output_convention="dc", output_tensor_requires_grads=[1])
    >>> grad_node_attributes(node)["output_tensor_requires_grads"]
    [1]
    """
    attrs = {a.name: _value(node, a, GRAD_EXPECTED) for a in node.attribute if a.name in GRAD_EXPECTED}
    for name in ("func_name", "output_convention"):
        if name not in attrs:
            raise MalformedModelError(f"{_where(node)}: the attribute {name!r} is missing")
    convention = attrs["output_convention"]
    if not node.output:
        raise MalformedModelError(f"{_where(node)}: no output (one gradient per tensor input of the forward)")
    if set(convention) - {"c", "d"} or convention.count("d") != len(node.output):
        raise MalformedModelError(
            f"{_where(node)}: output_convention {convention[:80]!r} does not describe its {len(node.output)} output(s)"
        )
    if not node.input or not node.input[0]:
        raise MalformedModelError(f"{_where(node)}: input 0 (the context) is missing")
    for name in ("output_tensor_requires_grads", "output_tensor_types", "output_tensor_ranks"):
        if name in attrs and len(attrs[name]) != len(node.output):
            raise MalformedModelError(
                f"{_where(node)}: {name} has {len(attrs[name])} entries for {len(node.output)} output(s)"
            )
    _check_types_and_ranks(node, attrs)
    return attrs
