"""The body of ``onnx-symdims optimize`` (imported when the command runs)."""

from __future__ import annotations

__all__ = ["run_optimize"]

import argparse
import logging
import sys
from collections import Counter
from typing import Any

import onnx_ir as ir

from onnx_symdims import __version__
from onnx_symdims._cli_infer import _example_model
from onnx_symdims.cli import CliError, Run, check_output_paths, verify_options, wants_verify

logger = logging.getLogger(__name__)


def run_optimize(args: argparse.Namespace) -> int:
    """``onnx-symdims optimize``: see the command's ``--help``."""
    run = Run(quiet=args.quiet)
    if args.in_place and not args.model:
        raise CliError("-i/--in-place needs a MODEL (the bundled example stays as it is)", 2)
    output = args.model if args.in_place else args.output
    check_output_paths(None if args.in_place else output, args.json)
    if args.model:
        return _optimize_file(run, args, args.model, output)
    with _example_model() as path:
        run.say("no MODEL given: using the bundled example")
        return _optimize_file(run, args, path, output)


def _optimize_file(run: Run, args: argparse.Namespace, path: str, output: str | None) -> int:
    from onnx_symdims.rewrite import OptimizePass

    model = run.load(path)
    verify = wants_verify(args)
    checked = verify_options(args, model) if verify else None  # before any write
    original = ir.serde.deserialize_model(ir.serde.serialize_model(model)) if verify else None
    with run.stage("optimize", "optimizing"):
        result = OptimizePass(fusions=args.fusions, max_rounds=args.max_rounds)(model)
    report = _report(path, args, result)
    if not run.quiet:
        _print_summary(report, result)
    if output:
        saved = run.save(model, output, args.save_as_external_data)
        report["written"]["model"] = saved.path
        report["written"]["external_data"] = saved.external_data
    status = 0
    if checked is not None:
        status = _verify(run, original, model, checked, report)
    if args.json:
        run.write_json(report, args.json)
    if not output:
        run.say("nothing written: pass -o OUT.onnx to save the optimized model (or -i)")
    total = run.total()
    stages = ", ".join(
        f"{k} {run.timings[k]:.3f}s" for k in ("load", "optimize", "save", "verify")
        if k in run.timings
    )
    run.say(f"time: {total:.2f}s ({stages})")
    return status


def _report(path: str, args: argparse.Namespace, result) -> dict[str, Any]:
    return {
        "schema": "onnx-symdims.optimize-report/1",
        "tool": {"name": "onnx-symdims", "version": __version__},
        "model": {"path": path},
        "options": {"fusions": args.fusions, "max_rounds": args.max_rounds},
        "nodes": {
            "before": sum(result.before.values()),
            "after": sum(result.after.values()),
            "before_by_op": dict(sorted(result.before.items())),
            "after_by_op": dict(sorted(result.after.items())),
        },
        "rounds": result.rounds,
        "fired": dict(result.fired.most_common()),
        "declined": dict(result.declined.most_common()),
        "diagnostics": [str(d) for d in result.diagnostics],
        "written": {},
    }


def _print_summary(report: dict[str, Any], result) -> None:
    nodes = report["nodes"]
    before, after = nodes["before"], nodes["after"]
    print(f"model: {report['model']['path']}")
    print(
        f"nodes: {before} -> {after} ({after - before:+d}) in {result.rounds} rounds, "
        f"{result.seconds:.2f}s"
    )
    changes = Counter(result.after)
    changes.subtract(result.before)
    changed = sorted((k for k, v in changes.items() if v), key=lambda k: (changes[k], k))
    if changed:
        print("by op: " + ", ".join(f"{k} {changes[k]:+d}" for k in changed[:16]))
    if result.fired:
        print("rules fired: " + ", ".join(f"{k} {v}" for k, v in result.fired.most_common()))
    for diagnostic in report["diagnostics"][:10]:
        print(f"  {diagnostic}")


def _verify(run: Run, original, model, options: dict[str, Any], report) -> int:
    try:
        from onnx_symdims.verify import VerifyError, compare_models
    except ImportError as e:
        raise CliError(
            "--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2
        ) from e
    from onnx_symdims import infer_symbolic_shapes

    infer_symbolic_shapes(original)  # relations are read from the dims of either model
    try:
        with run.stage("verify", "comparing outputs in onnxruntime"):
            compared = compare_models(
                original,
                model,
                runs=options["runs"],
                sizes=options["sizes"],
                equalities=options["equalities"],
            )
    except VerifyError as e:
        raise CliError(f"{report['model']['path']}: {e}") from e
    report["verify"] = {
        "runs": compared.runs,
        "compared_outputs": compared.compared_outputs,
        "differences": [str(d) for d in compared.differences],
        "errors": list(compared.errors),
    }
    run.say(
        f"verify: {compared.runs} onnxruntime runs, {compared.compared_outputs} outputs "
        f"compared, {len(compared.differences)} differences"
    )
    for difference in compared.differences[:20]:
        print(f"  DIFFERENCE {difference}")
    if compared.differences:
        return 1
    if not compared.runs:
        print(
            "error: verify: no onnxruntime run of the original succeeded, nothing was "
            "compared; give sizes with --verify-sizes NAME=V,...",
            file=sys.stderr,
        )
        return 1
    return 0
