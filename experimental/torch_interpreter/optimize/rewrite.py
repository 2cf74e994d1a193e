"""The one protocol of the optimization pipeline: :class:`Rewrite` (a name, the stage it runs at, what it does to
a model, why it sits where it does), and the two adapters that make an onnxscript rule set or an onnx-ir pass a
rewrite, so that running a step, counting its changes, removing what it left unused and logging it are written
once, here.

A rewrite changes the model in place; :meth:`Rewrite.apply` returns how many changes it made (matches rewritten,
nodes changed; 1 or 0 for an onnx-ir pass, which says whether it changed the model, not how much).

The stages (:data:`STAGES`), in the order they run:

* ``"translation"``: at every level, ``optimize=False`` included, at the end of the translation (what the raw
  translation needs to run as PyTorch does);
* ``"default"``: ``optimize=True`` and ``"onnxruntime"`` (standard ONNX in, standard ONNX out);
* ``"onnxruntime"``: ``optimize="onnxruntime"`` (fusions into the kernels onnxruntime runs, ``com.microsoft``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Literal

import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassBase, PassResult
from onnx_ir.passes.common import RemoveUnusedNodesPass
from onnxscript.rewriter import pattern

logger = logging.getLogger(__name__)

Stage = Literal["translation", "default", "onnxruntime"]

#: the stages, in the order they run (see the module's docstring)
STAGES: tuple[Stage, ...] = ("translation", "default", "onnxruntime")


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One step of the pipeline.

    :param name: what it does, in a few words (the key of its count in the logs)
    :param level: the stage it runs at, one of :data:`STAGES`
    :param run: changes the model in place, returns how many changes it made
    :param why: why it is there and why at this position of the pipeline
    :param cleanup: the nodes it leaves unused are removed after it, when it changed something

    Example::

        >>> import onnx_ir as ir
        >>> from onnx_ir.passes.common import RemoveUnusedNodesPass
        >>> from experimental.torch_interpreter.optimize.rewrite import Rewrite, ir_pass
        >>> step = Rewrite("remove_unused", "default", ir_pass(RemoveUnusedNodesPass), why="dead code")
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> dead, live = ir.node("Neg", [x]), ir.node("Abs", [x])
        >>> live.outputs[0].name = "y"
        >>> model = ir.Model(ir.Graph([x], live.outputs, nodes=[dead, live], opset_imports={"": 18}), ir_version=10)
        >>> step.apply(model), [n.op_type for n in model.graph]
        (1, ['Abs'])
    """

    name: str
    level: Stage
    run: Callable[[ir.Model], int]
    why: str
    cleanup: bool = False

    def __post_init__(self) -> None:
        if self.level not in STAGES:
            raise ValueError(f"rewrite {self.name!r}: level={self.level!r}, expected one of {STAGES}")

    def apply(self, model: ir.Model) -> int:
        """Runs the rewrite on ``model`` in place (then removes the nodes it left unused when :attr:`cleanup`);
        returns how many changes it made."""
        begin = time.perf_counter()
        count = int(self.run(model))
        if count and self.cleanup:
            RemoveUnusedNodesPass()(model)
        logger.debug("%s [%s]: %d change(s) in %.3fs", self.name, self.level, count, time.perf_counter() - begin)
        return count


class CountingPass(InPlacePass):
    """An onnx-ir in-place pass that counts its changes: a subclass writes :meth:`rewrite`, the count is kept
    in :attr:`count` (read by :func:`ir_pass`).

    Example::

        >>> import onnx_ir as ir
        >>> from experimental.torch_interpreter.optimize.rewrite import CountingPass
        >>> class RenameNodes(CountingPass):
        ...     def rewrite(self, model):
        ...         for i, node in enumerate(model.graph):
        ...             node.name = f"n{i}"
        ...         return len(model.graph)
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> node = ir.node("Abs", [x])
        >>> model = ir.Model(ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 18}), ir_version=10)
        >>> rename = RenameNodes()
        >>> rename(model).modified, rename.count, node.name
        (True, 1, 'n0')
    """

    count: int = 0

    def call(self, model: ir.Model) -> PassResult:
        self.count = self.rewrite(model)
        return PassResult(model, self.count > 0)

    def rewrite(self, model: ir.Model) -> int:
        """Changes ``model`` in place; returns how many changes it made."""
        raise NotImplementedError


def rules(rule_set: pattern.RewriteRuleSet) -> Callable[[ir.Model], int]:
    """The ``run`` of a rewrite applying onnxscript's rule set ``rule_set`` (pattern, check, replacement) to the
    model, its functions and subgraphs: the number of matches replaced.

    Example::

        >>> import onnx_ir as ir
        >>> from onnxscript.rewriter import pattern
        >>> from experimental.torch_interpreter.optimize.rewrite import rules
        >>> neg_neg = pattern.RewriteRule(lambda op, x: op.Neg(op.Neg(x)), lambda op, x: op.Identity(x))
        >>> x = ir.val("x", ir.DataType.FLOAT, [2])
        >>> a = ir.node("Neg", [x])
        >>> b = ir.node("Neg", a.outputs)
        >>> b.outputs[0].name = "y"
        >>> model = ir.Model(ir.Graph([x], b.outputs, nodes=[a, b], opset_imports={"": 18}), ir_version=10)
        >>> rules(pattern.RewriteRuleSet([neg_neg]))(model), [n.op_type for n in model.graph]
        (1, ['Identity'])
    """
    return rule_set.apply_to_model


def ir_pass(factory: Callable[[], PassBase]) -> Callable[[ir.Model], int]:
    """The ``run`` of a rewrite running a new onnx-ir pass made by ``factory``: the pass's :attr:`count` for a
    :class:`CountingPass`, else 1 when it changed the model, 0 when not. Example: :class:`Rewrite`."""

    def run(model: ir.Model) -> int:
        step = factory()
        result = step(model)
        return step.count if isinstance(step, CountingPass) else int(result.modified)

    return run
