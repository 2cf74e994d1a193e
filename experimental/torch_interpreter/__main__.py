"""``python -m experimental.torch_interpreter export|compare FILE.py:factory`` and ``genai MODEL_FOLDER OUT_FOLDER`` (see :mod:`.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
