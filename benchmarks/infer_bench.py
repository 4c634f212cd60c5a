"""Times symbolic shape inference: onnx-symdims against the peers, in one process.

Usage::

    python benchmarks/infer_bench.py [--reps 5] [--corpus DIR] [--only TEXT] [--no-peers]
        [--ts-layers 17 43] [--synthetic] [--model PATH ...] [--no-cold] [--cold-runs 11]

Models: every ``models/*/model.onnx`` of the dev corpus, every ``tests/data`` model,
TorchScript-style decoders (:func:`_ts_models.ts_decoder`; 17 layers are 8.1k nodes, 43
are 20.3k) plus the 17-layer one with 16x the weight bytes (same graph; the time must not
move), ``--synthetic`` adds the generated KV-cache decoder and 20k-node chain of
:mod:`_models`, and any ``--model`` file.

For every tool the median wall time of ``--reps`` rounds is printed as one markdown table
row: peers with how many times slower than onnx-symdims they are, onnx C++ with ours as a
fraction of it. The tools take turns in every round, after one warm-up round, so load
spikes on a shared machine hit all alike. The conversion from ``ModelProto`` to
``onnx_ir.Model`` is excluded for the two onnx-ir based tools (it is shared work); onnx C++
(``infer_shapes(data_prop=True)``) and onnxruntime's tool take the proto directly. Peers
that fail are reported, not fatal.

The cold start is timed in fresh subprocesses: ``import onnx_symdims`` plus the first
``infer_symbolic_shapes`` call on a ~20-node model (onnx and onnx-ir imported before the
clock starts), with the bytecode cache warm as in an installed package (a private
``PYTHONPYCACHEPREFIX``), and without bytecode (what ``PYTHONDONTWRITEBYTECODE`` costs).
The median of ``--cold-runs`` processes is printed (one process varies by +-30 % on a
shared machine), with the first and third quartiles. Then what the cold start leaves out
and a CLI user waits for: the imports of numpy, ml_dtypes, onnx and onnx-ir, and the
whole ``onnx-symdims infer`` command on that model, start to exit.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import onnx
import onnx_ir as ir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import _models  # noqa: E402
import _ts_models  # noqa: E402

DEFAULT_CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "dev_corpus"))
COLD_MODEL = os.path.join(ROOT, "tests", "data", "bert_ortfused.onnx")


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


OURS, OSI, ORT, CPP = "ours", "onnx-shape-inference", "onnxruntime's tool", "onnx C++"
TOOLS = [
    (OURS, "ir", run_ours),
    (OSI, "ir", run_osi),
    (ORT, "proto", run_ort),
    (CPP, "proto", run_onnx_cpp),
]


def bench(proto: onnx.ModelProto, reps: int, peers: bool) -> dict[str, float | str]:
    """Median seconds per tool (or the error text of a tool that failed)."""
    tools = TOOLS if peers else [t for t in TOOLS if t[0] in (OURS, CPP)]
    times: dict[str, list[float]] = {tool: [] for tool, _, _ in tools}
    failed: dict[str, str] = {}
    for round_ in range(reps + 1):
        for tool, kind, fn in tools:
            if tool in failed:
                continue
            try:
                seconds = _time_once(proto, kind, fn)
            except Exception as e:
                failed[tool] = f"{type(e).__name__}: {str(e)[:60]}"
                continue
            if round_:
                times[tool].append(seconds)
    results: dict[str, float | str] = {t: statistics.median(v) for t, v in times.items() if v}
    results.update(failed)
    return results


def _cell(results: dict, tool: str) -> str:
    value = results.get(tool)
    ours = results.get(OURS)
    if value is None:
        return "-"
    if isinstance(value, str):
        return f"failed ({value})"
    text = f"{value * 1000:.1f} ms"
    if tool == OURS or not isinstance(ours, float):
        return text
    if tool == CPP:
        return f"{text} (ours {ours / value:.2f}x)"
    return f"{text} ({value / ours:.1f}x)"


def models(args) -> list[tuple[str, onnx.ModelProto]]:
    corpus = sorted(glob.glob(os.path.join(args.corpus, "models", "*", "model.onnx")))
    found = [(os.path.basename(os.path.dirname(path)), path) for path in corpus]
    tests = os.path.join(ROOT, "tests")
    data = sorted(glob.glob(os.path.join(tests, "data", "**", "*.onnx"), recursive=True))
    found += [(os.path.relpath(path, tests), path) for path in data]
    found += [(os.path.basename(p), p) for p in args.model]
    loaded = [(name, onnx.load(path, load_external_data=False)) for name, path in found]
    loaded += [
        (f"ts_decoder({layers} layers)", _ts_models.ts_decoder(layers))
        for layers in args.ts_layers
    ]
    if args.ts_layers:
        layers = args.ts_layers[0]
        heavy = _ts_models.ts_decoder(layers, hidden=256, intermediate=512)
        loaded.append((f"ts_decoder({layers} layers, 16x weights)", heavy))
    if args.synthetic:
        loaded.append(("decoder(64 layers)", _models.decoder(64)))
        loaded.append(("chain(1670 blocks)", _models.chain(1670)))
    return [(n, m) for n, m in loaded if args.only is None or args.only in n]


_COLD = """
import sys, time
import onnx, onnx_ir as ir
model, again = ir.load(sys.argv[1]), ir.load(sys.argv[1])
t0 = time.perf_counter()
import onnx_symdims
onnx_symdims.infer_symbolic_shapes(model)
t1 = time.perf_counter()
onnx_symdims.infer_symbolic_shapes(again)
print((t1 - t0) * 1000, (time.perf_counter() - t1) * 1000)
"""


_IMPORTS = """
import time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
import ml_dtypes
t2 = time.perf_counter()
import onnx, onnx_ir
t3 = time.perf_counter()
print((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, ml_dtypes.__version__)
"""


def _fresh_processes(command: list[str], runs: int) -> tuple[list[list[str]], list[float]]:
    """``command`` in ``runs`` fresh processes (after one unmeasured run, which fills the
    bytecode cache): each one's stdout words and its wall time, start to exit, in ms."""
    words, walls = [], []
    for k in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        if k:
            walls.append((time.perf_counter() - start) * 1000)
            words.append(done.stdout.split())
    return words, walls


def dependency_imports(path: str, runs: int = 11) -> None:
    """What every process pays before our code, and the whole ``onnx-symdims infer`` command.

    The imports of numpy, ml_dtypes, onnx and onnx-ir are excluded from the cold start
    above, but a CLI user waits for them: ml_dtypes 0.7.0 registers its dtypes in ~0.5 s
    (0.6.0 in ~10 ms), which doubled the CLI's time (hence ``ml_dtypes<0.7``).
    """
    words, _ = _fresh_processes([sys.executable, "-c", _IMPORTS], runs)
    numpy_ms, ml_ms, onnx_ms = (
        statistics.median(float(w[i]) for w in words) for i in range(3)
    )
    with tempfile.TemporaryDirectory() as out_dir:
        output = os.path.join(out_dir, "out.onnx")
        _, walls = _fresh_processes(
            [sys.executable, "-m", "onnx_symdims", "infer", path, "-o", output], runs
        )
    print(
        f"imports before our code (median of {runs} processes): numpy {numpy_ms:.0f} ms, "
        f"ml_dtypes {words[0][3]} {ml_ms:.0f} ms, onnx + onnx_ir {onnx_ms:.0f} ms; "
        f"`onnx-symdims infer {os.path.basename(path)}` start to exit "
        f"{statistics.median(walls):.0f} ms",
        flush=True,
    )


def cold_start(path: str, runs: int = 11) -> None:
    """Import plus first call in fresh processes, with and without cached bytecode."""
    nodes = len(onnx.load(path, load_external_data=False).graph.node)
    with tempfile.TemporaryDirectory() as cache:
        for label, extra in (
            ("bytecode cached (installed package)", {"PYTHONPYCACHEPREFIX": cache}),
            ("no bytecode (PYTHONDONTWRITEBYTECODE=1)", {"PYTHONDONTWRITEBYTECODE": "1"}),
        ):
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(extra)
            firsts, seconds = [], []
            for k in range(runs + 1):
                out = subprocess.run(
                    [sys.executable, "-c", _COLD, path],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()
                if k or "PYTHONDONTWRITEBYTECODE" in extra:  # first run fills the cache
                    firsts.append(float(out[0]))
                    seconds.append(float(out[1]))
            q1, _, q3 = (
                statistics.quantiles(firsts, n=4) if len(firsts) > 1 else [firsts[0]] * 3
            )
            print(
                f"cold start, {os.path.basename(path)} ({nodes} nodes), {label}: import + first "
                f"call {statistics.median(firsts):.1f} ms (quartiles {q1:.1f}-{q3:.1f}), second "
                f"call {statistics.median(seconds):.1f} ms (median of {len(firsts)} processes)",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--only", help="only models whose name contains this text")
    parser.add_argument("--no-peers", action="store_true", help="only ours and onnx C++")
    parser.add_argument("--ts-layers", type=int, nargs="*", default=[17, 43])
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--cold-model", default=COLD_MODEL)
    parser.add_argument("--cold-runs", type=int, default=11, help="processes per cold figure")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    if not args.no_cold:
        cold_start(args.cold_model, args.cold_runs)
        dependency_imports(args.cold_model, args.cold_runs)
    print(f"\n| model | nodes | {OURS} | {OSI} | {ORT} | {CPP} (`data_prop`) |")
    print("|---|---|---|---|---|---|", flush=True)
    worst_cpp, worst_peer = 0.0, float("inf")
    for name, proto in models(args):
        results = bench(proto, args.reps, not args.no_peers)
        cells = " | ".join(_cell(results, tool) for tool, _, _ in TOOLS)
        print(f"| {name} | {len(proto.graph.node):,} | {cells} |", flush=True)
        ours = results.get(OURS)
        if isinstance(ours, float):
            if isinstance(results.get(CPP), float):
                worst_cpp = max(worst_cpp, ours / results[CPP])  # type: ignore[operator]
            for peer in (OSI, ORT):
                if isinstance(results.get(peer), float):
                    worst_peer = min(worst_peer, results[peer] / ours)  # type: ignore[operator]
    print(
        f"\nworst ours / onnx C++: {worst_cpp:.2f}x; smallest peer speed-up: {worst_peer:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
