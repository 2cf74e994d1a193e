"""The forward and backward graphs AOTAutograd makes of a function, as the ``torch.compile`` backend receives them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def aot_graphs(fn: Callable[..., torch.Tensor], *args: Any, grad: torch.Tensor | None = None) -> dict[str, Any]:
    """Runs ``fn(*args)`` through AOTAutograd, then its backward (with ``grad``, random by default); returns
    ``{"forward": (gm, inputs), "backward": (gm, inputs)}``: each graph with a copy of the inputs it was called with.

    Example::

        >>> import torch
        >>> graphs = aot_graphs(torch.nn.functional.logsigmoid, torch.randn(3, requires_grad=True))
        >>> sorted(graphs), len(graphs["backward"][1]) > 0
        (['backward', 'forward'], True)
    """
    from functorch.compile import aot_function

    graphs: dict[str, Any] = {}

    def compiler(name: str) -> Callable:
        def compile(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable:
            def run(inputs: list[Any]) -> Any:
                graphs[name] = (gm, tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in inputs))
                return gm(*inputs)

            run._boxed_call = True  # type: ignore[attr-defined]
            return run

        return compile

    out = aot_function(fn, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))(*args)
    out.backward(torch.randn(out.shape) if grad is None else grad)
    return graphs
