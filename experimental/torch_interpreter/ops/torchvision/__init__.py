"""Converters of torchvision's own ops (``torch.ops.torchvision.*``, registry keys ``torchvision::<op>.default``), one
module per op family; ``_rois.py`` holds what the region-of-interest families share.

``ops/__init__.py`` imports this package only when torchvision is installed, and nothing here imports torchvision: a
key is a string and a converter reads the FX node alone, so the package loads whether or not torchvision's kernels do.
"""

from . import deform_conv, nms, ps_roi, roi_align, roi_pool  # noqa: F401
