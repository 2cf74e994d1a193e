"""What a ``com.microsoft::PythonOp`` node calls at run time, and the nodes run in Python around it.

:func:`python_call` reads a node: a custom op (``func_name`` ``torch.ops.<ns>.<op>.<overload>``, found through
``torch.ops``, :mod:`.custom_op_calls`) or a ``torch.autograd.Function`` (found by its qualified name,
:mod:`experimental.torch_interpreter.python_op.table`), its constants rebuilt from the attributes
(:mod:`experimental.torch_interpreter.python_op.attributes`). :class:`ControlFlowCall` runs a control-flow node
whose bodies hold PythonOp nodes with onnx's reference evaluator, :class:`PythonOp` calling torch back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ..python_op import table
from ..python_op.attributes import DOMAIN, decode_constants
from ..python_op.encoding import PREFIX, object_table, tensor_lists
from ..python_op.table import resolve_function
from .custom_op_calls import call_arguments, resolve_op
from .python_op_nodes import node_inputs


@dataclass
class PythonCall:
    """One PythonOp node: the Function class or the custom op, its constants by position, its input convention."""

    node: onnx.NodeProto
    label: str
    convention: str
    constants: dict[int, Any]
    output_types: list[int]
    cls: type | None = None
    op: torch._ops.OpOverload | None = None
    lists: dict[int, int] = field(default_factory=dict)

    def arguments(self, tensors: Sequence[torch.Tensor]) -> list[Any]:
        """The arguments of the Function's ``apply``: ``tensors`` in the ``d`` positions, constants elsewhere."""
        it = iter(tensors)
        return [next(it) if c == "d" else self.constants[i] for i, c in enumerate(self.convention)]

    def __call__(self, tensors: Sequence[torch.Tensor]) -> Any:
        if self.op is not None:
            args, kwargs = call_arguments(self.op, self.convention, self.constants, tensors, self.lists)
            return self.op(*args, **kwargs)
        return self.cls.apply(*self.arguments(tensors))  # type: ignore[union-attr]


def python_call(node: onnx.NodeProto) -> PythonCall:
    """What a PythonOp node calls: a custom op (``func_name`` ``torch.ops.<ns>.<op>.<overload>``, found through
    ``torch.ops``) or a ``torch.autograd.Function`` (found by its qualified name), constants rebuilt.

    >>> node = onnx.helper.make_node("PythonOp", ["x"], ["ctx", "y"], domain="com.microsoft",
    ...                              func_name="torch.ops.aten.relu.default", input_convention="d")
    >>> python_call(node)([torch.tensor([-1.0, 2.0])])
    tensor([0., 2.])
    """
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    name, convention = attrs["func_name"], attrs["input_convention"]
    types = list(attrs.get("output_tensor_types", []))
    if name.startswith(PREFIX):
        op = resolve_op(name, attrs.get("comment", ""), node.name)
        pointer, floats = object_table(attrs.get("comment", ""))
        constants = decode_constants(attrs, pointer)
        constants.update(floats)  # full precision, the attributes are float32
        lists = tensor_lists(attrs.get("comment", ""))
        return PythonCall(node, name, convention, constants, types, op=op, lists=lists)
    cls = resolve_function(name)
    return PythonCall(node, name, convention, decode_constants(attrs, table.pointer), types, cls=cls)


class PythonOp(OpRun):
    """onnx's reference evaluator kernel for ``com.microsoft::PythonOp`` (the evaluator finds a kernel by its
    class name): calls the function or the custom op (numpy in and out)."""

    op_domain = DOMAIN

    def _run(self, *inputs: np.ndarray, **attributes: Any) -> tuple[np.ndarray, ...]:
        call = getattr(self, "_call", None)
        if call is None:
            call = self._call = python_call(self.onnx_node)
        tensors = [torch.from_numpy(np.array(x, copy=True)) for x in inputs]
        with torch.no_grad():
            result = call(tensors)
        outs = [result] if isinstance(result, torch.Tensor) else list(result)
        if len(outs) != len(self.onnx_node.output) - 1:
            raise RuntimeError(
                f"PythonOp {self.onnx_node.name!r}: {call.label} returned {len(outs)} value(s), the node has "
                f"{len(self.onnx_node.output) - 1} output(s)"
            )
        return (np.zeros(1, dtype=np.int64), *(o.detach().cpu().numpy() for o in outs))


@dataclass
class ControlFlowCall:
    """A control-flow node whose bodies hold PythonOp nodes, run node by node by onnx's reference evaluator
    (numpy, on the CPU), the PythonOp nodes calling back torch."""

    node: onnx.NodeProto
    inputs: list[str]
    evaluator: Any

    @classmethod
    def create(cls, node: onnx.NodeProto, model: onnx.ModelProto) -> ControlFlowCall:
        """The call of ``node``, a node of ``model`` (its opsets and functions are the evaluator's)."""
        inputs = list(dict.fromkeys(node_inputs(node)))
        graph = onnx.helper.make_graph(
            [node],
            f"{node.name}_control_flow",
            [onnx.helper.make_empty_tensor_value_info(n) for n in inputs],
            [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
        )
        sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
        sub.ir_version = model.ir_version
        return cls(node, inputs, ReferenceEvaluator(sub, new_ops=[PythonOp]))

    def run(self, values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The node's outputs for the values of :attr:`inputs`."""
        feeds = {name: v.detach().cpu().numpy() for name, v in zip(self.inputs, values)}
        return [torch.from_numpy(np.asarray(o)) for o in self.evaluator.run(None, feeds)]
