"""Times symbolic shape inference: onnx-symdims against the peers, in one process.

Usage::

    python benchmarks/infer_bench.py [--reps 5] [--layers 64] [--blocks 1670] [--model PATH ...]

Models: a generated KV-cache decoder (``--layers`` layers, ~50 nodes each), a chain of
``12 * --blocks`` nodes (20k by default), and any ``--model`` file. For every tool the median
wall time of ``--reps`` runs is printed, with the ratio to onnx-symdims. The conversion from
``ModelProto`` to ``onnx_ir.Model`` is excluded for the two onnx-ir based tools (it is shared
work); onnx C++ and onnxruntime's tool take the proto directly. Peers that fail are reported,
not fatal.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import warnings

import onnx
import onnx_ir as ir

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _models


def _time_ir_tool(proto, fn, reps):
    times = []
    for _ in range(reps):
        model = ir.from_proto(proto)
        t0 = time.perf_counter()
        fn(model)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _time_proto_tool(proto, fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(proto)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_ours(model):
    import onnx_symdims

    onnx_symdims.infer_symbolic_shapes(model)


def run_osi(model):
    from onnx_shape_inference import infer_symbolic_shapes

    infer_symbolic_shapes(model)


def run_ort(proto):
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    SymbolicShapeInference.infer_shapes(proto, auto_merge=True)


def run_onnx_cpp(proto):
    onnx.shape_inference.infer_shapes(proto, data_prop=True)


TOOLS = [
    ("onnx-symdims", "ir", run_ours),
    ("onnx-shape-inference", "ir", run_osi),
    ("ORT symbolic_shape_infer", "proto", run_ort),
    ("onnx C++ (data_prop)", "proto", run_onnx_cpp),
]


def bench(name: str, proto: onnx.ModelProto, reps: int) -> None:
    print(f"\n{name}: {len(proto.graph.node)} nodes", flush=True)
    results = {}
    for tool, kind, fn in TOOLS:
        try:
            timer = _time_ir_tool if kind == "ir" else _time_proto_tool
            results[tool] = timer(proto, fn, reps)
        except Exception as e:
            print(f"  {tool:28s} failed: {type(e).__name__}: {str(e)[:100]}")
    ours = results.get("onnx-symdims")
    for tool, seconds in results.items():
        ratio = f"{seconds / ours:7.1f}x ours" if ours else ""
        print(f"  {tool:28s} median {seconds * 1000:9.1f} ms   {ratio}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=1670)
    parser.add_argument("--model", action="append", default=[])
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    bench(f"decoder({args.layers} layers)", _models.decoder(args.layers), args.reps)
    bench(f"chain({args.blocks} blocks)", _models.chain(args.blocks), max(1, args.reps // 2))
    for path in args.model:
        bench(os.path.basename(path), onnx.load(path, load_external_data=False), args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
