"""Long differential fuzzing run: random exporter-like graphs, our dims against onnxruntime.

Usage::

    python benchmarks/fuzz_long.py --seconds 600 --seed 0 [--workers 2]

Worker processes take the seeds ``seed + w``, ``seed + w + workers``, … until the time is
up (``tests/fuzz/graph_gen.py`` builds each graph, ``tests/fuzz/oracle.py`` checks it).
Every mismatch is printed with its binding, expected versus inferred, the hook likely at
fault and an ONNX-text reproducer: shrunk (``tests.fuzz.oracle.minimize``) for the first
``--shrink`` findings of each (op, kind) per worker, the backward slice of the wrong
value otherwise. A worker killed by onnxruntime (a crash of the runtime, not of ours)
is reported with its seed and restarted on the next one. A summary of the distinct
(op, kind) signatures ends the run.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import selectors
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.fuzz import graph_gen, oracle  # noqa: E402


def _finding_report(case: graph_gen.FuzzCase, finding: oracle.Finding, shrink: bool) -> str:
    if shrink:
        small = oracle.minimize(case, finding)
        return oracle.report(small, oracle.restate(small, finding))
    targets = [finding.value] if finding.value else [o.name for o in case.model.graph.output]
    nodes = oracle.backward_slice(list(case.model.graph.node), targets)
    bindings = [case.bindings[finding.binding_index]] if finding.binding_index >= 0 else None
    sliced = oracle.rebuild(case, nodes, targets, bindings=bindings)
    return oracle.report(sliced, finding) + "\n  (backward slice, not shrunk)"


def worker(first: int, stride: int, deadline: float, shrink: int) -> None:
    """Checks seeds ``first, first + stride, …``; one JSON line per event on stdout."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    shrunk: collections.Counter[tuple[str, str]] = collections.Counter()
    seed = first
    while time.time() < deadline:
        print(json.dumps({"event": "start", "seed": seed}), flush=True)
        try:
            _check_seed(seed, shrunk, shrink)
        except Exception:  # a bug of the fuzzer itself: report it and go on
            print(
                json.dumps({"event": "error", "seed": seed, "trace": traceback.format_exc()}),
                flush=True,
            )
        seed += stride


def _check_seed(seed: int, shrunk: collections.Counter[tuple[str, str]], shrink: int) -> None:
    case = graph_gen.generate(seed)
    outcome = oracle.check_case(case)
    print(
        json.dumps(
            {
                "event": "done",
                "seed": seed,
                "runs": outcome.runs,
                "rejected": outcome.rejected,
                "findings": len(outcome.findings),
                "departures": outcome.departures,
            }
        ),
        flush=True,
    )
    seen: set[tuple[str, str]] = set()
    for finding in outcome.findings:
        if finding.signature in seen:  # one report per signature and graph
            continue
        seen.add(finding.signature)
        shrink_it = shrunk[finding.signature] < shrink
        shrunk[finding.signature] += 1
        print(
            json.dumps(
                {
                    "event": "finding",
                    "seed": seed,
                    "op": finding.op_type,
                    "kind": finding.kind,
                    "message": finding.message,
                    "report": _finding_report(case, finding, shrink_it),
                }
            ),
            flush=True,
        )


def _spawn(
    first: int, stride: int, deadline: float, shrink: int, memo: bool = False
) -> subprocess.Popen:
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        f"--seed={first}",
        f"--stride={stride}",
        f"--deadline={deadline}",
        f"--shrink={shrink}",
    ]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    if memo:
        env["FUZZ_MEMO"] = "1"
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shrink", type=int, default=3, help="findings shrunk per (op, kind)")
    parser.add_argument(
        "--memo", action="store_true", help="force the engine's memo on (graphs are small)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stride", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        if os.environ.get("FUZZ_MEMO"):
            from onnx_symdims.passes._inference import InferenceEngine

            InferenceEngine.memo_min_nodes = 0
        worker(args.seed, args.stride, args.deadline, args.shrink)
        return 0

    deadline = time.time() + args.seconds
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    examples: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    graphs = runs = rejected = 0
    crashes: list[int] = []
    errors: list[int] = []
    departures: collections.Counter[str] = collections.Counter()
    departure_examples: dict[str, str] = {}
    # Workers run concurrently; each is restarted after the seed that killed it.
    pending = {w: args.seed + w for w in range(args.workers)}
    processes = {
        w: _spawn(s, args.workers, deadline, args.shrink, args.memo)
        for w, s in pending.items()
    }
    selector = selectors.DefaultSelector()
    for w, process in processes.items():
        selector.register(process.stdout, selectors.EVENT_READ, w)
    current: dict[int, int] = dict(pending)
    while processes:
        for key, _ in selector.select(timeout=5):
            w = key.data
            process = processes[w]
            line = process.stdout.readline()
            if line:
                event = json.loads(line)
                if event["event"] == "start":
                    current[w] = event["seed"]
                elif event["event"] == "error":
                    errors.append(event["seed"])
                    print(
                        f"\n=== fuzzer error on seed {event['seed']}:\n{event['trace']}",
                        flush=True,
                    )
                elif event["event"] == "done":
                    graphs += 1
                    runs += event["runs"]
                    rejected += bool(event["rejected"])
                    for departure in event["departures"]:
                        op = departure.split(":")[0]
                        departures[op] += 1
                        departure_examples.setdefault(op, f"seed {event['seed']}: {departure}")
                else:
                    signature = (event["op"], event["kind"])
                    counts[signature] += 1
                    examples[signature].append(event["seed"])
                    print(f"\n=== mismatch #{sum(counts.values())} (seed {event['seed']})")
                    print(event["report"], flush=True)
                continue
            selector.unregister(process.stdout)
            code = process.wait()
            del processes[w]
            if code != 0 and time.time() < deadline:
                crashes.append(current[w])
                print(
                    f"\n=== worker died (exit {code}) on seed {current[w]}: restarting",
                    flush=True,
                )
                process = _spawn(
                    current[w] + args.workers, args.workers, deadline, args.shrink, args.memo
                )
                processes[w] = process
                selector.register(process.stdout, selectors.EVENT_READ, w)
    print(
        f"\n=== summary: {graphs} graphs, {runs} onnxruntime runs, {rejected} models rejected "
        f"by onnxruntime, {len(crashes)} worker crashes {crashes[:20]}, "
        f"{len(errors)} fuzzer errors {errors[:20]}"
    )
    for (op, kind), count in counts.most_common():
        print(f"  {op:20s} {kind:15s} {count:5d}  seeds {examples[(op, kind)][:8]}")
    print("runs skipped because onnxruntime departs from the spec (reference evaluator):")
    for op, count in departures.most_common():
        print(f"  {op:20s} {count:5d}  e.g. {departure_examples[op]}")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
