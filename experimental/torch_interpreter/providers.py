"""Which onnxruntime execution providers a model is made for, and where each one's kernels differ from PyTorch.

Some onnxruntime kernels give another answer than PyTorch on edge values, and not the same one on every
provider (measured on onnxruntime 1.31, CPU and CUDA on an H100): the CPU computes float16 arithmetic in
float32 and drops the rounding PyTorch does; its ``MaxPool`` skips NaN; CUDA's ``ReduceMax`` of a row of
``-inf`` is the lowest finite float32. The converters and rewrites add a guard for each such difference, and
only where the model's providers have it: ``to_onnx(..., providers=...)`` says which providers the model is for,
``"any"`` (default: right on every provider below) or ``"cpu"`` / ``"cuda"`` (onnxruntime's names
``"CPUExecutionProvider"``, ``"CUDAExecutionProvider"`` and lists of them are understood too). A model made for
one provider gives PyTorch's answer there and may not elsewhere: :class:`InferenceSession` warns when it runs a
model on a provider it was not made for (the choice is stored in the model, :data:`METADATA_KEY`).

>>> from experimental.torch_interpreter.providers import check_providers, needs_guard
>>> check_providers("any"), check_providers(["CUDAExecutionProvider"])
(('cpu', 'cuda'), ('cuda',))
>>> needs_guard(("cuda",), "half_computed_in_float"), needs_guard(("cpu", "cuda"), "half_computed_in_float")
(False, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import ProviderError
from .metadata import PROVIDERS as METADATA_KEY

#: the providers whose kernels were compared with PyTorch on edge values
KNOWN = ("cpu", "cuda")

#: onnxruntime's names of the providers of :data:`KNOWN`
ONNXRUNTIME_NAMES = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}

#: each difference from PyTorch a guard exists for: what the kernel does, and the providers doing it
QUIRKS: Mapping[str, tuple[str, frozenset[str]]] = {
    "half_computed_in_float": (
        "float16 arithmetic computed in float32, the rounding to float16 dropped when the result is cast or "
        "compared (PyTorch rounds every float16 result)",
        frozenset({"cpu"}),
    ),
    "max_pool_skips_nan": (
        "MaxPool returns the largest number of a window holding a NaN (PyTorch: NaN)",
        frozenset({"cpu"}),
    ),
    "max_pool_floor_is_finite": (
        "MaxPool of a window of -inf only returns the lowest finite value (measured on the CPU; kept on CUDA "
        "until measured there)",
        frozenset({"cpu", "cuda"}),
    ),
    "sign_of_nan_is_nan": (
        "Sign(NaN) is NaN (PyTorch and CUDA: 0)",
        frozenset({"cpu"}),
    ),
    "skip_norm_kernel_slower": (
        "the fused residual + normalization kernel (SkipLayerNormalization, SkipSimplifiedLayerNormalization) is "
        "slower than Add + the normalization where the sum is read again (a speed difference, not a number: "
        "the rewrite gives the fusion back)",
        frozenset({"cpu"}),
    ),
    "extremum_of_infinities_is_finite": (
        "ReduceMax of a row of -inf (ReduceMin of +inf) returns the lowest (highest) finite float32",
        frozenset({"cuda"}),
    ),
}

#: quirks about speed, not numbers: not named when a model runs where it was not made for
SPEED_ONLY = frozenset({"skip_norm_kernel_slower"})

def check_providers(value: Any) -> tuple[str, ...]:
    """The providers ``value`` names, sorted: ``"any"`` or None for all of :data:`KNOWN`, ``"cpu"``, ``"cuda"``,
    onnxruntime's provider names, or a list of those; :class:`ProviderError` for any other.

    Example::

        >>> from experimental.torch_interpreter.providers import check_providers
        >>> check_providers(None), check_providers(("CPUExecutionProvider", "cuda"))
        (('cpu', 'cuda'), ('cpu', 'cuda'))
    """
    if value is None or value == "any":
        return KNOWN
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Iterable):
        raise ProviderError(
            f"providers={value!r}: expected a name or a list of names; use 'any' (right on {', '.join(KNOWN)}), "
            f"'cpu' or 'cuda'"
        )
    by_name = {**{k: k for k in KNOWN}, **{v.lower(): k for k, v in ONNXRUNTIME_NAMES.items()}}
    found = set()
    for name in names:
        key = by_name.get(name.lower()) if isinstance(name, str) else None
        if key is None:
            raise ProviderError(
                f"providers={value!r}: {name!r} is not a provider whose kernels were compared with PyTorch; "
                f"use 'any' (right on {', '.join(KNOWN)}) or one of {list(KNOWN)}"
            )
        found.add(key)
    if not found:
        raise ProviderError(f"providers={value!r} names no provider; use 'any' for every one")
    return tuple(sorted(found))


def session_providers(value: Any) -> list[Any] | None:
    """onnxruntime's provider list for a session asked for with the package's ``providers=`` vocabulary (the one
    ``to_onnx``, ``InferenceSession`` and the ``torch.compile`` backend take): None or ``"any"``: None (the session
    chooses: CUDA where onnxruntime-gpu and a GPU are present, the CPU otherwise); ``"cpu"`` and ``"cuda"``: that
    provider; onnxruntime's names and ``(name, options)`` pairs as they are; a list mixing them. A lowercase name
    that is none of these is a :class:`ProviderError`.

    Example::

        >>> from experimental.torch_interpreter.providers import session_providers
        >>> session_providers("cpu"), session_providers(["cuda", "CPUExecutionProvider"]), session_providers("any")
        (['CPUExecutionProvider'], ['CUDAExecutionProvider', 'CPUExecutionProvider'], None)
    """
    if value is None or (isinstance(value, str) and value.lower() == "any"):
        return None
    if isinstance(value, str) or (isinstance(value, tuple) and _is_pair(value)):
        items = [value]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        raise ProviderError(f"providers={value!r}: expected a name or a list of names ('any', 'cpu', 'cuda' or "
                            "onnxruntime's names)")
    chosen: list[Any] = []
    for item in items:
        if isinstance(item, str) and item.lower() in ONNXRUNTIME_NAMES:
            item = ONNXRUNTIME_NAMES[item.lower()]
        elif isinstance(item, str) and not item.endswith("ExecutionProvider"):
            raise ProviderError(
                f"providers={value!r}: {item!r} is neither {', '.join(map(repr, ('any', *KNOWN)))} nor an "
                "onnxruntime provider name (CPUExecutionProvider, CUDAExecutionProvider...)"
            )
        if item not in chosen:
            chosen.append(item)
    return chosen


def _is_pair(value: tuple) -> bool:
    """Whether ``value`` is onnxruntime's ``(name, options)`` form of one provider."""
    return len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict)


