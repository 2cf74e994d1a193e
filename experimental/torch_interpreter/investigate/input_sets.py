"""Every input set of ``to_onnx(inputs=[...])`` run by onnxruntime and by the PyTorch model, outputs compared.

The sets decided the dynamic axes; one of them was exported. Running each of them, eagerly (on a copy: a
transformers cache grows in place) and through the ONNX model, tells whether the graph holds for all: a branch the
model takes differently for another size, a size the model fixes, a wrong converter on another shape.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import onnx_ir as ir
import torch
from torch.utils._pytree import tree_leaves

from ..errors import VerificationError
from ..runtime import InferenceSession, to_numpy
from .compare import TOLERANCES, compare_arrays
from .engine import onnx_feeds

#: (atol, rtol) per floating type (the comparisons' own, float64 tighter: a whole model against itself); other
#: types compare exactly
_TOLERANCES = {**TOLERANCES, torch.float64: (1e-7, 1e-6)}


def _eager(model: torch.nn.Module, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    args, kwargs = copy.deepcopy((args, kwargs))
    with torch.no_grad():
        out = model(*args, **kwargs)
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _difference(expected: torch.Tensor, got: torch.Tensor) -> str | None:
    """Why ``got`` is not ``expected`` within the type's tolerance (:func:`.compare.compare_arrays`, floats within
    :data:`_TOLERANCES`, other types exactly), None when it is."""
    atol, rtol = _TOLERANCES.get(expected.dtype, (0.0, 0.0))
    found = compare_arrays(expected.detach().cpu(), to_numpy(got.detach().cpu()), atol, rtol)
    if found.ok:
        return None
    if found.reason == "shape":
        return f"shape {tuple(got.shape)} instead of {tuple(expected.shape)}"
    if found.reason == "dtype":
        return f"type {got.dtype} instead of {expected.dtype}"
    return f"values differ by up to {found.max_abs:.3g} (atol={atol:g}, rtol={rtol:g}; NaN and infinities compared too)"


def check_input_sets(
    ep: torch.export.ExportedProgram,
    onnx_model: ir.Model,
    model: torch.nn.Module,
    sets: Sequence[tuple[tuple, dict]],
) -> list[str]:
    """Runs every input set through ``onnx_model`` and ``model``; raises :class:`VerificationError` naming the set
    and the output that differ, returns one line per set otherwise. The pytree nodes the inputs need (caches) are
    registered by the caller.

    >>> from experimental.torch_interpreter import to_onnx
    >>> sets = [((torch.randn(2, 3),), {}), ((torch.randn(5, 3),), {})]
    >>> ep = torch.export.export(torch.nn.ReLU(), sets[0][0], dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> onx = to_onnx(ep, as_ir=True)
    >>> check_input_sets(ep, onx, torch.nn.ReLU(), sets)
    ['set 1: 1 outputs equal to eager', 'set 2: 1 outputs equal to eager']
    """
    session = InferenceSession(onnx_model)
    names = [v.name for v in onnx_model.graph.outputs]
    lines = []
    for i, (args, kwargs) in enumerate(sets, 1):
        expected = _eager(model, args, kwargs)
        try:  # the exported program's own checks of the sizes (a range the model narrowed), then onnxruntime's
            got = session.run_torch(None, onnx_feeds(ep, onnx_model, args, kwargs)[0])
        except Exception as e:
            raise VerificationError(
                f"input set {i}: the exported graph does not hold for its sizes ({type(e).__name__}: {e}); the model "
                f"decides something from a size (a branch, a range): export the sets that need one graph each") from e
        if len(got) != len(expected):
            raise VerificationError(f"input set {i}: the ONNX model returns {len(got)} outputs and the model "
                                    f"{len(expected)} tensors: they cannot be compared")
        for name, e, g in zip(names, expected, got):
            why = _difference(e, g)
            if why is not None:
                raise VerificationError(
                    f"input set {i}: output {name!r} differs from eager: {why}. The exported graph does not hold "
                    "for this set (the model decides something the graph keeps fixed: a branch, a Python state); "
                    "find_discrepancies(model, args, kwargs) with this set names the first node that differs"
                )
        lines.append(f"set {i}: {len(got)} outputs equal to eager")
    return lines
