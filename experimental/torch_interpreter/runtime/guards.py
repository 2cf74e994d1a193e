"""The conditions on input sizes an ONNX model carries in its ``metadata_props``, checked on the feeds.

Two keys written by :func:`~experimental.torch_interpreter.to_onnx` (:mod:`~experimental.torch_interpreter.metadata`):
``RANGE_CONSTRAINTS`` (the ranges torch.export narrowed on dynamic axes) and ``SHAPE_GUARDS`` (conditions the graph
relies on). :class:`SizeChecks` reads them once and raises a
:class:`~experimental.torch_interpreter.RuntimeFeedError` naming the input, the axis, the condition and where
it comes from when a feed breaks one. The conditions are Python expressions read by a small evaluator that
accepts only integers, arithmetic, comparisons, ``and``/``or``/``not``, ``min``/``max``/``ceil``/``floor``
and ``shape(input, axis)``: a model file never runs code. A condition is at most :data:`MAX_CONDITION`
characters, every value it computes at most :data:`MAX_BITS` bits, and a model holds at most
:data:`MAX_METADATA` characters of them, so that they cannot make the check take memory or time;
entries that do not have the expected form are not checked (a warning says so).
"""

from __future__ import annotations

import ast
import json
import logging
import math
import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from ..errors import MalformedModelError, RuntimeFeedError
from ..metadata import RANGE_CONSTRAINTS, SHAPE_GUARDS

logger = logging.getLogger(__name__)

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: Fraction(a) / Fraction(b),
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: lambda a, b: _power(a, b),
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "abs": abs}
#: the longest condition read, in characters
MAX_CONDITION = 10_000
#: the largest value a condition may compute, in bits (sizes and their products need far less)
MAX_BITS = 256
#: the most characters of size conditions (each of the two metadata entries) a model may hold
MAX_METADATA = 100_000


def _bits(value: Any) -> int:
    if isinstance(value, Fraction):
        return max(value.numerator.bit_length(), value.denominator.bit_length())
    return abs(int(value)).bit_length() if isinstance(value, (int, float)) and math.isfinite(value) else 0


def _bounded(value: Any) -> Any:
    if _bits(value) > MAX_BITS:
        raise ValueError(f"a value of more than {MAX_BITS} bits in a size condition")
    return value


