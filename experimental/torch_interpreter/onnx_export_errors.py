"""``bypass_export_some_errors``: patches the known causes of export failures, undone on exit."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx.experimental._config as fx_config

from .logs import verbosity
from .patches import Patch, select
from .patches.base import mark_active
from .patches.rewrite_if import rewrite_forward

logger = logging.getLogger(__name__)


def patch_table(patches: list[Patch] | None = None) -> str:
    """The patches as a reStructuredText table (name, group, what it replaces, error fixed, versions)."""
    rows = [(p.name, p.group, p.replaces, p.fixes, p.versions) for p in (patches or select())]
    header = ("patch", "group", "replaces", "fixes", "versions")
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines)


def _copy_caches(value: Any) -> Any:
    """Inputs with every transformers cache copied, so that exporting and running the model in eager
    mode (which appends to caches in place) do not change the user's objects."""
    if type(value).__name__.endswith("Cache") and hasattr(value, "layers") or type(value).__name__ == (
        "EncoderDecoderCache"
    ):
        return copy.deepcopy(value)
    if isinstance(value, dict):
        return {k: _copy_caches(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_copy_caches(v) for v in value)
    return value


@contextlib.contextmanager
def bypass_export_some_errors(
    patch_sympy: bool = True,
    patch_torch: bool = True,
    patch_transformers: bool = False,
    backed_size_oblivious: bool = False,
    verbose: int = 0,
    rewrite_control_flow: Sequence[type] = (),
    patch_torchvision: bool = False,
    patch_ultralytics: bool = False,
) -> Iterator[Callable[[Any], Any]]:
    """Patches what makes ``torch.export`` fail on common models; undoes everything on exit.

    Only the patches the installed versions need are applied (each checks for itself), so nesting
    the context manager is safe: the inner one applies nothing that the outer one applied.

    :param patch_sympy: patches for sympy (none is needed with sympy 1.14 and torch 2.13)
    :param patch_torch: patches for torch, see the table below
    :param patch_transformers: registers transformers caches as pytree nodes, rewrites the loops over
        the sequence of a few recurrent models with ``scan`` (``patches/transformers_recurrences.py``) and keeps
        the sizes given to ``torch_int`` symbolic (``patches/transformers_sizes.py``)
    :param backed_size_oblivious: sets ``torch.fx.experimental._config.backed_size_oblivious`` while
        exporting, so that an example input of size 1 on a dynamic axis (a past length of 1) does not
        specialize the dimension; the graph is then valid for sizes >= 2 and for 1 where broadcasting
        does not depend on it
    :param verbose: 1 logs the patches applied and undone
    :param rewrite_control_flow: module classes whose ``forward`` is recompiled while inside the block so
        that an ``if`` on a tensor value whose branches end with ``return`` becomes ``torch.cond``
        (opt-in: it changes the code that runs; see ``patches/rewrite_if.py``)
    :param patch_torchvision: replaces the functions of torchvision's detection models (Faster R-CNN, Mask
        R-CNN, RetinaNet, FCOS...) that branch on the data-dependent number of boxes
        (``patches/torchvision_detection.py``) or specialize the image size (``patches/torchvision_image_sizes.py``);
        the patches applied while a model is captured are listed in its metadata (``aten2onnx.capture.patches``)
    :param patch_ultralytics: makes ultralytics' YOLO heads (detect, segment, pose, oriented boxes) compute their
        anchors for the size at hand at every call, as ultralytics' own exporter does with ``dynamic=True``, so that a
        model that already ran in eager mode exports with a dynamic batch and image size
        (``patches/ultralytics_heads.py``)
    :return: (as context manager) a function ``adapt(inputs)`` returning the inputs with every cache
        copied, so that exporting and running the model in eager mode leave the user's caches alone

    The patches:

    .. list-table::
       :header-rows: 1

       * - patch
         - group
         - fixes
       * - torch.jit.isinstance
         - torch
         - strict export: ``Unsupported: Attempted to call function marked as skipped ... isinstance``
       * - torch._dynamo.mark_static_address
         - torch
         - strict export: ``Attempt to trace forbidden callable <function mark_static_address>``
       * - torch.cond without aliasing
         - torch
         - ``Encountered aliasing during higher order op tracing`` (a branch ``lambda x: x``)
       * - while_loop without aliasing
         - torch
         - the same for a ``while_loop`` body returning a carried tensor unchanged
       * - scan without aliasing
         - torch
         - ``Output-to-output aliasing`` / ``Input-to-output aliasing`` in a ``scan`` combine_fn
       * - DynamicCache as pytree
         - transformers
         - ``Unsupported input type <class 'transformers.cache_utils.DynamicCache'>``
       * - EncoderDecoderCache as pytree
         - transformers
         - ``Unsupported input type <class '...EncoderDecoderCache'>``
       * - mamba_selective_scan as scan (Mamba, Falcon-Mamba, Jamba), rwkv_linear_attention_cpu as scan,
           RecurrentGemmaRglru._rnn_scan as scan
         - transformers
         - ``Constraints violated (L['input_ids'].size()[1])``: a Python loop over the sequence, unrolled
       * - CpmAntModel._prepare_attention_mask with arange
         - transformers
         - the same, from a mask built with ``torch.tensor(list(range(seqlen)))``
       * - Funnel positions as a symbolic progression
         - transformers
         - the same, from token positions kept as ``list(range(seq_len))``
       * - mamba2_chunk_scan cuts its padding for every length (Mamba-2, Bamba, Falcon-H1, Zamba2...)
         - transformers
         - other lengths than a multiple of the chunk size: the padded output (``if pad_size > 0`` not traced)
       * - FSMT decoder padding mask kept when empty
         - transformers
         - ``Could not guard on data-dependent expression``: ``if not padding_mask.any()`` on the input's values
       * - torch_int and torch_float keep symbolic sizes
         - transformers
         - a dynamic image size fixed by ``int(height)`` in ``torch_int`` (RT-DETR's anchors, position embeddings
           interpolated to the image): the graph held at the example's size only
       * - batched_nms with the coordinate trick for any number of boxes
         - torchvision
         - ``Could not guard on data-dependent expression Eq(4*u1, 0)``: the number of boxes of detection models
       * - _multiscale_roi_align sized by shape[0]
         - torchvision
         - ``Could not extract specialized integer from data-dependent expression Min(1000, u2)`` (``len(rois)``)
       * - detection images resized with symbolic sizes
         - torchvision
         - a dynamic height or width specialized to the example's (``min`` of the sizes)
       * - detection batches padded with symbolic sizes
         - torchvision
         - a dynamic height or width specialized to the example's (``math.ceil(float(size) / 32)``)
       * - Mask R-CNN masks pasted all at once
         - torchvision
         - ``Could not extract specialized integer from data-dependent expression Min(100, u9)`` (a loop over
           the detections)
       * - YOLO Detect heads make their anchors at every call
         - ultralytics
         - ``Constraints violated``: a dynamic batch, height or width fixed to the example's by
           ``self.shape != shape`` after an eager call

    Example::

        >>> import torch
        >>> from experimental.torch_interpreter import bypass_export_some_errors, to_onnx
        >>> class Model(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x + 1 if torch.jit.isinstance(x, torch.Tensor) else x
        >>> with bypass_export_some_errors(verbose=0) as adapt:
        ...     onx = to_onnx(Model(), adapt((torch.randn(2),)), strict=True, capture_strategies=False)
        >>> [n.op_type for n in onx.graph.node]
        ['Add']
    """
    groups = {
        "sympy": patch_sympy,
        "torch": patch_torch,
        "transformers": patch_transformers,
        "torchvision": patch_torchvision,
        "ultralytics": patch_ultralytics,
    }
    enabled = [group for group, on in groups.items() if on]
    undo: list[tuple[Patch, Callable[[], None]]] = []
    stack = contextlib.ExitStack()
    stack.enter_context(verbosity(verbose))
    level = logging.INFO
    try:
        for patch in select(groups=enabled):
            if patch.needed():
                undo.append((patch, mark_active(patch, patch.apply())))
                logger.log(level, "applied patch %r: %s", patch.name, patch.replaces)
        for cls in rewrite_control_flow:
            stack.callback(rewrite_forward(cls))
            logger.log(level, "rewrote the tensor `if` statements of %s.forward into torch.cond", cls.__name__)
        if backed_size_oblivious:
            stack.enter_context(fx_config.patch(backed_size_oblivious=True))
            logger.log(level, "set torch.fx.experimental._config.backed_size_oblivious=True")
        logger.log(level, "%d patch(es) applied: %s", len(undo), [p.name for p, _ in undo])
        yield _copy_caches
    finally:
        for patch, fn in reversed(undo):
            fn()
            logger.log(level, "undid patch %r", patch.name)
        torch._dynamo.reset()  # dynamo may have cached code traced with the patches
        stack.close()
