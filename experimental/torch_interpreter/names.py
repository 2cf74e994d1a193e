"""Unique names: the one rule every graph, subgraph and initializer table of the package names a new entry by."""

from __future__ import annotations

from collections.abc import Container


def unique_name(base: str, taken: Container[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... the first that ``taken`` does not hold (the caller records it).

    >>> unique_name("w", {"x"}), unique_name("w", {"w", "w_1"})
    ('w', 'w_2')
    """
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name
