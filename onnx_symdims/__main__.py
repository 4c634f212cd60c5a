"""``python -m onnx_symdims``: the command line."""

from __future__ import annotations

import sys

from onnx_symdims.cli import main

if __name__ == "__main__":
    sys.exit(main())
