"""Conditions on the input sizes that an exported graph relies on but does not check: kept in the ONNX model.

torch.export checks the ranges of the dynamic axes (:mod:`.range_constraints`), yet some graphs hold more:

* ``aten::split.Tensor`` of a dynamic axis gives as many pieces as the example input had, a number the graph
  fixes without a guard (torch 2.13): ``x.split(3, dim=1)`` exported with 6 columns gives two pieces, and on
  8 columns the ONNX model, like the ExportedProgram, returns two pieces where PyTorch returns three;
* ``aten::unbind.int`` of an axis whose size is an expression of the dynamic axes (a chunk of one, a slice): it
  gives as many tensors as that size had at export, unguarded (torch 2.13; unbinding a dynamic axis itself makes
  torch.export fix it); on other sizes onnxruntime fails inside the graph (``Split``, ``Squeeze``) where PyTorch
  returns more tensors;
* ``aten::_assert_scalar`` nodes: runtime asserts torch.export keeps in the graph, which ONNX cannot express;
* the guards torch.export made from the model's own code (a Python branch on a size, ``if h % 2 == 0``): the
  exported program checks them when it is called (``ExportedProgram.module()``), the graph does not; torch's own
  guards (layouts, strides, the choice of a kernel) and plain bounds (the ranges) are left out;
* broadcasts (``expand``, elementwise arithmetic, ``where``) of a size torch could not prove equal to the
  output's: with an example of batch 1, torch.export reasons size-obliviously and leaves, for instance,
  ``min(512, seq)`` (a slice of transformers' position buffer) expanded to ``seq`` unguarded, true only while
  ``seq <= 512``.

:func:`record` writes each such condition over the input sizes into the model's ``metadata_props`` under
:data:`~experimental.torch_interpreter.metadata.SHAPE_GUARDS` (JSON): the condition as a Python expression of
``shape(input name, axis)`` terms, and where it comes from (FX node, user's line).
:class:`~experimental.torch_interpreter.InferenceSession` checks them on every run and refuses inputs outside
with a :class:`~experimental.torch_interpreter.RuntimeFeedError` instead of returning other numbers than PyTorch.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir
import sympy
import torch
from torch.export.graph_signature import InputKind

from ..logs import warn_at_user
from ..metadata import SHAPE_GUARDS, write_json
from ..provenance import portable_path, source_line
from .export import TORCH_DIR
from .range_constraints import RangeConstraintWarning

logger = logging.getLogger(__name__)


def _input_axes(ep: torch.export.ExportedProgram, input_names: list[str]) -> dict[sympy.Symbol, str]:
    """``{symbol: "shape('x', 1)"}`` for every dynamic axis of a user input whose size is a plain symbol."""
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    users = [n for n, s in zip(placeholders, ep.graph_signature.input_specs) if s.kind == InputKind.USER_INPUT]
    names = input_names if len(input_names) == len(users) else [n.name for n in users]
    found: dict[sympy.Symbol, str] = {}
    for node, name in zip(users, names):
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for axis, size in enumerate(val.shape):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                    found.setdefault(size.node.expr, f"shape({name!r}, {axis})")
    return found


def _expr(value: Any) -> sympy.Expr:
    return value.node.expr if isinstance(value, (torch.SymInt, torch.SymBool)) else sympy.sympify(value)


def _axis_size(node: torch.fx.Node, dim: int) -> Any:
    """The size of axis ``dim`` of the first input of ``node`` (its example tensor), None when it has none."""
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return x.shape[dim % x.dim()] if isinstance(x, torch.Tensor) and x.dim() else None


def _conditions(ep: torch.export.ExportedProgram) -> Iterator[tuple[sympy.Basic, torch.fx.Node, str]]:
    """``(condition, node, why)`` for each condition of the top-level graph."""
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten.split.Tensor:
            pieces = node.meta.get("val")
            size = _axis_size(node, node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0))
            if not isinstance(pieces, (list, tuple)) or not isinstance(size, torch.SymInt):
                continue
            n, k = len(pieces), _expr(node.args[1] if len(node.args) > 1 else node.kwargs["split_size"])
            d = _expr(size)
            why = f"{node.target.name()} gives {n} pieces of {k}, a number fixed at export"
            yield sympy.And(sympy.Gt(d, (n - 1) * k), sympy.Le(d, n * k)), node, why
        elif node.target in (torch.ops.aten.unbind.int, torch.ops.aten.unbind_copy.int):
            size = _axis_size(node, node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0))
            parts = node.meta.get("val")
            if isinstance(size, torch.SymInt) and isinstance(parts, (list, tuple)):
                why = f"{node.target.name()} gives {len(parts)} tensors, a number fixed at export"
                yield sympy.Eq(_expr(size), len(parts)), node, why
        elif node.target in _BROADCASTING:
            yield from _broadcast_conditions(node)
        elif node.target is torch.ops.aten._assert_scalar.default:
            condition = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
            if isinstance(condition, torch.SymBool):
                yield _expr(condition), node, "a runtime assert of the exported program"


#: ops whose tensor inputs broadcast to the output's shape (expand to its size argument)
_BROADCASTING = frozenset(
    {
        torch.ops.aten.expand.default,
        torch.ops.aten.add.Tensor,
        torch.ops.aten.sub.Tensor,
        torch.ops.aten.mul.Tensor,
        torch.ops.aten.div.Tensor,
        torch.ops.aten.where.self,
    }
)


def _broadcast_conditions(node: torch.fx.Node) -> Iterator[tuple[sympy.Basic, torch.fx.Node, str]]:
    """``a == b or a == 1`` for each input axis of size ``a`` broadcast to an output axis of size ``b`` that torch
    could not prove equal: a size reasoned about size-obliviously (an example of batch 1), such as
    ``min(512, seq)`` for a slice of transformers' position buffer of 512 expanded to ``seq``, holds only while
    ``seq <= 512``; torch.export does not check it, the model's inputs are."""
    out = node.meta.get("val")
    if not isinstance(out, torch.Tensor):
        return
    for arg in node.args:
        x = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(x, torch.Tensor) or x.dim() > out.dim():
            continue
        for axis, (a, b) in enumerate(zip(x.shape, out.shape[out.dim() - x.dim() :])):
            if not isinstance(a, torch.SymInt):
                continue  # a fixed size that is not b was guarded or specialized by torch.export
            ea, eb = _expr(a), _expr(b)
            if ea == eb or sympy.simplify(ea - eb) == 0:
                continue
            why = f"{node.target.name()} broadcasts a size {ea} to {eb} on axis {axis}"
            yield sympy.Or(sympy.Eq(ea, eb), sympy.Eq(ea, 1)), node, why


