"""Converts PyTorch models to ONNX from the FX graph ``torch.export`` produces, op by op.

>>> from experimental.torch_interpreter import to_onnx, InferenceSession
"""

from .torch_versions import check_torch_version

# first: a torch outside the supported range gets a message naming the range, not an error inside an import
check_torch_version()

from . import ops  # noqa: F401, E402  (registers the converters)
from .capture.range_constraints import RangeConstraintWarning
from .checkpoint import empty_weights
from .convert import to_onnx
from .errors import (
    ArgumentError,
    CaptureStrategyWarning,
    CheckpointError,
    ConstantInputWarning,
    ConversionError,
    DynamicShapeError,
    DynamicShapeWarning,
    EagerFallbackWarning,
    ExportCaptureError,
    GenAIError,
    InputMismatchError,
    InvalidModelError,
    MalformedModelError,
    OpsetError,
    PythonOpError,
    MissingCustomOpError,
    MissingFunctionError,
    ProviderError,
    ProviderWarning,
    RuntimeFeedError,
    SaveError,
    TorchInterpreterError,
    TorchInterpreterWarning,
    PythonOpWarning,
    TrainingModeWarning,
    UnsupportedOpError,
    UnsupportedTorchError,
    MissingDependencyError,
    UntestedTorchWarning,
    UntrustedCodeError,
    VerificationError,
)
from .genai import GenAIPackage, export_genai
from .investigate import DiscrepancyReport, ExportReport, NodeDiscrepancy
from .investigate.discrepancies import find_discrepancies
from .investigate.plot_graph import plot_graph
from .onnx_export_errors import bypass_export_some_errors
from .optimize import optimize_model
from .program import OnnxProgram, export
from .runtime import InferenceSession
from .translation.registry import Registry, default_registry, register

__all__ = [
    "ArgumentError",
    "CaptureStrategyWarning",
    "CheckpointError",
    "ConstantInputWarning",
    "ConversionError",
    "DiscrepancyReport",
    "DynamicShapeError",
    "DynamicShapeWarning",
    "EagerFallbackWarning",
    "ExportCaptureError",
    "ExportReport",
    "GenAIError",
    "GenAIPackage",
    "InferenceSession",
    "InputMismatchError",
    "InvalidModelError",
    "MalformedModelError",
    "OpsetError",
    "PythonOpError",
    "MissingCustomOpError",
    "MissingFunctionError",
    "NodeDiscrepancy",
    "OnnxProgram",
    "ProviderError",
    "ProviderWarning",
    "RangeConstraintWarning",
    "Registry",
    "RuntimeFeedError",
    "SaveError",
    "TorchInterpreterError",
    "TorchInterpreterWarning",
    "PythonOpWarning",
    "TrainingModeWarning",
    "UnsupportedOpError",
    "UnsupportedTorchError",
    "MissingDependencyError",
    "UntestedTorchWarning",
    "UntrustedCodeError",
    "VerificationError",
    "bypass_export_some_errors",
    "default_registry",
    "empty_weights",
    "export",
    "export_genai",
    "find_discrepancies",
    "optimize_model",
    "plot_graph",
    "register",
    "to_onnx",
]
