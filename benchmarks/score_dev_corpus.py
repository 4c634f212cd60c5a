"""Scores onnx-symdims (and optionally the peers) on the dev corpus with its own scorer.

Usage::

    python benchmarks/score_dev_corpus.py [--corpus ../shared/dev_corpus] [--peers] [--only NAME]
    python benchmarks/score_dev_corpus.py --committed [--peers]

Prints, per model, the percentage of correct dims and the number of wrong dims for each
tool, using the corpus's ``score.py`` (imported, not copied).

The dev corpus (17 exported and hand-written models, each with a ``truth.json`` of real
sizes under three bindings) is not part of this repository: it is the project's
``shared/dev_corpus`` folder, laid beside the repository checkout (``../shared``), and is
rebuilt from scratch by its own ``build_dev_corpus.py`` (torch and transformers, tiny
configs, no download). Without it (or with ``--committed``) the script scores the models
this repository commits instead: ``tests/data/*.onnx``, ``tests/data/ort_tools/*.onnx`` and
the bundled decoder, against their ``*.truth.json`` (same format, made by
``tools/build_models.py`` / ``tools/build_ort_tool_models.py`` from onnxruntime runs), with a
small scorer of the same rules (below, :func:`score_committed`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "dev_corpus"))
#: Committed models with a ``<name>.truth.json`` beside them (or, for the bundled
#: decoder, in tests/data).
COMMITTED = [
    os.path.join(ROOT, "tests", "data"),
    os.path.join(ROOT, "tests", "data", "ort_tools"),
]
BUNDLED = os.path.join(ROOT, "onnx_symdims", "data", "tiny_decoder.onnx")


def load_scorer(corpus: str):
    spec = importlib.util.spec_from_file_location(
        "dev_corpus_score", os.path.join(corpus, "score.py")
    )
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


# --- the committed models: a scorer of the same rules ----------------------------------


def committed_models() -> dict[str, tuple[str, str]]:
    """``name -> (model path, truth path)`` of every committed model with a truth file."""
    found: dict[str, tuple[str, str]] = {}
    for folder in COMMITTED:
        for entry in sorted(os.listdir(folder)):
            if entry.endswith(".truth.json"):
                stem = entry.removesuffix(".truth.json")
                model = os.path.join(folder, stem + ".onnx")
                if stem == "tiny_decoder":
                    model = BUNDLED
                if os.path.exists(model):
                    found[stem] = (model, os.path.join(folder, entry))
    return found


def _declared_dims(model: onnx.ModelProto) -> dict[str, list | None]:
    """Value name -> its dims (int, text or None each), or None for no shape."""
    out: dict[str, list | None] = {}
    graph = model.graph
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if not info.type.HasField("tensor_type") or not tensor.HasField("shape"):
            out.setdefault(info.name, None)
            continue
        out[info.name] = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        ]
    return out


def score_committed(truth: dict, inferred: onnx.ModelProto) -> dict:
    """Classifies every true dim as correct, wrong or unknown (the corpus scorer's rules).

    An int is correct when it is the true size under every binding. A text is parsed by
    ``onnx_symdims.expr`` (every dialect the corpus scorer reads: ``/`` exact, ``//``,
    ``Max``, ``floor``, ``CeilToInt``, ``broadcast``, ...); if it uses only the bindings'
    symbols it is correct when it evaluates to the true size under every binding, wrong
    otherwise (an evaluation error included). A text with other names is opaque: unknown,
    but all dims with the same opaque text must have the same sizes, so those that differ
    from the text's most common sizes are wrong. A rank that differs makes every true dim
    of that value wrong; no shape or an empty dim is unknown.
    """
    from onnx_symdims import expr

    bindings = truth["bindings"]
    symbols = set().union(*(b.keys() for b in bindings))
    declared = _declared_dims(inferred)
    counts = {"correct": 0, "wrong": 0, "unknown": 0}
    wrong_values: set[str] = set()
    opaque: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for name, shapes in truth["shapes"].items():
        rank = len(shapes[0])
        dims = declared.get(name)
        if dims is None:
            counts["unknown"] += rank
            continue
        if len(dims) != rank:
            counts["wrong"] += rank
            wrong_values.add(name)
            continue
        for axis, dim in enumerate(dims):
            sizes = tuple(shape[axis] for shape in shapes)
            if dim is None:
                counts["unknown"] += 1
            elif isinstance(dim, int):
                ok = all(size == dim for size in sizes)
                counts["correct" if ok else "wrong"] += 1
                if not ok:
                    wrong_values.add(name)
            else:
                verdict = _text_verdict(expr, dim, sizes, bindings, symbols)
                if verdict == "opaque":
                    opaque.setdefault(dim, []).append((name, sizes))
                else:
                    counts[verdict] += 1
                    if verdict == "wrong":
                        wrong_values.add(name)
    for uses in opaque.values():
        common = max({s for _, s in uses}, key=lambda s: sum(1 for _, t in uses if t == s))
        for name, sizes in uses:
            if sizes == common:
                counts["unknown"] += 1
            else:
                counts["wrong"] += 1
                wrong_values.add(name)
    total = sum(counts.values())
    return {
        **counts,
        "percent_correct": 100.0 * counts["correct"] / total if total else 100.0,
        "wrong_values": sorted(wrong_values),
    }


def _text_verdict(expr, text: str, sizes, bindings, symbols) -> str:
    try:
        parsed = expr.parse_expr(text)
    except (expr.ExprError, ArithmeticError, OverflowError):
        return "unknown" if not set(re.findall(r"[A-Za-z_]\w*", text)) <= symbols else "wrong"
    if isinstance(parsed, int):
        return "correct" if all(size == parsed for size in sizes) else "wrong"
    if parsed.is_unknown or not parsed.symbols() <= symbols:
        return "opaque"
    try:
        values = [expr.evaluate(parsed, binding) for binding in bindings]
    except (expr.ExprError, ArithmeticError):
        return "wrong"
    return "correct" if tuple(values) == sizes else "wrong"


def score_committed_model(model_path: str, truth_path: str, tool) -> dict:
    model = onnx.load(model_path, load_external_data=False)
    with open(truth_path) as f:
        truth = json.load(f)
    t0 = time.perf_counter()
    try:
        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)  # ORT's tool may write files into the working directory
            try:
                inferred = tool(model)
            finally:
                os.chdir(cwd)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    elapsed = time.perf_counter() - t0
    summary = score_committed(truth, inferred)
    summary["seconds"] = elapsed
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        default=DEFAULT_CORPUS,
        help="the dev corpus folder (default: ../shared/dev_corpus beside the repository)",
    )
    parser.add_argument(
        "--committed",
        action="store_true",
        help="score the models this repository commits (the default without a corpus)",
    )
    parser.add_argument("--peers", action="store_true", help="also score the peer tools")
    parser.add_argument("--only", action="append", help="score only these models")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    tools = TOOLS if args.peers else {"onnx-symdims": TOOLS["onnx-symdims"]}
    have_corpus = os.path.exists(os.path.join(args.corpus, "score.py"))
    if args.committed or not have_corpus:
        if not args.committed:
            print(
                f"no dev corpus at {args.corpus} (it is the project's shared/dev_corpus, "
                "beside the repository; rebuilt by its build_dev_corpus.py): scoring the "
                "committed models (tests/data, the bundled decoder) instead",
                file=sys.stderr,
            )
        models = committed_models()
        names = args.only or sorted(models)
        unknown = sorted(set(names) - set(models))
        if unknown:
            parser.error(f"no committed model {', '.join(unknown)}")
        return _print_table(
            names, tools, lambda name, tool: score_committed_model(*models[name], tool)
        )
    scorer = load_scorer(args.corpus)
    names = args.only or model_names(args.corpus)
    return _print_table(
        names, tools, lambda name, tool: score_model(scorer, args.corpus, name, tool)
    )


def _print_table(names, tools, score) -> int:
    print(f"{'model':26s} " + " ".join(f"{t:>26s}" for t in tools))
    total_wrong = 0
    for name in names:
        cells = []
        for tool_name, tool in tools.items():
            s = score(name, tool)
            if "error" in s:
                cells.append(f"{'crash':>26s}")
                print(f"  {tool_name} on {name}: {s['error']}", file=sys.stderr)
                continue
            if tool_name == "onnx-symdims":
                total_wrong += s["wrong"]
                if s["wrong"]:
                    print(f"  wrong values: {s['wrong_values'][:10]}", file=sys.stderr)
            cells.append(
                f"{s['percent_correct']:6.1f}% ({s['wrong']:3d} wrong) {s['seconds'] * 1000:6.0f}ms"
            )
        print(f"{name:26s} " + " ".join(cells), flush=True)
    print(f"onnx-symdims total wrong dims: {total_wrong}")
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
