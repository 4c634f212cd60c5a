"""The body of ``onnx-symdims optimize`` (imported when the command runs).

Report schema (``"schema": "onnx-symdims.optimize-report/1"``; every key is always
present; the keys shared with ``infer``'s report have the same form)::

    schema        "onnx-symdims.optimize-report/1"
    tool          {"name": "onnx-symdims", "version": str}
    command       "optimize"
    model         {"path": str, "graph": str, "nodes": int, "opsets": {domain: int}}
                  (as loaded)
    options       {"fusions", "max_rounds", "max_constant_elements", "inexact_floats",
                   "symbol_ranges": {name: [lo | null, hi | null]} (with the sizes
                   --input-shape fixed), "input_shapes": {input: [int | str | null]},
                   "verify",
                   "verify_runs", "verify_sizes", "verify_bind", "save_as_external_data"}
    inputs        [{"name": str, "dtype": str | null, "shape": [int | str | null] | null}]
    outputs       same, after optimizing (dims in the model's own names)
    nodes         {"before": n, "after": n, "before_by_op": {op: n}, "after_by_op": {op: n}}
                  main-graph nodes
    rounds        int: rounds of the rewrite loop
    fired         {rule: n}: rewrites applied ("fusion.<name>" for fusions)
    declined      {"rule: reason": n}: why our rules left a node alone
    diagnostics   {"total", "by_severity", "by_op": {op: {"count", "severity",
                  "examples"}}}: of the final inference; the optimizer's own notes (a
                  fusion step undone) under "<optimize>"
    written       {"model": str | null, "external_data": str | null, "json": str | null}
    verify        null, or {"runs", "compared_outputs", "differences": [{"output",
                  "kind", "detail", "sizes", "max_abs"}], "errors": [str],
                  "relations": [str]}
    timings       {"load", "optimize", "save", "verify", "total"}: seconds (those that
                  ran; "total" is the whole command, imports included)
"""

from __future__ import annotations

__all__ = ["SCHEMA", "run_optimize"]

import argparse
import logging
import os
import sys
from collections import Counter
from typing import Any

import onnx_ir as ir

from onnx_symdims import __version__
from onnx_symdims._cli_infer import _example_model
from onnx_symdims._cli_report import diagnostic_lines, group_diagnostics, io_entries, io_lines
from onnx_symdims.cli import (
    CliError,
    Run,
    check_external_data,
    check_model_output_name,
    check_output_args,
    check_output_paths,
    check_weights_inside,
    check_weights_kept,
    model_symbols,
    parse_input_shapes,
    parse_ranges,
    require_onnxruntime,
    verify_options,
    wants_verify,
)

logger = logging.getLogger(__name__)

SCHEMA = "onnx-symdims.optimize-report/1"
_MAX_DECLINED = 3
_MAX_BY_OP = 16


def run_optimize(args: argparse.Namespace) -> int:
    """``onnx-symdims optimize``: see the command's ``--help``."""
    run = Run(quiet=args.quiet)
    if args.in_place and not args.model:
        raise CliError("-i/--in-place needs a MODEL (the bundled example stays as it is)", 2)
    args.symbol_ranges = parse_ranges(args.symbol_range)
    args.input_shapes = parse_input_shapes(args.input_shape)
    output = args.model if args.in_place else args.output
    check_output_args(args)
    check_model_output_name(output)
    check_output_paths(None if args.in_place else output, args.json)
    require_onnxruntime(args)
    if args.model:
        return _optimize_file(run, args, args.model, output)
    with _example_model() as path:
        run.say("no MODEL given: using the bundled example")
        return _optimize_file(run, args, path, output)


