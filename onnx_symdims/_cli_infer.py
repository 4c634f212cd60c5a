"""The body of ``onnx-symdims infer`` (imported when the command runs)."""

from __future__ import annotations

__all__ = ["run_infer", "run_verify"]

import argparse
import contextlib
import importlib.resources
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir

from onnx_symdims._cli_report import build_report, print_summary
from onnx_symdims.cli import (
    EXAMPLE_MODEL,
    CliError,
    Run,
    check_external_data,
    check_model_output_name,
    check_output_args,
    check_output_paths,
    check_weights_inside,
    check_weights_kept,
    model_symbols,
    parse_ranges,
    require_onnxruntime,
    verify_options,
    wants_verify,
)
from onnx_symdims.passes import AnchorConstraintPropagationPass, SymbolicShapeInferencePass
from onnx_symdims.shapes import ShapeInferenceError, ShapesContext

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _example_model() -> Iterator[str]:
    resource = importlib.resources.files("onnx_symdims") / "data" / EXAMPLE_MODEL
    with importlib.resources.as_file(resource) as path:
        if not path.exists():
            raise CliError(f"the bundled example {EXAMPLE_MODEL} is not installed", 2)
        yield str(path)


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rinferring shapes: {done}/{total} nodes")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run_infer(args: argparse.Namespace) -> int:
    """``onnx-symdims infer``: see the command's ``--help``."""
    run = Run(quiet=args.quiet)
    if args.in_place and not args.model:
        raise CliError("-i/--in-place needs a MODEL (the bundled example stays as it is)", 2)
    ranges = parse_ranges(args.symbol_range)
    if args.assume_nonempty:
        empty = sorted(name for name, (_, upper) in ranges.items() if upper == 0)
        if empty:  # both assumptions at once hold in no run: inference would prove anything
            raise CliError(
                f"--assume-nonempty (every input size >= 1) contradicts --symbol-range "
                f"{empty[0]}, which allows only size 0",
                2,
            )
    output = args.model if args.in_place else args.output
    check_output_args(args)
    check_model_output_name(output)
    check_output_paths(None if args.in_place else output, args.json)
    require_onnxruntime(args)
    if args.model:
        return _infer_file(run, args, args.model, output, ranges)
    with _example_model() as path:
        run.say(f"no MODEL given: using the bundled example {EXAMPLE_MODEL}")
        return _infer_file(run, args, path, output, ranges)


def _options(args: argparse.Namespace, ranges: dict) -> dict[str, Any]:
    return {
        "policy": args.policy,
        "strict": args.strict,
        "anchors": not args.no_anchors,
        "assume_nonempty": args.assume_nonempty,
        "symbol_ranges": {k: list(v) for k, v in ranges.items()},
        "value_info_anchors": args.value_info_anchors,
        "constant_initializers": args.constant_initializers,
        "verify": wants_verify(args),
        "verify_runs": args.verify_runs,
        "verify_sizes": list(args.verify_sizes),
        "verify_bind": list(args.verify_bind),
        "save_as_external_data": args.save_as_external_data,
    }


def _infer_file(
    run: Run, args: argparse.Namespace, path: str, output: str | None, ranges: dict
) -> int:
    model = run.load(path)
    check_weights_kept(model, args)
    verify = wants_verify(args)
    # Inference reads no weights; onnxruntime does, and so does a save that copies them.
    here = os.path.dirname(os.path.abspath(path))
    elsewhere = output and os.path.dirname(os.path.abspath(output)) != here
    copies = output and (args.save_as_external_data or elsewhere)
    if verify or copies:
        check_external_data(model, path)
    if verify or output:
        check_weights_inside(model, path)
    checked_verify = verify_options(args, model) if verify else None  # before any write
    declared = model_symbols(model)
    for name in ranges:
        if name not in declared:
            print(
                f"warning: --symbol-range {name}: no declared dim of {path} uses {name!r} "
                f"(the inputs use: {', '.join(sorted(model_symbols(model, True))) or 'none'})",
                file=sys.stderr,
            )
    ctx = ShapesContext()
    tty = sys.stderr.isatty() and not run.quiet
    inference = SymbolicShapeInferencePass(
        args.policy,
        strict=args.strict,
        context=ctx,
        progress=_progress if run.big and tty else None,
        nonempty_inputs=args.assume_nonempty,
        symbol_ranges=ranges,
        value_info_anchors=args.value_info_anchors,
        constant_initializers=args.constant_initializers,
    )
    renames: dict[str, str] = {}
    implied: list[str] = []
    try:
        with run.stage("inference", None if tty else "inferring shapes"):
            result = inference(model)
        if not args.no_anchors:
            with run.stage("anchors"):
                propagation = AnchorConstraintPropagationPass(
                    ctx, strict=args.strict, snapshot=result.snapshot
                )(model)
            renames, implied = propagation.renames, propagation.implied_equalities
    except ShapeInferenceError as e:
        raise CliError(f"{path}: {e}") from e
    report = build_report(
        model,
        ctx,
        path=path,
        options=_options(args, ranges),
        renames=renames,
        implied_equalities=implied,
    )
    if not run.quiet:
        print_summary(report)
    if output:
        saved = run.save(model, output, args.save_as_external_data)
        report["written"]["model"] = saved.path
        report["written"]["external_data"] = saved.external_data
    status = 0
    if checked_verify is not None:
        symbol_ranges = dict(ranges)
        if args.assume_nonempty:
            for name in model_symbols(model, inputs_only=True):
                lower, upper = symbol_ranges.get(name, (None, None))
                symbol_ranges[name] = (max(lower or 0, 1), upper)
        try:
            status = run_verify(
                run, model, report, checked_verify, ctx.constraint_dims(), symbol_ranges
            )
        except CliError:
            if args.json:  # the report says what was written and why verify failed
                run.write_json(report, args.json)
            raise
    if args.json:
        run.write_json(report, args.json)
    if not output:
        run.say(
            "nothing written: pass -o OUT.onnx to save the inferred model "
            "(or -i to update MODEL in place)"
        )
    timings = run.timings
    total = run.total()
    names = ("load", "inference", "anchors", "save", "verify")
    other = total - sum(timings.get(k, 0.0) for k in names)  # imports, summary, report
    stages = ", ".join(f"{k} {timings[k]:.3f}s" for k in names if k in timings)
    run.say(f"time: {total:.2f}s ({stages}; imports and the rest {other:.2f}s)")
    return status


