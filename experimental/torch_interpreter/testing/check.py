"""Shared checks: export with to_onnx, validate the ONNX model, compare onnxruntime with eager PyTorch.

Example::

    >>> import torch
    >>> onx = check_model(Fn(lambda x: x.relu() * 2), (rand(2, 3),), dynamic_shapes=({0: "batch"},),
    ...                   more_inputs=[((rand(5, 3),), None)])
    >>> op_types(onx)
    ['Relu', 'Mul']
    >>> op_types(check_dynamic(torch.nn.Softmax(-1), rand(2, 4)))
    ['Softmax']
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import torch
from torch.utils._pytree import tree_leaves

from ..convert import to_onnx
from ..runtime import InferenceSession


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
    """The op types of the main graph's nodes, in order (see the module's example)."""
    return [n.op_type for n in onx.graph.node]


def count_nodes(graph: onnx.GraphProto) -> int:
    """Nodes of ``graph`` and of every subgraph its nodes hold (If branches, Loop and Scan bodies).

    >>> branch = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "b", [], [])
    >>> node = onnx.helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    >>> count_nodes(onnx.helper.make_graph([node], "g", [], []))
    3
    """
    total = 0
    for node in graph.node:
        total += 1
        for attr in node.attribute:
            total += sum(count_nodes(g) for g in ([attr.g] if attr.HasField("g") else list(attr.graphs)))
    return total


class Fn(torch.nn.Module):
    """Wraps a function of tensors into a module, for one-op tests: ``Fn(lambda x: x.relu())``.
    Its inputs are positional: ``dynamic_shapes`` takes one entry per tensor, ``({0: "batch"},)``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def rand(
    *shape: int,
    dtype: torch.dtype = torch.float32,
    low: float = -3.0,
    high: float = 3.0,
    nonzero: bool = False,
    seed: int | None = None,
    normal: bool = False,
    p_true: float = 0.5,
) -> torch.Tensor:
    """A random tensor of ``shape`` (no shape: a 0-D tensor) and ``dtype``.

    * floating dtypes: uniform in ``[low, high)``; with ``normal=True`` standard normal, clipped to
      ``[low, high]``; ``nonzero=True`` replaces the values of magnitude below 0.1 by 0.5;
    * integer dtypes: uniform in ``[low, high]`` (both included); ``nonzero=True`` replaces 0 by 1;
    * bool: true with probability ``p_true``.

    ``seed=None`` draws from PyTorch's global generator (two calls give two different tensors),
    an integer from a generator of its own (the same tensor at each call).

    >>> rand(2, 3, dtype=torch.int64, low=0, high=4, seed=0).shape, rand(dtype=torch.bool).dim()
    (torch.Size([2, 3]), 0)
    """
    gen = None if seed is None else torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 1 - p_true
    if not dtype.is_floating_point:
        if not dtype.is_signed:
            low = max(low, 0)
        t = torch.randint(int(low), int(high) + 1, shape, generator=gen, dtype=dtype)
        return torch.where(t == 0, torch.ones_like(t), t) if nonzero else t
    if normal:
        t = torch.randn(shape, generator=gen).clamp(low, high)
    else:
        t = torch.rand(shape, generator=gen) * (high - low) + low
    if nonzero:
        t = torch.where(t.abs() < 0.1, torch.full_like(t, 0.5), t)
    return t.to(dtype)


#: names of the dynamic axes of :func:`check_dynamic`
_AXIS_NAMES = {0: "batch", 1: "c", 2: "h", 3: "w", 4: "d"}


