"""What a ``com.microsoft::PythonOp`` node calls at run time, and the nodes run in Python around it.

:func:`python_call` reads a node, its attributes checked first (:mod:`.node_checks`): a custom op (``func_name``
``torch.ops.<ns>.<op>.<overload>``, found through ``torch.ops``, :mod:`.custom_op_calls`) or a
``torch.autograd.Function`` (exported or registered in this process,
:mod:`experimental.torch_interpreter.python_op.table`, or imported from a module the session's
:class:`.trust.TrustPolicy` allows), its constants rebuilt from the attributes
(:mod:`experimental.torch_interpreter.python_op.attributes`). :class:`ControlFlowCall` runs a control-flow node
whose bodies hold PythonOp nodes with onnx's reference evaluator, :class:`PythonOp` calling torch back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ..errors import MalformedModelError, MissingFunctionError, PythonOpError, TorchInterpreterError, UntrustedCodeError
from ..python_op import contexts, table
from ..python_op.attributes import DOMAIN, GRAD_OP_TYPE, decode_constants
from ..python_op.encoding import PREFIX
from .custom_op_calls import call_arguments, node_constants, resolve_op
from .node_checks import grad_node_attributes, node_attributes
from .python_op_nodes import node_inputs, python_op_nodes
from .trust import TrustPolicy, import_module, option_hint


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
    #: the ranks the node declares for its outputs (``output_tensor_ranks``), empty when it declares none
    output_ranks: list[int] = field(default_factory=list)
    #: ``training_mode=1``: a Function run with autograd recording, its context kept for the PythonOpGrad node
    requires_grads: list[int] | None = None

    def arguments(self, tensors: Sequence[torch.Tensor]) -> list[Any]:
        """The arguments of the Function's ``apply``: ``tensors`` in the ``d`` positions, constants elsewhere."""
        it = iter(tensors)
        return [next(it) if c == "d" else self.constants[i] for i, c in enumerate(self.convention)]

    def __call__(self, tensors: Sequence[torch.Tensor]) -> Any:
        if self.op is not None:
            args, kwargs = call_arguments(self.op, self.convention, self.constants, tensors, self.lists)
            return self.op(*args, **kwargs)
        return self.cls.apply(*self.arguments(tensors))  # type: ignore[union-attr]

    def run(self, tensors: Sequence[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, list[Any]]:
        """The node's outputs: the context (a handle for the backward when the node trains, else zeros), then
        the function's outputs; what the code raises becomes a :class:`PythonOpError` naming the node."""
        with raised_by(self.node, self.label):
            if self.requires_grads is not None and self.cls is not None:
                tensor_grads = [r for c, r in zip(self.convention, self.requires_grads) if c == "d"]
                handle, outs = contexts.run_forward(
                    self.label, self.cls.apply, self.arguments, tensors, tensor_grads, _as_list
                )
                return handle.to(device), outs
            with torch.no_grad():
                result = self(tensors)
            return torch.zeros(1, dtype=torch.int64, device=device), _as_list(result)


def _as_list(result: Any) -> list[Any]:
    return [result] if isinstance(result, torch.Tensor) else list(result)


@contextmanager
def raised_by(node: onnx.NodeProto, label: str) -> Iterator[None]:
    """Turns what the code a node calls raises into a :class:`PythonOpError` naming the node (the project's own
    errors and ``MemoryError`` go through).

    >>> with raised_by(onnx.helper.make_node("PythonOp", [], [], name="n"), "m.F"):
    ...     1 / 0
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.PythonOpError: PythonOp node 'n': m.F raised ZeroDivisionError: division by zero
    """
    try:
        yield
    except (TorchInterpreterError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - any error of the called code, chained
        raise PythonOpError(
            f"{node.op_type} node {node.name!r}: {label} raised {type(e).__name__}: {str(e)[:1000]}"
        ) from e


@dataclass
class GradCall:
    """One ``com.microsoft::PythonOpGrad`` node: the backward of the context its input 0 holds, run once
    (:mod:`experimental.torch_interpreter.python_op.contexts`); nothing is imported or resolved, the context was
    made in this process by the forward's PythonOp node."""

    node: onnx.NodeProto
    label: str
    output_types: list[int]
    output_ranks: list[int] = field(default_factory=list)

    def run(self, tensors: Sequence[torch.Tensor | None], device: torch.device) -> tuple[None, list[Any]]:
        """The gradients of the forward's tensor inputs (None where none), from the context and the incoming
        gradients ``tensors``."""
        context, grads = tensors[0], list(tensors[1:])
        with raised_by(self.node, self.label):
            return None, contexts.run_backward(context, grads, self.label, f"PythonOpGrad node {self.node.name!r}")


def function_class(name: str, policy: TrustPolicy, where: str) -> type:
    """The ``torch.autograd.Function`` a PythonOp node names: exported or registered in this process, or found in
    a module ``policy`` allows (imported then); refused with
    :class:`~experimental.torch_interpreter.errors.UntrustedCodeError` before any import otherwise.

    >>> function_class("this.Zen", TrustPolicy(), "PythonOp node 'n'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.UntrustedCodeError: PythonOp node 'n': the autograd.Function 'this.Zen' is not registered ...
    """
    cls = table.registered_function(name)
    if cls is not None:
        return cls
    module = ".".join(table.check_function_name(name, where)[:-1])
    if not policy.allows(module):
        raise UntrustedCodeError(
            f"{where}: the autograd.Function {name!r} is not registered in this process and its module {module!r} "
            "is not allowed, nothing was imported: run the model in the process that exported it, register the "
            "class (from experimental.torch_interpreter.python_op.table import register_function; "
            f"register_function(cls)), or {option_hint(module)}; a model exported with "
            "to_onnx(..., autograd_functions='inline') has no such node"
        )
    return table.resolve_function(name, lambda module: import_module(module, policy, where), where)


def python_call(node: onnx.NodeProto, policy: TrustPolicy | None = None) -> PythonCall | GradCall:
    """What a PythonOp node calls: a custom op (``func_name`` ``torch.ops.<ns>.<op>.<overload>``, registered in
    this process) or a ``torch.autograd.Function`` (found by its qualified name), constants rebuilt; the node's
    attributes are checked first and nothing is imported unless ``policy`` (default: nothing) allows it.

    >>> class Twice(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, alpha):
    ...         return x * 2 * alpha
    >>> table.register_function(Twice, "doc_example.Twice")
    >>> node = onnx.helper.make_node("PythonOp", ["x"], ["ctx", "y"], domain="com.microsoft",
    ...                              func_name="doc_example.Twice", input_convention="dc",
    ...                              input_float_scalars=[0.5], input_float_scalar_positions=[1])
    >>> python_call(node)([torch.tensor([-1.0, 2.0])])
    tensor([-1.,  2.])
    """
    policy = policy or TrustPolicy()
    where = f"PythonOp node {node.name!r}"
    if node.op_type == GRAD_OP_TYPE:
        attrs = grad_node_attributes(node)
        ranks = list(attrs.get("output_tensor_ranks", []))
        return GradCall(node, attrs["func_name"], list(attrs.get("output_tensor_types", [])), ranks)
    attrs = node_attributes(node)
    name, convention = attrs["func_name"], attrs["input_convention"]
    types = list(attrs.get("output_tensor_types", []))
    ranks = list(attrs.get("output_tensor_ranks", []))
    if name.startswith(PREFIX):
        op = resolve_op(name, attrs.get("comment", ""), node.name, policy)
        constants, lists = node_constants(attrs, op, where)
        return PythonCall(node, name, convention, constants, types, op=op, lists=lists, output_ranks=ranks)
    cls = function_class(name, policy, where)
    trains = attrs.get("training_mode", 0) == 1
    return PythonCall(
        node, name, convention, _function_constants(attrs, name, where), types, cls=cls,
        requires_grads=list(attrs.get("input_requires_grads", [])) if trains else None, output_ranks=ranks,
    )


def _function_constants(attrs: dict[str, Any], name: str, where: str) -> dict[int, Any]:
    try:
        return decode_constants(attrs, lambda address: table.pointer(address, name))
    except (ValueError, TypeError) as e:
        raise MalformedModelError(f"{where}: {e}") from None
    except LookupError as e:  # an argument by reference unknown here (or given to another class at export)
        raise MissingFunctionError(f"{where}: {e}") from None


def check_python_ops(model: onnx.ModelProto, policy: TrustPolicy | None = None) -> None:
    """Reads every PythonOp node of ``model`` (control-flow bodies and local functions included) under
    ``policy``, so that a session refuses a model when it is created, before anything runs.

    >>> node = onnx.helper.make_node("PythonOp", ["x"], ["ctx", "y"], domain="com.microsoft",
    ...                              func_name="torch.ops.aten.relu.default", input_convention="d")
    >>> check_python_ops(onnx.helper.make_model(onnx.helper.make_graph([node], "g", [], [])))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.UntrustedCodeError: PythonOp node '' calls aten::relu.default, ...
    """
    for node in python_op_nodes(model):
        python_call(node, policy)


class PythonOp(OpRun):
    """onnx's reference evaluator kernel for ``com.microsoft::PythonOp`` (the evaluator finds a kernel by its
    class name): calls the function or the custom op (numpy in and out), found under the session's ``policy``
    (:func:`kernel` makes the class of one policy)."""

    op_domain = DOMAIN
    policy = TrustPolicy()

    def _run(self, *inputs: np.ndarray, **attributes: Any) -> tuple[np.ndarray, ...]:
        call = getattr(self, "_call", None)
        if call is None:
            call = self._call = python_call(self.onnx_node, self.policy)
        tensors = [torch.from_numpy(np.array(x, copy=True)) for x in inputs]
        with raised_by(self.onnx_node, call.label), torch.no_grad():
            outs = _as_list(call(tensors))
        if len(outs) != len(self.onnx_node.output) - 1:
            raise MalformedModelError(
                f"PythonOp {self.onnx_node.name!r}: {call.label} returned {len(outs)} value(s), the node has "
                f"{len(self.onnx_node.output) - 1} output(s)"
            )
        return (np.zeros(1, dtype=np.int64), *(o.detach().cpu().numpy() for o in outs))


def kernel(policy: TrustPolicy) -> type[PythonOp]:
    """The :class:`PythonOp` kernel resolving its nodes under ``policy`` (same class name, as the evaluator needs).

    >>> kernel(TrustPolicy(("mypkg",))).__name__, kernel(TrustPolicy(("mypkg",))).policy.modules
    ('PythonOp', ('mypkg',))
    """
    return type("PythonOp", (PythonOp,), {"policy": policy})


@dataclass
class ControlFlowCall:
    """A control-flow node whose bodies hold PythonOp nodes, run node by node by onnx's reference evaluator
    (numpy, on the CPU), the PythonOp nodes calling back torch."""

    node: onnx.NodeProto
    inputs: list[str]
    evaluator: Any

    @classmethod
    def create(cls, node: onnx.NodeProto, model: onnx.ModelProto, policy: TrustPolicy | None = None) -> ControlFlowCall:
        """The call of ``node``, a node of ``model`` (its opsets and functions are the evaluator's), its PythonOp
        nodes resolved under ``policy`` (the session checks them all before: :func:`check_python_ops`)."""
        inputs = list(dict.fromkeys(node_inputs(node)))
        graph = onnx.helper.make_graph(
            [node],
            f"{node.name}_control_flow",
            [onnx.helper.make_empty_tensor_value_info(n) for n in inputs],
            [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
        )
        sub = onnx.helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions)
        sub.ir_version = model.ir_version
        return cls(node, inputs, ReferenceEvaluator(sub, new_ops=[kernel(policy or TrustPolicy())]))

    def run(self, values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The node's outputs for the values of :attr:`inputs`."""
        feeds = {name: v.detach().cpu().numpy() for name, v in zip(self.inputs, values)}
        return [torch.from_numpy(np.asarray(o)) for o in self.evaluator.run(None, feeds)]