def run_verify(
    run: Run,
    model: ir.Model,
    report: dict[str, Any],
    options: dict[str, Any],
    proven: list,
    symbol_ranges: dict,
) -> int:
    """``--verify`` of inferred dims: prints the result, fills ``report["verify"]``."""
    try:
        from onnx_symdims.verify import VerifyError, verify_model
    except ImportError as e:
        raise CliError(
            "--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2
        ) from e
    try:
        with run.stage("verify", "verifying with onnxruntime"):
            result = verify_model(
                model,
                runs=options["runs"],
                bindings=options["sizes"],
                equalities=[*options["equalities"], *proven],
                symbol_ranges=symbol_ranges,
                edges=True,
            )
    except ImportError as e:
        raise CliError(
            "--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2
        ) from e
    except VerifyError as e:
        report["verify"] = {
            "runs": 0,
            "checked_dims": 0,
            "unchecked_dims": 0,
            "mismatches": [],
            "errors": [str(e)],
            "relations": [],
            "edges": [],
            "departures": [],
        }
        raise CliError(f"{report['model']['path']}: {e}") from e
    report["verify"] = {
        "runs": result.runs,
        "checked_dims": result.checked_dims,
        "unchecked_dims": result.unchecked_dims,
        "mismatches": [str(m) for m in result.mismatches],
        "errors": result.errors,
        "relations": result.relations,
        "edges": [
            {"label": e.label, "sizes": dict(e.binding), "error": e.error}
            for e in result.edges
        ],
        "departures": result.departures,
    }
    for relation in result.relations:
        run.say(f"verify: sizes follow {relation}")
    ran = [e.label for e in result.edges if not e.error and not e.departure]
    refused = [e.label for e in result.edges if e.error]
    departed = [e.label for e in result.edges if e.departure]
    if result.edges:
        run.say(
            f"verify: edge sizes run: {', '.join(ran) or 'none'}"
            + (f"; refused by onnxruntime: {', '.join(refused)}" if refused else "")
            + (
                f"; not judged (onnxruntime runs what the spec calls invalid): "
                f"{', '.join(departed)}"
                if departed
                else ""
            )
        )
    for departure in result.departures[:3]:
        run.say(f"verify: not judged: {departure}")
    run.say(
        f"verify: {result.runs} onnxruntime runs, {result.checked_dims} dims checked, "
        f"{result.unchecked_dims} not evaluable, {len(result.mismatches)} mismatches"
    )
    for mismatch in result.mismatches[:50]:
        print(f"  MISMATCH {mismatch}")
    if result.mismatches:
        return 1
    if not result.runs:
        for error in result.errors[:3]:
            print(f"  run failed: {error[:300]}", file=sys.stderr)
        print(
            "error: verify: no onnxruntime run succeeded, nothing was checked; give sizes "
            "that run with --verify-sizes NAME=V,... or relate inputs with --verify-bind "
            "NAME=EXPR",
            file=sys.stderr,
        )
        return 1
    if result.errors and not result.relations:
        run.say(f"verify: {len(result.errors)} size draws refused by onnxruntime (skipped)")
    return 0
