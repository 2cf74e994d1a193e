"""Ranges torch.export narrowed on dynamic axes: warned about, and kept in the ONNX model.

torch.export gives every dynamic dimension a range (``ep.range_constraints``): ``[2, int_oo]`` by default
(0 and 1 are specialized), ``[0, int_oo]`` with ``backed_size_oblivious`` or ``Dim(min=0)``, the declared
``[min, max]`` of a ``torch.export.Dim``. The model's code may narrow it silently: ``torch._check(n >= 5)``,
``x[:4]`` added to a tensor of 4 rows, a reshape that needs an even size (the axis becomes ``2*s0``). The
ExportedProgram checks these ranges on its inputs; an ONNX model has no such check, and another size gives
another result than PyTorch, or an error. :func:`record` tells (a :class:`RangeConstraintWarning` naming the
input, the axis and the range) and writes every input axis's range into the model's ``metadata_props``
under :data:`~experimental.torch_interpreter.metadata.RANGE_CONSTRAINTS` (JSON), where a runtime can check its
inputs. torch's lower bound of 2 is its 0/1 specialization, not the graph's: an axis whose program was checked at
size 1 (:func:`..grown_example.holding_at_one`) starts at 1.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import onnx_ir as ir
import sympy
import torch
from torch.export.graph_signature import InputKind
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import bound_sympy

from ..errors import TorchInterpreterWarning
from ..logs import warn_at_user
from ..metadata import RANGE_CONSTRAINTS, write_json

logger = logging.getLogger(__name__)


class RangeConstraintWarning(TorchInterpreterWarning):
    """torch.export narrowed the range of a dynamic axis (``torch._check``, a slice of fixed length, a reshape
    needing an even size): the ONNX model does not check it; the ranges are in its ``metadata_props``."""


#: the lowest lower bound torch.export gives a dynamic axis without being told (0 and 1 specialized)
_DEFAULT_LOW = 2


@dataclass
class AxisRange:
    """The range of one dynamic axis of an input: ``low <= size <= high`` (``high`` None: no bound),
    ``expr`` the size as torch.export sees it (``s0``, or ``2*s0`` for an even size), ``narrowed`` when
    the model's code made it narrower than declared."""

    input: str
    axis: int
    dim: str
    expr: str
    low: int
    high: int | None
    narrowed: bool

    def describe(self) -> str:
        """``input 'x' axis 0 ('batch')``: the axis, for messages.

        >>> AxisRange("x", 0, "batch", "s0", 5, None, True).describe()
        "input 'x' axis 0 ('batch') must be >= 5"
        """
        where = f"input {self.input!r} axis {self.axis} ({self.dim!r})"
        if not self.expr.isidentifier():
            bounds = f">= {self.low}" if self.high is None else f"in [{self.low}, {self.high}]"
            return f"{where} must be of the form {self.expr} ({bounds})"
        if self.high is None:
            return f"{where} must be >= {self.low}"
        return f"{where} must be in [{self.low}, {self.high}]"


def _bound(value: Any) -> int | None:
    if value in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return None
    return int(value)  # TypeError for a symbolic bound


def _declared(spec: Any) -> dict[str, tuple[int, int | None]]:
    """``{dim name: (min, max)}`` of the named ``torch.export.Dim`` objects in a dynamic shapes spec;
    ``{"*": ...}`` when it declares a derived dim (``2 * Dim("n")``)."""
    found: dict[str, tuple[int, int | None]] = {}

    def walk(s: Any) -> None:
        if isinstance(s, torch.export.Dim) and hasattr(s, "root"):  # a derived dim: the user chose the form
            found["*"] = (0, None)
        elif isinstance(s, torch.export.Dim):
            found[s.__name__] = (int(s.min), _bound(s.max))
        elif isinstance(s, Mapping):
            for v in s.values():
                walk(v)
        elif isinstance(s, (list, tuple)):
            for v in s:
                walk(v)

    walk(spec)
    return found


