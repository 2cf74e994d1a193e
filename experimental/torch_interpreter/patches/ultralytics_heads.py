"""ultralytics' YOLO heads with anchors made for the size at hand, at every call.

``Detect`` (and ``Segment``, ``Pose``, ``OBB``, the end-to-end heads, which inherit it) keeps its anchor grid and
the feature size it was made for, and makes a new grid only ``if self.dynamic or self.shape != shape``. A model
that ran once in eager mode holds the example's size: under ``torch.export`` the comparison guards the batch,
height and width to the example's, and a dynamic image size is refused (``Constraints violated``). ultralytics'
own exporter sets ``dynamic=True`` on the heads before exporting; the patch does the same for each call while it is
applied (the anchors are the same numbers, made from the feature sizes), without changing the model's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Patch, Undo, attribute_needed, imported_owner, replace_attribute

#: the module of the heads
HEAD_MODULE = "ultralytics.nn.modules.head"
_HEAD = HEAD_MODULE
_MISSING = object()


def _always_dynamic(original: Callable) -> Callable:
    """``original`` (a method of a head) called with ``self.dynamic`` True, the instance's own value put back."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = vars(self).get("dynamic", _MISSING)
        self.dynamic = True
        try:
            return original(self, *args, **kwargs)
        finally:
            if before is _MISSING:
                del self.dynamic
            else:
                self.dynamic = before

    return call


def _method() -> str:
    """The method of ``Detect`` holding the anchor cache: ``_get_decode_boxes`` (ultralytics 8.4), ``_inference``
    before."""
    owner = imported_owner(_HEAD, "Detect")
    return "_get_decode_boxes" if owner is not None and "_get_decode_boxes" in vars(owner) else "_inference"


def _apply() -> Undo:
    owner = imported_owner(_HEAD, "Detect")
    name = _method()
    return replace_attribute(owner, name, _always_dynamic(vars(owner)[name]))


PATCHES = [
    Patch(
        name="YOLO Detect heads make their anchors at every call",
        group="ultralytics",
        replaces="ultralytics.nn.modules.head.Detect._get_decode_boxes (_inference before 8.4): dynamic=True",
        fixes="`Constraints violated`: a dynamic batch, height or width fixed to the example's by "
              "`self.shape != shape` after an eager call",
        versions="ultralytics 8.3, 8.4",
        needed=lambda: attribute_needed(_HEAD, _method(), "Detect"),
        apply=_apply,
    ),
]
