"""Which ONNX value stands for each output of each FX node: found through the tags the interpreter puts on
values (``metadata_props[FX_OUTPUT]``) and the FX node every ONNX node carries (``FX_NODE``); a node without
ONNX node of its own (``getitem``, ``alias``, ``detach``...) is found through the node it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx_ir as ir
import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind

from ..provenance import target_key
from .onnx_run import fx_groups, fx_outputs, result_values


def index_path(val: Any, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The path (indices into nested tuples and lists) of each tensor in ``val``, in order.

    >>> index_path((torch.zeros(1), [torch.zeros(1), 3]))
    [(0,), (1, 0)]
    """
    if isinstance(val, (tuple, list)):
        return [p for i, v in enumerate(val) for p in index_path(v, path + (i,))]
    return [path] if isinstance(val, torch.Tensor) else []


def pick(value: Any, path: tuple[int, ...]) -> Any:
    """The element of ``value`` at ``path`` (see :func:`index_path`).

    >>> pick((1, [2, 3]), (1, 0))
    2
    """
    for i in path:
        value = value[i]
    return value


class Aligner:
    """Finds the ONNX value standing for each (FX node, output) of the top-level graph ``graph``.

    ``inputs`` holds PyTorch's value of each placeholder by name, ``outputs`` the ONNX graph output standing for
    an FX node the model returns (renamed ``logits``...), ``placeholders`` the ONNX input or weight standing for a
    placeholder; ``values`` adds ONNX values by FX output tag (``name``, ``name:1``, as ``metadata_props[FX_OUTPUT]``
    writes them) to those the model's tags give: the value a converter returned when it made no node of its own
    and the value already had a tag (an input handed back as it is). :meth:`exported` builds one for an
    ``ExportedProgram``.
    """

    def __init__(
        self,
        graph: torch.fx.Graph,
        model: ir.Model,
        torch_results: dict[str, Any],
        inputs: Mapping[str, Any],
        outputs: Mapping[str, ir.Value] | None = None,
        placeholders: Mapping[str, ir.Value] | None = None,
        values: Mapping[str, ir.Value] | None = None,
    ):
        self.groups = fx_groups(model.graph)
        self.tags = fx_outputs(model.graph)
        for tag, value in (values or {}).items():
            self.tags.setdefault(tag, value)
        self.results = torch_results
        self.nodes = {n.name: n for n in graph.nodes}
        self.outputs = dict(outputs or {})
        self.placeholders = dict(placeholders or {})
        self.inputs = inputs
        self.missing_reason: dict[str, str] = {}

    @classmethod
    def exported(
        cls, ep: torch.export.ExportedProgram, model: ir.Model, torch_results: dict[str, Any], inputs: dict[str, Any]
    ) -> Aligner:
        """The aligner of ``model`` translated from ``ep`` (outputs and weights found through ``ep``'s signature)."""
        return cls(
            ep.graph, model, torch_results, inputs, cls._graph_outputs(ep, model), cls._placeholders(ep, model)
        )

    @staticmethod
    def _graph_outputs(ep: torch.export.ExportedProgram, model: ir.Model) -> dict[str, ir.Value]:
        """FX node name -> ONNX graph output, for the nodes returned by the model (renamed ``logits``...)."""
        out_node = next(n for n in ep.graph.nodes if n.op == "output")
        flat = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
        user = [a for a, spec in zip(flat, ep.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
        user = [a for a in user if a is not None]
        mapping: dict[str, ir.Value] = {}
        if len(user) != len(model.graph.outputs):
            return mapping
        for arg, value in zip(user, model.graph.outputs):
            producer = value.producer()
            if isinstance(arg, torch.fx.Node) and producer is not None:
                mapping.setdefault(arg.name, value)
        return mapping

    @staticmethod
    def _placeholders(ep: torch.export.ExportedProgram, model: ir.Model) -> dict[str, ir.Value]:
        """Placeholder name -> ONNX weight (initializer named after the parameter) or graph input."""
        mapping: dict[str, ir.Value] = {}
        graph_inputs = iter(model.graph.inputs)
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        for node, spec in zip(placeholders, ep.graph_signature.input_specs):
            if spec.kind == InputKind.USER_INPUT:
                if isinstance(node.meta.get("val"), (torch.Tensor, torch.SymInt)):
                    mapping[node.name] = next(graph_inputs, None)
            elif spec.target in model.graph.initializers:
                mapping[node.name] = model.graph.initializers[spec.target]
        return mapping

    def _torch_value(self, node: torch.fx.Node) -> Any:
        if node.op == "placeholder":
            return self.inputs.get(node.name)
        return self.results.get(node.name)

    def resolve(self, name: str, path: tuple[int, ...], depth: int = 0) -> tuple[ir.Value | None, str]:
        """The ONNX value of output ``path`` of FX node ``name`` and the FX node it was found under."""
        node = self.nodes[name]
        group = self.groups.get(name)
        tag = ":".join([name, *map(str, path)])
        if tag in self.tags:
            return self.tags[tag], name
        if group:
            if not self.tags:  # a model made before values were tagged: names, when they are unambiguous
                named = result_values(name, group)
                expected = {name + "".join(f"_{i}" for i in p if i) for p in index_path(node.meta.get("val"))}
                onnx_name = name + "".join(f"_{i}" for i in path if i)
                if onnx_name in named and set(named) == expected:
                    return named[onnx_name], name
                if not path and name in self.outputs:
                    return self.outputs[name], name
            self.missing_reason.setdefault(name, "no ONNX value named after it (removed as unused or renamed)")
            return None, ""
        if not path and name in self.outputs:
            return self.outputs[name], name
        if depth > 8 or node.op != "call_function":
            return None, ""
        # no ONNX node of its own: getitem picks an output of another node, passthrough converters
        # (alias, detach, clone...) return their input; the latter only when PyTorch agrees they are equal
        if target_key(node.target) == "operator::getitem" and isinstance(node.args[0], torch.fx.Node):
            return self.resolve(node.args[0].name, (node.args[1],) + path, depth + 1)
        source = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
        if source is not None and not path and _same_tensor(self.results.get(name), self._torch_value(source)):
            if source.op == "placeholder":
                value = self.placeholders.get(source.name)
                if value is not None:
                    return value, source.name
            else:
                return self.resolve(source.name, (), depth + 1)
        self.missing_reason.setdefault(
            name,
            "nothing uses its result (removed)" if not node.users
            else "no ONNX value holds it (folded into a constant, or removed because nothing uses the result)",
        )
        return None, ""


def _same_tensor(a: Any, b: Any) -> bool:
    """Both are tensors of the same shape, type and values (NaN equal to NaN)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    return bool(torch.equal(a, b))
