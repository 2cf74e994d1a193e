"""Kernels swapped in while ``torch.export`` captures a model, so that some ops stay whole in the graph.

torch.export computes the shapes of the CompositeImplicitAutograd RNN ops (``aten.lstm.input``,
``gru.input``, ``rnn_tanh.input``, ``rnn_relu.input``) by running their decomposition, which unrolls the
time loop and fixes the sequence length. :func:`shape_only_rnn_kernels` swaps in kernels that only
compute shapes on fake tensors, so that the op stays whole in the graph with a dynamic sequence length
(its converter is ``ops/rnn.py``). This is capture's business: converters never import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch._decomp import decomposition_table

_aten = torch.ops.aten


_RNN_OPS = (_aten.lstm.input, _aten.gru.input, _aten.rnn_tanh.input, _aten.rnn_relu.input)


def _shape_only(op: torch._ops.OpOverload, original: Any) -> Any:
    """A kernel computing the outputs' shapes of ``op`` on fake tensors, ``original`` on real ones."""

    def kernel(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        h = hx[0] if op is _aten.lstm.input else hx
        if not torch._subclasses.fake_tensor.is_fake(input) or input.dim() != 3:
            return original(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        directions = 2 if bidirectional else 1
        seq, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
        size = (batch, seq) if batch_first else (seq, batch)
        output = input.new_empty((*size, directions * h.shape[2]))
        if op is _aten.lstm.input:
            return output, hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)
        return output, h.new_empty(h.shape)

    return kernel


@contextlib.contextmanager
def shape_only_rnn_kernels() -> Iterator[None]:
    """While capturing: the RNN ops compute their output shapes without unrolling the time loop,
    so torch.export keeps the sequence length dynamic (the graph still holds ``aten.lstm.input``...).

    >>> lstm, x = torch.nn.LSTM(4, 8), torch.randn(5, 2, 4)
    >>> with shape_only_rnn_kernels():
    ...     ep = torch.export.export(lstm, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    >>> [str(n.target) for n in ep.graph.nodes if "lstm" in str(n.target)]
    ['aten.lstm.input']
    """
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    saved = []
    for op in _RNN_OPS:
        kernel, decomp = op.py_kernels.get(key), decomposition_table.get(op)
        original = kernel or decomp or (lambda *args, _op=op: _op._op_dk(key, *args))
        saved.append((op, kernel, decomp))
        op.py_kernels[key] = _shape_only(op, original)
        decomposition_table[op] = _shape_only(op, decomp or original)
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, kernel, decomp in saved:
            if kernel is None:
                op.py_kernels.pop(key, None)
            else:
                op.py_kernels[key] = kernel
            if decomp is None:
                decomposition_table.pop(op, None)
            else:
                decomposition_table[op] = decomp
            op._dispatch_cache.clear()
