"""Command line: ``onnx-symdims infer`` and ``onnx-symdims simplify``.

``onnx-symdims infer [MODEL] [-o OUT] [--json REPORT] [--strict] [--policy P]
[--assume-nonempty] [--verify [N]] [--verify-bind NAME=EXPR]`` infers shapes, prints a
summary, optionally writes the model and a JSON report, and with ``--verify`` checks
every inferred dim against onnxruntime (exit code 1 on a mismatch; ``--verify-bind``
relates input symbols the random runs must respect, e.g. ``total=past+seq``). Without ``MODEL`` it runs on the bundled example, a tiny
exported decoder with a KV cache.

``onnx-symdims simplify EXPR`` prints the canonical form of a dim expression.
"""

from __future__ import annotations

__all__ = ["main", "summarize"]

import argparse
import collections
import contextlib
import importlib.resources
import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.passes import (
    POLICIES,
    AnchorConstraintPropagationPass,
    SymbolicShapeInferencePass,
)
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext

logger = logging.getLogger(__name__)

#: Models with more nodes than this show a progress indicator on stderr.
PROGRESS_THRESHOLD = 2000
EXAMPLE_MODEL = "tiny_decoder.onnx"


def _all_values(model: ir.Model) -> Iterator[ir.Value]:
    graphs = [model.graph, *model.graph.subgraphs()]
    for graph in graphs:
        for node in graph:
            yield from (v for v in node.outputs if v.name)


def summarize(model: ir.Model, ctx: ShapesContext, seconds: float) -> dict[str, Any]:
    """The summary of an inference run as a JSON-compatible dict.

    Dims are counted over every node output of every graph: ``int``, ``symbolic``
    (only names the model declares), ``fresh`` (containing a symbol the engine minted:
    a data-dependent or otherwise unknown size); values without a shape count as
    ``unknown_rank``.
    """
    counts = collections.Counter()
    generated = ctx.generated_symbols
    fresh_used: set[str] = set()
    for value in _all_values(model):
        counts["values"] += 1
        shape = value.shape
        if shape is None:
            counts["unknown_rank"] += 1
            continue
        for d in shape.dims:
            if isinstance(d, int):
                counts["int"] += 1
            elif not d.value:
                counts["fresh"] += 1
            else:
                parsed = expr.parse_dim(d.value)
                symbols = parsed.symbols() if isinstance(parsed, expr.DimExpr) else frozenset()
                if symbols & generated:
                    counts["fresh"] += 1
                    fresh_used |= symbols & generated
                else:
                    counts["symbolic"] += 1
    by_op: dict[str, dict[str, Any]] = {}
    for diagnostic in ctx.diagnostics:
        op = (
            f"{diagnostic.domain}::{diagnostic.op_type}"
            if diagnostic.domain
            else diagnostic.op_type
        )
        entry = by_op.setdefault(op or "<graph>", {"count": 0, "severity": {}, "examples": []})
        entry["count"] += 1
        entry["severity"][diagnostic.severity] = (
            entry["severity"].get(diagnostic.severity, 0) + 1
        )
        if len(entry["examples"]) < 3:
            entry["examples"].append(str(diagnostic))
    return {
        "model": model.graph.name or "",
        "nodes": sum(1 for _ in model.graph),
        "seconds": round(seconds, 4),
        "values": counts["values"],
        "dims": {
            "int": counts["int"],
            "symbolic": counts["symbolic"],
            "fresh": counts["fresh"],
        },
        "unknown_rank_values": counts["unknown_rank"],
        "fresh_symbols": sorted(fresh_used),
        "fresh_symbols_minted": len(generated),
        "constraints": [list(pair) for pair in ctx.constraints()],
        "bounds": [list(pair) for pair in ctx.less_equal_constraints()],
        "diagnostics": by_op,
    }


def _examples(names: Sequence[str], limit: int = 6) -> str:
    if not names:
        return ""
    more = ", ..." if len(names) > limit else ""
    return f" ({', '.join(names[:limit])}{more})"


