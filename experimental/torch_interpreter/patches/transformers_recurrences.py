"""transformers recurrences written as Python loops over the sequence, rewritten with ``scan``.

State-space and linear-recurrence models (Mamba, Falcon-Mamba, Jamba, RWKV, RecurrentGemma) run their CPU
path as ``for t in range(seq_len): state = a[t] * state + b[t]``. ``torch.export`` unrolls the loop, which
specializes the sequence axis to the example's length: ``Constraints violated (L['input_ids'].size()[1])
... your code specialized it to be a constant (8)``. Each patch replaces the function holding the loop with
the same computation where the loop is ``torch._higher_order_ops.scan`` over the sequence axis (an ONNX
``Scan``): same operations, same order, the sequence axis stays dynamic. CPM-Ant builds its left-padding
mask from ``torch.tensor(list(range(seqlen - prompt_length)))``, a Python list of the example's length:
the patch builds it with ``torch.arange``. Mamba-2 chunk scans (Bamba, Falcon-H1, Zamba2...) cut their
padding only ``if pad_size > 0``: the patch always cuts. Funnel keeps its token positions as a Python list of the length
(pooled by slicing): the patch keeps them as an arithmetic progression whose length may be symbolic. FSMT drops
its decoder padding mask ``if not padding_mask.any()``, a condition on the input's values (``Could not guard on
data-dependent expression``): the patch always keeps it (all False, it masks nothing).

The patches replace module attributes (``modeling_mamba.mamba_selective_scan``, ...); they apply only to
modules already imported (the model's module is imported once the model is built).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import torch

from .base import Patch, Undo, attribute_needed, imported_owner, replace_attribute

_MAMBA_MODULES = (
    "transformers.models.mamba.modeling_mamba",
    "transformers.models.falcon_mamba.modeling_falcon_mamba",
    "transformers.models.jamba.modeling_jamba",
)
_RWKV_MODULE = "transformers.models.rwkv.modeling_rwkv"
_GEMMA_MODULE = "transformers.models.recurrent_gemma.modeling_recurrent_gemma"
_CPMANT_MODULE = "transformers.models.cpmant.modeling_cpmant"
_FUNNEL_MODULE = "transformers.models.funnel.modeling_funnel"
_FSMT_MODULE = "transformers.models.fsmt.modeling_fsmt"
_MAMBA2_MODULES = tuple(
    f"transformers.models.{m}.modeling_{m}"
    for m in ("mamba2", "bamba", "falcon_h1", "granitemoehybrid", "nemotron_h", "zamba2")
)


def _scan(combine: Callable, init: Any, xs: Any) -> tuple[Any, Any]:
    from torch._higher_order_ops.scan import scan

    return scan(combine, init, xs)


def mamba_selective_scan(
    hidden_states: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,  # noqa: N803 (transformers' names)
    B: torch.Tensor,  # noqa: N803
    C: torch.Tensor,  # noqa: N803
    D: torch.Tensor | None = None,  # noqa: N803
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
    **kwargs: Any,
) -> Any:
    """transformers' ``mamba_selective_scan`` (the recurrent CPU path) with the loop over the sequence as a
    ``scan``: ``hidden_states`` and ``dt`` are ``(batch, d, seq)``, ``B`` and ``C`` ``(batch, n, seq)``.

    >>> b, d, n, seq = 2, 3, 4, 5
    >>> y = mamba_selective_scan(torch.rand(b, d, seq), torch.rand(b, d, seq), -torch.rand(d, n),
    ...                          torch.rand(b, n, seq), torch.rand(b, n, seq))
    >>> tuple(y.shape)
    (2, 3, 5)
    """
    input_dtype = hidden_states.dtype
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = torch.nn.functional.softplus(dt)
    B = B.transpose(1, 2)  # noqa: N806
    C = C.transpose(1, 2)  # noqa: N806
    discrete_A = torch.exp(A[None, :, None, :] * dt[:, :, :, None])  # noqa: N806
    discrete_B = dt[:, :, :, None] * B[:, None, :, :].float()  # noqa: N806
    deltaB_u = discrete_B * hidden_states[:, :, :, None].float()  # noqa: N806

    def step(state: torch.Tensor, xs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        a_t, bu_t, c_t = xs
        state = a_t * state + bu_t
        return state, torch.matmul(state.to(input_dtype), c_t.unsqueeze(-1))[:, :, 0]

    init = torch.zeros_like(deltaB_u[:, :, 0], dtype=input_dtype)
    ssm_state, outputs = _scan(
        step, init, (discrete_A.permute(2, 0, 1, 3), deltaB_u.permute(2, 0, 1, 3), C.transpose(0, 1))
    )
    scan_output = outputs.permute(1, 2, 0)
    if D is not None:
        scan_output = scan_output + hidden_states * D[None, :, None]
    if z is not None:
        scan_output = scan_output * torch.nn.functional.silu(z)
    if return_last_state:
        return scan_output, ssm_state
    return scan_output


def rwkv_linear_attention_cpu(
    time_decay: torch.Tensor,
    time_first: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    state: list[torch.Tensor] | None = None,
    return_state: bool = False,
) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """transformers' ``rwkv_linear_attention_cpu`` with the loop over the sequence (axis 1) as a ``scan``.

    >>> out, state = rwkv_linear_attention_cpu(torch.rand(3), torch.rand(3), torch.rand(2, 5, 3), torch.rand(2, 5, 3))
    >>> tuple(out.shape), state
    ((2, 5, 3), None)
    """
    if state is None:
        num_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        den_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        max_state = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38
    else:
        num_state, den_state, max_state = state
    time_decay = -torch.exp(time_decay)

    def step(carry: tuple[torch.Tensor, ...], xs: tuple[torch.Tensor, ...]) -> tuple[tuple, torch.Tensor]:
        num, den, mx = carry
        current_key, current_value = xs
        current_key = current_key.float()
        max_for_output = torch.maximum(mx, current_key + time_first)
        e1 = torch.exp(mx - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        out = ((e1 * num + e2 * current_value) / (e1 * den + e2)).to(key.dtype)
        max_for_state = torch.maximum(mx + time_decay, current_key)
        e1 = torch.exp(mx + time_decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        return (e1 * num + e2 * current_value, e1 * den + e2, max_for_state), out

    (num_state, den_state, max_state), outputs = _scan(
        step, (num_state, den_state, max_state), (key.transpose(0, 1), value.transpose(0, 1))
    )
    output = outputs.transpose(0, 1)
    if return_state or state is not None:
        return output, [num_state, den_state, max_state]
    return output, state


def recurrent_gemma_rnn_scan(
    self: Any,
    hidden_states: torch.Tensor,
    recurrent_gate: torch.Tensor,
    reset: torch.Tensor,
    recurrent_states: torch.Tensor | None,
    acc_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``RecurrentGemmaRglru._rnn_scan`` with the loop over the sequence (axis 1) as a ``scan``; a length 1
    (decoding) goes to the original method.

    >>> h, last = recurrent_gemma_rnn_scan(None, torch.rand(2, 5, 3), torch.rand(2, 5, 3),
    ...                                    torch.zeros(2, 5, 1, dtype=torch.bool), None)
    >>> tuple(h.shape), tuple(last.shape)
    ((2, 5, 3), (2, 3))
    """
    if hidden_states.shape[1] == 1:
        return _ORIGINAL[_GEMMA_MODULE](self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype)
    recurrent_gate = recurrent_gate * ~reset
    if recurrent_states is None:
        recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device)

    def step(state: torch.Tensor, xs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        gate_t, h_t = xs
        state = gate_t.type(acc_dtype) * state + h_t.type(acc_dtype)
        return state, state.to(hidden_states.dtype, copy=True)  # a copy: scan refuses aliased outputs

    recurrent_states, outputs = _scan(
        step, recurrent_states.to(acc_dtype), (recurrent_gate.transpose(0, 1), hidden_states.transpose(0, 1))
    )
    return outputs.transpose(0, 1), recurrent_states


def cpmant_prepare_attention_mask(
    self: Any, input_ids: torch.Tensor, span: torch.Tensor, context: torch.Tensor, length: torch.Tensor
) -> torch.Tensor:
    """``CpmAntModel._prepare_attention_mask`` with the left-padding positions from ``torch.arange`` instead
    of ``torch.tensor(list(range(seqlen - prompt_length))[::-1])``.

    >>> class Model:
    ...     prompt_length = 1
    >>> ids = torch.ones(1, 4, dtype=torch.int64)
    >>> m = cpmant_prepare_attention_mask(Model(), ids, torch.zeros(1, 4), torch.ones(1, 4, dtype=torch.bool),
    ...                                   torch.tensor([2]))
    >>> m[0].int().tolist()
    [[1, 0, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1], [1, 0, 1, 1]]
    """
    batch, seqlen, device = input_ids.size(0), input_ids.size(1), input_ids.device
    directional_mask_2d = torch.arange(seqlen, device=device) <= torch.arange(seqlen, device=device).view(-1, 1)
    attention_mask = context[:, None, :] | (
        context[:, :, None].logical_not() & directional_mask_2d.view(1, seqlen, seqlen)
    )
    attention_mask = attention_mask & (span[:, None, :] == span[:, :, None])
    positions = torch.arange(seqlen - self.prompt_length - 1, -1, -1, device=device)  # the reversed range
    mask_1d = positions[None, :].repeat(batch, 1) < length[:, None]
    mask_1d = torch.cat((torch.ones(batch, self.prompt_length, device=device).bool(), mask_1d), dim=1)
    return mask_1d.view(batch, seqlen, 1) & mask_1d.view(batch, 1, seqlen) & attention_mask


def fsmt_make_padding_mask(input_ids: torch.Tensor, padding_idx: int = 1) -> torch.Tensor:
    """``modeling_fsmt.make_padding_mask`` without ``if not padding_mask.any(): padding_mask = None``: the mask
    is its only reader's ``masked_fill`` argument, an all-False mask changes nothing there.

    >>> fsmt_make_padding_mask(torch.tensor([[5, 1, 7]])).tolist(), fsmt_make_padding_mask(torch.tensor([[5]])).tolist()
    ([[False, True, False]], [[False]])
    """
    return input_ids.eq(padding_idx)


def mamba2_chunk_scan_cut(original: Callable, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """transformers' ``mamba2_chunk_scan`` whose output is always cut to the sequence length.

    The original pads the sequence to a multiple of the chunk size and cuts the padding off under
    ``if pad_size > 0``: an example length that is a multiple of the chunk size traces the branch not taken,
    and the graph returns the padded length for other lengths. Cutting a tensor already of that length changes
    nothing, so the result is the original's for every length.

    >>> pad = lambda x, *a, **k: torch.cat([x, x[:, :3]], 1)  # a scan whose padding is not cut
    >>> tuple(mamba2_chunk_scan_cut(pad, torch.zeros(2, 5, 4)).shape)
    (2, 5, 4)
    """
    result = original(hidden_states, *args, **kwargs)
    length = hidden_states.shape[1]
    if isinstance(result, tuple):
        return (result[0][:, :length], *result[1:])
    return result[:, :length]


def _mamba2_apply() -> Undo:
    undo = []
    for module in _MAMBA2_MODULES:
        if attribute_needed(module, "mamba2_chunk_scan"):
            original = getattr(sys.modules[module], "mamba2_chunk_scan")
            undo.append(replace_attribute(sys.modules[module], "mamba2_chunk_scan",
                                          functools.partial(mamba2_chunk_scan_cut, original)))
    return lambda: [u() for u in reversed(undo)] and None


class _Positions:
    """Funnel's token positions, a Python list in transformers (``list(range(seq_len))``, pooled by slicing),
    kept as ``head + [start + step * i for i in range(count)]`` so that ``count`` may be a SymInt."""

    def __init__(self, head: list[int], start: Any, step: int, count: Any) -> None:
        self.head, self.start, self.step, self.count = head, start, step, count

    def __len__(self) -> Any:  # a SymInt for a dynamic sequence: used through size(), never by len()
        raise TypeError("use size()")

    def size(self) -> Any:
        return len(self.head) + self.count

    def first(self) -> Any:
        return self.head[0] if self.head else self.start

    def last(self) -> Any:
        return self.start + self.step * (self.count - 1)

    def drop_first(self) -> _Positions:
        if self.head:
            return _Positions(self.head[1:], self.start, self.step, self.count)
        return _Positions([], self.start + self.step, self.step, self.count - 1)

    def every_other(self) -> _Positions:
        if self.head:
            raise NotImplementedError("Funnel positions: pooling a list with a separate head")
        return _Positions([], self.start, self.step * 2, (self.count + 1) // 2)


def funnel_stride_pool_pos(self: Any, pos_id: _Positions, block_index: int) -> _Positions:
    """``FunnelAttentionStructure.stride_pool_pos`` on :class:`_Positions`."""
    if not self.config.separate_cls:
        return pos_id.every_other()
    pooled = pos_id.drop_first()
    if self.config.truncate_seq:  # drops the last position too
        pooled = _Positions(pooled.head, pooled.start, pooled.step, pooled.count - 1)
    pooled = pooled.every_other()
    return _Positions([-(2**block_index) + 1], pooled.start, pooled.step, pooled.count)


def funnel_relative_pos(
    self: Any, pos: _Positions, stride: int, pooled_pos: _Positions | None = None, shift: int = 1, device: Any = None
) -> torch.Tensor:
    """``FunnelAttentionStructure.relative_pos`` on :class:`_Positions`: the same ``arange``, symbolic bounds."""
    pooled_pos = pos if pooled_pos is None else pooled_pos
    ref_point = pooled_pos.first() - pos.first()
    max_dist = ref_point + shift * pooled_pos.size() * stride
    min_dist = pooled_pos.first() - pos.last()
    return torch.arange(max_dist, min_dist - 1, -stride, dtype=torch.long, device=device)


def funnel_get_position_embeds(self: Any, seq_len: Any, dtype: torch.dtype, device: Any) -> Any:
    """``FunnelAttentionStructure.get_position_embeds`` whose positions are :class:`_Positions` instead of
    ``list(range(seq_len))`` (a list of the example's length); the factorized attention has no such list and
    goes to the original method. Equal to the original for every static length.

    >>> class Cfg:
    ...     attention_type, d_model, num_blocks, separate_cls, truncate_seq = "relative_shift", 4, 2, True, True
    >>> class S:
    ...     config = Cfg()
    ...     sin_dropout = cos_dropout = staticmethod(lambda t: t)
    ...     stride_pool_pos, relative_pos = funnel_stride_pool_pos, funnel_relative_pos
    >>> [[tuple(t.shape) if t is not None else None for t in p]
    ...  for p in funnel_get_position_embeds(S(), 7, torch.float32, None)]
    [[(14, 4), None], [(8, 4), (15, 4)]]
    """
    if self.config.attention_type == "factorized":
        return _ORIGINAL[_FUNNEL_MODULE](self, seq_len, dtype, device)
    d_model = self.config.d_model
    freq_seq = torch.arange(0, d_model // 2, 1.0, dtype=torch.int64, device=device).to(dtype)
    inv_freq = 1 / (10000 ** (freq_seq / (d_model // 2)))
    rel_pos_id = torch.arange(-seq_len * 2, seq_len * 2, 1.0, dtype=torch.int64, device=device).to(dtype)
    zero_offset = seq_len * 2
    sinusoid = rel_pos_id[:, None] * inv_freq[None]
    pos_embed = torch.cat([self.sin_dropout(torch.sin(sinusoid)), self.cos_dropout(torch.cos(sinusoid))], dim=-1)

    def gather(rel_pos: torch.Tensor) -> torch.Tensor:
        rel_pos = rel_pos[:, None] + zero_offset
        return torch.gather(pos_embed, 0, rel_pos.expand(rel_pos.size(0), d_model))

    pos = pooled_pos = _Positions([], 0, 1, seq_len)
    position_embeds_list = []
    for block_index in range(self.config.num_blocks):
        position_embeds_pooling = None
        if block_index > 0:  # attention(pooled query, unpooled keys and values)
            pooled_pos = self.stride_pool_pos(pos, block_index)
            rel_pos = self.relative_pos(pos, 2 ** (block_index - 1), pooled_pos, shift=2, device=device)
            position_embeds_pooling = gather(rel_pos)
        pos = pooled_pos  # attention(pooled query, pooled keys and values)
        position_embeds_no_pooling = gather(self.relative_pos(pos, 2**block_index, device=device))
        position_embeds_list.append([position_embeds_no_pooling, position_embeds_pooling])
    return position_embeds_list


#: module name -> the function or method replaced (for the fallbacks above)
_ORIGINAL: dict[str, Any] = {}


def _replace(module: str, name: str, new: Callable, cls: str | None = None) -> Undo:
    owner = imported_owner(module, cls)
    _ORIGINAL[module] = owner.__dict__[name] if cls else getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return new(*args, **kwargs)

    wrapper.__doc__ = new.__doc__
    return replace_attribute(owner, name, wrapper)


def _funnel_apply() -> Undo:
    cls = "FunnelAttentionStructure"
    undo = [_replace(_FUNNEL_MODULE, "get_position_embeds", funnel_get_position_embeds, cls)]
    owner = imported_owner(_FUNNEL_MODULE, cls)  # the two helpers take positions only from the method above
    undo += [replace_attribute(owner, "stride_pool_pos", funnel_stride_pool_pos),
             replace_attribute(owner, "relative_pos", funnel_relative_pos)]
    return lambda: [u() for u in reversed(undo)] and None


def _mamba_needed() -> bool:
    return any(attribute_needed(m, "mamba_selective_scan") for m in _MAMBA_MODULES)


def _mamba_apply() -> Undo:
    undo = [_replace(m, "mamba_selective_scan", mamba_selective_scan) for m in _MAMBA_MODULES
            if attribute_needed(m, "mamba_selective_scan")]
    return lambda: [u() for u in reversed(undo)] and None


PATCHES = [
    Patch(
        name="mamba_selective_scan as scan",
        group="transformers",
        replaces="mamba_selective_scan of modeling_mamba, modeling_falcon_mamba, modeling_jamba (CPU recurrent path)",
        fixes="`Constraints violated (L['input_ids'].size()[1])`: the loop over the sequence unrolled",
        versions="transformers 5.x (the recurrent path without kernels)",
        needed=_mamba_needed,
        apply=_mamba_apply,
    ),
    Patch(
        name="rwkv_linear_attention_cpu as scan",
        group="transformers",
        replaces="modeling_rwkv.rwkv_linear_attention_cpu",
        fixes="`Constraints violated (L['input_ids'].size()[1])`: the loop over the sequence unrolled",
        versions="transformers 5.x",
        needed=lambda: attribute_needed(_RWKV_MODULE, "rwkv_linear_attention_cpu"),
        apply=lambda: _replace(_RWKV_MODULE, "rwkv_linear_attention_cpu", rwkv_linear_attention_cpu),
    ),
    Patch(
        name="RecurrentGemmaRglru._rnn_scan as scan",
        group="transformers",
        replaces="modeling_recurrent_gemma.RecurrentGemmaRglru._rnn_scan",
        fixes="`Constraints violated (L['input_ids'].size()[1])`: the loop over the sequence unrolled",
        versions="transformers 5.x",
        needed=lambda: attribute_needed(_GEMMA_MODULE, "_rnn_scan", "RecurrentGemmaRglru"),
        apply=lambda: _replace(_GEMMA_MODULE, "_rnn_scan", recurrent_gemma_rnn_scan, "RecurrentGemmaRglru"),
    ),
    Patch(
        name="mamba2_chunk_scan cuts its padding for every length",
        group="transformers",
        replaces="mamba2_chunk_scan of modeling_mamba2, bamba, falcon_h1, granitemoehybrid, nemotron_h, zamba2",
        fixes="other lengths than a multiple of the chunk size: the padded output (`if pad_size > 0` not traced)",
        versions="transformers 5.x (the torch path without kernels)",
        needed=lambda: any(attribute_needed(m, "mamba2_chunk_scan") for m in _MAMBA2_MODULES),
        apply=_mamba2_apply,
    ),
    Patch(
        name="Funnel positions as a symbolic progression",
        group="transformers",
        replaces="modeling_funnel.FunnelAttentionStructure.get_position_embeds, stride_pool_pos, relative_pos",
        fixes="`Constraints violated (L['input_ids'].size()[1])`: positions kept as a Python list of the length",
        versions="transformers 5.x",
        needed=lambda: attribute_needed(_FUNNEL_MODULE, "get_position_embeds", "FunnelAttentionStructure"),
        apply=lambda: _funnel_apply(),
    ),
    Patch(
        name="CpmAntModel._prepare_attention_mask with arange",
        group="transformers",
        replaces="modeling_cpmant.CpmAntModel._prepare_attention_mask",
        fixes="`Constraints violated (L['input_ids'].size()[1])`: a mask built from a Python list of the length",
        versions="transformers 5.x",
        needed=lambda: attribute_needed(_CPMANT_MODULE, "_prepare_attention_mask", "CpmAntModel"),
        apply=lambda: _replace(_CPMANT_MODULE, "_prepare_attention_mask", cpmant_prepare_attention_mask, "CpmAntModel"),
    ),
    Patch(
        name="FSMT decoder padding mask kept when empty",
        group="transformers",
        replaces="modeling_fsmt.make_padding_mask",
        fixes="`Could not guard on data-dependent expression Eq(u0, 1)`: `if not padding_mask.any()` on the input's values",
        versions="transformers 5.x",
        needed=lambda: attribute_needed(_FSMT_MODULE, "make_padding_mask"),
        apply=lambda: _replace(_FSMT_MODULE, "make_padding_mask", fsmt_make_padding_mask),
    ),
]
