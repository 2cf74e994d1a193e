"""The one layer every converter family may import: types, onnxruntime kernel gaps, shapes, spatial
arguments and small tensor-building blocks. Families import this package, ``context``, ``registry`` and
``dtypes``; never each other.
"""

from .kernels import *  # noqa: F401,F403
from .pool_windows import *  # noqa: F401,F403
from .shapes import *  # noqa: F401,F403
from .slices import *  # noqa: F401,F403
from .spatial import *  # noqa: F401,F403
from .tensors import *  # noqa: F401,F403
from .types import *  # noqa: F401,F403
