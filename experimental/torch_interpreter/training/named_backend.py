"""The backend ``torch.compile(model, backend="aten2onnx")`` finds by name (the ``torch_dynamo_backends`` entry point
``aten2onnx``). dynamo looks it up when ``torch.compile`` is first called with that name, before it traces anything:
the lookup marks the custom ``torch.autograd.Function`` classes defined so far, as ``OrtBackend()`` does when it is
made, so that dynamo leaves them whole and the graphs hold them as PythonOp / PythonOpGrad nodes. (The backend itself
is made at dynamo's first graph, after the tracing: marking there only serves the next compilations.)
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "aten2onnx":
        from .backend import aten2onnx, keep_functions

        keep_functions()
        return aten2onnx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
