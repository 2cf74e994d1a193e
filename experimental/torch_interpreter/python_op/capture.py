"""Capture of ``torch.autograd.Function.apply`` as one call to the custom op ``aten2onnx::python_op``.

While :func:`capture_autograd_functions` is active, ``Function.apply`` is replaced by a call to
``aten2onnx::python_op(str key, Tensor[] inputs) -> Tensor[]`` for the classes the policy keeps; ``key`` indexes
the table of captured calls (:mod:`.table`). torch.export records that op instead of the forward's ops, in
non-strict mode (our ``apply`` runs in Python) and in strict mode (the kept classes are put in the graph as
they are, dynamo's ``allow_in_graph``, so that the replaced ``apply`` runs when the graph is traced to aten).
The op's fake implementation gives the outputs' shapes and dtypes from the user's output rule, or by running
``forward`` on the fake tensors.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from ..errors import ConversionError
from ..torch_versions import FUNCTION_APPLY, dynamo_allowed_callable_ids, original_apply, uses_setup_context
from . import contexts, table
from .fake import RULE_ATTRIBUTE, fake_outputs
from .training import python_op_train

#: the modes a Function class can be exported with
PYTHON_OP = "python_op"
INLINE = "inline"
MODES = (PYTHON_OP, INLINE)
#: class attributes a Function may define to choose its mode and give its output rule
MODE_ATTRIBUTE = "onnx_export"

_LOCAL = threading.local()
_PATCH_LOCK = threading.Lock()
_PATCH_COUNT = 0

Policy = str | Mapping[Any, Any] | None


# -- the custom op ----------------------------------------------------------------------------------------
@torch.library.custom_op("aten2onnx::python_op", mutates_args=())
def python_op(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs the captured ``Function.apply`` call ``key`` on ``inputs`` (eager execution of an exported graph)."""
    call = table.get(key)
    with torch.no_grad():
        outs = call.outputs(original_apply(call.cls, *call.bind(inputs)))
    return contexts.unaliased(outs, inputs)