def _balanced(text: str) -> bool:
    """Whether the parentheses of ``text`` never close more than they opened (``a) + (b`` does)."""
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


class _Printer(sympy.printing.str.StrPrinter):
    """Python syntax for the conditions: ``==``, ``and``, ``//``, ``%`` (read back by the runtime's size checks)."""

    def _print_Equality(self, e: Any) -> str:
        return f"({self._print(e.lhs)} == {self._print(e.rhs)})"

    def _print_Unequality(self, e: Any) -> str:
        return f"({self._print(e.lhs)} != {self._print(e.rhs)})"

    def _print_And(self, e: Any) -> str:
        return "(" + " and ".join(self._print(a) for a in e.args) + ")"

    def _print_Or(self, e: Any) -> str:
        return "(" + " or ".join(self._print(a) for a in e.args) + ")"

    def _print_Not(self, e: Any) -> str:
        return f"(not {self._print(e.args[0])})"

    def _print_Relational(self, e: Any) -> str:
        return f"({self._print(e.lhs)} {e.rel_op} {self._print(e.rhs)})"

    def _print_Function(self, e: Any) -> str:
        name = type(e).__name__
        known = {"FloorDiv": "//", "PythonMod": "%", "Mod": "%"}
        if name in known:
            return f"({self._operand(e.args[0])} {known[name]} {self._operand(e.args[1])})"
        calls = {"CeilToInt": "ceil", "ceiling": "ceil", "FloorToInt": "floor", "floor": "floor", "Max": "max",
                 "Min": "min", "Abs": "abs"}
        return f"{calls.get(name, name)}(" + ", ".join(self._print(a) for a in e.args) + ")"

    _print_Max = _print_Min = _print_ceiling = _print_floor = _print_Abs = _print_Function

    def _print_Mod(self, e: Any) -> str:
        return f"({self._operand(e.args[0])} % {self._operand(e.args[1])})"

    def _operand(self, e: Any) -> str:
        """An operand of ``%`` or ``//``: in parentheses unless a symbol or a number (``-a - 1 % 2`` is not
        ``(-a - 1) % 2``)."""
        text = self._print(e)
        return text if e.is_Atom or (text.startswith("(") and text.endswith(")") and _balanced(text[1:-1])) \
            else f"({text})"

    def _print_Rational(self, e: Any) -> str:
        return f"({e.p} / {e.q})"


