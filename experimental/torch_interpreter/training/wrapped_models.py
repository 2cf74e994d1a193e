"""``OrtBackend.compile``: ``torch.compile`` that also reaches the modules inside ``DistributedDataParallel`` and FSDP2.

``torch.compile(DistributedDataParallel(model), backend=...)`` and ``torch.compile(fully_shard(model))`` trace the
wrapper's forward, break the graph where DDP enters its module (``_inside_ddp_forward`` is not traced) or at FSDP2's
hooks, and leave the rest to dynamo's frame callback, which skips every frame whose code is torch's own: a model made
of ``torch.nn`` modules alone (an ``nn.Sequential`` MLP) is never traced and no graph reaches any backend, inductor
included, while a model whose forward is its own code (a transformers Llama) is. Here the forward of DDP's module, or
of each module ``fully_shard`` made an ``FSDPModule``, is compiled itself, through a function of this file that dynamo
traces and that inlines torch's code; DDP's reducer, DDPOptimizer's buckets and FSDP2's hooks stay as they are. The
module's names, parameters and ``state_dict`` are unchanged (its ``forward`` becomes an attribute of the instance).

After the first call, a model under which the backend compiled no graph is said: a warning, or an error with
``fallback="raise"``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..errors import ConversionError, EagerFallbackWarning


def _traceable(forward: Callable[..., Any]) -> Callable[..., Any]:
    """``forward`` called from a function whose code is not torch's: dynamo traces it and inlines ``forward``."""

    def forward_(*args: Any, **kwargs: Any) -> Any:
        return forward(*args, **kwargs)

    return forward_


def _fsdp_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return []
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def inner_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules whose forward is compiled itself: DDP's module, or every module FSDP2 shards; empty for a model
    ``torch.compile`` reaches as it is."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return _fsdp_modules(model.module) or [model.module]
    return _fsdp_modules(model)


def _check_after_first_call(model: torch.nn.Module, backend: Any) -> None:
    """A forward hook, removed at its first call, saying when the backend compiled nothing."""

    def check(module: torch.nn.Module, args: Any, output: Any) -> None:
        handle.remove()
        if backend.compilations:
            return
        message = (
            f"torch.compile handed no graph to the backend during the first call of {type(module).__name__}: "
            "every op ran eagerly in PyTorch, none in onnxruntime (dynamo skips frames whose code is torch's own; "
            "a module wrapped by DistributedDataParallel or fully_shard is reached with OrtBackend.compile(model))"
        )
        if backend.options.fallback == "raise":
            raise ConversionError(message)
        warnings.warn(message, EagerFallbackWarning, stacklevel=2)

    handle = model.register_forward_hook(check)


def compile_model(model: torch.nn.Module, backend: Any, **kwargs: Any) -> torch.nn.Module:
    """``model`` compiled with ``backend`` (``kwargs`` go to ``torch.compile``): the model itself with the forward of
    its wrapped modules compiled when DDP or FSDP2 wraps it, else ``torch.compile(model)``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"OrtBackend.compile takes a torch.nn.Module, not {type(model).__name__}")
    inner = inner_modules(model)
    for module in inner:
        module.forward = torch.compile(_traceable(module.forward), backend=backend, **kwargs)
    compiled = model if inner else torch.compile(model, backend=backend, **kwargs)
    _check_after_first_call(compiled, backend)
    return compiled
