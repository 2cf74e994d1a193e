"""``python -m experimental.torch_interpreter export|compare FILE.py:factory`` (see :mod:`.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
