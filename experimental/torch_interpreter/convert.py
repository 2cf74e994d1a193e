"""``to_onnx``: capture with torch.export, translate the FX graph as exported, build the ONNX model."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir
import torch
from torch.export.graph_signature import InputKind, OutputKind

from . import ops  # noqa: F401  (importing the converters fills default_registry)
from .capture import Captured, caches_registered, capture_model, range_constraints, read_input_sets, shape_guards
from .capture.grown_example import holding_at_one
from .checkpoint import MetaWeights, cpu_stand_ins, meta_tensor_names
from .errors import (
    ArgumentError,
    CheckpointError,
    ConversionError,
    DynamicShapeError,
    InputMismatchError,
    InvalidModelError,
    PythonOpWarning,
)
from .investigate.input_sets import check_input_sets
from .investigate.report import recording
from .investigate.verify import verify_export, verify_tolerances
from .logs import ExportProgress, verbosity
from .opsets import DEFAULT_OPSET, MIN_OPSET, check_opset
from .optimize import check_level, optimize_model, translation_opset
from .optimize.opset_conversion import convert_down
from .providers import KNOWN as KNOWN_PROVIDERS
from .providers import check_providers
from .python_op.attributes import DOMAIN as PYTHON_OP_DOMAIN
from .python_op.attributes import OP_TYPE as PYTHON_OP
from .python_op.capture import capture_autograd_functions
from .python_op.custom_ops import with_custom_ops
from .saving import save
from .torch_onnx_arguments import dynamic_axes_as_shapes, rename, resolve_opset, torch_onnx_options
from .translation.complex_pairs import check_no_complex_io
from .translation.interpreter import Interpreter, missing_converters, raise_if_missing
from .translation.registry import Registry, default_registry

logger = logging.getLogger(__name__)


def to_onnx(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    *,
    strict: bool = False,
    filename: str | os.PathLike | None = None,
    target_opset: int = DEFAULT_OPSET,
    external_data: bool | None = None,
    as_ir: bool = False,
    optimize: bool | str = True,
    registry: Registry | None = None,
    verbose: int = 0,
    verify: bool | dict[str, float] = False,
    report: Any = None,
    autograd_functions: str | dict | None = None,
    custom_ops: str | dict | None = None,
    capture_strategies: bool | str | tuple[str, ...] = True,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Any] | None = None,
    providers: str | Sequence[str] | None = "any",
    weights: str | os.PathLike | Mapping[str, Any] | None = None,
    inputs: Sequence[Any] | None = None,
    **torch_onnx_kwargs: Any,
) -> onnx.ModelProto | ir.Model:
    """Converts a PyTorch model into ONNX through ``torch.export.export``.

    The FX graph is translated as exported, without ``run_decompositions``: each aten op is
    translated by the converter registered for its overload.

    :param model: a ``torch.nn.Module``, or an ``ExportedProgram`` the user already has
    :param args: positional inputs (a tuple; a single tensor is accepted)
    :param kwargs: keyword inputs; a path there is taken as ``filename``, as ``torch.onnx.export(model, args, f)``
        takes it
    :param dynamic_shapes: as ``torch.export.export`` takes it; a string names a dynamic axis
        (``{0: "batch"}``) and one name shared by several inputs is one dimension
    :param strict: capture with dynamo (``True``) or by tracing Python (``False``, default)
    :param filename: also saves the model there, weights above 1 KB in ``filename + '.data'`` when
        they total more than 1 MB (see ``external_data``)
    :param target_opset: opset of the main domain: 18 or more, or 11 to 17, where the translation at 18 is converted
        down by onnx's version converter (an op without an older version, ``LayerNormalization`` before 17, is
        refused naming it)
    :param external_data: force (True) or forbid (False) the external data file
    :param as_ir: return the ``onnx_ir.Model`` (weights shared with the torch model, no copy)
        instead of an ``onnx.ModelProto``; when ``filename`` is given and weights are external, the
        returned proto references ``filename + '.data'`` instead of holding a second copy of the weights
    :param optimize: ``True`` (default) folds constants, simplifies shape ops, merges common
        subexpressions and removes unused nodes (standard ONNX); ``"onnxruntime"`` also fuses into
        onnxruntime's ``com.microsoft`` kernels (RMSNorm, skip norms, GELU...) and translates at opset 23 at
        least (ONNX ``Attention``); ``False`` keeps the raw translation; see ``_doc/performance.rst``
    :param registry: converters to use (default: the project's)
    :param verbose: 0 silent (but an export longer than a few seconds shows its step on stderr), 1 logs the steps
        and timings, 2 also every node with its time and the whole export report
    :param verify: runs onnxruntime on the export inputs and compares every FX node with PyTorch; raises
        :class:`VerificationError` naming the first node that differs (see :func:`find_discrepancies`); ``True``
        compares each value within its type's tolerance (float32: atol 1e-4, rtol 1e-3; float16 1e-2; bfloat16
        5e-2), ``{"atol": ..., "rtol": ...}`` within the tolerances given (one of them alone: the other is the
        type's)
    :param report: an :class:`ExportReport` to fill, or a path where its markdown is written (also when the
        export fails), or True for ``filename + '.report.md'``: steps and timings, capture strategies, op
        histograms, dynamic axes, missing ops, verification
    :param autograd_functions: how custom ``torch.autograd.Function`` calls are exported: ``"python_op"``
        (one ``com.microsoft::PythonOp`` node calling the function back, run by
        :class:`InferenceSession`), ``"inline"`` (the ops of its forward), or a dict
        ``{FunctionClass: mode or output rule}``; default: ``python_op`` for classes defined outside
        torch, unless the class says otherwise (``onnx_export``); see ``_doc/python_op.rst``
    :param custom_ops: how ops of other namespaces than aten (``torch.library.custom_op``, ``triton_op``,
        C++ extensions) without a registered converter are exported: ``"error"`` (default: refused, the
        message names this option), ``"python_op"`` (one ``com.microsoft::PythonOp`` node calling
        ``torch.ops.<ns>.<op>`` back, run by :class:`InferenceSession`), or a dict
        ``{op or "ns::op": mode or converter}``; a registered converter always wins over ``python_op``;
        see ``_doc/python_op.rst``
    :param capture_strategies: what to try when torch.export refuses the model (a batch of 1 on a dynamic
        axis, torch's suggested fixes for dynamic shapes, the other strict mode, transformers caches):
        ``True`` all, ``False`` none, or a tuple of names; see ``capture/strategies/``; the strategies
        applied are logged and recorded in the model's ``metadata_props``
    :param input_names: the names of the graph's first inputs, as ``torch.onnx.export`` takes them (the dynamic
        axes keep their names)
    :param output_names: the names of the graph's first outputs
    :param opset_version: ``torch.onnx.export``'s name for ``target_opset``
    :param dynamic_axes: ``torch.onnx.export``'s ``{input name: {axis: name} or [axes]}``, translated into
        ``dynamic_shapes`` (a warning shows what it became); entries of outputs are not needed and dropped
    :param providers: the onnxruntime providers the model is for: ``"any"`` (default: PyTorch's answer on the CPU
        and on CUDA), ``"cpu"`` or ``"cuda"`` (also onnxruntime's names and lists of them); the guards a
        provider does not need are left out (fewer nodes, faster), a float16/bfloat16 model for CUDA only
        computes in half precision what the converters compute in float32 for the CPU (within the type's
        tolerance, never before a comparison or an integer cast), and the choice is stored in the model; see
        ``_doc/providers.rst``
    :param weights: the values of a model whose parameters are on the meta device (built under
        :func:`~experimental.torch_interpreter.empty_weights`): a safetensors file, a folder of them
        (transformers' ``model.safetensors.index.json``), or a mapping from names to tensors; a stored tensor
        of the model's type stays in its file when ``filename`` lies in the checkpoint's folder (the saved model
        points at it), else it is copied; one of another floating type is converted when the model is saved, one
        tensor at a time; see
        ``_doc/large_models.rst``
    :param inputs: several real input sets instead of ``args``, ``kwargs`` and ``dynamic_shapes``: a list of
        ``(args, kwargs)`` pairs (or of tuples, of dicts); the axes whose size differs between the sets are made
        dynamic and named (``batch`` for an axis 0, a transformers model's usual names, else ``<input>_<axis>``),
        the spec is shown (a :class:`~experimental.torch_interpreter.DynamicShapeWarning`, the model's
        ``metadata_props``), the set with the largest sizes is exported, and every set is run by onnxruntime and
        by the model: a :class:`~experimental.torch_interpreter.VerificationError` names a set whose outputs
        differ
    :param torch_onnx_kwargs: the other keywords of ``torch.onnx.export``: ``f`` (``filename``), and
        ``export_params``, ``do_constant_folding``, ``keep_initializers_as_inputs``, ``dynamo``, ``training``
        accepted with the value that matches what ``to_onnx`` does; another value, or another keyword, raises
        :class:`~experimental.torch_interpreter.ArgumentError` saying what to do instead
    :return: the ONNX model

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> onx = to_onnx(model, (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},))
        >>> [n.op_type for n in onx.graph.node]
        ['Gemm', 'Relu']
        >>> onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param
        'batch'
    """
    with verbosity(verbose), recording(report, filename) as export_report, contextlib.ExitStack() as scope:
        filename = torch_onnx_options(model, filename, torch_onnx_kwargs, _PARAMETERS)  # torch.onnx.export's
        target_opset = resolve_opset(target_opset, opset_version, DEFAULT_OPSET)
        check_level(optimize)
        providers = check_providers(providers)
        # an opset the converters, onnx or onnxruntime cannot run: an error now, not at load
        keyword = "opset_version" if opset_version is not None else "target_opset"
        check_opset(target_opset, keyword, convertible=True)
        # an older opset: the translation at the converters' oldest, converted down after the optimization
        older, target_opset = (target_opset, MIN_OPSET) if target_opset < MIN_OPSET else (None, target_opset)
        registry = registry or default_registry
        tolerances = verify_tolerances(verify) if verify else {}  # a wrong value refused before the export
        kwargs, filename = _filename_in_third_position(kwargs, filename)
        meta_weights = _meta_weights(model, weights, verify=verify, filename=filename, as_ir=as_ir)
        sets = _input_sets(model, inputs, args, kwargs, dynamic_shapes, dynamic_axes)
        steps = ("capture", "translation", "optimization") + ("input sets",) * (sets is not None) + (
            "verification",) * bool(verify) + ("save",) * (filename is not None)
        progress = scope.enter_context(ExportProgress(steps, enabled=not verbose))  # logs.py: a long export shows
        captured = _capture(model, args, kwargs, dynamic_shapes, dynamic_axes, input_names, output_names,
                            autograd_functions, strict, capture_strategies, meta_weights, sets)
        ep, names, spec, capture_report = captured.ep, captured.names, captured.spec, captured.report
        args, kwargs = captured.args, captured.kwargs  # the set captured, when several were given
        export_report.exported(ep)
        # -- custom ops hook: converters from custom_ops=, PythonOp for the others (python_op/custom_ops.py)
        registry = with_custom_ops(registry, ep.graph_module, custom_ops)
        raise_if_missing(missing_converters(ep.graph_module, registry))
        # the onnxruntime level translates at opset 23 at least: ONNX Attention (optimize/__init__.py)
        logger.info("translation: %d FX nodes...", len(ep.graph.nodes))
        progress.step("translation")
        onnx_model = translate(ep, registry, names, translation_opset(optimize, target_opset), providers,
                               meta_weights)
        rename(onnx_model, input_names, output_names)  # torch.onnx.export's input_names, output_names
        export_report.translated(onnx_model)
        # size 1 where torch's range starts at 2 (its 0/1 specialization) and the graph holds there (a decode step)
        at_one = _holding_at_one(model, ep, args, kwargs, meta_weights)
        range_constraints.record(ep, onnx_model, names, spec and spec.torch_spec, at_one)  # warns about narrowed axes
        shape_guards.record(ep, onnx_model)  # size conditions the graph relies on, checked by InferenceSession
        logger.info("optimization: optimize=%r, %d nodes...", optimize, len(onnx_model.graph))
        progress.step("optimization")
        optimize_model(onnx_model, optimize)  # optimize/: generic passes, onnxruntime fusions
        if older is not None:
            onnx_model = convert_down(onnx_model, older, keyword)
        _warn_python_ops(onnx_model)
        if capture_report is not None:
            capture_report.record(onnx_model)
        export_report.optimized(onnx_model)
        if sets is not None:  # investigate/input_sets.py: each set through onnxruntime and the model
            progress.step("input sets")
            with caches_registered(model, *sets[0]):
                export_report.step("input sets", "; ".join(check_input_sets(ep, onnx_model, model, sets)))
        if verify:  # investigate/verify.py: raises VerificationError naming the first FX node that differs
            progress.step("verification")
            verify_export(ep, onnx_model, args, kwargs, export_report, **tolerances)
        if filename is None:
            return onnx_model if as_ir else ir.to_proto(onnx_model)
        progress.step("save")
        save(onnx_model, filename, external_data=external_data)
        export_report.step("save", os.fspath(filename))
        return onnx_model if as_ir else onnx.load(os.fspath(filename), load_external_data=False)


def _holding_at_one(model: Any, ep: torch.export.ExportedProgram, args: tuple, kwargs: dict,
                     meta_weights: Any) -> set[str]:
    """The dynamic axes whose graph holds at size 1 though torch's range starts at 2 (capture/grown_example.py);
    none for an ExportedProgram or a model on the meta device (no model to run)."""
    if not isinstance(model, torch.nn.Module) or meta_weights is not None:
        return set()
    with caches_registered(model, args, kwargs):
        return holding_at_one(ep, model, args, kwargs)


def _capture(model, args, kwargs, dynamic_shapes, dynamic_axes, input_names, output_names, autograd_functions,
             strict, capture_strategies, meta_weights, sets) -> Captured:
    """The ExportedProgram of ``model`` (an ExportedProgram is taken as it is), with the names of its dynamic axes,
    the spec, what the capture strategies did and the inputs captured."""
    if isinstance(model, torch.export.ExportedProgram):
        if dynamic_shapes is not None or dynamic_axes is not None:
            raise DynamicShapeError(
                "dynamic_shapes cannot be given with an ExportedProgram: its shapes were fixed when it was "
                "exported; pass dynamic_shapes to torch.export.export instead"
            )
        return Captured(model, {}, None, None, args, kwargs)  # no spec, no strategy
    if not isinstance(model, torch.nn.Module):
        raise InvalidModelError(
            f"to_onnx expects a torch.nn.Module or a torch.export.ExportedProgram, not "
            f"{type(model).__module__}.{type(model).__name__}; wrap a function in a Module whose forward calls it"
        )
    args, kwargs = _normalize_inputs(args, kwargs)
    if dynamic_axes is not None:  # torch.onnx.export's spelling (torch_onnx_arguments.py)
        if dynamic_shapes is not None:
            raise DynamicShapeError("dynamic_shapes and dynamic_axes are both given: give one of them")
        dynamic_shapes = dynamic_axes_as_shapes(model.forward, args, kwargs, dynamic_axes, input_names, output_names)
    # -- PythonOp hook: custom autograd.Function calls become aten2onnx::python_op (python_op/capture.py)
    hook = functools.partial(capture_autograd_functions, autograd_functions, training=model.training, strict=strict)
    logger.info("capture: torch.export.export of %s (strict=%s)...", type(model).__name__, strict)
    # a model on the meta device is captured with CPU stand-ins of its weights (checkpoint/)
    with cpu_stand_ins(model) if meta_weights is not None else contextlib.nullcontext():
        return capture_model(
            model, args, kwargs, dynamic_shapes, strict=strict, strategies=capture_strategies, around_export=hook,
            input_sets=sets,
        )


#: the parameters of to_onnx, for the suggestion made on an unknown keyword
_PARAMETERS = tuple(p for p in inspect.signature(to_onnx).parameters if p != "torch_onnx_kwargs")


def _warn_python_ops(model: ir.Model) -> None:
    """A :class:`PythonOpWarning` when ``model`` holds PythonOp nodes: what runs them, and the plain-ONNX option."""
    names = sorted({
        n.attributes["func_name"].as_string()
        for n in ir.traversal.RecursiveGraphIterator(model.graph)
        if n.op_type == PYTHON_OP and n.domain == PYTHON_OP_DOMAIN and "func_name" in n.attributes
    })
    if not names:
        return
    warnings.warn(
        f"the model has com.microsoft::PythonOp nodes calling Python code ({', '.join(names[:5])}"
        f"{', ...' if len(names) > 5 else ''}): onnxruntime alone cannot run them, "
        "experimental.torch_interpreter.InferenceSession does, in a process where each class is exported or "
        "registered (from experimental.torch_interpreter.python_op.table import register_function) or its module "
        "allowed (InferenceSession(..., trusted_modules=...)); to_onnx(..., autograd_functions='inline') traces "
        "the autograd.Functions into plain ONNX that any runtime runs",
        PythonOpWarning,
        stacklevel=3,
    )


def translate(
    ep: torch.export.ExportedProgram,
    registry: Registry,
    dim_names: dict[str, str],
    opset: int,
    providers: tuple[str, ...] = KNOWN_PROVIDERS,
    weights: MetaWeights | None = None,
) -> ir.Model:
    """Translates an ExportedProgram into an ``onnx_ir.Model`` for ``providers`` (:mod:`.providers`); the values of
    tensors on the meta device come from ``weights``."""
    check_no_complex_io(ep)
    interpreter = Interpreter.for_model(registry, opset, providers, dim_names)
    signature = ep.graph_signature
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    input_names = iter(_input_names(ep))
    env: dict[torch.fx.Node, Any] = {}
    for node, spec in zip(placeholders, signature.input_specs):
        name = next(input_names) if spec.kind == InputKind.USER_INPUT else None
        env[node] = _placeholder_value(ep, interpreter, node, spec, name or node.name, weights)
    outputs = interpreter.run(ep.graph_module, env)
    user = [v for v, spec in zip(outputs, signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
    mutated = [spec for spec in signature.output_specs if spec.kind == OutputKind.USER_INPUT_MUTATION]
    if mutated:
        logger.warning("inputs %s are mutated in place by the model; ONNX returns no such mutation", mutated)
    for value, name in zip(user, _output_names(ep, len(user))):
        if value is not None:
            interpreter.output(value, name)
    return interpreter.to_model()


def _placeholder_value(ep, interpreter, node, spec, name: str, weights: MetaWeights | None) -> Any:
    val = node.meta.get("val")
    if spec.kind == InputKind.USER_INPUT:
        if isinstance(val, (torch.Tensor, torch.SymInt)):
            return interpreter.input(name, val)
        return getattr(spec.arg, "value", val)  # a Python constant, specialized by torch.export
    if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
        builder = interpreter.builder
        tensor = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
        if tensor.device.type == "meta" or (weights is not None and spec.target in weights.names):
            if weights is None:
                raise CheckpointError(f"{spec.target!r} is on the meta device (no values): give weights=",
                                      tensor=spec.target)
            buffer = spec.kind != InputKind.PARAMETER
            return builder.stored_initializer(spec.target, weights(spec.target, tensor, buffer))
        return builder.initializer(spec.target, tensor)
    raise ConversionError(f"placeholder {node.name!r} of kind {spec.kind.name} is not supported")


def _input_sets(model: Any, inputs: Any, args: Any, kwargs: Any, dynamic_shapes: Any, dynamic_axes: Any) -> Any:
    """The input sets of ``inputs=`` as ``[(args, kwargs), ...]``, None without it; refused with the options it
    replaces."""
    if inputs is None:
        return None
    given = [name for name, value in [("args", args), ("kwargs", kwargs), ("dynamic_shapes", dynamic_shapes),
                                      ("dynamic_axes", dynamic_axes)]
             if value is not None and not (isinstance(value, (tuple, list, dict)) and not value)]
    if given:
        raise ArgumentError(f"inputs= gives the input sets and decides the dynamic shapes: drop {', '.join(given)} "
                            "(or drop inputs= and give args, kwargs and dynamic_shapes)")
    if not isinstance(model, torch.nn.Module):
        raise ArgumentError("inputs= needs the torch.nn.Module: an ExportedProgram's shapes are already fixed")
    return read_input_sets(inputs)


def _meta_weights(model: Any, weights: Any, *, verify: bool, filename: Any, as_ir: bool) -> MetaWeights | None:
    """The source of the values of ``model``'s tensors on the meta device, checked against the other options."""
    if isinstance(model, torch.export.ExportedProgram):
        tensors = {**model.state_dict, **model.constants}
        meta = [n for n, t in tensors.items() if isinstance(t, torch.Tensor) and t.device.type == "meta"]
    else:
        meta = meta_tensor_names(model)[0] if isinstance(model, torch.nn.Module) else []
    if weights is None:
        if meta:
            shown = ", ".join(meta[:3]) + (f" and {len(meta) - 3} more" if len(meta) > 3 else "")
            raise CheckpointError(
                f"{len(meta)} parameters or buffers of the model are on the meta device and hold no values "
                f"({shown}): give their values with weights= (a safetensors file, a folder of shards, or a "
                "mapping of tensors)", tensor=meta[0])
        return None
    if not meta:
        raise ArgumentError("weights= gives the values of a model whose parameters are on the meta device; this "
                            "model has none there: build it under empty_weights(), or drop weights=")
    if verify:
        raise ArgumentError("verify=True runs the PyTorch model, whose parameters are on the meta device: export "
                            "a small model with real weights to verify the translation")
    if filename is None and not as_ir:
        raise ArgumentError("with weights=, give filename= (the saved model points at the checkpoint's files) or "
                            "as_ir=True (an onnx_ir.Model whose weights are read when needed)")
    return MetaWeights(model if isinstance(model, torch.nn.Module) else None, weights)


def _input_names(ep: torch.export.ExportedProgram) -> list[str | None]:
    """Names of the user inputs: the placeholder's for a top-level tensor, the pytree path for a tensor
    inside a keyword container (``past_key_values.0.key``); None keeps the placeholder's name."""
    spec = ep.call_spec.in_spec
    paths = list(_spec_paths(spec, [])) if spec is not None else []
    return [".".join(str(p) for p in path[1:]) if len(path) > 2 and path[0] == 1 else None for path in paths]


def _output_names(ep: torch.export.ExportedProgram, count: int) -> list[str]:
    """``logits``, ``output_0``, ``present.0.key``: names from the output's pytree structure; a cache
    returned as ``past_key_values`` (``cache`` from transformers 5.2x) is named ``present``, as ONNX LLM runtimes
    expect."""
    spec = ep.call_spec.out_spec
    paths = list(_spec_paths(spec, [])) if spec is not None else []
    if len(paths) != count:
        return [None] * count
    names = []
    for path in paths:
        if not path:
            names.append("output")
        elif isinstance(path[0], int):
            names.append(".".join(["output_" + str(path[0])] + [str(p) for p in path[1:]]))
        else:
            head = "present" if path[0] in ("past_key_values", "cache") and len(path) > 1 else str(path[0])
            names.append(".".join([head] + [str(p) for p in path[1:]]))
    return names


def _spec_keys(spec) -> list:
    """Names of a TreeSpec's children: a dict's keys, a namedtuple's fields, the names a context holds
    (``(name, ...)`` tuples for the caches of ``patches/transformers_caches.py``), else positions."""
    n, ctx = spec.num_children, spec.context
    if hasattr(ctx, "_fields"):
        return list(ctx._fields)
    if isinstance(ctx, (list, tuple)) and len(ctx) == n:
        keys = [k[0] if isinstance(k, tuple) and k else k for k in ctx]
        if all(isinstance(k, str) for k in keys):
            return keys
    return list(range(n))


def _spec_paths(spec, prefix: list) -> Iterator[list]:
    if spec.is_leaf():
        yield prefix
        return
    for key, child in zip(_spec_keys(spec), spec.children()):
        yield from _spec_paths(child, prefix + [key])


def _filename_in_third_position(kwargs: Any, filename: Any) -> tuple[Any, Any]:
    """``(None, kwargs)`` when ``kwargs`` is a path (``to_onnx(model, args, "model.onnx")``, as
    ``torch.onnx.export`` is called), else ``(kwargs, filename)``.

    >>> _filename_in_third_position("model.onnx", None)
    (None, 'model.onnx')
    """
    if not isinstance(kwargs, (str, os.PathLike)):
        return kwargs, filename
    if filename is not None:
        raise InputMismatchError(
            f"kwargs={os.fspath(kwargs)!r} is a path and filename={os.fspath(filename)!r} too: give the path once "
            "(to_onnx(model, args, filename=...)); keyword inputs go in kwargs as a dict"
        )
    return None, kwargs


def _normalize_inputs(args: Any, kwargs: Any) -> tuple[tuple, dict]:
    if isinstance(args, torch.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise InputMismatchError(
            f"args must be a tuple of inputs (e.g. (x,)), not {type(args).__name__}; pass keyword inputs in kwargs"
        )
    if kwargs is None:
        kwargs = {}
    elif not isinstance(kwargs, dict):
        raise InputMismatchError(f"kwargs must be a dict, not {type(kwargs).__name__}")
    return args, kwargs

