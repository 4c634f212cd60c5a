"""Checks that two versions of the code write the same shapes: dump with each, then compare.

Usage::

    PYTHONPATH=<tree A> python benchmarks/compare_written_shapes.py dump a.json
    PYTHONPATH=<tree B> python benchmarks/compare_written_shapes.py dump b.json
    python benchmarks/compare_written_shapes.py compare a.json b.json

``dump`` infers every model of the dev, check and probe corpora (beside the repository:
``../shared/dev_corpus``, ``../check_corpus``, ``../probe_corpus`` and the
``../attack*_corpus`` folders that exist) and of ``tests/data``
with ``infer_symbolic_shapes``, and records the type and dim texts of every value (inputs,
outputs and node outputs of the main graph, its subgraphs and the functions). ``compare``
lists the models whose records differ; a speed change must leave none.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PATTERNS = [
    os.path.join(ROOT, "..", "shared", "dev_corpus", "models", "*", "model.onnx"),
    os.path.join(ROOT, "..", "check_corpus", "models", "*", "model.onnx"),
    os.path.join(ROOT, "..", "probe_corpus", "models", "*", "model.onnx"),
    os.path.join(ROOT, "..", "attack*_corpus", "models", "*", "model.onnx"),
    os.path.join(ROOT, "tests", "data", "**", "*.onnx"),
]


def _value_text(value) -> str:
    dims = None if value.shape is None else [str(d) for d in value.shape.dims]
    return f"{value.type}|{dims}"


def dump(out_path: str) -> None:
    import onnx_ir as ir

    import onnx_symdims

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    paths = [p for pattern in PATTERNS for p in sorted(glob.glob(pattern, recursive=True))]
    records: dict[str, object] = {}
    for path in paths:
        # tests/data relative to the tree, so that two checkouts' dumps compare
        real = os.path.realpath(path)
        inside = real.startswith(os.path.realpath(ROOT) + os.sep)
        key = os.path.relpath(
            real, os.path.realpath(ROOT if inside else os.path.join(ROOT, ".."))
        )
        try:
            model = onnx_symdims.infer_symbolic_shapes(ir.load(path))
        except Exception as e:  # recorded: both versions must fail alike
            records[key] = f"error {type(e).__name__}: {e}"
            continue
        graphs = [
            ("main", model.graph),
            *((g.name or "sub", g) for g in model.graph.subgraphs()),
        ]
        graphs += [(str(f.identifier()), f) for f in model.functions.values()]
        record = {}
        for k, (name, graph) in enumerate(graphs):
            values = [
                *graph.inputs,
                *graph.outputs,
                *(v for node in graph for v in node.outputs),
            ]
            for i, value in enumerate(values):
                record[f"{k}:{name}:{i}:{value.name}"] = _value_text(value)
        records[key] = record
    with open(out_path, "w") as f:
        json.dump(records, f, indent=0, sort_keys=True)
    print(f"{len(paths)} models dumped to {out_path}")


def compare(a_path: str, b_path: str) -> int:
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    differ = 0
    for model in sorted(set(a) | set(b)):
        left, right = a.get(model), b.get(model)
        if left == right:
            continue
        differ += 1
        if isinstance(left, dict) and isinstance(right, dict):
            keys = [k for k in sorted(set(left) | set(right)) if left.get(k) != right.get(k)]
            print(
                f"{model}: {len(keys)} values differ, e.g. {keys[0]}: "
                f"{left.get(keys[0])} vs {right.get(keys[0])}"
            )
        else:
            print(f"{model}: {str(left)[:80]} vs {str(right)[:80]}")
    values = sum(len(r) for r in a.values() if isinstance(r, dict))
    print(f"{len(a)} models, {values} values compared, {differ} models differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
