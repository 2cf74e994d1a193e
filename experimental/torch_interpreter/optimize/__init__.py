"""Optimization of the translated graph: a pipeline of rewrites (:mod:`.pipeline`), run by stage.

``to_onnx(..., optimize=...)`` calls :func:`optimize_model` once the FX graph is translated (the translation
itself ends with the ``"translation"`` stage, at every level):

* ``False``: the raw translation, one group of nodes per FX node;
* ``True`` (default): the ``"default"`` stage: onnxscript's optimizer (constant folding, shape-op
  simplification, common subexpression elimination, unused removal; :mod:`.onnxscript_adapter`), then exact
  rewrites of our own where onnxscript has none (:mod:`.simplify`: transformers' padding-mask index grid...),
  standard ONNX only;
* ``"onnxruntime"``: the translation at opset :data:`ATTENTION_OPSET` at least (:func:`translation_opset`:
  ``scaled_dot_product_attention`` becomes one ONNX ``Attention`` node, which onnxruntime runs as one kernel,
  grouped-query heads included, and which returns 0 on the rows a mask hides entirely as PyTorch does), the
  ``"default"`` stage, then the ``"onnxruntime"`` stage: fusions into the kernels onnxruntime runs
  (``SimplifiedLayerNormalization``, ``SkipSimplifiedLayerNormalization``, ``SkipLayerNormalization``,
  ``FastGelu``/``BiasGelu``, ``FusedMatMul``, ``RotaryEmbedding``..., ``MultiHeadAttention`` below opset 23),
  ``Attention`` on ``[batch, sequence, hidden]`` with the cache as its past inputs (:mod:`.attention_bsd`), the
  query/key/value projections of one input packed into one ``MatMul`` (:mod:`.packed_projections`) and, in
  encoders, given with the attention to ``com.microsoft::Attention`` (:mod:`.packed_attention`); a norm whose
  input and scale types differ reads its input in the scale's type (:mod:`.norm_types`); a residual + norm fusion
  whose CPU kernel is the slower is given back (:mod:`.skip_norm`); the model needs onnxruntime (or
  a runtime implementing the ``com.microsoft`` domain).

The provenance metadata of the nodes (:mod:`experimental.torch_interpreter.metadata`) stays on every node that
remains; a fused node carries the metadata its nodes shared.
"""

from __future__ import annotations

import logging
import time

import onnx
import onnx_ir as ir

from ..opsets import onnxruntime_max_opset
from .pipeline import PIPELINE, run_stage
from .rewrite import Rewrite

logger = logging.getLogger(__name__)

#: the values ``optimize=`` accepts, besides True and False
LEVELS = ("none", "default", "onnxruntime")

#: the opset the onnxruntime level translates at, at least: ONNX ``Attention`` (onnxruntime >= 1.23)
ATTENTION_OPSET = 23


def check_level(level: bool | str | None) -> str:
    """Returns the level's name (one of :data:`LEVELS`); raises ``ValueError`` for an unknown one.

    Example::

        >>> from experimental.torch_interpreter.optimize import check_level
        >>> check_level(True), check_level(False), check_level("onnxruntime")
        ('default', 'none', 'onnxruntime')
    """
    if level is True:
        return "default"
    if level is False or level is None:
        return "none"
    if isinstance(level, str) and level in LEVELS:
        return level
    raise ValueError(f"optimize={level!r}: expected True, False or one of {LEVELS}")


def translation_opset(level: bool | str | None, target_opset: int) -> int:
    """The opset ``to_onnx`` translates at for ``optimize=level``: ``target_opset``, raised to
    :data:`ATTENTION_OPSET` at the onnxruntime level when the installed onnx and onnxruntime know it.

    Example::

        >>> from experimental.torch_interpreter.optimize import translation_opset
        >>> translation_opset(True, 18), translation_opset("onnxruntime", 18), translation_opset("onnxruntime", 24)
        (18, 23, 24)
    """
    if check_level(level) != "onnxruntime" or target_opset >= ATTENTION_OPSET:
        return target_opset
    ort_max = onnxruntime_max_opset()
    if onnx.defs.onnx_opset_version() < ATTENTION_OPSET or ort_max is None or ort_max < ATTENTION_OPSET:
        logger.info("optimize='onnxruntime': opset %d kept, onnx or onnxruntime lacks opset %d", target_opset,
                    ATTENTION_OPSET)
        return target_opset
    return ATTENTION_OPSET


def optimize_model(model: ir.Model, level: bool | str = True) -> ir.Model:
    """Optimizes ``model`` in place at ``level`` and returns it (see the module's docstring): the ``"default"``
    stage of :data:`~.pipeline.PIPELINE`, then its ``"onnxruntime"`` stage at that level.

    :param model: the translated model (``to_onnx(..., optimize=False, as_ir=True)``)
    :param level: ``True``/``"default"``, ``"onnxruntime"``, or ``False``/``"none"`` (nothing done)
    :return: the same model

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import to_onnx
        >>> from experimental.torch_interpreter.optimize import optimize_model
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return (x * 2) + (x * 2)
        >>> raw = to_onnx(M(), (torch.randn(2, 3),), optimize=False, as_ir=True)
        >>> [n.op_type for n in raw.graph]
        ['Constant', 'Mul', 'Mul', 'Add']
        >>> [n.op_type for n in optimize_model(raw).graph]
        ['Mul', 'Add']
    """
    name = check_level(level)
    if name == "none":
        return model
    begin = time.perf_counter()
    before = len(model.graph)
    run_stage(model, "default")
    counts = run_stage(model, "onnxruntime") if name == "onnxruntime" else {}
    logger.info(
        "optimize=%r: %d -> %d nodes in %.3fs%s",
        level,
        before,
        len(model.graph),
        time.perf_counter() - begin,
        f", fusions {counts}" if counts else "",
    )
    return model


__all__ = [
    "ATTENTION_OPSET",
    "LEVELS",
    "PIPELINE",
    "Rewrite",
    "check_level",
    "optimize_model",
    "run_stage",
    "translation_opset",
]