def _print_summary(summary: dict[str, Any]) -> None:
    dims = summary["dims"]
    lines = [
        f"nodes: {summary['nodes']}   values: {summary['values']}   time: {summary['seconds']:.3f}s",
        (
            f"dims: {dims['int']} int, {dims['symbolic']} symbolic, {dims['fresh']} fresh"
            f" (unknown)   values with unknown rank: {summary['unknown_rank_values']}"
        ),
        f"fresh symbols: {len(summary['fresh_symbols'])} used{_examples(summary['fresh_symbols'])}",
        f"constraints: {len(summary['constraints'])}   bounds: {len(summary['bounds'])}",
    ]
    lines.extend(f"  {a} == {b}" for a, b in summary["constraints"][:10])
    lines.extend(f"  {a} <= {b}" for a, b in summary["bounds"][:10])
    diagnostics = summary["diagnostics"]
    total = sum(entry["count"] for entry in diagnostics.values())
    lines.append(f"diagnostics: {total}")
    for op, entry in sorted(diagnostics.items(), key=lambda item: -item[1]["count"]):
        severities = ", ".join(f"{n} {s}" for s, n in sorted(entry["severity"].items()))
        lines.append(f"  {op}: {severities}")
        lines.extend(f"    {example}" for example in entry["examples"][:2])
    print("\n".join(lines))


@contextlib.contextmanager
def _example_model() -> Iterator[str]:
    resource = importlib.resources.files("onnx_symdims") / "data" / EXAMPLE_MODEL
    with importlib.resources.as_file(resource) as path:
        if not path.exists():
            raise FileNotFoundError(f"the bundled example {EXAMPLE_MODEL} is not installed")
        yield str(path)


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rinferring shapes: {done}/{total} nodes")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _run_infer(args: argparse.Namespace, path: str) -> int:
    model = ir.load(path)
    node_count = sum(1 for _ in model.graph)
    progress = _progress if node_count > PROGRESS_THRESHOLD and sys.stderr.isatty() else None
    ctx = ShapesContext()
    inference = SymbolicShapeInferencePass(
        args.policy,
        strict=args.strict,
        context=ctx,
        progress=progress,
        nonempty_inputs=args.assume_nonempty,
    )
    start = time.perf_counter()
    try:
        inference(model)
    except ShapeInferenceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    anchor_lines: list[str] = []
    if not args.no_anchors:
        try:
            propagation = AnchorConstraintPropagationPass(ctx, strict=args.strict)(model)
        except ShapeInferenceError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        anchor_lines = propagation.summary_lines()
    summary = summarize(model, ctx, time.perf_counter() - start)
    summary["model"] = path
    summary["anchor_propagation"] = anchor_lines
    _print_summary(summary)
    for line in anchor_lines:
        print(line)
    if args.output:
        ir.save(model, args.output)
        print(f"wrote {args.output}")
    status = 0
    if args.verify:
        try:
            relations = [_relation(text) for text in args.verify_bind]
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        status = _run_verify(model, args.verify, summary, [*relations, *ctx.constraint_dims()])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
        print(f"wrote {args.json}")
    return status


def _relation(text: str) -> tuple[expr.Dim, expr.Dim]:
    """``NAME=EXPR`` (e.g. ``total_seq=past_seq+seq``) as an equality of dims."""
    name, sep, definition = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--verify-bind expects NAME=EXPR, got {text!r}")
    try:
        return expr.sym(name.strip()), expr.parse_expr(definition)
    except (expr.ExprError, ArithmeticError, OverflowError) as e:
        raise ValueError(f"--verify-bind {text!r}: {e}") from e


def _run_verify(
    model: ir.Model,
    runs: int,
    summary: dict[str, Any],
    equalities: list[tuple[expr.Dim, expr.Dim]],
) -> int:
    try:
        from onnx_symdims.verify import verify_model

        report = verify_model(model, runs=runs, equalities=equalities)
        if not report.runs:
            hints = _broadcast_hints(model)
            if hints:
                print(
                    "verify: no run succeeded; retrying with the input sizes that the "
                    "broadcast terms suggest: "
                    + ", ".join(f"{expr.to_onnx(a)}={expr.to_onnx(b)}" for a, b in hints)
                )
                report = verify_model(model, runs=runs, equalities=[*equalities, *hints])
    except ImportError:
        print("error: --verify needs onnxruntime (pip install onnxruntime)", file=sys.stderr)
        return 2
    summary["verify"] = {
        "runs": report.runs,
        "checked_dims": report.checked_dims,
        "unchecked_dims": report.unchecked_dims,
        "mismatches": [str(m) for m in report.mismatches],
        "errors": report.errors,
    }
    print(
        f"verify: {report.runs} onnxruntime runs, {report.checked_dims} dims checked, "
        f"{report.unchecked_dims} not evaluable, {len(report.mismatches)} mismatches"
    )
    for error in report.errors[:5]:
        print(f"  run failed: {error[:300]}")
    for mismatch in report.mismatches[:50]:
        print(f"  MISMATCH {mismatch}")
    if report.mismatches:
        return 1
    if not report.runs:
        print(
            "verify: no onnxruntime run succeeded, nothing was checked; if input sizes are "
            "related, say how with --verify-bind NAME=EXPR (e.g. total=past+seq)"
        )
        return 1
    return 0