@python_op.register_fake
def _python_op_fake(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return fake_outputs(table.get(key), inputs)


# -- policy -------------------------------------------------------------------------------------------------
class Resolver:
    """Chooses, for each Function class, between a PythonOp node (with an output rule or None) and inlining.

    In order: the entry of ``policy`` for the class (the class or its qualified name as key; the value is a
    mode or an output rule, which means ``python_op``), the class attribute ``onnx_export`` (and
    ``onnx_output_rule``), ``policy`` itself when it is a mode, else ``python_op`` for classes defined outside
    torch and ``inline`` for torch's own.
    """

    def __init__(self, policy: Policy = None, training: bool = False, differentiable: bool = False):
        self.default: str | None = None
        self.entries: dict[Any, Any] = {}
        if isinstance(policy, str):
            self.default = _check_mode(policy, "autograd_functions")
        elif isinstance(policy, Mapping):
            for key, value in policy.items():
                if not (isinstance(key, str) or (isinstance(key, type) and issubclass(key, torch.autograd.Function))):
                    raise TypeError(
                        f"autograd_functions keys are torch.autograd.Function classes or their qualified names, "
                        f"not {key!r}"
                    )
                if not callable(value):
                    _check_mode(value, f"autograd_functions[{key!r}]")
                self.entries[key] = value
        elif policy is not None:
            raise TypeError(
                f"autograd_functions is 'python_op', 'inline' or a dict {{Function class: mode or output rule}}, "
                f"not {type(policy).__name__}"
            )
        self.training = int(bool(training))
        #: a call that needs gradients becomes ``python_op_train`` (its backward ``python_op_grad``): the
        #: torch.compile backend, where AOTAutograd differentiates the graph
        self.differentiable = bool(differentiable)

    def resolve(self, cls: type) -> tuple[str, Callable[..., Any] | None]:
        rule = getattr(cls, RULE_ATTRIBUTE, None)
        for key in (cls, table.func_name(cls), cls.__qualname__):
            if key in self.entries:
                value = self.entries[key]
                if callable(value):
                    return PYTHON_OP, value
                return value, rule
        mode = getattr(cls, MODE_ATTRIBUTE, None)
        if mode is not None:
            return _check_mode(mode, f"{cls.__qualname__}.{MODE_ATTRIBUTE}"), rule
        if self.default is not None:
            return self.default, rule
        module = cls.__module__ or ""
        return (INLINE if module == "torch" or module.startswith("torch.") else PYTHON_OP), rule


def _check_mode(mode: Any, where: str) -> str:
    if mode not in MODES:
        raise ValueError(f"{where} must be one of {MODES} or an output rule (a callable), not {mode!r}")
    return mode


# -- the replacement of apply ---------------------------------------------------------------------------------
def _forward_arguments(cls: type, args: tuple, kwargs: dict) -> list[Any]:
    """Every argument of ``forward`` after ``ctx``, positional, defaults applied, ``*args`` flattened."""
    signature = inspect.signature(cls.forward)
    bound = signature.bind(*args, **kwargs) if uses_setup_context(cls) else signature.bind(None, *args, **kwargs)
    bound.apply_defaults()
    params = list(signature.parameters.values())
    if not uses_setup_context(cls):
        params = params[1:]
    values: list[Any] = []
    for param in params:
        value = bound.arguments.get(param.name, ())
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            values.extend(value)
        elif param.kind == inspect.Parameter.VAR_KEYWORD and not value:
            continue
        elif param.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise ConversionError(
                f"{table.func_name(cls)}.forward has the keyword-only parameter {param.name!r}: a PythonOp node "
                "passes its arguments by position"
            )
        else:
            values.append(value)
    return values


def _captured_apply(cls: type, *args: Any, **kwargs: Any) -> Any:
    resolver: Resolver | None = getattr(_LOCAL, "resolver", None)
    if resolver is None:
        return original_apply(cls, *args, **kwargs)
    mode, rule = resolver.resolve(cls)
    if mode == INLINE:
        return original_apply(cls, *args, **kwargs)
    values = _forward_arguments(cls, args, kwargs)
    convention, constants, tensors, grads = "", [], [], []
    for i, value in enumerate(values):
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise ConversionError(
                f"argument {i} of {table.func_name(cls)}.apply is a dynamic value ({value}): PythonOp constants are "
                "fixed at export; pass it as a tensor or compute it inside forward"
            )
        if not isinstance(value, torch.Tensor) and any(isinstance(v, torch.Tensor) for v in tree_leaves(value)):
            raise ConversionError(
                f"argument {i} of {table.func_name(cls)}.apply holds tensors inside a {type(value).__name__}: a "
                "PythonOp node takes tensors as separate arguments only"
            )
        if isinstance(value, torch.Tensor):
            convention += "d"
            constants.append(None)
            tensors.append(value)
            grads.append(int(value.requires_grad))
        else:
            convention += "c"
            constants.append(value)
            grads.append(0)
    if resolver.differentiable and torch.is_grad_enabled() and any(grads):
        key = table.register(cls, constants, convention, grads, rule, 1, tensors)
        outs = python_op_train(key, tensors)[1:]
    else:
        key = table.register(cls, constants, convention, grads, rule, resolver.training)
        outs = torch.ops.aten2onnx.python_op(key, tensors)
    return table.get(key).structure(outs)


def subclasses(cls: type) -> Iterator[type]:
    """Every subclass of ``cls`` defined so far, each once (subclasses of subclasses included).

    >>> torch.autograd.function.InplaceFunction in set(subclasses(torch.autograd.Function))
    True
    """
    seen: set[int] = set()
    stack = list(cls.__subclasses__())
    while stack:
        sub = stack.pop()
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        yield sub
        stack.extend(sub.__subclasses__())


@contextlib.contextmanager
def capture_autograd_functions(
    policy: Policy = None, training: bool = False, strict: bool = False, differentiable: bool = False
) -> Iterator[Resolver]:
    """Inside the block, ``Function.apply`` of the classes ``policy`` keeps becomes one ``aten2onnx::python_op``
    call, which :func:`to_onnx` translates into a ``com.microsoft::PythonOp`` node.

    ``to_onnx`` enters it around ``torch.export.export``; use it directly to export an ExportedProgram
    yourself and give it to ``to_onnx`` afterwards. ``training`` sets the nodes' ``training_mode``;
    The kept classes defined before the block are marked for dynamo (``allow_in_graph``) whatever ``strict``
    says, so that a strict capture run inside the block (``strict=True``, or a retry in strict mode after a
    non-strict failure) exports them as PythonOp too instead of tracing their forward; ``strict`` is kept
    for compatibility. ``differentiable`` (the torch.compile backend): a call that needs gradients becomes
    ``python_op_train`` and its backward ``python_op_grad`` (:mod:`.training`).
    """
    global _PATCH_COUNT
    resolver = Resolver(policy, training, differentiable)
    del strict  # kept classes are marked in any case: a strict retry may run inside the block
    allowed = dynamo_allowed_callable_ids()
    added: list[int] = []
    saved = getattr(_LOCAL, "resolver", None)
    with _PATCH_LOCK:
        if _PATCH_COUNT == 0:
            torch.autograd.Function.apply = classmethod(_captured_apply)
        _PATCH_COUNT += 1
        # strict capture: dynamo writes kept classes' apply into the graph as a call, run later by our apply
        for cls in subclasses(torch.autograd.Function):
            if resolver.resolve(cls)[0] == PYTHON_OP and id(cls) not in allowed:
                allowed.add(id(cls))
                added.append(id(cls))
    _LOCAL.resolver = resolver
    try:
        yield resolver
    finally:
        _LOCAL.resolver = saved
        with _PATCH_LOCK:
            for ident in added:
                allowed.remove(ident)
            _PATCH_COUNT -= 1
            if _PATCH_COUNT == 0:
                torch.autograd.Function.apply = FUNCTION_APPLY