def _shape_env(ep: torch.export.ExportedProgram) -> Any:
    """The shape environment of ``ep``'s symbolic sizes, None for a static program."""
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        sizes = val.shape if isinstance(val, torch.Tensor) else [val]
        for size in sizes:
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _is_bound(condition: sympy.Basic) -> bool:
    """A plain bound of one size (``s >= 2``, ``s != 1``): the ranges of the dynamic axes say as much."""
    if not isinstance(condition, sympy.core.relational.Relational) or len(condition.free_symbols) != 1:
        return False
    return any(isinstance(side, sympy.Symbol) for side in condition.args) and any(
        side.is_number for side in condition.args)


def _code_guards(ep: torch.export.ExportedProgram) -> Iterator[tuple[sympy.Basic, str]]:
    """``(condition, the model's line)`` for each guard torch.export made where the model's code (not torch's)
    looked at a size, but the plain bounds."""
    env = _shape_env(ep)
    for guard in getattr(env, "guards", None) or []:
        frame = guard.sloc.framework_loc
        filename = frame.filename if isinstance(frame, traceback.FrameSummary) else None
        if filename is None or os.path.abspath(filename).startswith(TORCH_DIR) or _is_bound(guard.expr):
            continue
        yield guard.expr, f"{portable_path(filename)}:{frame.lineno}: {(frame.line or '').strip()}"


def guards(ep: torch.export.ExportedProgram, input_names: list[str]) -> list[dict[str, str]]:
    """The conditions of ``ep`` over its inputs' sizes (``input_names``: their ONNX names), each as
    ``{"check": Python expression, "why": reason, "node": FX node, "source": user's line}``; conditions on
    data-dependent sizes (unbacked symbols) are left out: only the sizes of the inputs can be checked.

    >>> import torch
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.split(3, dim=1)[-1] * 2
    >>> ep = torch.export.export(M(), (torch.randn(2, 6),), dynamic_shapes=({1: torch.export.Dim.DYNAMIC},))
    >>> [g["check"] for g in guards(ep, ["x"])]
    ["((shape('x', 1) <= 6) and (shape('x', 1) > 3))"]
    """
    axes = _input_axes(ep, input_names)
    found: list[dict[str, str]] = []
    code_guards = ((c, None, "a guard of the model's code on a size, which the graph assumes", line)
                   for c, line in _code_guards(ep))
    for condition, node, why, line in [*((c, n, w, None) for c, n, w in _conditions(ep)), *code_guards]:
        if condition is sympy.true or not condition.free_symbols:
            continue
        if not condition.free_symbols <= set(axes):
            logger.debug("condition %s of %s is on sizes the inputs do not give: not kept", condition, node or line)
            continue
        named = condition.xreplace({s: sympy.Symbol(axes[s]) for s in condition.free_symbols})
        check = _Printer().doprint(named)
        if any(g["check"] == check for g in found):
            continue  # the same condition met again (every layer adds the same broadcast): checked once
        found.append({"check": check, "why": why, "node": node.name if node is not None else "",
                      "source": source_line(node) if node is not None else line})
    return found


def record(ep: torch.export.ExportedProgram, model: ir.Model) -> list[dict[str, str]]:
    """Writes :func:`guards` into ``model.metadata_props[SHAPE_GUARDS]`` (nothing when there is none) and
    warns (:class:`~experimental.torch_interpreter.RangeConstraintWarning`) about each.

    >>> import onnx_ir as ir
    >>> ep = torch.export.export(torch.nn.ReLU(), (torch.zeros(3),))
    >>> record(ep, ir.Model(ir.Graph([], [], nodes=[]), ir_version=10))
    []
    """
    found = guards(ep, [v.name for v in model.graph.inputs])
    if found:  # one warning for them all, at the user's line
        conditions = "; ".join(
            f"{g['check']} ({g['why']}, {'FX node ' + repr(g['node']) + ', ' if g['node'] else ''}{g['source']})"
            for g in found)
        message = (
            f"the exported graph relies on {len(found)} condition{'s' if len(found) > 1 else ''} on the input sizes "
            f"that it does not check: {conditions}. InferenceSession refuses inputs that break "
            f"{'them' if len(found) > 1 else 'it'}; a bare onnxruntime session does not "
            f"(metadata_props[{SHAPE_GUARDS!r}])"
        )
        warn_at_user(message, RangeConstraintWarning)
    if found:
        write_json(model, SHAPE_GUARDS, found)
        logger.info("%d conditions on the input sizes kept in metadata_props[%r]", len(found), SHAPE_GUARDS)
    return found
