"""The options of the ``torch.compile`` backend, checked once when the backend is made."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ProviderError
from ..opsets import DEFAULT_OPSET, check_opset
from ..optimize import check_level
from ..providers import check_providers
from ..translation.registry import Registry

#: what a graph the converters cannot translate does: run eagerly with a warning, or raise
FALLBACKS = ("eager", "raise")


@dataclass(frozen=True)
class BackendOptions:
    """How the backend translates and runs AOTAutograd's graphs.

    :param providers: the words ``to_onnx`` and ``InferenceSession`` take: ``None`` or ``"any"`` (default):
        onnxruntime's CUDA provider for graphs whose inputs are on a GPU, the CPU provider otherwise; ``"cpu"`` or
        ``"cuda"`` (or onnxruntime's name of either) to force one (a graph whose inputs live elsewhere is refused)
    :param optimize: the optimization level of :func:`~experimental.torch_interpreter.to_onnx` (``True``,
        ``False`` or ``"onnxruntime"``); default ``False``: onnxruntime optimizes each session itself, and the
        package's optimizer, which costs 1 to 10 seconds at the first step (onnxscript's rewrite rules tried on
        every node), made no step faster (Llama, BERT, ResNet, Qwen2-MoE: same losses, step times equal or lower
        without it; see the training page)
    :param fallback: ``"eager"`` (default): a graph with an op no converter translates runs eagerly, with a
        warning naming the op and the source line; ``"raise"``: the error is raised
    :param verify: also runs each graph eagerly on its first inputs and compares every output (forward and
        backward graphs): a :class:`~experimental.torch_interpreter.VerificationError` names the first output that
        differs and the FX node producing it
    :param autograd_functions: as :func:`~experimental.torch_interpreter.to_onnx` takes it: which custom
        ``torch.autograd.Function`` classes stay one PythonOp / PythonOpGrad pair (default: those defined outside
        torch)
    :param target_opset: the opset of the main domain
    :param registry: the converters (default: the project's)
    :param dump_folder: saves every translated graph there (``forward_0.onnx``, ``backward_0.onnx``...)
    :param rtol: relative tolerance of ``verify``
    :param atol: absolute tolerance of ``verify``

    >>> BackendOptions(fallback="eager").fallback
    'eager'
    >>> BackendOptions(fallback="warn")
    Traceback (most recent call last):
    ...
    ValueError: fallback='warn': one of ('eager', 'raise')
    """

    providers: str | Sequence[str] | None = None
    optimize: bool | str = False
    fallback: str = "eager"
    verify: bool = False
    autograd_functions: Any = None
    target_opset: int = DEFAULT_OPSET
    registry: Registry | None = None
    dump_folder: str | os.PathLike | None = None
    rtol: float = 1e-4
    atol: float = 1e-5

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise ValueError(f"fallback={self.fallback!r}: one of {FALLBACKS}")
        check_level(self.optimize)
        check_providers(self.providers)
        check_opset(self.target_opset)

    def provider_for(self, device_type: str) -> str:
        """``"cpu"`` or ``"cuda"``: the provider a graph whose inputs are on ``device_type`` runs with.

        >>> BackendOptions().provider_for("cuda"), BackendOptions(providers="cpu").provider_for("cpu")
        ('cuda', 'cpu')
        """
        wanted = "cuda" if device_type == "cuda" else "cpu"
        allowed = check_providers(self.providers)
        if wanted not in allowed:
            raise ProviderError(
                f"providers={self.providers!r} but the graph's inputs are on {device_type}: move the model and its "
                f"inputs to {'a GPU' if allowed == ('cuda',) else 'the CPU'} or leave providers=None"
            )
        return wanted
