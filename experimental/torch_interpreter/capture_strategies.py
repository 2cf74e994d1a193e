"""Capture strategies: what :func:`to_onnx` tries when ``torch.export`` refuses a model, and says so.

Each strategy is named; ``to_onnx(..., capture_strategies=...)`` takes ``True`` (all, the default),
``False`` (none: one plain ``torch.export.export``) or a tuple of names. The strategies used are
logged and recorded in the ONNX model's ``metadata_props`` (``aten2onnx.capture.*``).

- ``transformers_dynamic_shapes``: a transformers ``PreTrainedModel`` given no ``dynamic_shapes`` gets the
  usual ones for its known inputs (see :func:`transformers_dynamic_shapes`): ``batch``, ``seq``, ``past``,
  ``total`` (attention mask), ``encoder_seq``; other inputs stay static.
- ``size_oblivious``: an example size 0 or 1 on an axis declared dynamic (a batch of 1) makes torch.export
  specialize the axis. The capture then runs under ``torch.fx.experimental._config.backed_size_oblivious``
  (from the start when such a size is seen, or as a retry when torch reports a 0/1 specialization), which
  keeps the axis dynamic. A size derived from the dynamic axes that the example makes 0 or 1 (8 tokens cut
  into chunks of 8: one chunk) is fixed by torch.export without an error, only a guard
  (:func:`pinned_small_sizes`): the capture is then retried the same way, the first one kept if the retry fails.
- ``refine_dynamic_shapes``: "Constraints violated" with suggested fixes (``h = Dim('h', min=3)``,
  ``a = b + 1``) is retried with :func:`torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes`
  when every fix keeps the axis dynamic (bounds, relations); a fix making an axis static (``a = 8``)
  raises :class:`DynamicShapeError` naming the input and axis.
- ``control_flow_aliasing``: a ``torch.cond`` branch (``while_loop`` body, ``scan`` combine_fn) returning
  an input unchanged is refused by torch ("aliasing"); the capture is retried with the patches of
  ``patches/control_flow.py`` (the aliased outputs are cloned), as ``bypass_export_some_errors`` applies them.
- ``other_mode``: non-strict capture failing is retried in strict mode (and the reverse); a warning says
  which mode worked.
- ``lower_functorch``: ``torch.vmap`` in ``forward`` leaves functorch batching ops in the exported graph
  (``_add_batch_dim``, ``_remove_batch_dim``, ``_vmap_increment_nesting``); ``run_decompositions({})`` applies
  the batching rules and gives plain aten ops (nothing else is decomposed: the table is empty). Only graphs
  holding such ops are lowered.
- ``transformers_caches``: when an input is a transformers cache or the model a ``PreTrainedModel``, the
  cache classes are registered as pytree nodes (``patches/transformers_caches.py``) for the export only.
- ``transformers_recurrences``: for a ``PreTrainedModel``, the Python loops over the sequence of recurrent
  models (Mamba, Falcon-Mamba, Jamba, RWKV, RecurrentGemma; CPM-Ant's mask) are replaced for the export by
  the same computation through ``scan`` (``patches/transformers_recurrences.py``): unrolled, they make the
  sequence axis static ("Constraints violated"); FSMT's decoder padding mask, dropped on a condition on the
  input's values, is always kept.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import keystr, tree_flatten_with_path

from . import capture
from . import capture_checks as checks
from . import dynamic_shapes as ds
from .capture_kernels import shape_only_rnn_kernels
from .errors import CaptureStrategyWarning, DynamicShapeError, ExportCaptureError
from .patches import ALL_PATCHES, TRANSFORMERS_RECURRENCES
from .patches.control_flow import PATCHES as CONTROL_FLOW_PATCHES

logger = logging.getLogger(__name__)

#: every strategy, in the order they are considered
STRATEGIES = (
    "transformers_caches",
    "transformers_dynamic_shapes",
    "size_oblivious",
    "refine_dynamic_shapes",
    "control_flow_aliasing",
    "other_mode",
    "lower_functorch",
    "transformers_recurrences",
)

_METADATA_PREFIX = "aten2onnx.capture."


def resolve(choice: bool | str | Sequence[str] | None) -> frozenset[str]:
    """The set of strategies named by ``choice``.

    >>> sorted(resolve(("size_oblivious",)))
    ['size_oblivious']
    >>> resolve(False)
    frozenset()
    """
    if choice is None or choice is True:
        return frozenset(STRATEGIES)
    if choice is False:
        return frozenset()
    names = (choice,) if isinstance(choice, str) else tuple(choice)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown capture strategies {unknown}; the strategies are {list(STRATEGIES)}")
    return frozenset(names)


@dataclass
class CaptureReport:
    """What the capture did: the mode that worked, the strategies applied and why."""

    strict: bool
    strategies: frozenset[str] = frozenset(STRATEGIES)
    applied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)
    #: the dynamic shapes were inferred (transformers_dynamic_shapes), not given: static is a fallback
    inferred_shapes: bool = False

    def use(self, strategy: str, note: str) -> None:
        if strategy not in self.applied:
            self.applied.append(strategy)
        self.notes.append(note)
        logger.info("capture strategy %s: %s", strategy, note)

    def metadata(self) -> dict[str, str]:
        """Entries for the ONNX model's ``metadata_props``.

        >>> CaptureReport(strict=False).metadata()["aten2onnx.capture.mode"]
        'non-strict'
        """
        meta = {
            _METADATA_PREFIX + "mode": "strict" if self.strict else "non-strict",
            _METADATA_PREFIX + "strategies": ",".join(self.applied),
        }
        if self.notes:
            meta[_METADATA_PREFIX + "notes"] = "\n".join(self.notes)
        if self.constants:
            meta[_METADATA_PREFIX + "constant_inputs"] = repr(self.constants)
        return meta


# -- transformers caches ------------------------------------------------------------------------------------


def _is_cache(value: Any) -> bool:
    name = type(value).__name__
    return type(value).__module__.startswith("transformers") and name.endswith("Cache")


def _contains_cache(value: Any) -> bool:
    if _is_cache(value):
        return True
    if isinstance(value, dict):
        return any(_contains_cache(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains_cache(v) for v in value)
    return False


def _is_transformers_model(model: Any) -> bool:
    return any(
        c.__module__.startswith("transformers.") and c.__name__ == "PreTrainedModel" for c in type(model).__mro__
    )


@contextlib.contextmanager
def scope(model: Any, args: tuple, kwargs: dict, report: CaptureReport) -> Iterator[None]:
    """Applies the patches ``transformers_caches`` and ``transformers_recurrences`` need while capturing,
    undone on exit."""
    strategies, undo = report.strategies, []
    try:
        if "transformers_caches" in strategies and (_contains_cache((args, kwargs)) or _is_transformers_model(model)):
            for patch in ALL_PATCHES:
                if patch.group == "transformers" and patch not in TRANSFORMERS_RECURRENCES and patch.needed():
                    undo.append((patch, patch.apply()))
            if undo:
                report.use(
                    "transformers_caches",
                    "registered as pytree nodes for the export: " + ", ".join(p.name for p, _ in undo),
                )
        if "transformers_recurrences" in strategies and _is_transformers_model(model):
            applied = [(p, p.apply()) for p in TRANSFORMERS_RECURRENCES if p.needed()]
            undo += applied
            if applied:
                report.use("transformers_recurrences", "loops over the sequence as scan: "
                           + ", ".join(p.name for p, _ in applied))
        yield
    finally:
        for patch, fn in reversed(undo):
            fn()
            logger.debug("undid patch %r", patch.name)


_DECODER_AXES = {
    "input_ids": {0: "batch", 1: "seq"},
    "inputs_embeds": {0: "batch", 1: "seq"},
    "position_ids": {0: "batch", 1: "seq"},
    "token_type_ids": {0: "batch", 1: "seq"},
    "attention_mask": {0: "batch", 1: "total"},
    "cache_position": {0: "seq"},
}
_ENCODER_DECODER_AXES = {
    "input_ids": {0: "batch", 1: "encoder_seq"},
    "inputs_embeds": {0: "batch", 1: "encoder_seq"},
    "attention_mask": {0: "batch", 1: "encoder_seq"},
    "decoder_input_ids": {0: "batch", 1: "seq"},
    "decoder_attention_mask": {0: "batch", 1: "total"},
    "decoder_position_ids": {0: "batch", 1: "seq"},
    "cache_position": {0: "seq"},
}


def _cache_spec(cache: Any, length: str) -> list[dict[int, str]] | None:
    layers = getattr(cache, "layers", None)
    if layers is None:
        return None
    return [{0: "batch", 2: length}] * (2 * len(layers))


def transformers_dynamic_shapes(model: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The dynamic shapes of a transformers model's known keyword inputs, or None when ``model`` is not a
    ``PreTrainedModel`` or takes positional inputs.

    Decoder-only: ``input_ids`` ``(batch, seq)``, ``attention_mask`` ``(batch, total)``, each cache tensor
    ``(batch, heads, past, dim)``; encoder-decoder: ``input_ids`` ``(batch, encoder_seq)``,
    ``decoder_input_ids`` ``(batch, seq)``, the cross-attention cache on ``encoder_seq``.

    >>> transformers_dynamic_shapes(torch.nn.Linear(2, 2), (), {"input_ids": torch.zeros(1, 3)}) is None
    True
    """
    if not _is_transformers_model(model) or args:
        return None
    encdec = bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))
    known = _ENCODER_DECODER_AXES if encdec else _DECODER_AXES
    spec: dict[str, Any] = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and name in known:
            spec[name] = {a: n for a, n in known[name].items() if a < value.dim()}
        elif _is_cache(value) and hasattr(value, "self_attention_cache"):
            self_spec = _cache_spec(value.self_attention_cache, "past")
            cross_spec = _cache_spec(value.cross_attention_cache, "encoder_seq")
            spec[name] = [self_spec, cross_spec] if self_spec is not None and cross_spec is not None else None
        elif _is_cache(value):
            spec[name] = _cache_spec(value, "past")
    return spec if any(v is not None for v in spec.values()) else None


