"""Instructions per ``infer_symbolic_shapes`` call, counted by callgrind: repeatable on a busy machine.

Usage::

    python benchmarks/callgrind_counts.py [--models NAME,NAME,...] [--calls 3] [--warmups 8]
        [--corpus DIR]

Wall time on a shared 2-core machine moves by 10-30 % between runs; callgrind's instruction
count for the same code and inputs does not (a few thousand in a million), so a change of
1 % is visible. Names: a dev-corpus model (``segformer_dynamo``), ``data/NAME`` for
``tests/data/NAME.onnx``, or ``tsN`` for the TorchScript-style decoder of
:mod:`_ts_models` with N layers. Each model is loaded, inferred ``--warmups`` times (lazy
imports, the algebra's caches, and CPython 3.11's specializing interpreter, which quickens
a function on its 8th call: with fewer warm-ups the functions run once per inference are
measured unspecialized, and their quickening lands in the measured calls), the heap
frozen (otherwise the collector's passes, and so the count, depend on what earlier
models left alive), then ``--calls`` fresh ``ir.Model`` copies are
inferred inside one ``sys.call_tracing`` call, the only function callgrind collects in and
dumps before. Needs ``valgrind`` on PATH; about a minute for the default models.
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "dev_corpus"))
DEFAULT_MODELS = (
    "hand_control_flow,hand_dynamic_ops,data/bert_ortfused,data/convnet_dynamo,"
    "whisper_encoder_dynamo,mistral_kv_dynamo,segformer_dynamo,ts17"
)
_CHILD = "_ONNX_SYMDIMS_CALLGRIND_CHILD"


def _load(name: str, corpus: str):
    import onnx

    if name.startswith("ts") and name[2:].isdigit():
        sys.path.insert(0, HERE)
        import _ts_models

        return _ts_models.ts_decoder(int(name[2:]))
    if name.startswith("data/"):
        path = os.path.join(ROOT, "tests", "data", name[5:] + ".onnx")
    else:
        path = os.path.join(corpus, "models", name, "model.onnx")
    return onnx.load(path, load_external_data=False)


def _child(models: list[str], calls: int, warmups: int, corpus: str) -> None:
    """Runs under callgrind: one ``sys.call_tracing`` per model, after its warm-up."""
    import onnx_ir as ir

    import onnx_symdims

    def infer_all(copies):
        for model in copies:
            onnx_symdims.infer_symbolic_shapes(model)

    for name in models:
        proto = _load(name, corpus)
        copies = [ir.from_proto(proto) for _ in range(calls + warmups)]
        for _ in range(warmups):
            onnx_symdims.infer_symbolic_shapes(copies.pop())
        gc.collect()
        gc.freeze()
        sys.call_tracing(infer_all, (copies,))
        del copies, proto
        gc.unfreeze()
        gc.collect()


def _total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--warmups", type=int, default=8)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    if os.environ.get(_CHILD):
        _child(models, args.calls, args.warmups, args.corpus)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not on PATH", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as out:
        base = os.path.join(out, "cg.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=sys_call_tracing",
            "--dump-before=sys_call_tracing",
            f"--callgrind-out-file={base}",
            sys.executable,
            os.path.abspath(__file__),
            *(argv if argv is not None else sys.argv[1:]),
        ]
        env = {**os.environ, _CHILD: "1", "PYTHONHASHSEED": "0"}
        run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if run.returncode:
            print(run.stderr[-2000:], file=sys.stderr)
            return run.returncode
        # cg.out.1, cg.out.2, ... are dumped on entering each call_tracing (what ran
        # before it); cg.out, at exit, holds the last model's calls.
        dumps = sorted(glob.glob(base + ".*"), key=lambda p: int(p.rsplit(".", 1)[1]))
        totals = [t for t in map(_total, [*dumps, base]) if t]
    if len(totals) != len(models):
        print(f"expected {len(models)} counts, got {len(totals)}", file=sys.stderr)
        return 1
    print("| model | instructions per call |")
    print("|---|---|")
    for name, total in zip(models, totals, strict=True):
        print(f"| {name} | {total // args.calls // 1000:,}k |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
