"""The attributes of ``com.microsoft::PythonOp`` (ONNX Runtime's schema), written from a captured call and read
back by the runtime.

Every argument of ``forward`` after ``ctx`` has one character in ``input_convention``: ``d`` for a tensor (an
input of the node), ``c`` for a constant. Constants go by kind into ``input_{bool,int,float}_scalars`` or
``input_{bool,int,float}_tuples`` (concatenated, each tuple starting at its ``*_begins`` entry), with their
argument index in ``*_positions``; any other object (None, a string, a list of mixed types...) is passed by
reference in ``input_pointer_scalars``, which only means something in the process that exported the model.
Lists of numbers are stored as tuples (the function receives a tuple back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

if TYPE_CHECKING:
    from .table import Call

DOMAIN = "com.microsoft"
OP_TYPE = "PythonOp"
#: the node running a PythonOp's backward (ONNX Runtime's training schema)
GRAD_OP_TYPE = "PythonOpGrad"
_INT64 = (-(2**63), 2**63 - 1)
_KINDS = ("bool", "int", "float")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]


def constant_kind(value: Any) -> str:
    """How a constant argument is stored: ``bool``, ``int``, ``float``, ``bool_tuple``, ``int_tuple``,
    ``float_tuple`` or ``pointer``.

    >>> [constant_kind(v) for v in (True, 3, 0.5, (2, 3), [1.0], (), (1, 2.0), None, "gelu")]
    ['bool', 'int', 'float', 'int_tuple', 'float_tuple', 'int_tuple', 'pointer', 'pointer', 'pointer']
    """
    if isinstance(value, bool):
        return "bool"
    if _is_int(value):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        if all(isinstance(v, bool) for v in value) and value:
            return "bool_tuple"
        if all(_is_int(v) for v in value):
            return "int_tuple"
        if all(isinstance(v, float) for v in value):
            return "float_tuple"
    return "pointer"


def node_attributes(
    call: Call | Any,
    input_types: Sequence[int],
    input_ranks: Sequence[int],
    output_types: Sequence[int],
    output_ranks: Sequence[int],
    comment: str = "",
    pointer_id: Callable[[Any], int] = id,
) -> list[ir.Attr]:
    """The attributes of the PythonOp node of ``call`` (tensor types are ONNX element types).

    ``call`` has the attributes ``name``, ``convention``, ``arguments``, ``requires_grads`` and
    ``training_mode`` (a :class:`.table.Call`, or a custom op's call); ``pointer_id`` gives what
    ``input_pointer_scalars`` stores for an object that is no number (default: its ``id``)."""
    scalars: dict[str, tuple[list, list]] = {k: ([], []) for k in _KINDS}
    tuples: dict[str, tuple[list, list, list]] = {k: ([], [], []) for k in _KINDS}
    pointers: tuple[list, list] = ([], [])
    for position, (conv, value) in enumerate(zip(call.convention, call.arguments)):
        if conv == "d":
            continue
        kind = constant_kind(value)
        if kind in scalars:
            scalars[kind][0].append(int(value) if kind == "bool" else value)
            scalars[kind][1].append(position)
        elif kind.endswith("_tuple"):
            values, positions, begins = tuples[kind[: -len("_tuple")]]
            begins.append(len(values))
            positions.append(position)
            values.extend(int(v) if kind == "bool_tuple" else v for v in value)
        else:
            pointers[0].append(pointer_id(value))
            pointers[1].append(position)

    attrs = [
        ir.AttrString("func_name", call.name),
        ir.AttrString("input_convention", call.convention),
        ir.AttrInt64s("input_requires_grads", list(call.requires_grads)),
        ir.AttrInt64s("input_tensor_types", [int(t) for t in input_types]),
        ir.AttrInt64s("input_tensor_ranks", list(input_ranks)),
    ]
    for kind in _KINDS:
        values, positions = scalars[kind]
        if positions:
            make = ir.AttrFloat32s if kind == "float" else ir.AttrInt64s
            attrs += [make(f"input_{kind}_scalars", values), ir.AttrInt64s(f"input_{kind}_scalar_positions", positions)]
    for kind in _KINDS:
        values, positions, begins = tuples[kind]
        if positions:
            make = ir.AttrFloat32s if kind == "float" else ir.AttrInt64s
            attrs += [
                make(f"input_{kind}_tuples", values),
                ir.AttrInt64s(f"input_{kind}_tuple_positions", positions),
                ir.AttrInt64s(f"input_{kind}_tuple_begins", begins),
            ]
    if pointers[1]:
        attrs += [
            ir.AttrInt64s("input_pointer_scalars", pointers[0]),
            ir.AttrInt64s("input_pointer_scalar_positions", pointers[1]),
        ]
    attrs += [
        ir.AttrInt64s("output_tensor_types", [int(t) for t in output_types]),
        ir.AttrInt64s("output_tensor_ranks", list(output_ranks)),
        ir.AttrInt64("training_mode", call.training_mode),
        ir.AttrInt64("safe_run_mode", 1),
        ir.AttrString("comment", comment),
    ]
    return attrs


def decode_constants(attrs: Mapping[str, Any], pointer: Any) -> dict[int, Any]:
    """The constant arguments of a PythonOp node by position, rebuilt from its attributes (``attrs`` maps
    names to Python values); ``pointer(address)`` resolves the arguments passed by reference. The layout is
    checked before anything is decoded (:func:`check_constant_layout`): the work is linear in the attributes."""
    check_constant_layout(attrs)
    constants: dict[int, Any] = {}
    cast = {"bool": bool, "int": int, "float": float}
    for kind in _KINDS:
        values = attrs.get(f"input_{kind}_scalars", [])
        positions = attrs.get(f"input_{kind}_scalar_positions", [])
        _check_lengths(kind + " scalars", values, positions)
        for v, p in zip(values, positions):
            constants[int(p)] = cast[kind](v)
        values = list(attrs.get(f"input_{kind}_tuples", []))
        positions = attrs.get(f"input_{kind}_tuple_positions", [])
        begins = list(attrs.get(f"input_{kind}_tuple_begins", []))
        _check_lengths(kind + " tuples", begins, positions)
        ends = begins[1:] + [len(values)]
        for p, b, e in zip(positions, begins, ends):
            constants[int(p)] = tuple(cast[kind](v) for v in values[b:e])
    addresses = attrs.get("input_pointer_scalars", [])
    positions = attrs.get("input_pointer_scalar_positions", [])
    _check_lengths("pointer scalars", addresses, positions)
    for a, p in zip(addresses, positions):
        constants[int(p)] = pointer(int(a))
    convention = attrs["input_convention"]
    if len(constants) != convention.count("c"):  # each position is a c of the convention, once (checked above)
        raise ValueError(
            f"PythonOp {attrs.get('func_name')!r}: constant positions {sorted(constants)} do not match "
            f"input_convention {convention!r}"
        )
    return constants


def check_constant_layout(attrs: Mapping[str, Any]) -> None:
    """Raises ``ValueError`` unless the constants of a PythonOp node (``attrs``: names to Python values) fill the
    ``c`` positions of its ``input_convention`` once each, and each kind's tuples start at 0 with nondecreasing
    ``*_tuple_begins`` within their values: what lets :func:`decode_constants` decode them in linear time (tuples
    that overlap or repeat would not).

    >>> check_constant_layout({"input_convention": "dcc", "input_int_tuples": [1, 2, 3],
    ...                        "input_int_tuple_begins": [0, 0], "input_int_tuple_positions": [1, 2]})
    >>> check_constant_layout({"input_convention": "dc", "input_int_tuples": [1, 2],
    ...                        "input_int_tuple_begins": [1, 0], "input_int_tuple_positions": [1]})
    Traceback (most recent call last):
    ...
    ValueError: PythonOp: input_int_tuple_begins [1, 0] do not start at 0 and grow within the 2 value(s)
    """
    convention = attrs["input_convention"]
    seen: set[int] = set()
    keys = [f"input_{k}_scalar_positions" for k in _KINDS] + [f"input_{k}_tuple_positions" for k in _KINDS]
    for key in [*keys, "input_pointer_scalar_positions"]:
        for p in attrs.get(key, []):
            if not isinstance(p, int) or not 0 <= p < len(convention) or convention[p] != "c" or p in seen:
                raise ValueError(
                    f"PythonOp: {key} holds {p!r}: the constant positions are those of the c of "
                    f"input_convention {convention[:80]!r}, each once"
                )
            seen.add(p)
    for kind in _KINDS:
        begins = list(attrs.get(f"input_{kind}_tuple_begins", []))
        count = len(attrs.get(f"input_{kind}_tuples", []))
        if begins and (
            begins[0] != 0 or begins[-1] > count or any(b > a for a, b in zip(begins[1:], begins[:-1]))
        ):
            raise ValueError(
                f"PythonOp: input_{kind}_tuple_begins {begins[:8]} do not start at 0 and grow within the {count} "
                "value(s)"
            )


def _check_lengths(what: str, a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise ValueError(f"PythonOp: the {what} and their positions have different lengths ({len(a)} != {len(b)})")


def grad_node_attributes(
    call: Call | Any,
    grad_types: Sequence[int],
    grad_ranks: Sequence[int],
    input_types: Sequence[int],
) -> list[ir.Attr]:
    """The attributes of the ``PythonOpGrad`` node of a differentiated ``call`` (a :class:`.table.Call` with
    ``tensor_dtypes`` and ``tensor_ranks``): its inputs are the context (input 0) and the gradients of the
    forward's outputs (``grad_types``, ``grad_ranks``), its outputs the gradients of the forward's tensor inputs
    (of types ``input_types``, ranks ``call.tensor_ranks``), in order, those whose ``output_tensor_requires_grads``
    is 0 left unread.

    As ONNX Runtime's gradient builder writes it: ``output_convention`` is the forward's ``input_convention``,
    the ``input_tensor_*`` describe the incoming gradients, the ``output_tensor_*`` the gradients returned."""
    wanted = call.tensor_requires_grads()
    return [
        ir.AttrString("func_name", call.name),
        ir.AttrString("output_convention", call.convention),
        ir.AttrInt64s("input_tensor_types", [int(t) for t in grad_types]),
        ir.AttrInt64s("input_tensor_ranks", list(grad_ranks)),
        ir.AttrInt64s("output_tensor_types", [int(t) for t in input_types]),
        ir.AttrInt64s("output_tensor_ranks", list(call.tensor_ranks)),
        ir.AttrInt64s("output_tensor_requires_grads", list(wanted)),
        ir.AttrInt64("safe_run_mode", 1),
        ir.AttrString("comment", ""),
    ]
