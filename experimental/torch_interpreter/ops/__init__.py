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
    linalg,
    normalization,
    passthrough,
    python_op,
    reduction,
    shape,
    symbolic,
)
