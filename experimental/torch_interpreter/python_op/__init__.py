"""Custom ``torch.autograd.Function`` exported as one ``com.microsoft::PythonOp`` node (ONNX Runtime's schema).

* :mod:`.capture`: during ``torch.export``, ``Function.apply`` becomes one call to the custom op
  ``aten2onnx::python_op(str key, Tensor[] inputs) -> Tensor[]``;
* :mod:`.table`: what each key stands for (class, constant arguments, output rule), the classes by name;
* :mod:`.attributes`: the node's attributes, written by the converter (``ops/python_op.py``) and read back
  by the runtime (``runtime_python_op.py``).

Choose per ``to_onnx`` call with ``autograd_functions="python_op" | "inline" | {cls: mode or output rule}``,
or per class with the attributes ``onnx_export = "inline"`` and ``onnx_output_rule = staticmethod(...)``.
"""

from .attributes import DOMAIN, OP_TYPE, constant_kind, decode_constants, node_attributes
from .capture import INLINE, MODES, PYTHON_OP, Resolver, capture_autograd_functions, python_op
from .table import func_name, register_function, resolve_function

__all__ = [
    "DOMAIN",
    "INLINE",
    "MODES",
    "OP_TYPE",
    "PYTHON_OP",
    "Resolver",
    "capture_autograd_functions",
    "constant_kind",
    "decode_constants",
    "func_name",
    "node_attributes",
    "python_op",
    "register_function",
    "resolve_function",
]
