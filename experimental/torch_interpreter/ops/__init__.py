"""Converters, one module per op family (see ``_doc/design.rst`` for the rule that cuts them).
Importing this package registers them all.
"""

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
    logical,
    loss,
    loss_backward,
    normalization,
    normalization_backward,
    padding_windows,
    passthrough,
    pooling,
    python_op,
    random,
    reduction,
    reorder,
    rnn,
    sampling,
    sort,
    special,
    symbolic,
    views,
    views_backward,
)

# last, once every functional converter is registered: their in-place twins (add_ from add...)
INPLACE_KEYS = inplace.register_inplace()
