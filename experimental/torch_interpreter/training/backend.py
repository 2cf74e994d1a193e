"""The ``torch.compile`` backend: dynamo's graph handed to AOTAutograd, whose forward and backward graphs are
translated by the project's converters and run by onnxruntime.

AOTAutograd applies its own transformations and no more: functionalization, the decomposition of PyTorch's
``CompositeImplicitAutograd`` ops (``linear`` becomes ``t`` + ``addmm``...) and the autograd formulas of
``derivatives.yaml`` (``threshold_backward``, ``native_layer_norm_backward``...); no decomposition table is given to
it. A custom ``torch.autograd.Function`` stays whole: one ``PythonOp`` node in the forward graph, one
``PythonOpGrad`` node in the backward graph, calling the user's ``forward`` and ``backward`` back.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import onnxruntime as ort
import torch
import torch.fx
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from ..errors import ConversionError, EagerFallbackWarning, ProviderError, TorchInterpreterError, TorchInterpreterWarning
from ..providers import ONNXRUNTIME_NAMES
from ..python_op.capture import PYTHON_OP, Resolver, capture_autograd_functions, subclasses
from ..translation.registry import default_registry
from .compiled_graph import OrtGraph
from .graph_translation import translate_graph
from .options import BackendOptions
from .unused_outputs import GradientPruner, record_forward, track_outputs
from .verification import verified
from .wrapped_models import compile_model


@dataclass
class GraphRecord:
    """One graph the backend was handed (an entry of :attr:`OrtBackend.graphs`)."""

    #: ``"forward"``, ``"backward"`` or ``"inference"``
    kind: str
    #: the number of the dynamo graph it belongs to (1 for the first)
    number: int
    #: its FX nodes
    fx_nodes: int
    #: ``"onnxruntime"``, ``"eager"`` (a fallback, :attr:`reason` says why), None until its first call
    runs_in: str | None = None
    reason: str | None = None
    #: its ONNX nodes and the compiled graph, once it runs in onnxruntime
    onnx_nodes: int | None = None
    graph: OrtGraph | None = None
    #: seconds of its translation and of its session's creation
    translate_s: float = 0.0
    session_s: float = 0.0
    #: where ``dump_folder`` saved it
    path: str | None = None

logger = logging.getLogger(__name__)


def keep_functions(policy: Any = None) -> list[type]:
    """Marks the ``torch.autograd.Function`` classes defined so far that ``policy`` keeps whole (see
    :func:`~experimental.torch_interpreter.to_onnx`'s ``autograd_functions``) so that dynamo leaves their
    ``apply`` in the graph (``torch.compiler.allow_in_graph``) instead of tracing their forward and backward; the
    backend then makes them PythonOp / PythonOpGrad nodes. Returns the classes marked.

    The backend calls it when it is made and before each graph; call it yourself for a class defined later, before
    the first call of the compiled model.

    >>> class Twice(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return 2 * x
    >>> Twice in keep_functions()
    True
    """
    resolver = Resolver(policy)
    marked = [cls for cls in subclasses(torch.autograd.Function) if resolver.resolve(cls)[0] == PYTHON_OP]
    for cls in marked:
        torch.compiler.allow_in_graph(cls)
    return marked


def _traced_functions(gm: torch.fx.GraphModule) -> list[str]:
    """Where dynamo traced through a custom Function (its ``autograd_function_apply`` nodes)."""
    return [
        n.meta.get("stack_trace", "").strip().splitlines()[-2:][0].strip() if n.meta.get("stack_trace") else n.name
        for n in gm.graph.nodes
        if n.op == "call_function" and getattr(n.target, "__name__", "") == "autograd_function_apply"
    ]


def _device(example_inputs: Sequence[Any]) -> str:
    types = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if len(types) > 1:
        raise TorchInterpreterError(f"a graph's inputs are on several devices {sorted(types)}: onnxruntime runs one")
    return types.pop() if types else "cpu"


class OrtBackend:
    """A ``torch.compile`` backend running AOTAutograd's forward and backward graphs in onnxruntime.

    ``torch.compile(model, backend=OrtBackend(...))``, or ``torch.compile(model, backend="aten2onnx")`` with the
    default options (``options={...}`` passes :class:`BackendOptions` fields). The parameters stay torch tensors,
    the optimizer stays PyTorch's: each step feeds the current parameters to the graphs (no copy).

    :attr:`graphs` lists what was compiled (one :class:`GraphRecord` per forward, backward or inference graph: its
    kind, number, FX and ONNX node counts, onnxruntime graph or eager fallback, the seconds of its translation and of
    its session's creation; a graph is translated at its first call); :attr:`compilations` counts the graphs dynamo
    handed over (a new shape that recompiles adds one, logged at INFO by ``experimental.torch_interpreter.training``).

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter.training import OrtBackend
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        >>> backend = OrtBackend(providers="cpu")
        >>> compiled = torch.compile(model, backend=backend)
        >>> loss = compiled(torch.randn(16, 4)).pow(2).mean()
        >>> loss.backward()
        >>> [(g.kind, g.runs_in) for g in backend.graphs]
        [('forward', 'onnxruntime'), ('backward', 'onnxruntime')]
    """

    def __init__(self, options: BackendOptions | None = None, **kwargs: Any):
        if options is not None and kwargs:
            raise TypeError("give BackendOptions or keyword options, not both")
        self.options = options or BackendOptions(**kwargs)
        self.graphs: list[GraphRecord] = []
        self.compilations = 0
        self.by_name = False  # made by torch.compile(backend="aten2onnx") at the first graph
        keep_functions(self.options.autograd_functions)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
        self.compilations += 1
        logger.info(
            "aten2onnx: compiling dynamo graph #%d (%d nodes, inputs %s)",
            self.compilations,
            len(gm.graph.nodes),
            [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in example_inputs],
        )
        traced = _traced_functions(gm)
        if traced:
            if self.by_name:  # made at dynamo's first graph: the Functions were traced before anything could mark them
                advice = (
                    'backend="aten2onnx" is made when dynamo hands over its first graph, after dynamo traced the '
                    "Function: pass backend=OrtBackend() (it marks the classes defined when it is made) or call "
                    "experimental.torch_interpreter.training.keep_functions() before the first call; the next "
                    "compilations keep them whole"
                )
            else:
                advice = (
                    "define the class before creating the backend, or call "
                    "experimental.torch_interpreter.training.keep_functions() before the first call"
                )
            warnings.warn(
                f"dynamo traced through {len(traced)} custom autograd.Function call(s) (first at {traced[0]}): "
                f"their forward and backward are in the graphs as ops, not PythonOp/PythonOpGrad nodes; {advice}",
                TorchInterpreterWarning,
                stacklevel=2,
            )
        keep_functions(self.options.autograd_functions)  # for the next graphs
        compile_ = functools.partial(self._compile, self.compilations)
        with capture_autograd_functions(self.options.autograd_functions, training=True, differentiable=True):
            # torch's documented way for a custom backend (AotAutograd): DDPOptimizer counts its calls to know
            # that each bucket's graph went through AOTAutograd (aot_module_simplified alone left the count as it
            # was, and the first backward of a model split in buckets failed: "found bucket -1")
            return track_outputs(
                aot_autograd(
                    fw_compiler=functools.partial(compile_, "forward"),
                    bw_compiler=functools.partial(compile_, "backward"),
                    inference_compiler=functools.partial(compile_, "inference"),
                )(gm, example_inputs)
            )

    def compile(self, model: torch.nn.Module, **kwargs: Any) -> torch.nn.Module:
        """``torch.compile(model, backend=self, **kwargs)``, which also reaches a model wrapped by
        ``DistributedDataParallel`` or FSDP2's ``fully_shard`` (:mod:`.wrapped_models`: dynamo alone skips the
        ``torch.nn`` modules inside them, and no graph reached the backend); after the first call, a warning (an
        error with ``fallback="raise"``) when no graph did.

        >>> import torch
        >>> from experimental.torch_interpreter.training import OrtBackend
        >>> backend = OrtBackend(providers="cpu")
        >>> model = backend.compile(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
        >>> model(torch.randn(3, 4)).sum().backward()
        >>> [g.runs_in for g in backend.graphs]
        ['onnxruntime', 'onnxruntime']
        """
        return compile_model(model, self, **kwargs)

    def _compile(self, number: int, kind: str, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        """AOTAutograd's compiler callback: the graph is translated at its first call, on real inputs (the
        callback runs under PyTorch's fake tensor mode, where the converters' constants could not be made)."""
        entry = GraphRecord(kind, number, len(gm.graph.nodes))
        self.graphs.append(entry)
        state: dict[str, Any] = {}
        pruner = GradientPruner(gm) if kind == "backward" else None

        def run(args: list[Any]) -> Any:
            compiled = state.get("compiled")
            if compiled is None:
                compiled = state["compiled"] = self._translate(entry, gm, args, f"{kind}_{number}")
            if pruner is not None:  # gradients that only unused outputs lead to: None, as eager leaves them
                inputs = list(args)
                return pruner.prune(inputs, compiled(args))
            result = compiled(args)
            if kind == "forward":
                record_forward(result)
            return result

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    def _translate(self, entry: GraphRecord, gm: torch.fx.GraphModule, args: Sequence[Any], name: str) -> Any:
        options = self.options
        try:
            provider = options.provider_for(_device(args))
            if provider == "cuda" and ONNXRUNTIME_NAMES["cuda"] not in ort.get_available_providers():
                raise ProviderError(
                    "the graph's inputs are on a GPU but this onnxruntime has no CUDA provider: install "
                    "onnxruntime-gpu (pip install -e '.[gpu]')"
                )
            begin = time.perf_counter()
            translated = translate_graph(
                gm, args, options.registry or default_registry, options.target_opset, provider, options.optimize
            )
            entry.translate_s = time.perf_counter() - begin
            begin = time.perf_counter()
            compiled = _session(translated, provider, name)
            entry.session_s = time.perf_counter() - begin
        except TorchInterpreterError as e:
            if options.fallback == "raise":
                raise
            entry.runs_in, entry.reason = "eager", str(e)
            warnings.warn(
                f"the {entry.kind} graph #{entry.number} runs eagerly, not in onnxruntime: {e}",
                EagerFallbackWarning,
                stacklevel=2,
            )
            return make_boxed_func(gm.forward)
        entry.runs_in, entry.onnx_nodes, entry.graph = "onnxruntime", len(translated.model.graph.node), compiled
        if options.dump_folder is not None:
            entry.path = compiled.save(os.fspath(options.dump_folder))
        logger.info(
            "aten2onnx: %s: %d FX nodes -> %d ONNX nodes on %s",
            name, len(gm.graph.nodes), len(translated.model.graph.node), provider,
        )
        if options.verify:
            return verified(compiled, gm, options.rtol, options.atol, options.registry or default_registry)
        return compiled


def _session(translated: Any, provider: str, name: str) -> OrtGraph:
    """The onnxruntime session of a translated graph; onnxruntime refusing the model is a conversion error (the
    backend falls back to eager or raises it, as for an op without converter)."""
    try:
        return OrtGraph(translated, provider, name)
    except TorchInterpreterError:
        raise
    except Exception as e:  # noqa: BLE001  (onnxruntime's own exception types)
        raise ConversionError(
            f"onnxruntime cannot load the translated {name} graph: {type(e).__name__}: {str(e)[:600]}"
        ) from e


@functools.cache
def _default() -> OrtBackend:
    backend = OrtBackend()
    backend.by_name = True
    return backend


def aten2onnx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: dict | None = None) -> Any:
    """The backend ``torch.compile(model, backend="aten2onnx")`` finds (registered as an entry point of the
    ``torch_dynamo_backends`` group); ``options={...}`` passes the fields of :class:`BackendOptions`.

    >>> import torch
    >>> compiled = torch.compile(torch.nn.Linear(3, 2), backend="aten2onnx")
    >>> compiled(torch.ones(1, 3)).shape
    torch.Size([1, 2])
    """
    if options:
        backend = OrtBackend(**options)
        backend.by_name = True
    else:
        backend = _default()
    return backend(gm, example_inputs)
