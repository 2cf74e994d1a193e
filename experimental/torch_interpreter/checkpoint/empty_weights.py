"""A model built without its weights: parameters on the meta device, buffers real.

``with torch.device("meta")`` puts every tensor on the meta device, the buffers a module computes when it is built
too (the inverse frequencies of a rotary embedding), which a checkpoint does not hold. :func:`empty_weights` moves
only the parameters there, as they are registered: the buffers keep their values, and the parameters cost no
memory (their initialization runs on the meta device).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """Within the block, every parameter a module registers is moved to the meta device (its buffers stay where
    they are built); export such a model with ``to_onnx(..., weights=checkpoint)``.

    Example::

        >>> import torch
        >>> with empty_weights():
        ...     layer = torch.nn.Linear(4096, 4096)
        >>> layer.weight.device.type, layer.weight.shape
        ('meta', torch.Size([4096, 4096]))
    """
    register = torch.nn.Module.register_parameter

    def register_on_meta(module: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            kind = type(param)
            module._parameters[name] = kind(param.to("meta"), requires_grad=param.requires_grad)

    torch.nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def meta_tensor_names(model: torch.nn.Module) -> tuple[list[str], dict[str, list[str]]]:
    """The names of ``model``'s parameters and buffers on the meta device, and for each name the other names of
    the same tensor (tied weights: a checkpoint stores one of them).

    Example::

        >>> import torch
        >>> with empty_weights():
        ...     m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
        >>> m[1].weight = m[0].weight
        >>> meta_tensor_names(m)
        (['0.weight', '1.weight'], {'0.weight': ['1.weight'], '1.weight': ['0.weight']})
    """
    groups: dict[int, list[str]] = {}
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    for name, tensor in tensors:
        if tensor.device.type == "meta":
            groups.setdefault(id(tensor), []).append(name)
    names = [n for group in groups.values() for n in group]
    aliases = {n: [m for m in group if m != n] for group in groups.values() for n in group}
    return names, aliases


@contextlib.contextmanager
def cpu_stand_ins(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, each parameter and buffer of ``model`` on the meta device is replaced by an uninitialized
    CPU tensor of its shape and type (tied ones by the same tensor), then put back: torch.export reads shapes and
    types only, and a capture whose inputs are CPU tensors then sees one device. The stand-ins' memory is reserved,
    never written, so it does not become resident.

    Example::

        >>> import torch
        >>> with empty_weights():
        ...     layer = torch.nn.Linear(3, 2)
        >>> with cpu_stand_ins(layer):
        ...     inside = layer.weight.device.type
        >>> inside, layer.weight.device.type
        ('cpu', 'meta')
    """
    replaced: list[tuple[dict, str, torch.Tensor]] = []
    stand_ins: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if tensor is None or tensor.device.type != "meta":
                    continue
                if id(tensor) not in stand_ins:
                    empty = torch.empty(tensor.shape, dtype=tensor.dtype)
                    if isinstance(tensor, torch.nn.Parameter):
                        empty = torch.nn.Parameter(empty, requires_grad=tensor.requires_grad)
                    stand_ins[id(tensor)] = empty
                replaced.append((table, name, tensor))
                table[name] = stand_ins[id(tensor)]
    try:
        yield
    finally:
        for table, name, tensor in replaced:
            table[name] = tensor
