"""Times symbolic shape inference: onnx-symdims against the peers, in one process.

Usage::

    python benchmarks/infer_bench.py [--reps 5] [--layers 64] [--blocks 1670] [--model PATH ...]

Models: a generated KV-cache decoder (``--layers`` layers, ~50 nodes each), a chain of
``12 * --blocks`` nodes (20k by default), and any ``--model`` file. For every tool the median
wall time of ``--reps`` runs is printed, with the ratio to onnx-symdims (the tools take turns
in every round, after one warm-up round, so load spikes hit all alike). The conversion from
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


def _time_once(proto, kind, fn):
    model = ir.from_proto(proto) if kind == "ir" else proto
    t0 = time.perf_counter()
    fn(model)
    return time.perf_counter() - t0


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
    """Runs the tools in turn, ``reps`` rounds (plus one warm-up), so that load spikes on
    a shared machine hit every tool alike; prints the medians."""
    print(f"\n{name}: {len(proto.graph.node)} nodes", flush=True)
    times: dict[str, list[float]] = {tool: [] for tool, _, _ in TOOLS}
    failed: dict[str, str] = {}
    for round_ in range(reps + 1):
        for tool, kind, fn in TOOLS:
            if tool in failed:
                continue
            try:
                seconds = _time_once(proto, kind, fn)
            except Exception as e:
                failed[tool] = f"{type(e).__name__}: {str(e)[:100]}"
                continue
            if round_:
                times[tool].append(seconds)
    for tool, error in failed.items():
        print(f"  {tool:28s} failed: {error}")
    results = {tool: statistics.median(t) for tool, t in times.items() if t}
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
    bench(f"chain({args.blocks} blocks)", _models.chain(args.blocks), max(3, args.reps // 2))
    for path in args.model:
        bench(os.path.basename(path), onnx.load(path, load_external_data=False), args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
