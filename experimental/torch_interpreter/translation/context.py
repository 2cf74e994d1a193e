"""NodeContext: what a converter sees of the conversion while it translates one FX node.

The context reads the interpreter it is given (the interpreter passes itself), it does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import onnx_ir as ir
import torch
import torch.fx

from ..dtypes import value_type
from ..providers import needs_guard

if TYPE_CHECKING:
    from .interpreter import Interpreter


class NodeContext:
    """Passed as first argument to every converter.

    ``ctx.op("Add", a, b)`` appends a node, ``ctx.const(1.0, dtype)`` a constant; ``ctx.val`` is the
    FakeTensor PyTorch computed for the node's output, ``ctx.out_dtype`` its ONNX element type.
    """

    def __init__(self, interpreter: Interpreter, node: torch.fx.Node, key: str):
        self._interpreter = interpreter
        self._g = interpreter.builder
        self.node = node
        #: the registry key the converter was called for (``aten::ones.default``): converters registered
        #: under several keys tell the variants apart by it
        self.key = key

    @property
    def op_name(self) -> str:
        """The op of :attr:`key` without namespace and overload: ``ones`` for ``aten::ones.default``."""
        return self.key.partition("::")[2].partition(".")[0]

    # -- building ------------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: ir.Value | None, **kwargs: Any) -> Any:
        return self._g.op(op_type, *inputs, **kwargs)

    def const(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        return self._g.const(value, dtype)

    def initializer(self, name: str, tensor: torch.Tensor) -> ir.Value:
        """A new initializer of the graph being built (made once per graph: see :meth:`memo`)."""
        return self._g.initializer(name, tensor)

    def rename(self, value: ir.Value, name: str) -> None:
        """Gives ``value`` the name ``name`` (made unique in the model)."""
        self._g.rename(value, name)

    def memo(self, namespace: str) -> dict[Any, Any]:
        """A dictionary kept for the graph being built, shared by every converter that asks for the same
        ``namespace`` (e.g. weights reordered once and read by several nodes)."""
        return self._g.memo.setdefault(namespace, {})

    @property
    def opset(self) -> int:
        return self._g.opset

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers the model is made for (``to_onnx(..., providers=...)``, :mod:`..providers`)."""
        return self._g.providers

    def needs_guard(self, quirk: str) -> bool:
        """Whether a provider the model is made for computes ``quirk`` (a key of
        :data:`~experimental.torch_interpreter.providers.QUIRKS`) otherwise than PyTorch: the converter adds
        its guard only then."""
        return needs_guard(self._g.providers, quirk)

    def mutate(self, index: int, value: ir.Value) -> None:
        """Tells the interpreter that the node wrote ``value`` into its argument ``index``: every alias of
        that argument reads the new value from now on. An op returning the argument it mutates
        (``add_(Tensor(a!) self) -> Tensor(a!)``) need not call it: its result is written back."""
        aliases = self._interpreter.aliases
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
        dtype = value_type(val)
        if dtype is not None:
            return dtype
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
        return self._interpreter.onnx_shape(self.val if val is None else val)

    # -- helpers used by many converters ---------------------------------------------------------------
    def cast(self, x: ir.Value, dtype: ir.DataType) -> ir.Value:
        """Casts ``x`` to ``dtype`` unless it already has it; the result keeps the shape of ``x``."""
        if x.dtype == dtype:
            return x
        y = self.op("Cast", x, to=dtype)
        if y.shape is None and x.shape is not None:
            y.shape = ir.Shape(list(x.shape))
        return y

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
        return self._interpreter.inline(module, inputs)

    def translate_subgraph(self, module: torch.fx.GraphModule, inputs: Sequence[Any], name: str) -> ir.Graph:
        """Translates ``module`` into an ONNX subgraph (a body of If, Loop, Scan), by the same converters.

        ``inputs`` has one entry per placeholder: ``None`` makes it an input of the subgraph, typed and
        shaped from the placeholder's ``meta['val']``; a value (an ``ir.Value`` of an enclosing graph, or
        a Python value) binds the placeholder to it, read from the outer scope without copy. The
        subgraph's outputs are the module's outputs, typed from their ``meta['val']``.
        """
        return self._interpreter.translate_subgraph(module, inputs, name)

    def new_subgraph(self) -> SubgraphBuilder:
        """An empty ONNX subgraph to fill by hand (a Loop body whose inputs are not the module's)."""
        return SubgraphBuilder(self._interpreter.child())

    @staticmethod
    def output_vals(module: torch.fx.GraphModule) -> list[Any]:
        """``meta['val']`` of each (flattened) output of ``module``, or the Python value it returns."""
        return output_vals(module)


class SubgraphBuilder:
    """A subgraph (body of If, Loop, Scan) being built: inputs, inlined FX modules, outputs.

    Made by :meth:`NodeContext.new_subgraph`; :meth:`graph` returns the finished ``ir.Graph``.
    """

    def __init__(self, interpreter: Interpreter):
        self._interpreter = interpreter

    def input(self, name: str, dtype: ir.DataType, shape: Sequence[int | str | None] | None) -> ir.Value:
        return self._interpreter.builder.input(name, dtype, shape)

    def input_like(self, name: str, val: Any) -> ir.Value:
        """A new input typed and shaped like ``val`` (a FakeTensor, SymInt or SymBool)."""
        return self._interpreter.input(name, val)

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translates ``module`` into this subgraph, its placeholders bound to ``inputs``."""
        return self._interpreter.inline(module, inputs)

    def op(self, op_type: str, *inputs: ir.Value | None, **kwargs: Any) -> Any:
        return self._interpreter.builder.op(op_type, *inputs, **kwargs)

    def const(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        return self._interpreter.builder.const(value, dtype)

    def outputs(self, values: Sequence[Any], vals: Sequence[Any]) -> None:
        """Marks ``values`` as the subgraph's outputs, typed from ``vals`` (``meta['val']``)."""
        for value, val in zip(values, vals):
            self._interpreter.output(value, val=val)

    def graph(self, name: str) -> ir.Graph:
        return self._interpreter.to_subgraph(name)


def output_vals(module: torch.fx.GraphModule) -> list[Any]:
    """``meta['val']`` of each (flattened) output of ``module``, or the Python value returned.

    >>> class Twice(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x, (x + 1, 2)
    >>> output_vals(torch.fx.symbolic_trace(Twice()))
    [None, None, 2]
    """
    output = next(n for n in reversed(module.graph.nodes) if n.op == "output")
    return [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in flatten(output.args[0])]


def flatten(value: Any) -> Iterable[Any]:
    """The leaves of nested lists and tuples, in order.

    >>> list(flatten([1, (2, [3]), 4]))
    [1, 2, 3, 4]
    """
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from flatten(v)
    else:
        yield value
