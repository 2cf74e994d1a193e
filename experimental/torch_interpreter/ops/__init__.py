"""Converters, one module per op family (see ``_doc/design.rst`` for the rule that cuts them).
Importing this package registers them all, and the converters of a library's own ops (``ops/<library>/``) when that
library is installed.
"""

import importlib.util

from . import (  # noqa: F401
    activation,
    activation_backward,
    attention,
    attention_backward,
    comparison,
    complex,
    concat_split,
    control_flow,
    convolution,
    convolution_backward,
    creation,
    cumulative,
    diagonals,
    elementwise,
    fft,
    grouped_mm,
    higher_order,
    indexing,
    inplace,
    linalg,
    linalg_backward,
    logical,
    loss,
    loss_backward,
    normalization,
    normalization_backward,
    padding_backward,
    padding_windows,
    passthrough,
    pooling,
    pooling_backward,
    python_op,
    random,
    reduction,
    reorder,
    rnn,
    sampling,
    sort,
    special,
    symbolic,
    triangular_solve,
    views,
    views_backward,
)

# a library's own ops (torch.ops.torchvision...) in a folder named after it, loaded when the library is installed:
# the converters never import it, nothing changes without it
if importlib.util.find_spec("torchvision") is not None:
    from . import torchvision  # noqa: F401

# last, once every functional converter is registered: their in-place twins (add_ from add...)
INPLACE_KEYS = inplace.register_inplace()
