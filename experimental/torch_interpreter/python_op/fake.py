"""The outputs of a captured ``Function.apply`` call on fake tensors: what torch.export and AOTAutograd learn of a
PythonOp node's outputs (shapes, dtypes) without running the user's code on real data.

The user's output rule when the call has one, else ``forward`` run on the fake tensors with a ``ctx`` whose autograd
methods do nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ConversionError
from ..torch_versions import uses_setup_context
from . import table

#: the class attribute a Function may define to give its output rule
RULE_ATTRIBUTE = "onnx_output_rule"


class FakeCtx:
    """What ``forward`` receives as ``ctx`` while it runs on fake tensors: a namespace whose autograd
    methods do nothing.

    >>> ctx = FakeCtx((True,))
    >>> ctx.save_for_backward(1, 2); ctx.saved_tensors
    (1, 2)
    """

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *args: Any) -> None:
        pass

    def mark_non_differentiable(self, *args: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


def run_forward_on_fake(cls: type, args: list[Any]) -> Any:
    """Runs ``cls.forward`` on fake tensors to learn its outputs, or says how to give them."""
    try:
        if uses_setup_context(cls):
            return cls.forward(*args)
        needs = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        return cls.forward(FakeCtx(needs), *args)
    except Exception as e:
        name = table.func_name(cls)
        raise ConversionError(
            f"the forward of {name} cannot run on fake tensors ({type(e).__name__}: {str(e).strip()[:300]}), so "
            "the shapes and dtypes of its outputs are unknown. Give an output rule: a function taking forward's "
            "arguments (without ctx) and returning empty tensors shaped like the outputs, e.g. "
            f"to_onnx(..., autograd_functions={{{cls.__name__}: lambda x, *args: torch.empty_like(x)}}) or the "
            f"class attribute {cls.__name__}.{RULE_ATTRIBUTE} = staticmethod(...)"
        ) from e


def fake_outputs(call: table.Call, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Empty tensors shaped and typed like the outputs of ``call`` on ``inputs`` (fake tensors)."""
    args = call.bind(inputs)
    if call.rule is not None:
        try:
            result = call.rule(*args)
        except Exception as e:
            raise ConversionError(
                f"the output rule of {call.name} failed on fake tensors: {type(e).__name__}: {e}"
            ) from e
    else:
        result = run_forward_on_fake(call.cls, args)
    return [torch.empty_like(o) for o in call.outputs(result)]
