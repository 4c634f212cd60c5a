"""The ``infer`` summary: built once as a JSON-compatible report, printed from it.

Report schema (``"schema": "onnx-symdims.report/1"``; every key is always present)::

    schema        "onnx-symdims.report/1"
    tool          {"name": "onnx-symdims", "version": str}
    command       "infer"
    model         {"path": str, "graph": str, "nodes": int, "opsets": {domain: int}}
    options       {option: value}: the command line options that shaped the result
    inputs        [{"name": str, "dtype": str | null, "shape": [int | str | null] | null}]
    outputs       same as inputs (after inference); a null dim is unknown
    values        int: node outputs counted (all graphs)
    dims          {"int": n, "symbolic": n, "fresh": n}: dims of those values; "fresh"
                  ones contain a symbol the engine minted (a size it could not express
                  in the model's own names)
    unknown_rank_values  int
    fresh_symbols [{"name", "first_value", "op", "node", "lower", "upper",
                    "upper_bounds": [str]}]: minted symbols still in the model
    constraints   [{"lhs": str, "rhs": str}]: equalities inference proved
    bounds        [{"lhs": str, "rhs": str}]: proven lhs <= rhs
    renames       [{"from": str, "to": str}]: minted symbols renamed to model names
    implied_equalities  [str]
    diagnostics   {"total": n, "by_severity": {severity: n},
                   "by_op": {op: {"count", "severity": {s: n}, "examples": [str]}}}
    written       {"model": str | null, "external_data": str | null, "json": str | null}
    verify        null, or {"runs", "checked_dims", "unchecked_dims", "mismatches": [str],
                  "errors": [str], "relations": [str], "edges": [{"label", "sizes",
                  "error"}], "departures": [str]}
    timings       {"load", "inference", "anchors", "save", "verify", "total"}: seconds
"""

from __future__ import annotations

__all__ = [
    "SCHEMA",
    "build_report",
    "diagnostic_lines",
    "group_diagnostics",
    "io_entries",
    "io_lines",
    "print_summary",
    "shape_text",
]

import collections
import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import onnx_ir as ir

from onnx_symdims import __version__, expr
from onnx_symdims.shapes import Diagnostic, ShapesContext

logger = logging.getLogger(__name__)

SCHEMA = "onnx-symdims.report/1"
_MAX_LISTED = 10


def _all_values(model: ir.Model) -> Iterator[tuple[ir.Node, ir.Value]]:
    for graph in (model.graph, *model.graph.subgraphs()):
        for node in graph:
            for value in node.outputs:
                if value.name:
                    yield node, value


def _dims_json(shape: ir.Shape | None) -> list[int | str | None] | None:
    if shape is None:
        return None
    return [d if isinstance(d, int) else (d.value or None) for d in shape.dims]


def shape_text(entry: dict[str, Any]) -> str:
    """``float[batch, seq_len]`` for an ``inputs`` / ``outputs`` entry of the report."""
    dtype = (entry["dtype"] or "?").lower()
    if entry["shape"] is None:
        return f"{dtype}[?] (unknown rank)"
    dims = ", ".join("?" if d is None else str(d) for d in entry["shape"])
    return f"{dtype}[{dims}]"


def io_entries(values: Sequence[ir.Value]) -> list[dict[str, Any]]:
    """The ``inputs`` / ``outputs`` entries of a report: name, dtype and dims of each value."""
    return [
        {
            "name": v.name,
            "dtype": v.dtype.name if v.dtype is not None else None,
            "shape": _dims_json(v.shape),
        }
        for v in values
    ]


