"""The initializers of a model cut at its PythonOp nodes, held once however many segments read them.

Copying an initializer into the model of every segment that reads it multiplies its memory by the number of
segments (a weight read at each of 40 levels of PythonOp nodes: 40 copies in the segments' models, more in their
sessions). :class:`SharedInitializers` keeps one copy of each initializer read by more than one segment:

* when the session made its own ``SessionOptions``, one ``OrtValue`` given to every segment's session through
  ``SessionOptions.add_external_initializers`` (the segment's model declares the initializer as external data
  that onnxruntime replaces by the value, never reading a file): still an initializer for onnxruntime, constant
  folding and prepacking included. onnxruntime 1.32 still copies it into each session on the CPU, and prepacks a
  ``MatMul``'s weight there (measured: 8 MB more per session for an 8 MB weight, twice as fast a product);
* when those copies would exceed :data:`MAX_SESSION_COPIES` bytes (a model file can repeat a weight at a thousand
  levels), or when the user gave ``sess_options``, which the session must not change: one tensor fed to the
  segments as an input at each run, never copied (it goes through DLPack).

An initializer smaller than :data:`MIN_SHARED_BYTES` (an axis, a shape, which onnxruntime's shape inference must
read in the model) is copied into each segment's model while all copies stay under the bound.

``Constant`` nodes holding a tensor become initializers first (:func:`constants_as_initializers`), so that they are
shared the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnxruntime as ort
import torch

from .ort_values import to_torch
from .python_op_nodes import node_inputs
from .segments import Segment

logger = logging.getLogger(__name__)


def constants_as_initializers(graph: onnx.GraphProto) -> int:
    """Turns the ``Constant`` nodes of ``graph`` (not its bodies) holding a ``value`` tensor into initializers;
    returns how many.

    >>> node = onnx.helper.make_node("Constant", [], ["c"], value=onnx.helper.make_tensor("v", 1, [1], [2.0]))
    >>> graph = onnx.helper.make_graph([node], "g", [], [])
    >>> constants_as_initializers(graph), [t.name for t in graph.initializer], len(graph.node)
    (1, ['c'], 0)
    """
    kept, moved = [], 0
    for node in graph.node:
        attrs = list(node.attribute)
        if (
            node.op_type == "Constant"
            and node.domain in ("", "ai.onnx")
            and len(attrs) == 1
            and attrs[0].name == "value"
            and len(node.output) == 1
            and node.output[0]
        ):
            tensor = onnx.TensorProto()
            tensor.CopyFrom(attrs[0].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
            moved += 1
        else:
            kept.append(node)
    if moved:
        del graph.node[:]
        graph.node.extend(kept)
    return moved


#: the most bytes onnxruntime may copy (and prepack) of the shared initializers in the sessions of the segments
#: reading them; above, they are fed as inputs
MAX_SESSION_COPIES = 256 << 20
#: below this size (bytes), an initializer several segments read is copied into each of their models (while the
#: copies stay under MAX_SESSION_COPIES): onnxruntime's shape inference reads such constants (axes, shapes)
MIN_SHARED_BYTES = 1 << 16
#: the location the segments' models give a shared initializer: no file, onnxruntime takes the OrtValue instead
SHARED_LOCATION = "a2o_shared_initializer"


def _placeholder(tensor: onnx.TensorProto) -> onnx.TensorProto:
    """The declaration of an initializer without its bytes: external data that
    ``SessionOptions.add_external_initializers`` replaces before anything reads it."""
    declared = onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=list(tensor.dims))
    declared.data_location = onnx.TensorProto.EXTERNAL
    declared.external_data.add(key="location", value=SHARED_LOCATION)
    return declared


@dataclass
class SharedInitializers:
    """The initializers read by more than one segment: ``values`` (given through ``add_external_initializers``, kept alive
    here as long as the sessions) or ``fed`` (torch tensors fed at each run, with their ``types``)."""

    values: dict[str, ort.OrtValue] = field(default_factory=dict)
    fed: dict[str, torch.Tensor] = field(default_factory=dict)
    types: dict[str, onnx.ValueInfoProto] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        steps: Sequence[Any],
        initializers: Mapping[str, onnx.TensorProto],
        own_options: bool,
    ) -> SharedInitializers:
        """The shared initializers of the planned ``steps`` (:func:`.segments.plan`); ``own_options``: whether
        the session makes its own options (:meth:`give` then adds the values to them), False when the user gave
        them."""
        readers: dict[str, int] = {}
        for step in steps:
            if isinstance(step, Segment):
                for name in {n for node in step.nodes for n in node_inputs(node)} & set(initializers):
                    readers[name] = readers.get(name, 0) + 1
        names = [
            n for n, count in readers.items() if count > 1 and initializers[n].data_type != onnx.TensorProto.STRING
        ]
        arrays = {n: onnx.numpy_helper.to_array(initializers[n]) for n in names}
        # small ones (shapes, axes: onnxruntime's shape inference reads them) stay in each segment's model
        small = {n for n in names if arrays[n].nbytes < MIN_SHARED_BYTES}
        copies = sum(arrays[n].nbytes * readers[n] * (1 if n in small else 2) for n in names)  # copy, prepacked
        within = copies <= MAX_SESSION_COPIES
        if not within:
            logger.info(
                "initializers read by several segments: %d bytes of copies in the segments' sessions, more than %d: "
                "fed as inputs instead", copies, MAX_SESSION_COPIES,
            )
        shared = cls()
        for name, array in arrays.items():
            if within and name in small:
                continue
            if within and own_options:
                shared.values[name] = ort.OrtValue.ortvalue_from_numpy(array)
            else:
                tensor = initializers[name]
                shared.fed[name] = to_torch(array.copy())
                shared.types[name] = onnx.helper.make_tensor_value_info(name, tensor.data_type, list(tensor.dims))
        return shared

    def give(self, options: ort.SessionOptions, names: set[str]) -> None:
        """Adds to ``options`` (those of one segment's session, made by the session) the shared values among
        ``names``, the initializers that segment reads (onnxruntime refuses a value its model does not declare)."""
        given = [n for n in self.values if n in names]
        if given:
            options.add_external_initializers(given, [self.values[n] for n in given])

    def segment_initializers(self, initializers: Mapping[str, onnx.TensorProto]) -> dict[str, onnx.TensorProto]:
        """What the segments' models hold as initializers: each one itself, a shared one given by
        ``add_external_initializers`` declared without bytes, a fed one not at all (it is an input)."""
        return {
            name: _placeholder(t) if name in self.values else t
            for name, t in initializers.items()
            if name not in self.fed
        }
