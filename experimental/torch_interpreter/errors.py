"""Exceptions raised by the converter.

Every failure a user can meet derives from :class:`TorchInterpreterError`, so a notebook can catch
one type. Messages name what failed (aten op, FX node, the user's source line) and what to try.
"""

from __future__ import annotations


class TorchInterpreterError(Exception):
    """Base class of every error raised by :mod:`experimental.torch_interpreter`."""


class InvalidModelError(TorchInterpreterError, TypeError):
    """The object given to :func:`to_onnx` is neither a ``torch.nn.Module`` nor an ``ExportedProgram``."""


class InputMismatchError(TorchInterpreterError, ValueError):
    """The inputs do not match the model's ``forward`` signature, or the feeds do not match the ONNX inputs."""


class DynamicShapeError(TorchInterpreterError, ValueError):
    """A ``dynamic_shapes`` specification does not fit the inputs, or a dynamic dimension became static."""


class ExportCaptureError(TorchInterpreterError, RuntimeError):
    """``torch.export.export`` failed; the original exception is chained as ``__cause__``."""


class UnsupportedOpError(TorchInterpreterError, NotImplementedError):
    """The exported graph contains operators without a converter.

    ``missing`` maps each operator name to the list of ``(fx_node_name, source_line)`` using it,
    so that all missing operators are reported at once.
    """

    def __init__(self, message: str, missing: dict[str, list[tuple[str, str]]]):
        super().__init__(message)
        self.missing = missing


class ConversionError(TorchInterpreterError, RuntimeError):
    """A converter failed, or produced a type that disagrees with ``node.meta['val']``."""


class RuntimeFeedError(InputMismatchError):
    """The feeds given to :class:`InferenceSession` do not match the model inputs."""


class VerificationError(TorchInterpreterError, AssertionError):
    """``to_onnx(..., verify=True)``: onnxruntime's results differ from PyTorch's; the message names the first
    FX node that differs, ``report`` is the :class:`~experimental.torch_interpreter.DiscrepancyReport`."""

    def __init__(self, message: str, report: object = None):
        super().__init__(message)
        self.report = report


class SaveError(TorchInterpreterError, OSError):
    """The ONNX model could not be written; ``model`` holds the model in memory (nothing is lost) and the
    message names the target path."""

    def __init__(self, message: str, model: object = None, path: str = ""):
        super().__init__(message)
        self.model = model
        self.path = path

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class MissingCustomOpError(TorchInterpreterError, LookupError):
    """A ``PythonOp`` node calls a custom op (``torch.ops.mylib.op``) that is not registered in the process running
    the model: the message names the module to import."""


class UntrustedCodeError(TorchInterpreterError, LookupError):
    """:class:`~experimental.torch_interpreter.InferenceSession` refused a ``PythonOp`` node of a model: the node
    names Python code (an ``autograd.Function`` neither exported nor registered in this process, a module to
    import, a built-in torch op) that the session was not allowed to import or call. The message names the node,
    the module or op and the option that allows it (``trusted_modules=...``, ``trust_python_code=True``); nothing
    was imported. A ``LookupError``: the code is not among what the session may look up."""


class MissingFunctionError(TorchInterpreterError, LookupError):
    """A ``PythonOp`` node names an ``autograd.Function`` (or an argument passed by reference) that cannot be
    found in this process although the session was allowed to look for it: the message names the node and the
    module."""


class MalformedModelError(TorchInterpreterError, ValueError):
    """A ``PythonOp`` node of a model has attributes
    :class:`~experimental.torch_interpreter.InferenceSession` cannot read: missing, of the wrong type, out of
    bounds or inconsistent with the node's inputs and outputs (a model edited or crafted by hand). The message
    names the node and the attribute."""


class PythonOpError(TorchInterpreterError, RuntimeError):
    """The code a ``PythonOp`` or ``PythonOpGrad`` node calls (an ``autograd.Function``'s ``forward`` or
    ``backward``, a custom op) raised while :class:`~experimental.torch_interpreter.InferenceSession` ran it, with
    the node's inputs and constants: the message names the node and the code, the original exception is chained
    as ``__cause__``."""


class UnsupportedTorchError(TorchInterpreterError, ImportError):
    """The installed torch is older than the supported range: the package does not import. The message names
    the range (:data:`experimental.torch_interpreter.torch_versions.SUPPORTED`) and the command that installs a
    supported release."""


class MissingDependencyError(TorchInterpreterError, ImportError):
    """An optional package a feature needs is not installed (matplotlib for plots...): the message names the
    package and the command that installs it."""


