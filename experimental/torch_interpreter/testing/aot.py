"""The forward and backward graphs AOTAutograd makes of a function, as the ``torch.compile`` backend receives them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def aot_graphs(
    fn: Callable[..., torch.Tensor] | torch.nn.Module,
    *args: Any,
    grad: torch.Tensor | Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Runs ``fn(*args)`` through AOTAutograd (a module's parameters are inputs of its graphs), then its backward
    with ``grad`` (a tensor, a function of the output such as ``torch.ones_like``, random by default); returns
    ``{"forward": (gm, inputs), "backward": (gm, inputs)}``: each graph with a copy of the inputs it was called with.

    Example::

        >>> import torch
        >>> graphs = aot_graphs(torch.nn.functional.logsigmoid, torch.randn(3, requires_grad=True))
        >>> sorted(graphs), len(graphs["backward"][1]) > 0
        (['backward', 'forward'], True)
    """
    from functorch.compile import aot_function, aot_module

    graphs: dict[str, Any] = {}

    def compiler(name: str) -> Callable:
        def compile(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable:
            def run(inputs: list[Any]) -> Any:
                graphs[name] = (gm, tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in inputs))
                return gm(*inputs)

            run._boxed_call = True  # type: ignore[attr-defined]
            return run

        return compile

    aot = aot_module if isinstance(fn, torch.nn.Module) else aot_function
    out = aot(fn, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))(*args)
    if grad is None:
        grad = torch.randn(out.shape)
    out.backward(grad(out) if callable(grad) else grad)
    return graphs
