"""The Python attributes of a model's modules, as they were before a capture.

``torch.export`` runs ``forward`` on fake tensors. A module that caches something in a plain attribute during
``forward`` (ultralytics' detection heads keep ``self.anchors`` and ``self.shape``, others keep masks or position
tables) is left holding the fake tensor or the symbolic size: the next eager call reuses it and returns a
``FakeTensor`` without values, or compares a symbolic size. :func:`kept_attributes` puts every such attribute
back as it was, with the items of the dictionaries, lists and sets they hold (a cache filled in place); parameters
and buffers are torch.export's own business (it restores them itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

#: the attributes of ``torch.nn.Module`` holding its parameters, buffers and children: left to torch
_REGISTRIES = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"})


#: containers whose contents are kept too: a cache filled in place (timm's ``attention_bias_cache[device] = ...``)
_CONTAINERS = (dict, list, set)


def _contents(value: object) -> object:
    """A shallow copy of a container's items, None for any other value."""
    if isinstance(value, dict):
        return dict(value)
    return list(value) if isinstance(value, (list, set)) else None


def _same(a: object, b: object) -> bool:
    """Whether two shallow copies hold the same objects (identity, not equality: tensors compare elementwise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(a[k] is b[k] for k in a)
    return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _refill(container: object, items: object) -> None:
    container.clear()
    if isinstance(container, dict):
        container.update(items)
    elif isinstance(container, list):
        container.extend(items)
    else:
        container.update(items)


def _snapshot(model: torch.nn.Module) -> list[tuple[torch.nn.Module, dict, dict]]:
    saved = []
    for m in model.modules():
        attributes = {k: v for k, v in vars(m).items() if k not in _REGISTRIES}
        contents = {k: _contents(v) for k, v in attributes.items() if isinstance(v, _CONTAINERS)}
        saved.append((m, attributes, contents))
    return saved


def _restore(saved: list[tuple[torch.nn.Module, dict, dict]]) -> list[str]:
    """Puts the attributes of ``saved`` back, and the items of their containers; the names of those that had
    changed (``Module.attr``)."""
    changed = []
    for module, before, contents in saved:
        now = vars(module)
        for key in [k for k in now if k not in _REGISTRIES and k not in before]:
            del now[key]
            changed.append(f"{type(module).__name__}.{key}")
        for key, value in before.items():
            if key not in now or now[key] is not value:
                now[key] = value
                changed.append(f"{type(module).__name__}.{key}")
            if key in contents and not _same(_contents(value), contents[key]):
                _refill(value, contents[key])
                changed.append(f"{type(module).__name__}.{key}[...]")
    return changed


@contextlib.contextmanager
def kept_attributes(model: object) -> Iterator[list[str]]:
    """Within the block, the modules of ``model`` may set any plain attribute; on exit each one is as it was
    before (added ones removed, replaced ones put back, the items of a dictionary, list or set too). The list
    given fills, on exit, with the attributes put back. A ``model`` that is not a module is left alone.

    >>> class Cache(torch.nn.Module):
    ...     def forward(self, x):
    ...         self.last = x * 2
    ...         return self.last
    >>> m = Cache()
    >>> with kept_attributes(m) as changed:
    ...     _ = m(torch.ones(1))
    >>> hasattr(m, "last"), changed
    (False, ['Cache.last'])
    """
    saved = _snapshot(model) if isinstance(model, torch.nn.Module) else []
    changed: list[str] = []
    try:
        yield changed
    finally:
        changed.extend(_restore(saved))