def require(module: str, feature: str, install: str | None = None) -> None:
    """Raises :class:`MissingDependencyError` when ``module`` cannot be imported.

    >>> require("json", "reading JSON")
    >>> require("no_such_package_here", "plots")
    Traceback (most recent call last):
    ...
    experimental.torch_interpreter.errors.MissingDependencyError: plots need the package 'no_such_package_here', which is not installed: pip install no_such_package_here
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(
            f"{feature} need the package {module!r}, which is not installed: pip install {install or module}"
        )


class TorchInterpreterWarning(UserWarning):
    """Base class of every warning emitted by :mod:`experimental.torch_interpreter`."""


class UntestedTorchWarning(TorchInterpreterWarning):
    """The installed torch is newer than the supported range: the package imports, but torch.export's internals
    may have moved; the message names the range the package was tested on."""


class PythonOpWarning(TorchInterpreterWarning):
    """The exported model holds ``com.microsoft::PythonOp`` nodes calling Python code (a custom
    ``torch.autograd.Function``, a custom op without converter): only
    :class:`~experimental.torch_interpreter.InferenceSession` runs them, in a process where that code is registered
    or its module allowed. ``to_onnx(..., autograd_functions="inline")`` traces the functions into plain ONNX that
    any runtime runs."""


class TrainingModeWarning(TorchInterpreterWarning):
    """The model is exported in training mode and contains modules that behave differently in eval mode
    (dropout, batch norm statistics): call ``model.eval()`` first unless a training graph is wanted."""


class ConstantInputWarning(TorchInterpreterWarning):
    """A Python scalar input was baked into the graph as a constant: another value at run time is ignored."""


class CaptureStrategyWarning(TorchInterpreterWarning):
    """The capture worked only after a strategy changed how it ran (e.g. the other strict mode)."""


class DynamicShapeWarning(TorchInterpreterWarning):
    """What the dynamic shapes became, when it is not what was written: the spec inferred from several input sets
    (``to_onnx(model, inputs=[...])``, with the names the ONNX model gives the axes), or two axes named differently
    that are one dimension for the model (its code makes them equal, ``x + y``: the ONNX model names both with the
    first name)."""


class ProviderError(TorchInterpreterError, ValueError):
    """``to_onnx(..., providers=...)`` names a provider whose kernels were not compared with PyTorch (see
    :mod:`experimental.torch_interpreter.providers`): ``"any"`` is the safe choice for it; or
    :class:`InferenceSession` runs on the CPU a model made for CUDA only that the CPU has no kernel for (a
    bfloat16 model computes in bfloat16 there)."""


class ProviderWarning(TorchInterpreterWarning):
    """:class:`InferenceSession` runs a model on a provider it was not made for (``to_onnx(..., providers=...)``):
    the guards that provider needs were left out, some edge values (NaN, infinities, float16 rounding) may
    differ from PyTorch."""


class OpsetError(ConversionError, ValueError):
    """The opset asked (``target_opset``, or ``opset_version`` as ``torch.onnx.export`` names it) is one the
    converters, the installed onnx or the installed onnxruntime cannot handle: the message names the keyword the
    user gave and the opsets that work. A :class:`ConversionError` and a ``ValueError``, as these refusals were
    before."""


class ArgumentError(TorchInterpreterError, TypeError):
    """A function of the package was given an argument it does not take in that form; the message says which
    function takes it."""


class EagerFallbackWarning(TorchInterpreterWarning):
    """The ``torch.compile`` backend runs a graph eagerly (PyTorch's kernels) instead of in onnxruntime: an op of
    the graph has no converter or the translation failed; the message names the op and the model line."""


class GenAIError(TorchInterpreterError, ValueError):
    """:func:`~experimental.torch_interpreter.export_genai` cannot write the onnxruntime-genai package: the model
    or folder is not a causal language model with a key-value cache (a recurrent state instead: Mamba, RWKV,
    hybrids), an argument is unknown (precision, provider), or the output folder exists. Nothing is written."""


class CheckpointError(TorchInterpreterError, ValueError):
    """The weights given with ``weights=`` do not fit the model whose parameters are on the meta device: a tensor
    missing from the checkpoint, of another shape or of a type that cannot be converted, a file that is not a
    safetensors file or is truncated. The message names the tensor and the file; nothing is written."""

    def __init__(self, message: str, tensor: str | None = None, path: str | None = None):
        super().__init__(message)
        #: the tensor's name in the model or the checkpoint (None when the file itself is wrong)
        self.tensor = tensor
        #: the checkpoint file (None for a mapping)
        self.path = path
