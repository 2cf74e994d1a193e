"""Complex tensors inside a graph, as real pairs: a complex tensor of shape ``S`` is carried as a real tensor
of shape ``S + [2]`` (real part, imaginary part on the last axis).

ONNX Runtime has almost no complex kernels, so the interpreter sends every FX node that reads or produces a
complex tensor to the converter registered under ``complex::<op>.<overload>`` (``ops/complex.py``) instead of
``aten::<op>.<overload>``; ``view_as_complex`` and ``view_as_real`` are the boundary. A complex input or
output of the model itself has no such representation and stays an error (:func:`check_no_complex_io`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import onnx_ir as ir
import torch
import torch.fx

from ..errors import ConversionError
from .context import flatten
from .registry import add_missing_hint

#: complex ONNX type -> the real type of its parts
REAL_OF = {ir.DataType.COMPLEX64: ir.DataType.FLOAT, ir.DataType.COMPLEX128: ir.DataType.DOUBLE}


def is_complex(val: Any) -> bool:
    """Whether an FX value (``meta['val']``) is a complex tensor.

    >>> is_complex(torch.zeros(2, dtype=torch.complex64)), is_complex(torch.zeros(2)), is_complex(3)
    (True, False, False)
    """
    return isinstance(val, torch.Tensor) and val.is_complex()


def _vals(arg: Any) -> Iterable[Any]:
    if isinstance(arg, torch.fx.Node):
        yield arg.meta.get("val")
    elif isinstance(arg, (list, tuple)):
        for a in arg:
            yield from _vals(a)


def involves_complex(node: torch.fx.Node) -> bool:
    """Whether ``node`` reads or produces a complex tensor."""
    vals = [node.meta.get("val"), *_vals(list(node.args)), *_vals(list(node.kwargs.values()))]
    flat = []
    for v in vals:
        flat.extend(v if isinstance(v, (list, tuple)) else [v])
    return any(is_complex(v) for v in flat)


def complex_key(key: str) -> str:
    """The registry key of the real-pair converter of an aten key.

    >>> complex_key("aten::mul.Tensor")
    'complex::mul.Tensor'
    """
    return "complex::" + key.partition("::")[2]


def pair_type(val: torch.Tensor, shape: list[int | str]) -> tuple[ir.DataType, list[int | str]]:
    """ONNX type and shape of the real pair carrying the complex ``val`` whose ONNX shape is ``shape``.

    >>> dtype, shape = pair_type(torch.zeros(3, dtype=torch.complex64), [3])
    >>> dtype.name, shape
    ('FLOAT', [3, 2])
    """
    if val.dtype == torch.complex64:
        return ir.DataType.FLOAT, [*shape, 2]
    if val.dtype == torch.complex128:
        return ir.DataType.DOUBLE, [*shape, 2]
    raise ConversionError(f"complex dtype {val.dtype} has no real-pair representation (complex32 is not supported)")


def check_no_complex_io(ep: torch.export.ExportedProgram) -> None:
    """Raises :class:`ConversionError` when a user input or output of ``ep`` is complex: inside the graph
    complex tensors are real pairs, the model's own inputs and outputs have no ONNX Runtime type."""
    from torch.export.graph_signature import InputKind

    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, ep.graph_signature.input_specs):
        if is_complex(node.meta.get("val")):
            kind = "input" if spec.kind == InputKind.USER_INPUT else f"{spec.kind.name.lower()} {spec.target}"
            raise ConversionError(
                f"the model's {kind} {node.name!r} is complex ({node.meta['val'].dtype}): complex tensors are "
                "supported inside the graph only; pass torch.view_as_real(x) and call torch.view_as_complex "
                "in the model"
            )
    output = next(n for n in reversed(ep.graph.nodes) if n.op == "output")
    for i, arg in enumerate(flatten(output.args[0])):
        if isinstance(arg, torch.fx.Node) and is_complex(arg.meta.get("val")):
            raise ConversionError(
                f"output {i} of the model ({arg.name!r}) is complex ({arg.meta['val'].dtype}): complex tensors are "
                "supported inside the graph only; return torch.view_as_real(...) instead"
            )


def missing_complex_hint(keys: list[str]) -> str | None:
    """The line an "operator(s) have no converter" error adds for ops on complex tensors (``complex::`` keys).

    >>> missing_complex_hint(["aten::relu.default"]) is None
    True
    """
    ops = [k for k in keys if k.startswith("complex::")]
    if not ops:
        return None
    return (
        f"{', '.join(ops)} {'reads or produces' if len(ops) == 1 else 'read or produce'} complex tensors, which the "
        "graph carries as real pairs (real, imaginary on a last axis of 2), and has no converter on pairs: compute on the parts in the model "
        "(torch.view_as_real, .real, .imag), or register a converter under that complex:: key "
        "(experimental/torch_interpreter/ops/complex.py shows how)"
    )


add_missing_hint(missing_complex_hint)