def needs_guard(providers: Iterable[str], quirk: str) -> bool:
    """Whether one of ``providers`` (checked names) has ``quirk`` (a key of :data:`QUIRKS`).

    Example::

        >>> from experimental.torch_interpreter.providers import needs_guard
        >>> needs_guard(("cpu",), "max_pool_skips_nan"), needs_guard(("cpu",), "extremum_of_infinities_is_finite")
        (True, False)
    """
    if quirk not in QUIRKS:
        raise KeyError(f"no quirk {quirk!r}: {sorted(QUIRKS)}")
    return bool(QUIRKS[quirk][1].intersection(providers))


def encode(providers: Iterable[str]) -> str:
    """The metadata value of ``providers``: ``"cpu,cuda"``.

    >>> from experimental.torch_interpreter.providers import decode, encode
    >>> decode(encode(("cuda",)))
    ('cuda',)
    """
    return ",".join(sorted(providers))


def decode(text: str | None) -> tuple[str, ...]:
    """The providers a model's :data:`METADATA_KEY` value names; every known provider when absent (a model
    made before the key existed, or by another exporter, is taken as made for any)."""
    if not text:
        return KNOWN
    return tuple(sorted(p for p in text.split(",") if p in KNOWN)) or KNOWN


def of_model(model: Any) -> tuple[str, ...]:
    """The providers ``model`` (an ``onnx_ir.Model``) was made for, from its :data:`METADATA_KEY`.

    >>> import onnx_ir as ir
    >>> from experimental.torch_interpreter.providers import of_model
    >>> model = ir.Model(ir.Graph([], [], nodes=[]), ir_version=10)
    >>> of_model(model)
    ('cpu', 'cuda')
    >>> model.metadata_props["aten2onnx.providers"] = "cuda"
    >>> of_model(model)
    ('cuda',)
    """
    return decode(model.metadata_props.get(METADATA_KEY))


def not_made_for(made_for: Iterable[str], running: Sequence[str]) -> str | None:
    """A message when ``running`` (a session's providers, the first one running the model) is not among the
    providers ``made_for`` names; None when it is, or when it is a provider of unknown kernels.

    >>> from experimental.torch_interpreter.providers import not_made_for
    >>> not_made_for(("cuda",), ["CUDAExecutionProvider", "CPUExecutionProvider"]) is None
    True
    >>> print(not_made_for(("cuda",), ["CPUExecutionProvider"]))  # doctest: +ELLIPSIS
    the model was made for cuda (to_onnx(..., providers=...)) and runs on cpu: ...
    """
    by_name = {v: k for k, v in ONNXRUNTIME_NAMES.items()}
    first = by_name.get(running[0]) if running else None
    made_for = tuple(made_for)
    if first is None or first in made_for:
        return None
    left_out = [
        text for name, (text, have) in QUIRKS.items()
        if first in have and not have.intersection(made_for) and name not in SPEED_ONLY
    ]
    differences = "; ".join(left_out) if left_out else "none measured so far"
    return (
        f"the model was made for {', '.join(made_for)} (to_onnx(..., providers=...)) and runs on {first}: the "
        f"guards {first} needs were left out, so these edge values may differ from PyTorch: {differences}; export "
        f"with providers='any' or providers='{first}' for this provider"
    )


def describe() -> str:
    """A table of :data:`QUIRKS`: one line per difference, with the providers that have it.

    >>> from experimental.torch_interpreter.providers import describe
    >>> "max_pool_skips_nan" in describe()
    True
    """
    return "\n".join(f"{name} ({', '.join(sorted(p))}): {text}" for name, (text, p) in QUIRKS.items())
