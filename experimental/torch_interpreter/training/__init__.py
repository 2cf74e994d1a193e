"""Training through onnxruntime: a ``torch.compile`` backend whose forward and backward graphs (AOTAutograd's) are
translated by the project's converters and run by onnxruntime, a custom ``torch.autograd.Function`` kept as one
``PythonOp`` / ``PythonOpGrad`` pair.

* :mod:`.backend`: :class:`OrtBackend` (:class:`GraphRecord`: what it compiled) and the ``"aten2onnx"`` backend,
  :func:`keep_functions`;
* :mod:`.options`: :class:`BackendOptions`;
* :mod:`.graph_translation`: one FX graph -> one ONNX model;
* :mod:`.compiled_graph`: the model run on torch tensors;
* :mod:`.verification`: each graph compared with PyTorch (``verify=True``).

>>> import torch
>>> from experimental.torch_interpreter.training import OrtBackend
>>> compiled = torch.compile(torch.nn.Linear(2, 2), backend=OrtBackend())
"""

from .backend import GraphRecord, OrtBackend, aten2onnx, keep_functions
from .options import BackendOptions

__all__ = ["BackendOptions", "GraphRecord", "OrtBackend", "aten2onnx", "keep_functions"]
