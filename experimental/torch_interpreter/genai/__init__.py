"""onnxruntime-genai packages: a transformers causal LM exported as the folder onnxruntime-genai generates text
from (:func:`export_genai`), and greedy generation on both sides to check it (:mod:`.generate`)."""

from .package import GenAIPackage, export_genai

__all__ = ["GenAIPackage", "export_genai"]
