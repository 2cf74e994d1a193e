"""Running the exported models: :class:`InferenceSession` (onnxruntime with torch feeds, feed checks, CUDA
fallback), which runs a model with ``com.microsoft::PythonOp`` nodes by cutting it at them.

* :mod:`.inference_session`: :class:`InferenceSession`, which picks one of the two sessions below;
* :mod:`.session`: the low-level session, one ``onnxruntime.InferenceSession`` on a plain model;
* :mod:`.python_op_session`: a model cut at its PythonOp nodes (:mod:`.segments`, :mod:`.python_op_nodes`,
  :mod:`.sharing` for the initializers several segments read), the nodes calling back a ``torch.autograd.Function``
  or a custom op (:mod:`.python_calls`, :mod:`.custom_op_calls`), everything a model file holds checked first
  (:mod:`.node_checks`, :mod:`.tensor_data`, :mod:`.trust`);
* :mod:`.ort_values`: providers and the ``OrtValue`` / torch / numpy conversions both sessions share;
* :mod:`.feeds`, :mod:`.guards`: what is checked of the feeds; :mod:`.model_loading`: the model as a path,
  bytes or proto.

The runtime reads nothing of the translation: of the export side, only what a PythonOp node means
(``python_op/table.py``, ``python_op/attributes.py``, ``python_op/encoding.py``) and the metadata keys.
"""

from .inference_session import InferenceSession
from .ort_values import default_providers, to_numpy

__all__ = ["InferenceSession", "default_providers", "to_numpy"]
