"""Converters, one module per op family. Importing this package registers them all."""

from . import (  # noqa: F401
    activation,
    attention,
    comparison,
    control_flow,
    conv_pool,
    creation,
    elementwise,
    higher_order,
    indexing,
    inplace,
    linalg,
    normalization,
    passthrough,
    python_op,
    reduction,
    rnn,
    shape,
    symbolic,
)