def _broadcast_hints(model: ir.Model) -> list[tuple[expr.Dim, expr.Dim]]:
    """Pairs ``(s, e)`` from ``broadcast(s, e)`` terms, ``s`` a graph-input symbol.

    A run generally needs the two sides equal (one of them being 1 is the exception), so
    they are good candidates for related input sizes. Only used to draw verify inputs.
    """
    inputs: set[str] = set()
    for value in model.graph.inputs:
        for d in value.shape.dims if value.shape is not None else ():
            if not isinstance(d, int) and d.value:
                parsed = expr.parse_dim(d.value)
                if isinstance(parsed, expr.DimExpr) and parsed.is_symbol:
                    inputs.add(parsed.name)  # type: ignore[arg-type]
    hints: dict[str, expr.Dim] = {}
    for node in model.graph:
        for value in node.outputs:
            for d in value.shape.dims if value.shape is not None else ():
                if isinstance(d, int) or not d.value or "broadcast(" not in d.value:
                    continue
                parsed = expr.parse_dim(d.value)
                for mono, _ in parsed.terms if isinstance(parsed, expr.DimExpr) else ():
                    for atom in mono:
                        if atom.kind != "b" or len(atom.args) != 2:
                            continue
                        a, b = atom.args
                        for s, other in ((a, b), (b, a)):
                            name = s.name if isinstance(s, expr.DimExpr) else None
                            if name in inputs and name not in hints:
                                hints[name] = other
    return [(expr.sym(name), other) for name, other in hints.items()]


def _cmd_infer(args: argparse.Namespace) -> int:
    if args.model:
        return _run_infer(args, args.model)
    try:
        with _example_model() as path:
            print(f"no MODEL given: using the bundled example {EXAMPLE_MODEL}")
            return _run_infer(args, path)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _cmd_simplify(args: argparse.Namespace) -> int:
    try:
        print(expr.to_onnx(expr.parse_expr(args.expr)))
    except (expr.ExprError, ArithmeticError, OverflowError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnx-symdims", description="Sound symbolic shape inference for ONNX models."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    infer = sub.add_parser("infer", help="infer the shapes of a model and summarize them")
    infer.add_argument("model", nargs="?", help="the .onnx file (default: a bundled example)")
    infer.add_argument("-o", "--output", help="write the inferred model here")
    infer.add_argument("--json", metavar="REPORT", help="write the summary as JSON here")
    infer.add_argument(
        "--no-anchors",
        action="store_true",
        help="skip the anchor-constraint propagation pass (keep engine-made symbol names)",
    )
    infer.add_argument("--strict", action="store_true", help="fail on the first error")
    infer.add_argument(
        "--policy", choices=POLICIES, default="refine", help="declared vs inferred"
    )
    infer.add_argument(
        "--assume-nonempty",
        action="store_true",
        help="assume every graph-input dim is >= 1 (more exact dims; not valid for empty inputs)",
    )
    infer.add_argument(
        "--verify",
        nargs="?",
        type=int,
        const=3,
        default=0,
        metavar="N",
        help="check every dim against N onnxruntime runs (default 3)",
    )
    infer.add_argument(
        "--verify-bind",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="relate input symbols for --verify, e.g. total_seq=past_seq+seq (repeatable)",
    )
    infer.set_defaults(func=_cmd_infer)
    simplify = sub.add_parser("simplify", help="print the canonical form of a dim expression")
    simplify.add_argument("expr", help="e.g. '(a + b) - a'")
    simplify.set_defaults(func=_cmd_simplify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``onnx-symdims`` command."""
    args = _parser().parse_args(argv)
    return args.func(args)
