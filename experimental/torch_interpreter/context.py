"""NodeContext: what a converter sees of the conversion while it translates one FX node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import onnx_ir as ir
import torch
import torch.fx

from .dtypes import onnx_dtype

if TYPE_CHECKING:
    from .interpreter import Interpreter


class NodeContext:
    """Passed as first argument to every converter.

    ``ctx.op("Add", a, b)`` appends a node, ``ctx.const(1.0, dtype)`` a constant; ``ctx.val`` is the
    FakeTensor PyTorch computed for the node's output, ``ctx.out_dtype`` its ONNX element type.
    """

    def __init__(self, interpreter: Interpreter, node: torch.fx.Node):
        self.interpreter = interpreter
        self.g = interpreter.builder
        self.node = node

    # -- building ------------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: ir.Value | None, **kwargs: Any) -> Any:
        return self.g.op(op_type, *inputs, **kwargs)

    def const(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        return self.g.const(value, dtype)

    @property
    def opset(self) -> int:
        return self.g.opset

    def mutate(self, index: int, value: ir.Value) -> None:
        """Tells the interpreter that the node wrote ``value`` into its argument ``index``: every alias of
        that argument reads the new value from now on. An op returning the argument it mutates
        (``add_(Tensor(a!) self) -> Tensor(a!)``) need not call it: its result is written back."""
        aliases = self.interpreter.aliases
        if aliases is None:
            raise ValueError(f"{self.node.target} mutates its argument {index} but its schema says it does not")
        aliases.mutate(self.node.args[index], value, self.node)

    # -- what PyTorch says of the node ---------------------------------------------------------------
    @property
    def val(self) -> Any:
        return self.node.meta.get("val")

    @property
    def out_dtype(self) -> ir.DataType:
        """ONNX element type of the node's (first) tensor output."""
        val = self.val
        if isinstance(val, (tuple, list)):
            val = next(v for v in val if isinstance(v, torch.Tensor))
        if isinstance(val, torch.Tensor):
            return onnx_dtype(val.dtype)
        if isinstance(val, (torch.SymInt, int)):
            return ir.DataType.INT64
        if isinstance(val, (torch.SymFloat, float)):
            return ir.DataType.FLOAT
        if isinstance(val, (torch.SymBool, bool)):
            return ir.DataType.BOOL
        raise TypeError(f"node {self.node.name} has no tensor output (meta val {val!r})")

    @property
    def out_rank(self) -> int:
        return self.val.dim()

    def arg_val(self, index: int | str) -> Any:
        """``meta['val']`` of the node's argument ``index`` (positional) or keyword, or its Python value."""
        arg = self.node.args[index] if isinstance(index, int) else self.node.kwargs[index]
        return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg

    def onnx_shape(self, val: torch.Tensor | None = None) -> list[int | str]:
        """The ONNX shape of ``val`` (default: the node's output), with user names for dynamic dims."""
        return self.interpreter.onnx_shape(self.val if val is None else val)

    # -- helpers used by many converters ---------------------------------------------------------------
    def cast(self, x: ir.Value, dtype: ir.DataType) -> ir.Value:
        """Casts ``x`` to ``dtype`` unless it already has it."""
        return x if x.dtype == dtype else self.op("Cast", x, to=dtype)

    def operand(self, x: Any, dtype: ir.DataType) -> ir.Value:
        """``x`` (a value, a Python scalar or a SymInt value) as a tensor of element type ``dtype``."""
        if isinstance(x, ir.Value):
            return self.cast(x, dtype)
        return self.const(x, dtype)

    def int64s(self, values: Sequence[int | ir.Value]) -> ir.Value:
        """A 1-D INT64 tensor from Python ints and 0-D/1-D INT64 values (dynamic sizes)."""
        if all(isinstance(v, int) for v in values):
            return self.const(list(values), ir.DataType.INT64)
        pieces, ints = [], []
        for v in values:
            if isinstance(v, ir.Value):
                if ints:
                    pieces.append(self.const(ints, ir.DataType.INT64))
                    ints = []
                v = self.cast(v, ir.DataType.INT64)
                pieces.append(self.op("Reshape", v, self.const([1], ir.DataType.INT64)))
            else:
                ints.append(int(v))
        if ints:
            pieces.append(self.const(ints, ir.DataType.INT64))
        return pieces[0] if len(pieces) == 1 else self.op("Concat", *pieces, axis=0)

    def rank(self, x: ir.Value) -> int:
        """Rank of a value whose shape is known (every value that stands for an FX node has one)."""
        if x.shape is None:
            raise ValueError(f"the rank of {x.name} is unknown")
        return len(x.shape)

    def subgraph(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translates ``module``'s graph inline, its placeholders bound to ``inputs``; returns its outputs."""
        return self.interpreter.inline(module, inputs)

    def translate_subgraph(self, module: torch.fx.GraphModule, inputs: Sequence[Any], name: str) -> ir.Graph:
        """Translates ``module`` into an ONNX subgraph (a body of If, Loop, Scan), by the same converters.

        ``inputs`` has one entry per placeholder: ``None`` makes it an input of the subgraph, typed and
        shaped from the placeholder's ``meta['val']``; a value (an ``ir.Value`` of an enclosing graph, or
        a Python value) binds the placeholder to it, read from the outer scope without copy. The
        subgraph's outputs are the module's outputs, typed from their ``meta['val']``.
        """
        return self.interpreter.translate_subgraph(module, inputs, name)