def build_report(
    model: ir.Model,
    ctx: ShapesContext,
    *,
    path: str,
    options: dict[str, Any],
    renames: dict[str, str] | None = None,
    implied_equalities: Sequence[str] = (),
) -> dict[str, Any]:
    """The report of an inference run (``written``, ``verify``, ``timings`` left empty)."""
    counts: collections.Counter[str] = collections.Counter()
    generated = ctx.generated_symbols
    first_seen: dict[str, tuple[str, str, str]] = {}
    parsed_cache: dict[str, frozenset[str]] = {}
    for node, value in _all_values(model):
        counts["values"] += 1
        shape = value.shape
        if shape is None:
            counts["unknown_rank"] += 1
            continue
        for d in shape.dims:
            if isinstance(d, int):
                counts["int"] += 1
                continue
            if not d.value:
                counts["fresh"] += 1
                continue
            fresh = parsed_cache.get(d.value)
            if fresh is None:
                parsed = expr.parse_dim(d.value)
                symbols = parsed.symbols() if isinstance(parsed, expr.DimExpr) else frozenset()
                fresh = parsed_cache[d.value] = symbols & generated
            if fresh:
                counts["fresh"] += 1
                for name in fresh:
                    first_seen.setdefault(name, (value.name, node.op_type, node.name or ""))
            else:
                counts["symbolic"] += 1
    upper: dict[str, list[str]] = collections.defaultdict(list)
    for lhs, rhs in ctx.less_equal_constraints():
        upper[lhs].append(rhs)
    fresh_symbols = []
    for name in sorted(first_seen):
        lower, high = ctx.scope.bounds(expr.sym(name))
        value_name, op, node_name = first_seen[name]
        fresh_symbols.append(
            {
                "name": name,
                "first_value": value_name,
                "op": op,
                "node": node_name,
                "lower": lower,
                "upper": high,
                "upper_bounds": upper.get(name, []),
            }
        )
    return {
        "schema": SCHEMA,
        "tool": {"name": "onnx-symdims", "version": __version__},
        "command": "infer",
        "model": {
            "path": path,
            "graph": model.graph.name or "",
            "nodes": sum(1 for _ in model.graph),
            "opsets": dict(model.opset_imports),
        },
        "options": options,
        "inputs": io_entries(model.graph.inputs),
        "outputs": io_entries(model.graph.outputs),
        "values": counts["values"],
        "dims": {
            "int": counts["int"],
            "symbolic": counts["symbolic"],
            "fresh": counts["fresh"],
        },
        "unknown_rank_values": counts["unknown_rank"],
        "fresh_symbols": fresh_symbols,
        "constraints": [{"lhs": a, "rhs": b} for a, b in ctx.constraints()],
        "bounds": [{"lhs": a, "rhs": b} for a, b in ctx.less_equal_constraints()],
        "renames": [{"from": k, "to": v} for k, v in (renames or {}).items()],
        "implied_equalities": list(implied_equalities),
        "diagnostics": group_diagnostics(ctx.diagnostics),
        "written": {"model": None, "external_data": None, "json": None},
        "verify": None,
        "timings": {},
    }


def group_diagnostics(diagnostics: Iterable[Diagnostic | str]) -> dict[str, Any]:
    """The ``diagnostics`` entry of a report: counts by severity, by op with examples.

    A plain string (the optimizer's own notes, such as a fusion step that was undone) is
    counted as a ``warning`` of ``"<optimize>"``.
    """
    by_op: dict[str, dict[str, Any]] = {}
    by_severity: collections.Counter[str] = collections.Counter()
    for diagnostic in diagnostics:
        if isinstance(diagnostic, str):
            op, severity = "<optimize>", "warning"
        else:
            op = (
                f"{diagnostic.domain}::{diagnostic.op_type}"
                if diagnostic.domain
                else diagnostic.op_type
            ) or "<graph>"
            severity = diagnostic.severity
        entry = by_op.setdefault(op, {"count": 0, "severity": {}, "examples": []})
        entry["count"] += 1
        entry["severity"][severity] = entry["severity"].get(severity, 0) + 1
        by_severity[severity] += 1
        if len(entry["examples"]) < 3:
            entry["examples"].append(str(diagnostic))
    return {
        "total": sum(by_severity.values()),
        "by_severity": dict(by_severity),
        "by_op": by_op,
    }