def default_dynamic_shapes(model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any, report: CaptureReport) -> Any:
    """``dynamic_shapes``, or when None and the strategy ``transformers_dynamic_shapes`` applies, the usual
    dynamic shapes of a transformers model (recorded in the report)."""
    if dynamic_shapes is not None or "transformers_dynamic_shapes" not in report.strategies:
        return dynamic_shapes
    spec = transformers_dynamic_shapes(model, args, kwargs)
    if spec is None:
        return None
    shown = ", ".join(
        f"{k}: {v}" if isinstance(v, dict) else f"{k}: {len(v)} cache tensors" for k, v in spec.items() if v
    )
    report.use("transformers_dynamic_shapes", f"no dynamic_shapes given: used {shown}")
    report.inferred_shapes = True
    return spec


# -- 0/1 sizes ----------------------------------------------------------------------------------------------


def small_dynamic_sizes(spec: ds.DimSpec, args: tuple, kwargs: dict) -> list[str]:
    """``x axis 0 = 1``: the axes declared dynamic whose example size is 0 or 1.

    >>> x = torch.zeros(1, 3)
    >>> spec = ds.normalize(None, (x,), {}, ({0: "batch", 1: "n"},))
    >>> small_dynamic_sizes(spec, (x,), {})
    ['args_0 axis 0 = 1']
    """
    if not spec.axes:
        return []
    leaves = {keystr(path): leaf for path, leaf in tree_flatten_with_path((args, kwargs))[0]}
    found = []
    for path, (label, axes) in spec.axes.items():
        tensor = leaves.get(path)
        if not isinstance(tensor, torch.Tensor):
            continue
        for axis in axes:
            if tensor.shape[axis] in (0, 1):
                found.append(f"{label} axis {axis} = {tensor.shape[axis]}")
    return found


