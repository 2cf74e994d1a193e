"""Custom ``torch.autograd.Function`` exported as one ``com.microsoft::PythonOp`` node (ONNX Runtime's schema).

* :mod:`.capture`: during ``torch.export``, ``Function.apply`` becomes one call to the custom op
  ``aten2onnx::python_op(str key, Tensor[] inputs) -> Tensor[]``;
* :mod:`.table`: what each key stands for (class, constant arguments, output rule), the classes by name;
* :mod:`.attributes`: the node's attributes, written by the converter (``ops/python_op.py``) and read back
  by the runtime (``runtime_python_op.py``).
* :mod:`.custom_ops`: custom ops without converter (``torch.library.custom_op``, ``triton_op``, C++ extension
  ops) exported as the same node with ``to_onnx(..., custom_ops="python_op")``, called back through
  ``torch.ops`` by the runtime.

Choose per ``to_onnx`` call with ``autograd_functions="python_op" | "inline" | {cls: mode or output rule}``,
or per class with the attributes ``onnx_export = "inline"`` and ``onnx_output_rule = staticmethod(...)``.

Import the submodule you need: the converter and the runtime read ``table`` and ``attributes`` and never
load ``capture`` (the ``torch.export`` hook).
"""
