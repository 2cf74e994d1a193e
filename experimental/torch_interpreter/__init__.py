"""Converts PyTorch models to ONNX from the FX graph ``torch.export`` produces, op by op.

>>> from experimental.torch_interpreter import to_onnx, InferenceSession
"""

from . import ops  # noqa: F401  (registers the converters)
from .convert import to_onnx
from .errors import (
    CaptureStrategyWarning,
    ConstantInputWarning,
    ConversionError,
    DynamicShapeError,
    ExportCaptureError,
    InputMismatchError,
    InvalidModelError,
    MissingCustomOpError,
    ProviderError,
    ProviderWarning,
    RuntimeFeedError,
    SaveError,
    TorchInterpreterError,
    TorchInterpreterWarning,
    TrainingModeWarning,
    UnsupportedOpError,
    VerificationError,
)
from .investigate import DiscrepancyReport, ExportReport, NodeDiscrepancy
from .investigate.discrepancies import find_discrepancies
from .onnx_export_errors import bypass_export_some_errors
from .optimize import optimize_model
from .capture.range_constraints import RangeConstraintWarning
from .registry import Registry, default_registry, register
from .runtime import InferenceSession

__all__ = [
    "CaptureStrategyWarning",
    "ConstantInputWarning",
    "TorchInterpreterWarning",
    "TrainingModeWarning",
    "bypass_export_some_errors",
    "ConversionError",
    "DiscrepancyReport",
    "DynamicShapeError",
    "ExportCaptureError",
    "ExportReport",
    "InferenceSession",
    "InputMismatchError",
    "InvalidModelError",
    "MissingCustomOpError",
    "ProviderError",
    "ProviderWarning",
    "NodeDiscrepancy",
    "RangeConstraintWarning",
    "Registry",
    "RuntimeFeedError",
    "SaveError",
    "TorchInterpreterError",
    "UnsupportedOpError",
    "VerificationError",
    "default_registry",
    "find_discrepancies",
    "optimize_model",
    "register",
    "to_onnx",
]
