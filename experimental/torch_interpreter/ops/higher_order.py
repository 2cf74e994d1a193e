"""Higher-order operators whose body is translated inline (grad mode and autocast regions)."""

from __future__ import annotations

from typing import Any

import torch

from ..translation.context import NodeContext
from ..translation.registry import register


@register("higher_order::wrap_with_set_grad_enabled")
def higher_order_wrap_with_set_grad_enabled(ctx: NodeContext, enable: bool, body: torch.fx.GraphModule, *args: Any) -> tuple:
    """A region run under ``torch.set_grad_enabled(enable)``: gradients do not exist in ONNX."""
    return tuple(ctx.subgraph(body, args))


@register("higher_order::wrap_with_autocast")
def higher_order_wrap_with_autocast(
    ctx: NodeContext, device_type: str, dtype: Any, enabled: bool, cache_enabled: Any, body: torch.fx.GraphModule, *args
) -> tuple:
    """A region run under ``torch.autocast``: the body's nodes already carry the dtypes autocast chose."""
    return tuple(ctx.subgraph(body, args))
