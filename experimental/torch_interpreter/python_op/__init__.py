"""Custom ``torch.autograd.Function`` and custom ops exported as one ``com.microsoft::PythonOp`` node (ONNX
Runtime's schema): the export side, and the contract the runtime reads back.

Export side:

* :mod:`.capture`: during ``torch.export``, ``Function.apply`` becomes one call to the custom op
  ``aten2onnx::python_op(str key, Tensor[] inputs) -> Tensor[]``;
* :mod:`.custom_ops`: the policy for custom ops without converter (``torch.library.custom_op``, ``triton_op``,
  C++ extension ops): which become the same node with ``to_onnx(..., custom_ops="python_op")``.

Contract (written by the converters, ``ops/python_op.py``, read by the runtime, ``runtime/``):

* :mod:`.table`: what each key stands for (class, constant arguments, output rule), the classes by name;
* :mod:`.attributes`: the node's attributes;
* :mod:`.encoding`: how one custom-op call is written into the node (its ``comment`` attribute) and read back.

Choose per ``to_onnx`` call with ``autograd_functions="python_op" | "inline" | {cls: mode or output rule}``,
or per class with the attributes ``onnx_export = "inline"`` and ``onnx_output_rule = staticmethod(...)``.

Import the submodule you need: the converter and the runtime read the contract and never load ``capture``
(the ``torch.export`` hook) or ``custom_ops`` (the export policy).
"""
