"""GraphBuilder: creates ONNX nodes and values on top of ``onnx_ir``.

The builder knows nothing of torch.fx. The interpreter tells it which FX node is being converted
(:meth:`GraphBuilder.scope`) so that names and ``metadata_props`` of every node follow the FX graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from ..dtypes import onnx_dtype
from ..names import unique_name
from ..opsets import IR_VERSION
from ..providers import KNOWN
from .type_rules import mixed_input_types, output_dtypes


class NameScope:
    """Unique value and node names, shared by a graph and its subgraphs (ONNX forbids shadowing)."""

    def __init__(self) -> None:
        self.values: set[str] = set()
        self.nodes: set[str] = set()

    @staticmethod
    def _unique(used: set[str], base: str) -> str:
        name = unique_name(base, used)
        used.add(name)
        return name

    def value(self, base: str) -> str:
        return self._unique(self.values, base)

    def node(self, base: str) -> str:
        return self._unique(self.nodes, base)


def _as_array(value: Any, dtype: ir.DataType | None) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        dtype = dtype or onnx_dtype(value.dtype)
        if value.dtype == torch.bfloat16:
            value = value.float()
        value = value.numpy()
    if dtype is None:
        arr = np.asarray(value)
        if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
            arr = arr.astype(np.float32)
        return arr
    return np.asarray(value).astype(dtype.numpy())


class GraphBuilder:
    """Accumulates the nodes, inputs, outputs and initializers of one ONNX graph.

    >>> g = GraphBuilder(opset=18)
    >>> x = g.input("x", ir.DataType.FLOAT, ["batch", 4])
    >>> y = g.op("Relu", x)
    >>> g.output(y, "y")
    >>> [n.op_type for n in g.to_model().graph]
    ['Relu']
    """

    def __init__(
        self,
        opset: int,
        names: NameScope | None = None,
        parent: GraphBuilder | None = None,
        providers: tuple[str, ...] = KNOWN,
    ):
        self.opset = opset
        #: the providers the model is made for (:mod:`..providers`): a subgraph's are its parent's
        self.providers = parent.providers if parent is not None else providers
        self.names = names or NameScope()
        self.parent = parent
        self.nodes: list[ir.Node] = []
        self.inputs: list[ir.Value] = []
        self.outputs: list[ir.Value] = []
        self.initializers: list[ir.Value] = []
        self.extra_opsets: dict[str, int] = {}
        #: per-graph dictionaries of the converters (NodeContext.memo)
        self.memo: dict[str, dict] = {}
        self._constants: dict[tuple, ir.Value] = {}
        self._node_ids: set[int] = set()
        self._prefix = "node"
        self._metadata: dict[str, str] = {}

    # -- provenance ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self, prefix: str, metadata: dict[str, str]) -> Iterator[None]:
        """Names and metadata of the nodes created inside the ``with`` block."""
        saved = self._prefix, self._metadata
        self._prefix, self._metadata = prefix, metadata
        try:
            yield
        finally:
            self._prefix, self._metadata = saved

    # -- graph inputs, outputs, weights -------------------------------------------------------------
    def input(self, name: str, dtype: ir.DataType, shape: Sequence[int | str | None] | None) -> ir.Value:
        value = ir.Value(name=self.names.value(name), type=ir.TensorType(dtype))
        if shape is not None:
            value.shape = ir.Shape(shape)
        self.inputs.append(value)
        return value

    def initializer(self, name: str, tensor: torch.Tensor) -> ir.Value:
        """A weight, wrapped without copy."""
        tensor = tensor.detach()
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        onnx_dtype(tensor.dtype)  # a clear TypeError for a type ONNX does not have
        return self.stored_initializer(name, ir.tensor_adapters.TorchTensor(tensor, name=name))

    def stored_initializer(self, name: str, tensor: ir.TensorProtocol) -> ir.Value:
        """A weight given as an ONNX tensor: in memory, in a checkpoint's file, or computed when it is read."""
        name = self.names.value(name)
        tensor.name = name
        value = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=ir.Shape(tuple(tensor.shape)),
                         const_value=tensor)
        self.initializers.append(value)
        return value

    def output(self, value: ir.Value, name: str | None = None) -> None:
        """Marks ``value`` as a graph output, inserting an Identity where ONNX needs a distinct value
        (a graph input, a weight, an outer-scope value, or a value already returned)."""
        producer = value.producer()
        if producer is None or id(producer) not in self._node_ids or value in self.outputs:
            copy = self.op("Identity", value)
            copy.shape = value.shape
            value = copy
        if name is not None and value.name != name:
            self.rename(value, name)
        self.outputs.append(value)

    def rename(self, value: ir.Value, name: str) -> None:
        """Gives ``value`` the name ``name`` (made unique)."""
        self.names.values.discard(value.name)
        value.name = self.names.value(name)

    # -- nodes --------------------------------------------------------------------------------------
    def op(
        self,
        op_type: str,
        *inputs: ir.Value | None,
        domain: str = "",
        num_outputs: int = 1,
        **attributes: Any,
    ) -> Any:
        """Appends one node; returns its output, or a tuple of outputs when ``num_outputs > 1``."""
        attrs = {k: v for k, v in attributes.items() if v is not None}
        for i, inp in enumerate(inputs):
            if inp is not None and not isinstance(inp, ir.Value):
                raise TypeError(
                    f"input {i} of {op_type} is a {type(inp).__name__}, not an ir.Value: "
                    "use ctx.const(...) for constants"
                )
        mixed = mixed_input_types(op_type, domain, inputs)
        if mixed:
            raise TypeError(
                f"{op_type} needs inputs of one element type, got {[t.name for t in mixed]}: cast them first"
            )
        node = ir.Node(
            domain,
            op_type,
            inputs,
            ir.convenience.convert_attributes(attrs),
            num_outputs=num_outputs,
            name=self.names.node(f"{self._prefix}/{op_type}"),
            metadata_props=dict(self._metadata),
        )
        dtypes = output_dtypes(op_type, domain, inputs, attrs, num_outputs)
        for out, dtype in zip(node.outputs, dtypes):
            out.name = self.names.value(f"{self._prefix}__{op_type}")
            if dtype is not None:
                out.dtype = dtype
        self.nodes.append(node)
        self._node_ids.add(id(node))
        if domain and domain not in self.extra_opsets:
            self.extra_opsets[domain] = 1
        return node.outputs[0] if num_outputs == 1 else tuple(node.outputs)

    def const(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        """A constant (scalar, list, numpy array or torch tensor), deduplicated inside the graph.

        Python floats become FLOAT unless ``dtype`` says otherwise.
        """
        arr = _as_array(value, dtype)
        key = (dtype, arr.dtype.str, arr.shape, arr.tobytes())
        cached = self._constants.get(key)
        if cached is not None:
            return cached
        tensor = ir.tensor(arr, dtype=dtype)
        saved = self._prefix, self._metadata
        self._prefix, self._metadata = "const", {}
        try:
            out = self.op("Constant", value=tensor)
        finally:
            self._prefix, self._metadata = saved
        out.shape = ir.Shape(arr.shape)
        self._constants[key] = out
        return out

    # -- assembling ---------------------------------------------------------------------------------
    def to_graph(self, name: str = "main_graph") -> ir.Graph:
        opsets = {"": self.opset, **self.extra_opsets}
        outputs = set(map(id, self.outputs))
        used = [v for v in self.initializers if v.uses() or id(v) in outputs]  # unused buffers are dropped
        return ir.Graph(
            self.inputs,
            self.outputs,
            nodes=self.nodes,
            initializers=used,
            opset_imports=opsets,
            name=name,
        )

    def to_model(self, ir_version: int = IR_VERSION, producer_version: str = "0.1.0", **graph_kwargs: Any) -> ir.Model:
        graph = self.to_graph(**graph_kwargs)
        return ir.Model(graph, ir_version=ir_version, producer_name="aten2onnx", producer_version=producer_version)