def _power(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` when the result fits in :data:`MAX_BITS` bits.

    >>> _power(2, 10)
    1024
    >>> _power(10, 10**6)
    Traceback (most recent call last):
    ...
    ValueError: the power 10 ** 1000000 in a size condition exceeds 256 bits
    """
    if max(_bits(base), 1) * abs(int(exponent)) > MAX_BITS:
        raise ValueError(f"the power {base} ** {exponent} in a size condition exceeds {MAX_BITS} bits")
    return operator.pow(base, exponent)


def parse(text: str) -> ast.Expression:
    """The condition ``text`` parsed and checked once (at most :data:`MAX_CONDITION` characters, only the forms
    :func:`evaluate` reads); ``ValueError`` otherwise.

    >>> parse("__import__('os')")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unexpected Call(func=Name(id='__import__'... in a size condition
    """
    if not isinstance(text, str):
        raise ValueError(f"a size condition is text, not {type(text).__name__}")
    if len(text) > MAX_CONDITION:
        raise ValueError(f"a size condition of {len(text)} characters (more than {MAX_CONDITION})")
    try:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if not _readable(node):
                raise ValueError(f"unexpected {ast.dump(node)[:80]} in a size condition")
    except (RecursionError, MemoryError):
        raise ValueError("a size condition nests too deeply") from None
    return tree


_NODES = (ast.Expression, ast.UnaryOp, ast.USub, ast.Not, ast.BinOp, ast.BoolOp, ast.And, ast.Or, ast.Compare, ast.Load)


def _readable(node: ast.AST) -> bool:
    if isinstance(node, _NODES) or type(node) in _BINARY or type(node) in _COMPARE:
        return True
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, bool, str)
    if isinstance(node, ast.Name):
        return node.id == "shape" or node.id in _CALLS
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.keywords:
            return False
        if node.func.id == "shape":
            return len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args)
        return node.func.id in _CALLS
    return False


def evaluate(text: str | ast.Expression, shapes: Mapping[str, tuple[int, ...]]) -> Any:
    """The value of the condition ``text`` (or its :func:`parse` tree) for the input ``shapes`` ({input name:
    shape}); every value computed has at most :data:`MAX_BITS` bits (``ValueError`` otherwise), so that a
    condition costs microseconds whatever it says.

    >>> evaluate("((shape('x', 1) <= 6) and (shape('x', 1) > 3))", {"x": (2, 8)})
    False
    >>> evaluate("ceil(shape('x', 0) / 2) == 3", {"x": (5,)})
    True
    """

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, bool)):
            return _bounded(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            value = ev(node.operand)
            return -value if isinstance(node.op, ast.USub) else not value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _bounded(_BINARY[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
            left, result = ev(node.left), True
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                result = result and _COMPARE[type(op)](left, right)
                left = right
            return result
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id == "shape" and len(node.args) == 2:
                name, axis = (a.value for a in node.args if isinstance(a, ast.Constant))
                if type(axis) is not int or axis < 0:
                    raise ValueError(f"shape({name!r}, {axis!r}): the axis is a nonnegative integer")
                return shapes[name][axis]
            if node.func.id in _CALLS:
                return _bounded(_CALLS[node.func.id](*(ev(a) for a in node.args)))
        raise ValueError(f"unexpected {ast.dump(node)[:80]} in a size condition")

    tree = parse(text) if isinstance(text, str) else text
    try:
        return ev(tree)
    except (RecursionError, MemoryError):
        raise ValueError("a size condition nests too deeply") from None
    except OverflowError:
        raise ValueError("a size condition overflows") from None


def _is_guard(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("check"), str)


def _is_range(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("input"), str)
        and all(type(entry.get(k)) is int for k in ("axis", "low"))
        and entry["axis"] >= 0
        and (entry.get("high") is None or type(entry.get("high")) is int)
    )


def _parsed(guards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = []
    for g in guards:
        try:
            kept.append({**g, "tree": parse(g["check"])})
        except (ValueError, SyntaxError) as e:
            logger.warning("size condition %r unreadable (%s): not checked", g["check"][:200], e)
    return kept


def _entries(entries: Any, valid: Callable[[Any], bool]) -> list[Any]:
    """The entries of a metadata list that have the expected form (a warning for the others).

    >>> _entries([{"check": "1 == 1"}, 3], _is_guard)
    [{'check': '1 == 1'}]
    """
    if not isinstance(entries, list):
        entries = [entries]
    kept = [e for e in entries if valid(e)]
    if len(kept) != len(entries):
        logger.warning("%d size condition(s) of the model unreadable: not checked", len(entries) - len(kept))
    return kept


class SizeChecks:
    """The size conditions of a model (its ``metadata_props``), checked by :meth:`check` on every run.

    >>> checks = SizeChecks({SHAPE_GUARDS: '[{"check": "shape(\\'x\\', 0) <= 6", "why": "w",'
    ...                      ' "node": "split", "source": "m.py:3"}]'})
    >>> checks.check({"x": (8, 2)})
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.RuntimeFeedError: the feeds break a condition the exported graph relies on: shape('x', 0) <= 6 with x of shape (8, 2) (w, FX node 'split', m.py:3); PyTorch would give other results: export again with inputs of this size, or make the model's code independent of it
    """

    def __init__(self, metadata: Mapping[str, str]):
        for key in (SHAPE_GUARDS, RANGE_CONSTRAINTS):
            if len(metadata.get(key, "")) > MAX_METADATA:
                raise MalformedModelError(
                    f"metadata_props[{key!r}] holds {len(metadata[key])} characters, more than {MAX_METADATA}: "
                    "no export writes that many size conditions, the model was edited"
                )
        self.guards: list[dict[str, Any]] = []
        self.ranges: list[dict[str, Any]] = []
        try:
            guards = json.loads(metadata[SHAPE_GUARDS]) if SHAPE_GUARDS in metadata else []
            ranges = json.loads(metadata[RANGE_CONSTRAINTS]) if RANGE_CONSTRAINTS in metadata else []
        except (ValueError, TypeError, RecursionError) as e:  # a model edited by hand: say so, check nothing
            logger.warning("size conditions of the model unreadable (%s): not checked", e)
            return
        self.guards = _parsed(_entries(guards, _is_guard))
        self.ranges = [{**r, "high": r.get("high")} for r in _entries(ranges, _is_range) if r.get("narrowed")]

    def __bool__(self) -> bool:
        return bool(self.guards or self.ranges)

    def check(self, shapes: Mapping[str, tuple[int, ...] | None]) -> None:
        """Raises :class:`RuntimeFeedError` when the input ``shapes`` break a condition."""
        for r in self.ranges:
            shape = shapes.get(r["input"])
            if shape is None or r["axis"] >= len(shape):
                continue
            size = shape[r["axis"]]
            if size < r["low"] or (r["high"] is not None and size > r["high"]):
                bounds = f">= {r['low']}" if r["high"] is None else f"in [{r['low']}, {r['high']}]"
                raise RuntimeFeedError(
                    f"input {r['input']!r} axis {r['axis']} ({r.get('dim')!r}) is {size}, the exported graph needs it "
                    f"{bounds} (torch.export narrowed that range: metadata_props[{RANGE_CONSTRAINTS!r}]); "
                    "PyTorch would give other results or fail: export again with inputs of this size"
                )
        known = {k: v for k, v in shapes.items() if v is not None}
        for g in self.guards:
            try:
                holds = bool(evaluate(g["tree"], known))
            except (KeyError, IndexError):  # an input whose shape was not given (an OrtValue...): unchecked
                continue
            except (ValueError, SyntaxError, TypeError, ZeroDivisionError) as e:
                logger.warning("size condition %r unreadable (%s): not checked", g["check"][:200], e)
                continue
            if not holds:
                inputs = ", ".join(f"{n} of shape {tuple(s)}" for n, s in known.items() if repr(n) in g["check"])
                raise RuntimeFeedError(
                    f"the feeds break a condition the exported graph relies on: {g['check']} with {inputs} "
                    f"({g.get('why')}, {'FX node ' + repr(g['node']) + ', ' if g.get('node') else ''}{g.get('source')}); "
                    "PyTorch would give other "
                    "results: export again with inputs of this size, or make the model's code independent of it"
                )
