"""Shared checks: export with to_onnx, validate the ONNX model, compare onnxruntime with eager PyTorch."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import torch
from torch.utils._pytree import tree_leaves

from experimental.torch_interpreter import InferenceSession, to_onnx


def _feeds(onx: onnx.ModelProto, args: tuple, kwargs: dict | None) -> dict[str, Any]:
    leaves = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
    names = [i.name for i in onx.graph.input]
    assert len(names) == len(leaves), f"ONNX inputs {names} but {len(leaves)} tensors given"
    return dict(zip(names, leaves))


def _expected(model: torch.nn.Module, args: tuple, kwargs: dict | None) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*args, **(kwargs or {}))
    return [
        (t.float() if t.dtype == torch.bfloat16 else t).detach().cpu().numpy()
        for t in tree_leaves(out)
        if isinstance(t, torch.Tensor)
    ]


def check_model(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict | None = None,
    dynamic_shapes: Any = None,
    more_inputs: Sequence[tuple] = (),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    check_onnx: bool = True,
    **to_onnx_kwargs: Any,
) -> onnx.ModelProto:
    """Exports ``model``, checks the ONNX model, and compares onnxruntime with eager PyTorch on ``args``
    and on each ``(args, kwargs)`` of ``more_inputs`` (other shapes for dynamic cases)."""
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    onx = to_onnx(model, args, kwargs, dynamic_shapes=dynamic_shapes, **to_onnx_kwargs)
    if check_onnx:
        onnx.checker.check_model(onx, full_check=True)
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    for a, k in [(args, kwargs), *more_inputs]:
        feeds = _feeds(onx, a, k)  # before the eager run, which may grow caches in place
        expected = _expected(model, *copy.deepcopy((a, k)))
        got = sess.run(None, feeds)
        assert len(got) == len(expected), f"{len(got)} ONNX outputs, {len(expected)} torch outputs"
        for e, g in zip(expected, got):
            if g.dtype.name == "bfloat16":
                g = g.astype(np.float32)
            assert e.shape == g.shape, f"shape {g.shape} != expected {e.shape}"
            if e.dtype == np.bool_ or np.issubdtype(e.dtype, np.integer):
                np.testing.assert_array_equal(g, e)
            else:
                np.testing.assert_allclose(g, e, atol=atol, rtol=rtol)
    return onx


def op_types(onx: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in onx.graph.node]


class Fn(torch.nn.Module):
    """Wraps a function of tensors into a module, for one-op tests: ``Fn(lambda x: x.relu())``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)