def _optimize_file(run: Run, args: argparse.Namespace, path: str, output: str | None) -> int:
    from onnx_symdims.rewrite import OptimizePass

    model = run.load(path)
    check_weights_kept(model, args)
    check_external_data(model, path)  # folding reads the weights; -o copies them
    check_weights_inside(model, path)
    inputs = model_symbols(model, inputs_only=True)
    for name in args.symbol_ranges:
        if name not in inputs:
            print(
                f"warning: --symbol-range {name}: no graph input of {path} uses {name!r} "
                f"(they use: {', '.join(sorted(inputs)) or 'none'})",
                file=sys.stderr,
            )
    _apply_input_shapes(args, model)
    verify = wants_verify(args)
    checked = verify_options(args, model) if verify else None  # before any write
    if checked is not None:
        # Outputs are promised for these sizes only (a fixed one is the only one the
        # optimized model accepts).
        checked["symbol_ranges"] = args.symbol_ranges
    original = None
    if verify:
        original = ir.serde.deserialize_model(ir.serde.serialize_model(model))
        # The copy's external weights are read from the model's folder, not the cwd.
        ir.external_data.set_base_dir(original.graph, os.path.dirname(os.path.abspath(path)))
    loaded = {
        "path": path,
        "graph": model.graph.name or "",
        "nodes": sum(1 for _ in model.graph),
        "opsets": dict(model.opset_imports),
    }
    try:
        with run.stage("optimize", "optimizing"):
            result = OptimizePass(
                fusions=args.fusions,
                max_rounds=args.max_rounds,
                exact_floats=not args.inexact_floats,
                max_constant_elements=args.max_constant_elements,
                symbol_ranges=args.symbol_ranges,
            )(model)
    except Exception as e:
        # A weight whose data does not fill its shape fails wherever a rule reads it;
        # name the weight (an internal error would blame the tool for the file).
        from onnx_symdims._modelio import unreadable_initializer

        broken = unreadable_initializer(model)
        if broken is None:
            raise
        raise CliError(f"{path}: {broken}") from e
    report = _report(loaded, args, result, model)
    if not run.quiet:
        _print_summary(report, result)
    if output:
        saved = run.save(model, output, args.save_as_external_data)
        report["written"]["model"] = saved.path
        report["written"]["external_data"] = saved.external_data
    status = 0
    if checked is not None:
        # Without fusions and --inexact-floats every float output must be bit for bit
        # the original's; fused kernels and folded float math round differently.
        exact = args.fusions is None and not args.inexact_floats
        try:
            status = _verify(run, original, model, checked, report, exact)
        except CliError:
            if args.json:  # the report says what was written and why verify failed
                run.write_json(report, args.json)
            raise
    if args.json:
        run.write_json(report, args.json)
    if not output:
        run.say(
            ("model not written" if args.json else "nothing written")
            + ": pass -o OUT.onnx to save the optimized model (or -i to update MODEL in place)"
        )
    timings = run.timings
    total = run.total()
    names = ("load", "optimize", "save", "verify")
    other = total - sum(timings.get(k, 0.0) for k in names)  # imports, summary, report
    stages = ", ".join(f"{k} {timings[k]:.3f}s" for k in names if k in timings)
    run.say(f"time: {total:.2f}s ({stages}; imports and the rest {other:.2f}s)")
    return status


def _apply_input_shapes(args: argparse.Namespace, model: ir.Model) -> None:
    """Writes ``--input-shape`` into ``model`` before anything else reads it.

    Unnamed dims get their given size or name in ``model`` itself (so ``--verify`` draws
    the original's inputs with them too); a size given for a declared name becomes the
    one-size range of that name.
    """
    from onnx_symdims.rewrite import InputShapeError, apply_input_shapes

    try:
        fixed = apply_input_shapes(model, args.input_shapes)
    except InputShapeError as e:
        raise CliError(f"--input-shape: {e}", 2) from e
    for name, size in fixed.items():
        lower, upper = args.symbol_ranges.get(name, (None, None))
        if (lower is not None and size < lower) or (upper is not None and size > upper):
            raise CliError(
                f"--input-shape gives {name} = {size}, outside --symbol-range "
                f"{name}={'' if lower is None else lower}:{'' if upper is None else upper}",
                2,
            )
        args.symbol_ranges[name] = (size, size)


def _report(
    loaded: dict[str, Any], args: argparse.Namespace, result, model: ir.Model
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tool": {"name": "onnx-symdims", "version": __version__},
        "command": "optimize",
        "model": loaded,
        "options": {
            "fusions": args.fusions,
            "max_rounds": args.max_rounds,
            "max_constant_elements": args.max_constant_elements,
            "inexact_floats": args.inexact_floats,
            "symbol_ranges": {k: list(v) for k, v in args.symbol_ranges.items()},
            "input_shapes": args.input_shapes,
            "verify": wants_verify(args),
            "verify_runs": args.verify_runs,
            "verify_sizes": list(args.verify_sizes),
            "verify_bind": list(args.verify_bind),
            "save_as_external_data": args.save_as_external_data,
        },
        "inputs": io_entries(model.graph.inputs),
        "outputs": io_entries(model.graph.outputs),
        "nodes": {
            "before": sum(result.before.values()),
            "after": sum(result.after.values()),
            "before_by_op": dict(sorted(result.before.items())),
            "after_by_op": dict(sorted(result.after.items())),
            "kept_float_math_on_weights": result.kept_float_nodes,
        },
        "rounds": result.rounds,
        "fired": dict(result.fired.most_common()),
        "declined": dict(result.declined.most_common()),
        "diagnostics": group_diagnostics(result.diagnostics),
        "written": {"model": None, "external_data": None, "json": None},
        "verify": None,
        "timings": {},
    }


