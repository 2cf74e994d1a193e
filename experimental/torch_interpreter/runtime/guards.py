"""The conditions on input sizes an ONNX model carries in its ``metadata_props``, checked on the feeds.

Two keys written by :func:`~experimental.torch_interpreter.to_onnx` (:mod:`~experimental.torch_interpreter.metadata`):
``RANGE_CONSTRAINTS`` (the ranges torch.export narrowed on dynamic axes) and ``SHAPE_GUARDS`` (conditions the graph
relies on). :class:`SizeChecks` reads them once and raises a
:class:`~experimental.torch_interpreter.RuntimeFeedError` naming the input, the axis, the condition and where
it comes from when a feed breaks one. The conditions are Python expressions read by a small evaluator that
accepts only integers, arithmetic, comparisons, ``and``/``or``/``not``, ``min``/``max``/``ceil``/``floor``
and ``shape(input, axis)``: a model file never runs code. A condition is at most :data:`MAX_CONDITION`
characters and its powers at most :data:`MAX_BITS` bits, so that it cannot make the check take memory or time;
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

from ..errors import RuntimeFeedError
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
#: the largest power a condition may compute, in bits
MAX_BITS = 4096


def _bits(value: Any) -> int:
    if isinstance(value, Fraction):
        return max(value.numerator.bit_length(), value.denominator.bit_length())
    return abs(int(value)).bit_length() if isinstance(value, (int, float)) and math.isfinite(value) else 0


def _power(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` when the result fits in :data:`MAX_BITS` bits.

    >>> _power(2, 10)
    1024
    >>> _power(10, 10**6)
    Traceback (most recent call last):
    ...
    ValueError: the power 10 ** 1000000 in a size condition exceeds 4096 bits
    """
    if max(_bits(base), 1) * abs(int(exponent)) > MAX_BITS:
        raise ValueError(f"the power {base} ** {exponent} in a size condition exceeds {MAX_BITS} bits")
    return operator.pow(base, exponent)


def evaluate(text: str, shapes: Mapping[str, tuple[int, ...]]) -> Any:
    """The value of the condition ``text`` for the input ``shapes`` ({input name: shape}).

    >>> evaluate("((shape('x', 1) <= 6) and (shape('x', 1) > 3))", {"x": (2, 8)})
    False
    >>> evaluate("ceil(shape('x', 0) / 2) == 3", {"x": (5,)})
    True
    """

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, bool)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            value = ev(node.operand)
            return -value if isinstance(node.op, ast.USub) else not value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](ev(node.left), ev(node.right))
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
                return shapes[name][axis]
            if node.func.id in _CALLS:
                return _CALLS[node.func.id](*(ev(a) for a in node.args))
        raise ValueError(f"unexpected {ast.dump(node)[:80]} in a size condition")

    if len(text) > MAX_CONDITION:
        raise ValueError(f"a size condition of {len(text)} characters (more than {MAX_CONDITION})")
    try:
        return ev(ast.parse(text, mode="eval"))
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
        and (entry.get("high") is None or type(entry.get("high")) is int)
    )


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
        self.guards: list[dict[str, str]] = []
        self.ranges: list[dict[str, Any]] = []
        try:
            guards = json.loads(metadata[SHAPE_GUARDS]) if SHAPE_GUARDS in metadata else []
            ranges = json.loads(metadata[RANGE_CONSTRAINTS]) if RANGE_CONSTRAINTS in metadata else []
        except (ValueError, TypeError, RecursionError) as e:  # a model edited by hand: say so, check nothing
            logger.warning("size conditions of the model unreadable (%s): not checked", e)
            return
        self.guards = _entries(guards, _is_guard)
        self.ranges = [r for r in _entries(ranges, _is_range) if r.get("narrowed")]

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
                holds = bool(evaluate(g["check"], known))
            except (KeyError, IndexError):  # an input whose shape was not given (an OrtValue...): unchecked
                continue
            except (ValueError, SyntaxError, TypeError, ZeroDivisionError) as e:
                logger.warning("size condition %r unreadable (%s): not checked", g["check"], e)
                continue
            if not holds:
                inputs = ", ".join(f"{n} of shape {tuple(s)}" for n, s in known.items() if repr(n) in g["check"])
                raise RuntimeFeedError(
                    f"the feeds break a condition the exported graph relies on: {g['check']} with {inputs} "
                    f"({g.get('why')}, FX node {g.get('node')!r}, {g.get('source')}); PyTorch would give other "
                    "results: export again with inputs of this size, or make the model's code independent of it"
                )
