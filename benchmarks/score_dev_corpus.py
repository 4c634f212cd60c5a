"""Scores onnx-symdims (and optionally the peers) on the dev corpus with its own scorer.

Usage::

    python benchmarks/score_dev_corpus.py [--corpus ../shared/dev_corpus] [--peers] [--only NAME]

Prints, per model, the percentage of correct dims and the number of wrong dims for each
tool, using the corpus's ``score.py`` (imported, not copied).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "dev_corpus"))


def load_scorer(corpus: str):
    spec = importlib.util.spec_from_file_location("dev_corpus_score", os.path.join(corpus, "score.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ours(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnx_symdims

    return onnx_symdims.infer_symbolic_shapes(model)


def onnx_cpp(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def ort_symbolic(model: onnx.ModelProto) -> onnx.ModelProto:
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    return SymbolicShapeInference.infer_shapes(model, auto_merge=True)


def osi(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnx_ir as ir
    from onnx_shape_inference import infer_symbolic_shapes

    m = ir.from_proto(model)
    infer_symbolic_shapes(m)
    return ir.to_proto(m)


TOOLS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "onnx-symdims": ours,
    "onnx C++": onnx_cpp,
    "ORT symbolic": ort_symbolic,
    "onnx-shape-inference": osi,
}


def model_names(corpus: str) -> list[str]:
    root = os.path.join(corpus, "models")
    return sorted(
        n for n in os.listdir(root) if os.path.exists(os.path.join(root, n, "truth.json"))
    )


def score_model(scorer, corpus: str, name: str, tool) -> dict:
    model_dir = os.path.join(corpus, "models", name)
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    with open(os.path.join(model_dir, "truth.json")) as f:
        truth = json.load(f)
    t0 = time.perf_counter()
    try:
        inferred = tool(model)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    elapsed = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "inferred.onnx")
        onnx.save(inferred, path)
        summary, per_value = scorer.score(truth, scorer.load_model_no_data(path))
    summary["seconds"] = elapsed
    summary["wrong_values"] = [v for v, rec in per_value.items() if rec["status"] == "wrong"]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--peers", action="store_true", help="also score the peer tools")
    parser.add_argument("--only", action="append", help="score only these models")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    scorer = load_scorer(args.corpus)
    tools = TOOLS if args.peers else {"onnx-symdims": TOOLS["onnx-symdims"]}
    names = args.only or model_names(args.corpus)
    print(f"{'model':26s} " + " ".join(f"{t:>26s}" for t in tools))
    total_wrong = 0
    for name in names:
        cells = []
        for tool_name, tool in tools.items():
            s = score_model(scorer, args.corpus, name, tool)
            if "error" in s:
                cells.append(f"{'crash':>26s}")
                print(f"  {tool_name} on {name}: {s['error']}", file=sys.stderr)
                continue
            if tool_name == "onnx-symdims":
                total_wrong += s["wrong"]
                if s["wrong"]:
                    print(f"  wrong values: {s['wrong_values'][:10]}", file=sys.stderr)
            cells.append(f"{s['percent_correct']:6.1f}% ({s['wrong']:3d} wrong) {s['seconds']*1000:6.0f}ms")
        print(f"{name:26s} " + " ".join(cells), flush=True)
    print(f"onnx-symdims total wrong dims: {total_wrong}")
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
