"""The ONNX backend node tests as a conformance table: onnx-symdims against the peers.

Usage::

    python benchmarks/backend_compare.py [pure|inject ...]

For every tool and mode prints exact / incomplete / wrong / exception counts over the
declared output shapes (see ``tests/integration/backend_cases.py`` for the rules). In
``inject`` mode the test inputs (0-d ones included) become initializers and are removed
from the graph inputs, so they are true constants for every tool.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import score_dev_corpus as tools  # noqa: E402

from tests.integration import backend_cases  # noqa: E402


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    for mode in argv or ["pure", "inject"]:
        print(f"mode {mode}")
        for name, tool in tools.TOOLS.items():
            t0 = time.perf_counter()
            counts, wrong, _errors = backend_cases.run(tool, mode)
            total = sum(counts.values())
            print(
                f"  {name:22s} outputs={total} exact={counts['exact']} "
                f"({100 * counts['exact'] / total:.1f}%) incomplete={counts['incomplete']} "
                f"wrong={counts['wrong']} exception={counts['exception']} "
                f"time={time.perf_counter() - t0:.1f}s",
                flush=True,
            )
            for case, output, expected, got in wrong[:5]:
                print(f"      wrong: {case} {output}: expected {expected}, got {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