def axis_ranges(
    ep: torch.export.ExportedProgram,
    input_names: list[str],
    dim_names: Mapping[str, str],
    declared_spec: Any = None,
    at_one: Container[str] = (),
) -> list[AxisRange]:
    """The range of every dynamic axis of the user inputs of ``ep`` (``input_names``: their ONNX names).

    ``dim_names`` maps torch's symbols to the user's names; ``declared_spec`` is the ``dynamic_shapes``
    given to torch.export (its ``Dim(min=, max=)`` are declared ranges, not narrowings); ``at_one``: torch's
    symbols whose graph was checked at size 1 (:func:`..grown_example.holding_at_one`): their range starts at 1,
    not at torch's default 2.

    >>> import torch
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         torch._check(x.shape[0] >= 5)
    ...         return x + 1
    >>> ep = torch.export.export(M(), (torch.randn(6, 3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> [(r.input, r.axis, r.low, r.high, r.narrowed) for r in axis_ranges(ep, ["x"], {})]
    [('x', 0, 5, None, True)]
    """
    declared = _declared(declared_spec)
    ranges = ep.range_constraints
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    users = [n for n, s in zip(placeholders, ep.graph_signature.input_specs) if s.kind == InputKind.USER_INPUT]
    names = input_names if len(input_names) == len(users) else [n.name for n in users]
    found: list[AxisRange] = []
    for node, name in zip(users, names):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for axis, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
                continue
            expr = size.node.expr
            symbols = sorted(expr.free_symbols, key=str)
            user = [dim_names.get(str(s), str(s)) for s in symbols]
            try:
                bounds = bound_sympy(expr, {s: ranges[s] for s in symbols if s in ranges})
                low, high = max(int(bounds.lower), 0), _bound(bounds.upper)
                if isinstance(expr, sympy.Symbol) and str(expr) in at_one and low == _DEFAULT_LOW:
                    low = 1
            except (TypeError, ValueError, AttributeError):  # a range sympy cannot bound: nothing to tell
                logger.debug("no range for %s axis %d (%s)", name, axis, expr)
                continue
            dmin, dmax = (0, None)
            if len(symbols) == 1 and user[0] in declared:
                dmin, dmax = declared[user[0]]
            if isinstance(expr, sympy.Symbol):
                narrowed = low > max(_DEFAULT_LOW, dmin) or (high is not None and (dmax is None or high < dmax))
            else:  # 2*s0: an even size, unless the user declared that form
                narrowed = "*" not in declared
            shown = str(expr.xreplace({s: sympy.Symbol(u) for s, u in zip(symbols, user)}))
            found.append(AxisRange(name, axis, shown if len(user) != 1 else user[0], shown, low, high, narrowed))
    return found


def record(
    ep: torch.export.ExportedProgram,
    model: ir.Model,
    dim_names: Mapping[str, str],
    declared_spec: Any = None,
    at_one: Container[str] = (),
) -> list[AxisRange]:
    """Warns (:class:`RangeConstraintWarning`) about each dynamic axis of ``ep``'s inputs that the model's
    code narrowed, and writes the ranges of all of them into ``model.metadata_props[RANGE_CONSTRAINTS]``.

    Returns the narrowed axes. See :func:`axis_ranges` for the arguments.

    >>> import onnx_ir as ir
    >>> ep = torch.export.export(torch.nn.ReLU(), (torch.zeros(3),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
    >>> record(ep, model, {}), model.metadata_props[RANGE_CONSTRAINTS][:30]
    ([], '[{"input": "input", "axis": 0,')
    """
    found = axis_ranges(ep, [v.name for v in model.graph.inputs], dim_names, declared_spec, at_one)
    if not found:
        return []
    write_json(model, RANGE_CONSTRAINTS, [asdict(r) for r in found])
    narrowed = [r for r in found if r.narrowed]
    if narrowed:  # one warning for them all, at the user's line
        message = (
            f"torch.export narrowed {len(narrowed)} dynamic ax{'es' if len(narrowed) > 1 else 'is'} (the model's code "
            f"requires it): {'; '.join(r.describe() for r in narrowed)}. InferenceSession refuses other sizes; a bare "
            f"onnxruntime session does not check them (metadata_props[{RANGE_CONSTRAINTS!r}])"
        )
        logger.debug("%s", message)
        warn_at_user(message, RangeConstraintWarning)
    return narrowed
