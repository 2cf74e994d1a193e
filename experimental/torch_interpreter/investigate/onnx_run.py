"""Runs an ONNX model with every value named after an FX node observable.

The interpreter names the value an FX node produces after the node (``linear``, ``max_1`` for the second
output of ``max``) and every ONNX node it creates carries ``metadata_props[FX_NODE]``; both
together align an ONNX value with its FX node. Those values become graph outputs for one run of
onnxruntime with graph optimizations off, so that no value is fused away.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ..metadata import FX_NODE, FX_OUTPUT
from ..runtime import InferenceSession

logger = logging.getLogger(__name__)


def fx_groups(graph: ir.Graph) -> dict[str, list[ir.Node]]:
    """The nodes of ``graph`` (top level) grouped by the FX node they were created for.

    >>> import torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> model = to_onnx(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), (torch.randn(1, 2),), as_ir=True)
    >>> {k: [n.op_type for n in v] for k, v in fx_groups(model.graph).items()}
    {'linear': ['Gemm'], 'relu': ['Relu']}
    """
    groups: dict[str, list[ir.Node]] = defaultdict(list)
    for node in graph:
        name = node.metadata_props.get(FX_NODE)
        if name:
            groups[name].append(node)
    return dict(groups)


def fx_outputs(graph: ir.Graph) -> dict[str, ir.Value]:
    """The values of ``graph`` (top level) tagged with the FX output they hold (``linear``, ``max:1``).

    >>> import torch
    >>> from experimental.torch_interpreter import to_onnx
    >>> model = to_onnx(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()), (torch.randn(1, 2),), as_ir=True)
    >>> {k: v.name for k, v in fx_outputs(model.graph).items()}
    {'linear': 'linear', 'relu': 'output'}
    """
    tags: dict[str, ir.Value] = {}
    for node in graph:
        for value in node.outputs:
            tag = value.metadata_props.get(FX_OUTPUT)
            if tag:
                tags.setdefault(tag, value)
    return tags


def result_values(name: str, nodes: Sequence[ir.Node]) -> dict[str, ir.Value]:
    """The values of one FX node's group named after it (``name``, ``name_1``, ...), by value name;
    intermediate values (``name__Mul``) are left out."""
    prefix = name + "__"
    return {v.name: v for node in nodes for v in node.outputs if v.name and not v.name.startswith(prefix)}


@contextlib.contextmanager
def observed(model: ir.Model, values: Sequence[ir.Value], types: Mapping[str, ir.TypeProtocol]) -> Iterator[ir.Model]:
    """While inside, ``values`` are outputs of ``model`` too (typed from ``types`` when the model does not
    say); the outputs are restored on exit."""
    graph = model.graph
    saved = list(graph.outputs)
    present = {id(v) for v in saved}
    added = []
    for value in values:
        if id(value) in present:
            continue
        if value.type is None and value.name in types:
            value.type = types[value.name]
        if value.type is None:
            logger.debug("value %r has no type, not observed", value.name)
            continue
        graph.outputs.append(value)
        present.add(id(value))
        added.append(value)
    try:
        yield model
    finally:
        graph.outputs.clear()
        graph.outputs.extend(saved)


def run_unoptimized(model: ir.Model, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Runs ``model`` on the CPU with onnxruntime's graph optimizations disabled; every output by name."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    sess = InferenceSession(model, providers=["CPUExecutionProvider"], sess_options=options)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))
