"""Weights read where they lie: a model whose parameters are on the meta device exported with ``weights=``.

torch.export needs no weight values: a model built under :func:`empty_weights` (parameters on the meta device,
buffers real) is captured with the memory of its graph only. Its initializers are then taken from a
:class:`Checkpoint` (safetensors files, transformers' sharded folders, or a mapping of tensors): a stored tensor
of the right type stays in its file and the ONNX model points at it (``onnx_ir.ExternalTensor``); one that needs
new data (another floating type) is computed when the model is saved, one tensor at a time.

This layer reads files and builds tensors; it imports the base only.
"""

from .empty_weights import cpu_stand_ins, empty_weights, meta_tensor_names
from .source import Checkpoint, MetaWeights

__all__ = ["Checkpoint", "MetaWeights", "cpu_stand_ins", "empty_weights", "meta_tensor_names"]