def _listed(lines: list[str], items: Sequence[str], indent: str = "  ") -> None:
    lines.extend(indent + item for item in items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        lines.append(f"{indent}... {len(items) - _MAX_LISTED} more (see --json)")


def io_lines(lines: list[str], title: str, entries: list[dict[str, Any]]) -> None:
    """Appends ``title (n):`` and one ``name  dtype[dims]`` line per entry to ``lines``."""
    lines.append(f"{title} ({len(entries)}):")
    width = min(max((len(e["name"]) for e in entries), default=0), 32)
    _listed(lines, [f"{e['name']:<{width}}  {shape_text(e)}" for e in entries])


def print_summary(report: dict[str, Any], file=None) -> None:
    """Prints the inference part of ``report``: shapes, dims, symbols, diagnostics."""
    file = file or sys.stdout
    model = report["model"]
    lines = [f"model: {model['path']}   {model['nodes']} nodes, {report['values']} values"]
    io_lines(lines, "inputs", report["inputs"])
    io_lines(lines, "outputs", report["outputs"])
    dims = report["dims"]
    rank = report["unknown_rank_values"]
    lines.append(
        f"dims: {dims['int']} resolved (int), {dims['symbolic']} symbolic, "
        f"{dims['fresh']} fresh; {rank} value{'s' * (rank != 1)} of unknown rank"
    )
    fresh = report["fresh_symbols"]
    if fresh:
        lines.append(
            f"fresh symbols ({len(fresh)}), sizes inference could not name from the inputs:"
        )
        items = []
        for f in fresh:
            bound = []
            if (f["lower"] or 0) > 0 or f["upper"] is not None:
                lo = f"{f['lower']} <= " if (f["lower"] or 0) > 0 else ""
                hi = "" if f["upper"] is None else f" <= {f['upper']}"
                bound.append(f"{lo}{f['name']}{hi}")
            bound += [f"{f['name']} <= {b}" for b in f["upper_bounds"]]
            node = f"node {f['node']!r}, " if f["node"] else ""
            where = f"from {f['op']} ({node}value {f['first_value']!r})"
            items.append(f"{f['name']}: {where}" + (f"; {', '.join(bound)}" if bound else ""))
        _listed(lines, items)
    else:
        lines.append("fresh symbols: none (every dim is an int or uses the model's names)")
    listed = {f["name"] for f in fresh}
    bounds = [b for b in report["bounds"] if b["lhs"] not in listed]  # not twice
    for title, entries, fmt in (
        ("constraints (proven equalities)", report["constraints"], "{lhs} == {rhs}"),
        ("bounds", bounds, "{lhs} <= {rhs}"),
        ("renames (minted symbol -> model name)", report["renames"], "{from} -> {to}"),
    ):
        if entries:
            lines.append(f"{title} ({len(entries)}):")
            _listed(lines, [fmt.format(**e) for e in entries])
    if report["implied_equalities"]:
        lines.append(f"implied equalities ({len(report['implied_equalities'])}):")
        _listed(lines, report["implied_equalities"])
    diagnostic_lines(lines, report["diagnostics"])
    print("\n".join(lines), file=file)


def diagnostic_lines(lines: list[str], diagnostics: dict[str, Any]) -> None:
    """Appends the ``diagnostics`` entry of a report, grouped by op, to ``lines``."""
    if not diagnostics["total"]:
        lines.append("diagnostics: none")
        return
    severities = ", ".join(f"{n} {s}" for s, n in sorted(diagnostics["by_severity"].items()))
    lines.append(f"diagnostics ({diagnostics['total']}: {severities}), by op:")
    ordered = sorted(diagnostics["by_op"].items(), key=lambda item: -item[1]["count"])
    for op, entry in ordered[:_MAX_LISTED]:
        lines.append(f"  {op}: {entry['count']}")
        lines.extend(f"    {example}" for example in entry["examples"][:2])
    if len(ordered) > _MAX_LISTED:
        lines.append(f"  ... {len(ordered) - _MAX_LISTED} more ops (see --json)")