def _print_summary(report: dict[str, Any], result) -> None:
    nodes = report["nodes"]
    before, after = nodes["before"], nodes["after"]
    lines = [f"model: {report['model']['path']}"]
    io_lines(lines, "inputs", report["inputs"])
    io_lines(lines, "outputs", report["outputs"])
    lines.append(
        f"nodes: {before} -> {after} ({after - before:+d}) in {result.rounds} "
        f"round{'s' * (result.rounds != 1)}, "
        f"{result.seconds:.2f}s"
    )
    changes = Counter(result.after)
    changes.subtract(result.before)
    changed = sorted((k for k, v in changes.items() if v), key=lambda k: (changes[k], k))
    if changed:
        # Every op that grew (the fused ops a --fusions run adds) and the largest drops.
        grown = [k for k in changed if changes[k] > 0]
        dropped = [k for k in changed if changes[k] < 0]
        shown = dropped[: max(_MAX_BY_OP - len(grown), 8)]
        words = [f"{k} {changes[k]:+d}" for k in shown]
        if len(shown) < len(dropped):
            words.append(f"... ({len(dropped) - len(shown)} more)")
        words += [f"{k} {changes[k]:+d}" for k in grown]
        lines.append("by op: " + ", ".join(words))
    kept = nodes["kept_float_math_on_weights"]
    if kept:
        # What peers that fold float math (onnxslim, onnxsim) remove and we keep.
        lines.append(
            f"kept bit for bit: {kept} node{'s' * (kept != 1)} of float math on weights "
            "alone (--inexact-floats folds them where onnxruntime can)"
        )
    fired = report["fired"]
    lines.append("rules fired: " + (", ".join(f"{k} {v}" for k, v in fired.items()) or "none"))
    declined = report["declined"]
    if declined:
        # Why a node was left alone: the first thing to read when a model stays big.
        lines.append(
            f"rules declined ({sum(declined.values())} checks, {len(declined)} reasons; "
            f'all in --json under "declined"), most often:'
        )
        lines.extend(
            f"  {n} x {reason}" for reason, n in list(declined.items())[:_MAX_DECLINED]
        )
    diagnostic_lines(lines, report["diagnostics"])
    print("\n".join(lines), flush=True)


def _verify(run: Run, original, model, options: dict[str, Any], report, exact: bool) -> int:
    try:
        from onnx_symdims.verify import VerifyError, compare_models
    except ImportError as e:
        raise CliError(
            "--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2
        ) from e
    from onnx_symdims import infer_symbolic_shapes

    try:
        with run.stage("verify", "comparing outputs in onnxruntime"):
            infer_symbolic_shapes(original)  # relations are read from either model's dims
            compared = compare_models(
                original,
                model,
                runs=options["runs"],
                sizes=options["sizes"],
                equalities=options["equalities"],
                symbol_ranges=options["symbol_ranges"],
                **({"rtol": 0.0, "atol": 0.0} if exact else {}),
            )
    except ImportError as e:
        raise CliError(
            "--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2
        ) from e
    except VerifyError as e:
        report["verify"] = {
            "runs": 0,
            "compared_outputs": 0,
            "differences": [],
            "errors": [str(e)],
            "relations": [],
        }
        raise CliError(f"{report['model']['path']}: {e}") from e
    report["verify"] = {
        "runs": compared.runs,
        "compared_outputs": compared.compared_outputs,
        "differences": [
            {
                "output": d.output,
                "kind": d.kind,
                "detail": d.detail,
                "sizes": dict(d.binding),
                "max_abs": d.max_abs,
            }
            for d in compared.differences
        ],
        "errors": list(compared.errors),
        "relations": list(compared.relations),
    }
    for relation in compared.relations:
        run.say(f"verify: sizes follow {relation}")
    run.say(
        f"verify: {compared.runs} onnxruntime runs, {compared.compared_outputs} outputs "
        f"compared, {len(compared.differences)} differences"
    )
    for difference in compared.differences[:20]:
        print(f"  DIFFERENCE {difference}")
    if len(compared.differences) > 20:
        print(f"  ... {len(compared.differences) - 20} more differences (see --json)")
    if compared.differences:
        return 1
    if not compared.runs:
        for error in compared.errors[:3]:
            print(f"  run failed: {error[:300]}", file=sys.stderr)
        print(
            "error: verify: no onnxruntime run of the original succeeded, nothing was "
            "compared; give sizes that run with --verify-sizes NAME=V,... or relate "
            "inputs with --verify-bind NAME=EXPR",
            file=sys.stderr,
        )
        return 1
    return 0
