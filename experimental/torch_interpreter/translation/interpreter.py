"""Interpreter: walks an FX graph and hands each node to its converter. It translates nothing itself."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir
import torch
import torch.fx

from ..dtypes import value_type
from ..errors import ConversionError, TorchInterpreterError, UnsupportedOpError
from ..logs import Progress
from ..metadata import FX_OUTPUT, PROVIDERS
from ..optimize.pipeline import run_stage
from ..provenance import describe, node_metadata, source_line, target_key
from ..providers import encode as encode_providers
from .aliasing import AliasEnv
from .builder import GraphBuilder
from .complex_pairs import complex_key, involves_complex, is_complex, pair_type
from .context import NodeContext, flatten, output_vals
from .dims import onnx_dim
from .registry import Registry, missing_hint

logger = logging.getLogger(__name__)


def node_key(node: torch.fx.Node) -> str:
    """The registry key of the converter of a ``call_function`` node: its target's key, or for an aten op
    reading or producing complex tensors, the key of its real-pair converter (``complex::mul.Tensor``)."""
    key = target_key(node.target)
    if key.startswith("aten::") and involves_complex(node):
        key = complex_key(key)  # complex tensors travel as real pairs (complex_pairs.py)
    return key


def missing_converters(gm: torch.fx.GraphModule, registry: Registry) -> dict[str, list[tuple[str, str]]]:
    """Every ``call_function`` target of ``gm`` and its submodules without a converter."""
    missing: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for node in gm.graph.nodes:
        if node.op == "call_function" and node_key(node) not in registry:
            missing[node_key(node)].append((node.name, source_line(node)))
        elif node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                for key, uses in missing_converters(sub, registry).items():
                    missing[key].extend(uses)
    return dict(missing)


def raise_if_missing(missing: Mapping[str, list[tuple[str, str]]]) -> None:
    if not missing:
        return
    lines = [f"{len(missing)} operator(s) have no converter:"]
    for key, uses in sorted(missing.items()):
        lines.append(f"  - {key}, used by {len(uses)} node(s), first {uses[0][0]!r} at {uses[0][1]}")
    lines.append(
        "Register a converter with experimental.torch_interpreter.register(<key>), "
        "or rewrite the model code at the lines above; see registry.supported() for what is covered."
    )
    hint = missing_hint(sorted(missing))  # the hints installed in the registry (custom ops: the custom_ops= option)
    if hint:
        lines.append(hint)
    raise UnsupportedOpError("\n".join(lines), dict(missing))


class Interpreter:
    """Converts the nodes of an FX graph into ONNX nodes appended to ``builder``.

    ``env`` maps FX nodes to ``ir.Value`` (tensors and dynamic sizes), tuples of them, or Python values.
    """

    @classmethod
    def for_model(
        cls, registry: Registry, opset: int, providers: Sequence[str], dim_names: Mapping[str, str] | None = None
    ) -> Interpreter:
        """The interpreter of a main graph made for ``providers``: the one entry point of a translation, used by
        ``to_onnx`` and by the ``torch.compile`` backend; bind the placeholders to :meth:`input` values, weights
        or Python values, :meth:`run` the graph, mark its :meth:`output` values, then :meth:`to_model`. Subgraphs
        go through :meth:`translate_subgraph` (or ``NodeContext.new_subgraph``), with the same inputs and outputs.

        Example::

            >>> import torch
            >>> from experimental.torch_interpreter.translation.registry import default_registry
            >>> from experimental.torch_interpreter import ops  # the converters
            >>> ep = torch.export.export(torch.nn.ReLU(), (torch.randn(2, 3),))
            >>> interpreter = Interpreter.for_model(default_registry, 18, ("cpu",))
            >>> x = next(n for n in ep.graph.nodes if n.op == "placeholder")
            >>> [y] = interpreter.run(ep.graph_module, {x: interpreter.input("x", x.meta["val"])})
            >>> _ = interpreter.output(y, "y")
            >>> model = interpreter.to_model()
            >>> [n.op_type for n in model.graph], [v.name for v in model.graph.outputs]
            (['Relu'], ['y'])
        """
        return cls(GraphBuilder(opset, providers=tuple(providers)), registry, dim_names or {})

    def __init__(self, builder: GraphBuilder, registry: Registry, dim_names: Mapping[str, str]):
        self.builder = builder
        self.registry = registry
        self.dim_names = dim_names
        self.module: torch.fx.GraphModule | None = None
        self.aliases: AliasEnv | None = None  # the environment of the graph being run, when it mutates tensors
        self._named: set[int] = set()  # values already named after an FX node

    # -- public ----------------------------------------------------------------------------------------
    def run(self, module: torch.fx.GraphModule, env: dict[torch.fx.Node, Any]) -> list[Any]:
        """Converts every node of ``module.graph``; placeholders must already be in ``env``.

        Returns the flattened values of the output node.
        """
        saved = self.module, self.aliases
        self.module = module
        # in-place ops: an environment that carries the aliasing between views (aliasing.py)
        self.aliases = AliasEnv.create(self, module.graph, env)
        env = self.aliases if self.aliases is not None else env
        progress = Progress("translated", len(module.graph.nodes), "FX nodes") if self.builder.parent is None else None
        try:
            for node in module.graph.nodes:
                if progress is not None:
                    progress.tick()
                if node.op == "placeholder":
                    if node not in env:
                        raise ConversionError(f"placeholder {node.name!r} has no value")
                elif node.op == "output":
                    return list(flatten(self.lookup(node.args[0], env)))
                elif node.op == "get_attr":
                    env[node] = self.get_attr(node)
                elif node.op == "call_function":
                    env[node] = self.call_function(node, env)
                else:
                    raise ConversionError(
                        f"{describe(node)}: FX nodes of kind {node.op!r} do not appear in exported programs"
                    )
        finally:
            self.module, self.aliases = saved
        return []

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translates a submodule (e.g. the body of ``wrap_with_set_grad_enabled``) in place."""
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise ConversionError(f"submodule expects {len(placeholders)} inputs, got {len(inputs)}")
        return self.run(module, dict(zip(placeholders, inputs)))

    def onnx_shape(self, val: torch.Tensor) -> list[int | str]:
        return [onnx_dim(d, self.dim_names) for d in val.shape]

    # -- the graph's inputs and outputs: the same for a model, a training graph and a subgraph ------------------
    def input(self, name: str, val: Any) -> ir.Value:
        """A new input of this interpreter's graph, typed and shaped like ``val`` (a FakeTensor, a SymInt, a SymBool
        or the Python number it stands for): the one place a graph input gets its type."""
        dtype = value_type(val)
        if is_complex(val):  # a complex tensor travels as its real pair (a training graph's saved spectrum)
            return self.builder.input(name, *pair_type(val, self.onnx_shape(val)))
        if isinstance(val, torch.Tensor):
            return self.builder.input(name, dtype, self.onnx_shape(val))
        if isinstance(val, (torch.SymInt, torch.SymBool, int, bool)):
            return self.builder.input(name, dtype, [])
        raise ConversionError(f"a graph input cannot be a {type(val).__name__} ({val!r})")

    def output(self, value: Any, name: str | None = None, val: Any = None) -> ir.Value:
        """Marks ``value`` as an output of this interpreter's graph, named ``name`` (made unique); a Python value (a
        static size, a constant) becomes a constant; ``val`` (``meta['val']``), when given, types the output and
        gives it a shape where it has none. Returns the output (an Identity of ``value`` where ONNX needs a
        distinct value)."""
        if not isinstance(value, ir.Value):
            value = self.builder.const(value, value_type(value))
        self.builder.output(value, name)
        out = self.builder.outputs[-1]
        if isinstance(val, torch.Tensor):
            out.dtype = value_type(val)
            if out.shape is None:
                out.shape = ir.Shape(self.onnx_shape(val))
        elif val is not None and out.shape is None:
            out.shape = ir.Shape([])
        return out

    def to_model(self) -> ir.Model:
        """The model this (main) interpreter built: the providers it was made for in its metadata (read by the
        rewrites and the runtime), and the rewrites of the ``"translation"`` stage run (values nobody reads
        removed, float16 rounding kept: :mod:`~experimental.torch_interpreter.optimize.pipeline`)."""
        model = self.builder.to_model()
        model.metadata_props[PROVIDERS] = encode_providers(self.builder.providers)
        run_stage(model, "translation")
        return model

    # -- subgraphs (bodies of If, Loop, Scan) ------------------------------------------------------------
    def child(self) -> Interpreter:
        """An interpreter filling a new subgraph, sharing names, registry and dim names with this one."""
        builder = GraphBuilder(self.builder.opset, names=self.builder.names, parent=self.builder)
        return Interpreter(builder, self.registry, self.dim_names)

    def translate_subgraph(self, module: torch.fx.GraphModule, inputs: Sequence[Any], name: str) -> ir.Graph:
        """Translates ``module`` into an ONNX subgraph (see :meth:`NodeContext.translate_subgraph`)."""
        child = self.child()
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        bound = [
            child.input(node.name, node.meta.get("val")) if value is None else value
            for node, value in zip(placeholders, inputs)
        ]
        outputs = child.inline(module, bound)
        for value, val in zip(outputs, output_vals(module)):
            child.output(value, val=val)
        return child.to_subgraph(name)

    def to_subgraph(self, name: str) -> ir.Graph:
        """The graph this (child) interpreter built; opsets of other domains go to the parent graph."""
        parent = self.builder.parent
        if parent is not None:
            for domain, version in self.builder.extra_opsets.items():
                parent.extra_opsets.setdefault(domain, version)
        return self.builder.to_graph(name=name)

    # -- node kinds ------------------------------------------------------------------------------------
    def get_attr(self, node: torch.fx.Node) -> Any:
        attr = getattr(self.module, node.target)
        if isinstance(attr, torch.Tensor):
            return self.builder.initializer(node.target, attr)
        return attr  # submodules are handed to the converters of higher-order ops

    def call_function(self, node: torch.fx.Node, env: Mapping[torch.fx.Node, Any]) -> Any:
        start, begin = len(self.builder.nodes), time.perf_counter()
        with self.builder.scope(node.name, node_metadata(node)):
            result = self.convert(node, self.lookup(node.args, env), self.lookup(node.kwargs, env))
        created = {id(n) for n in self.builder.nodes[start:]}
        self._annotate(node, result, node.meta.get("val"), created, node.name)
        logger.debug(
            "%s (%s) -> %d ONNX node(s) in %.2f ms",
            node.name, target_key(node.target), len(created), 1e3 * (time.perf_counter() - begin),
        )
        return result

    def convert(self, node: torch.fx.Node, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Calls the converter of ``node`` on ``args`` and ``kwargs`` (values, not FX nodes) and returns
        what it returns; any failure becomes a :class:`ConversionError` naming the node. Every converter
        call goes through here, also the ones alias tracking makes on other arguments (aliasing.py)."""
        key = node_key(node)
        converter = self.registry.get(key)
        if converter is None:
            raise_if_missing({key: [(node.name, source_line(node))]})
        try:
            return converter(NodeContext(self, node, key), *args, **kwargs)
        except TorchInterpreterError:
            raise
        except Exception as e:
            raise ConversionError(
                f"converting {describe(node)} failed: {type(e).__name__}: {e}\n"
                f"The converter is {converter.__module__}.{converter.__qualname__}; "
                "the node's inputs were " + _describe_inputs(node)
            ) from e

    # -- helpers ---------------------------------------------------------------------------------------
    def lookup(self, arg: Any, env: Mapping[torch.fx.Node, Any]) -> Any:
        """``arg`` (an FX argument: a node, a Python value, lists and dicts of them) with every FX node
        replaced by its value in ``env``."""
        if isinstance(arg, torch.fx.Node):
            return env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.lookup(a, env) for a in arg)
        if isinstance(arg, dict):
            return {k: self.lookup(v, env) for k, v in arg.items()}
        return arg

    def _annotate(
        self, node: torch.fx.Node, result: Any, val: Any, created: set[int], name: str, path: tuple[int, ...] = ()
    ) -> None:
        """Checks ``result`` against PyTorch's ``val``, then names and shapes the new values; each one records
        the FX output it holds in ``metadata_props[metadata.FX_OUTPUT]`` (``max:1``: output 1 of ``max``),
        which ``find_discrepancies`` reads."""
        if isinstance(val, (tuple, list)):
            if not isinstance(result, (tuple, list)) or len(result) != len(val):
                raise ConversionError(
                    f"the converter of {describe(node)} returned {type(result).__name__} but PyTorch "
                    f"produces {len(val)} outputs"
                )
            for i, (r, v) in enumerate(zip(result, val)):
                if r is not None:
                    self._annotate(node, r, v, created, f"{name}_{i}" if i else name, path + (i,))
            return
        if not isinstance(result, ir.Value):
            return  # Python value: a static size or a constant
        if isinstance(val, (torch.SymFloat, float)):
            return
        expected = value_type(val)
        if expected is None:
            return
        shape = self.onnx_shape(val) if isinstance(val, torch.Tensor) else None
        if is_complex(val):
            expected, shape = pair_type(val, shape)
        if result.dtype is not None and result.dtype != expected:
            raise ConversionError(
                f"the converter of {describe(node)} produced {result.dtype.name} but PyTorch computes "
                f"{expected.name}; the converter must cast its result"
            )
        producer = result.producer()
        if producer is not None and id(producer) in created and id(result) not in self._named:
            result.dtype = expected
            if shape is not None:
                result.shape = ir.Shape(shape)
            elif isinstance(val, (torch.SymInt, torch.SymBool, int, bool)) and result.shape is None:
                result.shape = ir.Shape([])
            self.builder.rename(result, name)
            result.metadata_props[FX_OUTPUT] = ":".join([node.name, *map(str, path)])
            self._named.add(id(result))
        elif FX_OUTPUT not in result.metadata_props:  # a constant, an input returned as is
            result.metadata_props[FX_OUTPUT] = ":".join([node.name, *map(str, path)])


def _describe_inputs(node: torch.fx.Node) -> str:
    parts = []
    for arg in node.args:
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
        if isinstance(val, torch.Tensor):
            parts.append(f"Tensor({val.dtype}, {tuple(val.shape)})")
        else:
            parts.append(repr(val))
    return "(" + ", ".join(parts) + ")"
