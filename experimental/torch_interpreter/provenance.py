"""Where an FX node came from: its target's name (``aten::add.Tensor``, the registry's key), module scope and the
user's source line, read from ``node.meta``."""

from __future__ import annotations

import operator
import os
import re
from typing import Any

import torch
import torch.fx

from .metadata import FX_MODULE_SCOPE, FX_NODE, FX_SOURCE, FX_TARGET

_TORCH_DIR = os.path.dirname(torch.__file__)
# module-stack entries torch.export adds to nodes it inserts itself (runtime asserts, sym_size)
_TORCH_INSERTED = "_empty_nn_module_stack"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n\s*(?P<code>[^\n]*)')


#: namespaces of torch's own operators: a node of one is never a user's custom op (the export side gives it no
#: PythonOp, the runtime never calls one through a PythonOp node); checked against the namespaces a bare
#: ``import torch`` registers by ``_unittests/test_untrusted_models.py``
TORCH_NAMESPACES = frozenset(
    {
        "aten", "prim", "prims", "aten2onnx", "higher_order", "quantized", "quantization", "quantized_decomposed",
        "sparse", "mkl", "mkldnn", "mkldnn_prepacked", "onednn", "inductor", "inductor_prims", "c10d", "profiler",
        "debugprims", "rngprims", "debug_mode_ops", "export", "static_runtime", "symm_mem", "xnnpack", "vulkan",
        "vulkan_prepack", "prepacked",
    }
)


def is_torch_namespace(namespace: str) -> bool:
    """Whether ``namespace`` holds torch's own ops (private namespaces, ``_c10d_functional``..., included).

    >>> is_torch_namespace("aten"), is_torch_namespace("_quantized"), is_torch_namespace("mylib")
    (True, True, False)
    """
    return namespace in TORCH_NAMESPACES or namespace.startswith("_")


def copy_provenance(source: Any, *targets: Any) -> None:
    """Gives each ONNX node of ``targets`` the provenance of ``source`` (its ``metadata_props``: the FX node, its
    target, module scope and source line), as a rewrite does for the nodes that replace ``source``.

    >>> import onnx_ir as ir
    >>> old, new = ir.node("Relu", []), ir.node("Max", [])
    >>> old.metadata_props["pkg.torch.fx_node"] = "relu"
    >>> copy_provenance(old, new)
    >>> new.metadata_props["pkg.torch.fx_node"]
    'relu'
    """
    for target in targets:
        target.metadata_props.update(source.metadata_props)


def target_key(target: Any) -> str:
    """The registry key of an FX ``call_function`` target.

    >>> target_key(torch.ops.aten.add.Tensor)
    'aten::add.Tensor'
    >>> target_key(torch.ops.aten.linear.default)
    'aten::linear.default'
    >>> import operator
    >>> target_key(operator.getitem)
    'operator::getitem'
    """
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}::{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    if module in ("_operator", "operator") or getattr(operator, name, None) is target:
        return f"operator::{name}"
    if module in ("math", "builtins"):
        return f"{module}::{name}"
    return f"{module}::{name}" if module else name


def portable_path(path: str) -> str:
    """``path`` without what only the exporting machine has: a file of an installed package from the package's
    folder on (``transformers/models/llama/modeling_llama.py``), a file below the working directory relative to
    it, any other absolute path by its name alone (a model shipped elsewhere carries no home folders).

    >>> portable_path("/home/a/.venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py")
    'transformers/models/llama/modeling_llama.py'
    >>> portable_path("/somewhere/else/model.py")
    'model.py'
    """
    normalized = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in normalized:
            return normalized.rsplit(marker, 1)[1]
    if not os.path.isabs(path):
        return path
    here = os.getcwd()
    if os.path.commonpath([here, os.path.abspath(path)]) == here:
        return os.path.relpath(path, here)
    return os.path.basename(path)


def source_line(node: torch.fx.Node, portable: bool = False) -> str:
    """The innermost frame outside torch that created ``node``, as ``file:line in func: code``; ``portable``
    writes the file as :func:`portable_path` does (for what is saved in a model).

    Returns ``"<unknown source>"`` when the exporter recorded no stack trace.
    """
    trace = node.meta.get("stack_trace")
    if not trace:
        return "<unknown source>"
    frames = list(_FRAME.finditer(trace))
    if not frames:
        return trace.strip().splitlines()[-1]
    user = [f for f in frames if not f["file"].startswith((_TORCH_DIR, "<eval_with_key>"))]
    last = (user or frames)[-1]
    file = portable_path(last["file"]) if portable else last["file"]
    return f"{file}:{last['line']} in {last['func']}: {last['code'].strip()}"


def module_scope(node: torch.fx.Node) -> str:
    """Dotted path and class of the innermost module that called ``node``, ``""`` at top level."""
    stack = [v for k, v in (node.meta.get("nn_module_stack") or {}).items() if not k.startswith(_TORCH_INSERTED)]
    if not stack:
        return ""
    path, cls = stack[-1]
    cls_name = cls if isinstance(cls, str) else getattr(cls, "__qualname__", str(cls))
    return f"{path}: {cls_name}" if path else cls_name


def node_metadata(node: torch.fx.Node) -> dict[str, str]:
    """The ``metadata_props`` every ONNX node created for ``node`` carries (keys of :mod:`.metadata`)."""
    meta = {FX_NODE: node.name}
    if node.op == "call_function":
        meta[FX_TARGET] = target_key(node.target)
    scope = module_scope(node)
    if scope:
        meta[FX_MODULE_SCOPE] = scope
    if node.meta.get("stack_trace"):
        meta[FX_SOURCE] = source_line(node, portable=True)
    return meta


def describe(node: torch.fx.Node) -> str:
    """One line naming the FX node, its target and its source, for error messages."""
    target = target_key(node.target) if node.op == "call_function" else node.op
    scope = module_scope(node)
    where = f" in module {scope}" if scope else ""
    return f"FX node {node.name!r} ({target}){where}, from {source_line(node)}"