def check_dynamic(
    model: Any,
    x: torch.Tensor,
    dynamic: Sequence[int] = (0,),
    other: torch.Tensor | None = None,
    grow: int = 3,
    **kwargs: Any,
) -> onnx.ModelProto:
    """:func:`check_model` of ``model(x)`` (a module or a function of one tensor) exported with the axes
    ``dynamic`` of ``x`` dynamic (axis 0 named ``batch``), checked on ``x`` and on ``other``, by default
    a standard normal tensor of ``x``'s dtype with ``grow`` more on each dynamic axis."""
    if not isinstance(model, torch.nn.Module):
        model = Fn(model)
    dynamic = [d % x.dim() for d in dynamic]
    if other is None:
        shape = [s + grow if i in dynamic else s for i, s in enumerate(x.shape)]
        other = rand(*shape, dtype=x.dtype, normal=True)
    dynamic_shapes = ({i: _AXIS_NAMES.get(i, f"dim{i}") for i in dynamic},)
    return check_model(model, (x,), dynamic_shapes=dynamic_shapes, more_inputs=[((other,), None)], **kwargs)


def element_types(onx: onnx.ModelProto) -> dict[str, int]:
    """The element type (``onnx.TensorProto`` enum) of every value of ``onx``'s main graph onnx's shape inference
    types, its inputs, outputs and initializers included (a value of a domain onnx does not know may be missing).

    >>> from onnx import TensorProto, helper
    >>> nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), helper.make_node("Neg", ["h"], ["y"])]
    >>> graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])])
    >>> element_types(helper.make_model(graph))["h"] == TensorProto.FLOAT16
    True
    """
    inferred = onnx.shape_inference.infer_shapes(onx)
    types = {v.name: v.type.tensor_type.elem_type
             for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}
    types.update({i.name: i.data_type for i in onx.graph.initializer})
    return types


def nodes_without_cuda_kernel(onx: onnx.ModelProto) -> set[tuple[str, str, str]]:
    """The (domain, op type, element types) of the nodes of ``onx`` onnxruntime's CUDA provider has no kernel for
    (:data:`~experimental.torch_interpreter.ort_kernels.CUDA_TYPES`): each would run on the CPU, with a copy each way,
    and keep onnxruntime-genai from capturing a CUDA graph. An op the table does not list, or a node whose input type
    is unknown, counts as one."""
    from ..ort_kernels import CUDA_SIMPLIFIED_NORM_TYPES, CUDA_TYPES

    types = element_types(onx)
    missing = set()
    for node in onx.graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        taken = CUDA_TYPES.get((domain, node.op_type), ())
        if taken is None:
            continue
        read = [ir.DataType(types[name]) if types.get(name) else None for name in node.input]
        typed = read[1 if node.op_type == "Where" else 0] if read else None
        if node.op_type == "SimplifiedLayerNormalization":
            ok = (read[0], read[1]) in CUDA_SIMPLIFIED_NORM_TYPES
        elif node.op_type in ("LayerNormalization", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"):
            ok = typed in taken and len({t for t in read[:3] if t is not None}) == 1
        else:
            ok = typed in taken
        if not ok:
            missing.add((domain, node.op_type, ", ".join(t.name if t else "?" for t in read)))
    return missing


def bfloat16_nodes_without_cuda_kernel(onx: onnx.ModelProto) -> set[tuple[str, str]]:
    """The (domain, op type) of the nodes of ``onx`` reading or writing bfloat16 that onnxruntime's CUDA provider
    computes in no bfloat16 kernel: such a node would run on the CPU's, which has none either."""
    from ..ort_kernels import (
        CUDA_ANY_TYPE_MOVES,
        CUDA_BFLOAT16,
        CUDA_BFLOAT16_FUSED,
        MOVES,
    )

    bf16 = onnx.TensorProto.BFLOAT16
    types = element_types(onx)
    ops = CUDA_BFLOAT16 | MOVES | CUDA_ANY_TYPE_MOVES | {"Cast", "Constant", "Shape"}
    allowed = {("", op) for op in ops} | CUDA_BFLOAT16_FUSED
    return {
        (n.domain, n.op_type)
        for n in onx.graph.node
        if any(types.get(v) == bf16 for v in [*n.input, *n.output]) and (n.domain, n.op_type) not in allowed
    }
