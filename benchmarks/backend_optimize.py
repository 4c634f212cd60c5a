"""The ONNX backend node tests as an oracle for ``optimize``: outputs before and after.

Usage::

    python benchmarks/backend_optimize.py [pure|inject ...] [--inexact-floats]
        [--fusions ort|onnx] [--only TEXT]

Every node test case of ``onnx.backend.test.case`` runs in onnxruntime (graph
optimizations off) on its first data set, before and after ``onnx_symdims.optimize``,
and every output must be equal (floats bit for bit, NaN equal to NaN; see
:func:`tests.integration.backend_cases.compare_optimized`); with ``--fusions`` or
``--inexact-floats`` floats within ``rtol=1e-4, atol=1e-5`` as ``optimize --verify``
allows them (``close``). ``pure`` keeps the test
inputs as graph inputs; ``inject`` makes them initializers, so most of the model is
folded. Prints the verdict counts per mode and every case that is not ``same``,
``close`` or ``skip``; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import onnx_symdims  # noqa: E402
from tests.integration import backend_cases  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modes", nargs="*", help="pure and/or inject (default: both)")
    parser.add_argument("--inexact-floats", action="store_true")
    parser.add_argument("--fusions", choices=["ort", "onnx"])
    parser.add_argument("--only", help="cases whose name contains this")
    args = parser.parse_args(argv)
    args.modes = args.modes or ["pure", "inject"]
    if set(args.modes) - {"pure", "inject"}:
        parser.error(f"modes are pure and inject, got {args.modes}")
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)

    def optimize(model):
        return onnx_symdims.optimize(
            model, fusions=args.fusions, exact_floats=not args.inexact_floats
        )

    inexact = args.fusions is not None or args.inexact_floats
    tolerance = (1e-4, 1e-5) if inexact else None
    bad = 0
    for mode in args.modes:
        start = time.perf_counter()
        counts: collections.Counter = collections.Counter()
        for case in backend_cases.cases(mode):
            if args.only and args.only not in case.name:
                continue
            verdict, detail = backend_cases.compare_optimized(case, optimize, tolerance)
            counts[verdict] += 1
            if verdict not in ("same", "close", "skip"):
                bad += 1
                print(f"  {verdict}: {case.name}: {detail}", flush=True)
        print(
            f"mode {mode}: "
            + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            + f" ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