@contextlib.contextmanager
def _size_oblivious(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


def _specializes_small_size(message: str) -> bool:
    """torch reports a 0/1 specialization of an input size, or a guard ``... != 1`` on a size derived from
    a dynamic axis (the output of a pooling of size 1), which backed_size_oblivious avoids."""
    if "0/1 specialized" in message:
        return True
    return "Constraints violated" in message and re.search(r"generated guard .*\) != [01]\.", message) is not None


def pinned_small_sizes(ep: torch.export.ExportedProgram) -> list[str]:
    """The guards of ``ep`` fixing a size derived from the dynamic axes to 0 or 1 (``Eq((s1 + 7)//8, 1)``).

    The example gave that size 0 or 1, torch's meta functions branched on it (strides, broadcasting,
    ``reshape``) and the graph holds the constant instead of the expression: one chunk of a sequence cut into
    chunks, one window. torch.export does not refuse it (no axis is made static, the guard is only checked by
    ``ep.module()``), yet the graph is wrong on other sizes. backed_size_oblivious avoids these guards.
    Divisibility (``Eq(Mod(s, 8), 0)``) is not such a size.

    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.reshape(x.shape[0], -1, 4).cumsum(1)
    >>> ep = torch.export.export(M(), (torch.zeros(2, 4),), dynamic_shapes=({1: torch.export.Dim.DYNAMIC},))
    >>> [guard.endswith("//4), 1)") for guard in pinned_small_sizes(ep)]
    [True]
    """
    import sympy
    from torch.export.exported_program import _get_shape_env
    from torch.utils._sympy.functions import Mod, PythonMod

    shape_env = _get_shape_env(ep.graph_module)
    if shape_env is None:
        return []
    # torch < 2.13: var_to_val (deprecated since)
    hints = shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val
    found: list[str] = []
    for guard in shape_env.guards:
        expr = guard.expr
        if not isinstance(expr, sympy.Eq):
            continue
        for size, value in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            derived = size.free_symbols and not size.is_Symbol and not isinstance(size, (Mod, PythonMod, sympy.Mod))
            backed = all(s in hints for s in size.free_symbols)
            if value in (0, 1) and derived and backed and str(expr) not in found:
                found.append(str(expr))
    return found


@contextlib.contextmanager
def _control_flow_patches(enabled: bool) -> Iterator[None]:
    undo = [p.apply() for p in CONTROL_FLOW_PATCHES if p.needed()] if enabled else []
    try:
        yield
    finally:
        for fn in reversed(undo):
            fn()


# -- suggested fixes ----------------------------------------------------------------------------------------


def _suggested_fixes(message: str) -> list[tuple[str, str]]:
    """``[(name, fix)]`` read from the "Suggested fixes:" block of torch's message."""
    if "Suggested fixes:" not in message:
        return []
    block = message.split("Suggested fixes:", 1)[1].strip().split("\n\n")[0]
    fixes = []
    for line in block.splitlines():
        match = re.match(r"\s*(\w+) = (.+)$", line)
        if match is None:
            break
        fixes.append((match.group(1), match.group(2).strip()))
    return fixes


def _made_static(message: str, spec: ds.DimSpec) -> str:
    """``input x axis 0 ('a') ...``: the axes torch reports as specialized to a constant, in the user's words."""
    found = re.findall(r"You marked L\['(\w+)'\]((?:\[[^\]]+\])*)\.size\(\)\[(\d+)\] as dynamic but your code "
                       r"specialized it to be a constant \((\d+)\)", message)
    parts = []
    for name, sub, axis, value in found:
        label = name + sub
        names = next((axes for lab, axes in spec.axes.values() if lab == label), {})
        user = names.get(int(axis))
        parts.append(f"input {label} axis {axis}{f' ({user!r})' if user else ''} would become static ({value})")
    if not parts:
        return ""
    return (
        f"axes declared dynamic are fixed by the model: {'; '.join(parts)}. aten2onnx does not silently drop a "
        "dynamic axis: declare the axis static (remove it from dynamic_shapes) or change the model's code that "
        "fixes this size (a reshape to constants, a slice of a fixed length)."
    )


def _axes_named(spec: ds.DimSpec, name: str) -> list[str]:
    return [f"input {label} axis {axis}" for label, axes in spec.axes.values() for axis, n in axes.items() if n == name]


def refine(message: str, spec: ds.DimSpec, torch_spec: Any) -> tuple[Any, str]:
    """``torch_spec`` with torch's suggested fixes applied, and a description of them.

    Raises :class:`DynamicShapeError` when a fix makes an axis static.
    """
    fixes = _suggested_fixes(message)
    static = [(name, fix) for name, fix in fixes if re.fullmatch(r"-?\d+", fix)]
    if static:
        where = "; ".join(
            f"{', '.join(_axes_named(spec, name)) or name} would become static ({fix})" for name, fix in static
        )
        raise DynamicShapeError(
            f"axes declared dynamic are fixed by the model: {where}. torch.export suggests making them static; "
            "aten2onnx does not silently drop a dynamic axis. Declare the axis static (remove it from "
            "dynamic_shapes) or change the model's code that fixes this size."
        )
    block = "Suggested fixes:\n" + "\n".join(f"  {name} = {fix}" for name, fix in fixes)
    try:
        refined = torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(block, torch_spec)
    except Exception as e:  # torch cannot apply its own fixes to this spec
        raise DynamicShapeError(f"could not apply torch's suggested fixes ({block!r}): {e}") from e
    return refined, ", ".join(f"{name} = {fix}" for name, fix in fixes)


# -- the capture loop ---------------------------------------------------------------------------------------


def export(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict,
    spec: ds.DimSpec,
    report: CaptureReport,
) -> torch.export.ExportedProgram:
    """``capture.export`` with the strategies of ``report``, which records what was applied; then the
    checks of the captured program (a tensor output, the scalars made constant)."""
    try:
        ep = _export(model, args, kwargs, spec, report.strict, report.strategies, report)
    except (DynamicShapeError, ExportCaptureError) as e:
        if not report.inferred_shapes:
            raise
        # the user asked for nothing dynamic: the shapes inferred for a transformers model were a guess
        saved = spec.torch_spec, spec.axes
        spec.torch_spec, spec.axes = None, {}
        _clear_dynamic_marks((args, kwargs))
        try:
            ep = _export(model, args, kwargs, spec, report.strict, report.strategies, report)
        except Exception:
            spec.torch_spec, spec.axes = saved
            raise e from e.__cause__  # static fails too: the first error is the one to read
        first = str(e).splitlines()[0]
        note = f"the usual dynamic shapes of a transformers model do not fit this one ({first}): exported static"
        report.use("transformers_dynamic_shapes", note)
        warnings.warn(f"{note}; pass dynamic_shapes to choose the dynamic axes", CaptureStrategyWarning, stacklevel=3)
    if "lower_functorch" in report.strategies:
        ep = lower_functorch(ep, report)
    checks.check_outputs(ep)
    report.constants = checks.constant_inputs(ep)
    checks.warn_constant_inputs(report.constants)
    return ep


def _functorch_nodes(ep: torch.export.ExportedProgram) -> list[str]:
    found = []
    for module in ep.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            found += [
                n.name
                for n in module.graph.nodes
                if n.op == "call_function" and getattr(n.target, "__module__", "").startswith("torch._functorch")
            ]
    return found


def lower_functorch(ep: torch.export.ExportedProgram, report: CaptureReport) -> torch.export.ExportedProgram:
    """``ep`` with its functorch batching ops (``torch.vmap``) lowered to aten ops by their batching rules."""
    nodes = _functorch_nodes(ep)
    if not nodes:
        return ep
    with shape_only_rnn_kernels():
        lowered = ep.run_decompositions({})
    left = _functorch_nodes(lowered)
    if left:
        raise ExportCaptureError(
            f"torch.vmap could not be lowered: functorch ops {left} remain after run_decompositions"
        )
    report.use("lower_functorch", f"torch.vmap batching ops lowered to aten ops ({len(nodes)} functorch nodes)")
    return lowered


def _clear_dynamic_marks(inputs: Any) -> None:
    """Removes the marks torch.export leaves on the input tensors of a capture with dynamic shapes
    (``mark_dynamic``): a capture without them would still treat those axes as dynamic."""
    for _, leaf in tree_flatten_with_path(inputs)[0]:
        if isinstance(leaf, torch.Tensor):
            for attr in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices"):
                if hasattr(leaf, attr):
                    delattr(leaf, attr)


def start(
    model: torch.nn.Module, target_opset: int, strict: bool, choice: bool | str | Sequence[str] | None
) -> CaptureReport:
    """Checks made before capture (training mode) and the report of the capture to come."""
    checks.warn_training_mode(model)
    return CaptureReport(strict=strict, strategies=resolve(choice))


def record(onnx_model: Any, report: CaptureReport | None) -> None:
    """Writes the report into the ``metadata_props`` of an ``onnx_ir.Model``."""
    if report is not None:
        onnx_model.metadata_props.update(report.metadata())


def _export(model, args, kwargs, spec, strict, strategies, report) -> torch.export.ExportedProgram:
    try:
        return _export_mode(model, args, kwargs, spec, strict, strategies, report)
    except ExportCaptureError as first:
        if "other_mode" not in strategies or isinstance(first, DynamicShapeError):
            raise
        other = not strict
        mode, other_mode = ("strict" if strict else "non-strict"), ("strict" if other else "non-strict")
        logger.info("%s capture failed, trying %s: %s", mode, other_mode, str(first).splitlines()[0])
        try:
            ep = _export_mode(model, args, kwargs, spec, other, strategies, report)
        except Exception as second:
            first.args = (f"{first.args[0]}\n(the {other_mode} capture failed too: {str(second).splitlines()[0]})",)
            raise first from first.__cause__
        report.strict = other
        note = f"{mode} capture failed ({str(first).splitlines()[0]}); {other_mode} capture worked"
        report.use("other_mode", note)
        warnings.warn(f"{note}: pass strict={other} to skip the failing attempt", CaptureStrategyWarning, stacklevel=3)
        return ep


def _export_mode(model, args, kwargs, spec, strict, strategies, report) -> torch.export.ExportedProgram:
    torch_spec = spec.torch_spec
    oblivious = False
    small = small_dynamic_sizes(spec, args, kwargs) if "size_oblivious" in strategies else []
    if small:
        oblivious = True
        report.use(
            "size_oblivious",
            f"example sizes 0/1 on axes declared dynamic ({', '.join(small)}): captured with backed_size_oblivious",
        )
    refinements, unaliased = 0, False
    while True:
        try:
            with _size_oblivious(oblivious), _control_flow_patches(unaliased):
                ep = capture.export(model, args, kwargs, torch_spec, strict, spec.describe())
            pinned = pinned_small_sizes(ep) if "size_oblivious" in strategies and not oblivious else []
            if not pinned:
                return ep
            note = (f"torch.export fixed sizes derived from the dynamic axes to their example value 0/1 "
                    f"({', '.join(pinned[:3])}): retried with backed_size_oblivious")
            try:
                with _size_oblivious(True), _control_flow_patches(unaliased):
                    retried = capture.export(model, args, kwargs, torch_spec, strict, spec.describe())
            except (ExportCaptureError, DynamicShapeError) as e:  # the first capture stands, with its guards
                logger.info("%s, which failed (%s): the first capture is kept", note, str(e).splitlines()[0])
                return ep
            report.use("size_oblivious", note)
            return retried
        except ExportCaptureError as e:
            if "aliasing" in str(e) and "control_flow_aliasing" in strategies and not unaliased:
                unaliased = True
                report.use(
                    "control_flow_aliasing",
                    "a control-flow body returned an input unchanged: retried with its aliased outputs cloned",
                )
                continue
            raise
        except DynamicShapeError as e:
            message = str(e.__cause__ or e)
            if _specializes_small_size(message) and "size_oblivious" in strategies and not oblivious:
                oblivious = True
                report.use("size_oblivious", "torch.export specialized a 0/1 size: retried with backed_size_oblivious")
                continue
            if "Suggested fixes:" in message and "refine_dynamic_shapes" in strategies and refinements < 3:
                try:
                    torch_spec, applied = refine(message, spec, torch_spec)
                except DynamicShapeError as refused:
                    raise DynamicShapeError(f"{refused}\n{e}") from e.__cause__
                refinements += 1
                report.use("refine_dynamic_shapes", f"applied torch's suggested fixes: {applied}")
                continue
            made_static = _made_static(message, spec)
            if made_static:
                raise DynamicShapeError(f"{made_static}\n{e}") from e.__cause__
            raise
