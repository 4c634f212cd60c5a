"""Command line: ``onnx-symdims infer``, ``optimize`` and ``simplify``.

``onnx-symdims infer [MODEL] [-o OUT | -i] [--json REPORT] [--verify] ...`` infers
shapes, prints a summary (inputs and outputs with their shapes, dim counts, fresh
symbols, constraints, diagnostics by op), optionally writes the model and a JSON report
(schema in :mod:`onnx_symdims._cli_report`), and with ``--verify`` checks every inferred
dim against onnxruntime. Without ``MODEL`` it runs on the bundled example, a tiny
exported decoder with a KV cache.

``onnx-symdims optimize [MODEL] [-o OUT | -i] [--fusions ort|onnx] [--json R] [--verify]``
optimizes with proven shapes (:func:`onnx_symdims.optimize`), prints node counts before
and after by op type, the time and the rules fired, and with ``--verify`` runs the
original and the optimized model in onnxruntime on the same inputs (sizes that satisfy
the model's relations, empty caches and seq 1 included) and fails on any difference.

``onnx-symdims simplify EXPR`` prints the canonical form of a dim expression.

Every failure is one line on stderr (``error: FILE: cause``) and a non-zero exit code;
a traceback only with ``--debug`` or ``ONNX_SYMDIMS_DEBUG=1``. Exit codes: 0 success,
1 the model failed (cannot load or save, strict error, verify mismatch or nothing
verified), 2 bad usage, 3 internal error.

The heavy imports (onnx-ir, onnx, numpy) happen inside the commands, so ``--help`` and
``simplify`` answer at once. The helpers a command needs (:class:`Run` for loading,
saving, timings and progress; :func:`add_output_args`, :func:`add_verify_args`,
:func:`verify_options`) are shared, so another model command is a parser and a body.
"""

from __future__ import annotations

__all__ = [
    "CliError",
    "Run",
    "add_output_args",
    "add_verify_args",
    "check_output_args",
    "check_weights_inside",
    "check_weights_kept",
    "main",
    "verify_options",
    "wants_verify",
]

import argparse
import contextlib
import gc
import importlib.util
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from onnx_symdims import __version__

if TYPE_CHECKING:
    import onnx_ir as ir

    from onnx_symdims import expr
    from onnx_symdims._modelio import SaveResult

logger = logging.getLogger(__name__)

#: Models with more nodes than this (or model files larger than BIG_FILE bytes) show
#: progress on stderr.
PROGRESS_THRESHOLD = 2000
BIG_FILE = 50 * 2**20
EXAMPLE_MODEL = "tiny_decoder.onnx"
DEBUG_ENV = "ONNX_SYMDIMS_DEBUG"
#: When :func:`main` started: printed times cover imports, load, inference, save, verify.
_started_at: float | None = None


class _WarningLines(logging.Handler):
    """Prints each library warning as one ``warning: ...`` line on stderr.

    Without it logging's last-resort handler printed onnx-ir's and onnxscript's warnings
    bare and whole (``Input 'Q' of node 'a' (::Add:) cannot be found in any scope...``,
    ``Evaluation failed: ...``), and Python warnings came with a source line.
    """

    def __init__(self, debug: bool) -> None:
        super().__init__(logging.WARNING)
        self.debug = debug

    def emit(self, record: logging.LogRecord) -> None:
        # The optimizer's notes are also diagnostics, which the summary prints once.
        if not self.debug and record.name.startswith("onnx_symdims.rewrite"):
            return
        from onnx_symdims._modelio import one_line

        try:
            text = one_line(record.getMessage(), 300)
        except Exception:  # a library's bad format arguments must not end the run
            text = one_line(str(record.msg), 300)
        sys.stderr.write(f"warning: {text}\n")

    def show_warning(self, message, category, filename, lineno, file=None, line=None):
        """``warnings.showwarning`` on one line: category, message, where."""
        if self.level > logging.WARNING:
            return
        from onnx_symdims._modelio import one_line

        where = f"{os.path.basename(filename)}:{lineno}"
        text = one_line(f"{category.__name__}: {message}", 300)
        sys.stderr.write(f"warning: {text} ({where})\n")


#: The handler of the running :func:`main` (``-q`` raises its level to errors only).
_warning_lines: _WarningLines | None = None


class CliError(Exception):
    """A failure reported as one line ``error: <message>`` with exit ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------------------
# Shared helpers of model commands
# ----------------------------------------------------------------------------------------
class Run:
    """One command run: timings, quiet output, progress, and model I/O with one-line errors.

    Args:
        quiet: Print nothing but errors and mismatches.
    """

    def __init__(self, quiet: bool = False) -> None:
        self.start = _started_at if _started_at is not None else time.perf_counter()
        self.quiet = quiet
        if quiet and _warning_lines is not None:
            _warning_lines.setLevel(logging.ERROR)  # -q: errors only
        self.timings: dict[str, float] = {}
        self.big = False

    def say(self, text: str) -> None:
        """Prints ``text`` on stdout unless quiet."""
        if not self.quiet:
            print(text, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str, label: str | None = None) -> Iterator[None]:
        """Times a stage into ``timings[name]``; on big models says so on stderr."""
        shown = self.big and not self.quiet and label is not None
        if shown:
            sys.stderr.write(f"{label}...")
            sys.stderr.flush()
        # Loading and saving build or walk millions of small objects and free none: the
        # cyclic collector would scan them again and again (ir.load of a 100k-node
        # model: 6.9 s with it, 2.4 s without).
        paused = name in ("load", "save") and gc.isenabled()
        if paused:
            gc.disable()
        begin = time.perf_counter()
        try:
            yield
        finally:
            if paused:
                gc.enable()
            seconds = time.perf_counter() - begin
            self.timings[name] = round(self.timings.get(name, 0.0) + seconds, 4)
            if shown:
                sys.stderr.write(f" {seconds:.2f}s\n")
                sys.stderr.flush()

    def total(self) -> float:
        """Seconds since the run started; also stored as ``timings["total"]``."""
        self.timings["total"] = round(time.perf_counter() - self.start, 4)
        return self.timings["total"]

    def load(self, path: str) -> ir.Model:
        """Loads ``path``; a :class:`CliError` naming the file and the cause on failure."""
        from onnx_symdims._modelio import ModelLoadError, load_model

        with contextlib.suppress(OSError):
            self.big = os.path.getsize(path) > BIG_FILE
        try:
            with self.stage("load", f"loading {path}"):
                model = load_model(path)
        except ModelLoadError as e:
            raise CliError(str(e)) from e
        self.big = self.big or sum(1 for _ in model.graph) > PROGRESS_THRESHOLD
        return model

    def save(self, model: ir.Model, path: str, external_data: str | None = None) -> SaveResult:
        """Saves ``model`` (external weights next to it when needed) and says what it wrote."""
        from onnx_symdims._modelio import ModelSaveError, save_model

        try:
            with self.stage("save", f"saving {path}"):
                result = save_model(model, path, external_data=external_data)
        except ModelSaveError as e:
            raise CliError(str(e)) from e
        self.say(f"wrote {result.path}" + (f" ({result.note})" if result.note else ""))
        return result

    def write_json(self, report: dict[str, Any], path: str) -> None:
        """Writes the JSON report (timings completed first)."""
        report.setdefault("written", {})["json"] = path
        report["timings"] = {**self.timings, "total": self.total()}
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2)
        except OSError as e:
            raise CliError(f"{path}: cannot write the report: {e.strerror or e}") from e
        self.say(f"wrote {path}")


def check_output_paths(*paths: str | None) -> None:
    """Fails before any work when an output cannot be created."""
    from onnx_symdims._modelio import ModelSaveError, check_writable

    for path in paths:
        if path:
            try:
                check_writable(path)
            except ModelSaveError as e:
                raise CliError(str(e)) from e


#: Suffixes ``onnx.load`` reads as another format than the binary protobuf the commands write.
_OTHER_FORMAT_SUFFIXES = {
    ".json": "JSON",
    ".onnxjson": "JSON",
    ".textproto": "text protobuf",
    ".prototxt": "text protobuf",
    ".pbtxt": "text protobuf",
    ".onnxtxt": "ONNX text",
    ".onnxtext": "ONNX text",
}


def check_model_output_name(path: str | None) -> None:
    """Fails when the model would be written under a name onnx reads as another format."""
    if not path:
        return
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _OTHER_FORMAT_SUFFIXES:
        raise CliError(
            f"{path}: the model is written as binary ONNX, but onnx.load reads a {suffix!r} "
            f"file as {_OTHER_FORMAT_SUFFIXES[suffix]}: name it .onnx (the report is "
            "--json REPORT)",
            2,
        )


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links, case-insensitive file systems
    except OSError:
        return False


def _data_file(output: str | None, external_data: str | None) -> str | None:
    """Where ``--save-as-external-data`` writes: next to the model output."""
    if not output or not external_data:
        return None
    return os.path.join(os.path.dirname(os.path.abspath(output)), external_data)


def check_output_args(args: argparse.Namespace) -> None:
    """Fails (exit 2) before any work when two files the command writes are one file.

    ``--json`` equal to ``MODEL`` or to ``-o`` wrote the report over the model, and
    ``--save-as-external-data MODEL`` wrote the weights over the input: each run lost
    a file. ``-o MODEL`` stays allowed (it is ``-i``, written to a temporary file and
    renamed). An empty name used to write nothing and exit 0; ``-`` made a file named
    ``-``: the commands write no model or report to stdout.
    """
    given = (
        ("-o/--output", args.output),
        ("--json", args.json),
        ("--save-as-external-data", args.save_as_external_data),
    )
    for flag, value in given:
        if value is not None and not value.strip():
            raise CliError(f"{flag}: an empty file name", 2)
        if value == "-":
            raise CliError(
                f"{flag} -: writing to stdout is not supported, give a file name", 2
            )
    output = args.model if args.in_place else args.output
    if args.save_as_external_data and not output:
        raise CliError("--save-as-external-data needs -o OUT or -i (nothing is written)", 2)
    if output and args.save_as_external_data:
        from onnx_symdims._modelio import bad_data_name

        out_dir = os.path.dirname(os.path.abspath(output))
        if bad := bad_data_name(out_dir, args.save_as_external_data):
            # Exit 1 as before (the save failed, after the work): now before it.
            raise CliError(f"--save-as-external-data: {bad}")
    data = _data_file(output, args.save_as_external_data)
    model = (f"the input model {args.model}", args.model)
    out = (f"the model output {output}", output)
    report = (f"the report (--json {args.json})", args.json)
    weights = (f"the weights file (--save-as-external-data, {data})", data)
    for (what, path), (other, other_path) in (
        (report, model),
        (report, out),
        (weights, model),
        (weights, out),
        (weights, report),
    ):
        if path and other_path and _same_file(path, other_path):
            raise CliError(f"{what} would overwrite {other}: give another name", 2)


def check_weights_kept(model: ir.Model, args: argparse.Namespace) -> None:
    """Fails (exit 2) when an output would overwrite a weights file ``model`` reads.

    ``--json m.onnx.data`` or ``-o m.onnx.data`` replaced the input's external weights.
    ``--save-as-external-data`` naming that file is fine: the save keeps it as it is.
    """
    import onnx_ir as ir

    from onnx_symdims._modelio import weights_file

    output = args.model if args.in_place else args.output
    written = None
    if output and args.json:
        written = weights_file(model, output, args.save_as_external_data)
    if written and _same_file(args.json, written):
        # Written after the model: the report replaced the weights just copied next to
        # the output (OUT.data), and the model no longer loaded.
        raise CliError(
            f"the report (--json {args.json}) would overwrite the weights file written "
            f"with the model output ({written}): give another name",
            2,
        )
    targets = [("the model output", output), ("the report (--json)", args.json)]
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if not isinstance(tensor, ir.ExternalTensor):
                continue
            weights = os.path.join(str(tensor.base_dir), tensor.location)
            for what, path in targets:
                if path and _same_file(path, weights):
                    raise CliError(
                        f"{what} {path} would overwrite the weights file of "
                        f"{args.model} (initializer {value.name!r}): give another name",
                        2,
                    )


def check_external_data(model: ir.Model, path: str) -> None:
    """Fails, naming the data file, when a weight of ``model`` points at a missing file.

    Loading reads no weights, so a model whose ``.data`` file was left behind loads; the
    commands that read or copy the weights call this first (without it the failure came
    late, as an internal error or as ``OUT: no such file`` about the output).
    """
    import onnx_ir as ir

    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if not isinstance(tensor, ir.ExternalTensor):
                continue
            data = os.path.join(str(tensor.base_dir), tensor.location)
            if not os.path.isfile(data):
                raise CliError(
                    f"{path}: its external weights file {data} does not exist (initializer "
                    f"{value.name!r}): put the data file back next to the model as "
                    f"{tensor.location!r}"
                )
            try:
                end = (tensor.offset or 0) + (tensor.length or tensor.nbytes)
            except Exception:  # no byte size for the dtype (strings): onnx-ir decides
                continue
            if os.path.getsize(data) < end:
                # Failed later naming the output ("b/o.onnx: External data file ... is
                # shorter than expected") or inside onnxruntime.
                raise CliError(
                    f"{path}: its external weights file {data} is truncated: initializer "
                    f"{value.name!r} needs bytes up to {end}, the file has "
                    f"{os.path.getsize(data)}"
                )


def check_weights_inside(model: ir.Model, path: str) -> None:
    """Fails (exit 1) before any work when a weight lies outside the model's directory.

    Called when the command writes a model or runs onnxruntime: neither can use weights
    at ``../w.bin`` (onnxruntime refuses the path, onnx-ir will not read it to copy
    them), and the written model kept that location.
    """
    from onnx_symdims._modelio import outside_weights

    if (outside := outside_weights(model)) is not None:
        raise CliError(f"{path}: {outside}")


def add_output_args(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``-o/--output``, ``-i/--in-place``, ``--save-as-external-data``, ``--json``."""
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("-o", "--output", metavar="OUT", help="write the resulting model here")
    where.add_argument(
        "-i", "--in-place", action="store_true", help="overwrite MODEL with the result"
    )
    parser.add_argument(
        "--save-as-external-data",
        metavar="FILE",
        help="write the weights to FILE next to the output (a name relative to the "
        "output's directory that stays inside it, e.g. w.data or weights/w.data); by "
        "default external weights stay where they are, or are written to OUT.data when "
        "the output goes to another directory",
    )
    parser.add_argument("--json", metavar="REPORT", help="write a JSON report here")


def add_verify_args(parser: argparse.ArgumentParser, what: str = "every inferred dim") -> None:
    """``--verify``, ``--verify-runs``, ``--verify-sizes``, ``--verify-bind``."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help=f"check {what} against onnxruntime runs (needs onnxruntime: "
        "pip install 'onnx-symdims[verify]'); also --verify=N",
    )
    parser.add_argument(
        "--verify-runs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="random size draws for --verify (default 3; edge sizes are added; "
        "implies --verify)",
    )
    parser.add_argument(
        "--verify-sizes",
        action="append",
        default=[],
        metavar="NAME=V,...",
        help="also run with these input sizes, e.g. batch=1,seq_len=1,past_seq_len=0 "
        "(repeatable; implies --verify)",
    )
    parser.add_argument(
        "--verify-bind",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help="relate input sizes for --verify, e.g. total_seq_len=past_seq_len+seq_len "
        "(repeatable; implies --verify; usually found without it)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text!r}")
    return value


def _name_list(names: Sequence[str] | set[str]) -> str:
    names = sorted(names)
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else "none"


def parse_sizes(texts: Sequence[str]) -> list[dict[str, int]]:
    """``--verify-sizes`` values: ``"a=1,b=2"`` each, as assignments."""
    out = []
    for text in texts:
        sizes: dict[str, int] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, sep, value = item.partition("=")
            if not sep or not name.strip() or not value.strip().isdigit():
                raise CliError(
                    f"--verify-sizes expects NAME=SIZE,... with sizes >= 0, got {text!r}", 2
                )
            sizes[name.strip()] = int(value)
        if not sizes:
            raise CliError(f"--verify-sizes expects NAME=SIZE,..., got {text!r}", 2)
        out.append(sizes)
    return out


def parse_relations(texts: Sequence[str]) -> list[tuple[expr.Dim, expr.Dim]]:
    """``--verify-bind`` values ``NAME=EXPR`` as equalities of dims."""
    from onnx_symdims import expr

    out = []
    for text in texts:
        name, sep, definition = text.partition("=")
        if not sep or not name.strip() or not definition.strip():
            raise CliError(f"--verify-bind expects NAME=EXPR, got {text!r}", 2)
        try:
            out.append((expr.sym(name.strip()), expr.parse_expr(definition)))
        except (expr.ExprError, ArithmeticError) as e:
            raise CliError(f"--verify-bind {text!r}: {e}", 2) from e
    return out


def parse_ranges(texts: Sequence[str]) -> dict[str, tuple[int | None, int | None]]:
    """``--symbol-range NAME=LO:HI`` values (either end may be empty)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for text in texts:
        name, sep, bounds = text.partition("=")
        lo, colon, hi = bounds.partition(":")
        try:
            lower = int(lo) if lo.strip() else None
            upper = int(hi) if hi.strip() else None
        except ValueError:
            lower = upper = -1
        if (
            not sep
            or not colon
            or not name.strip()
            or (lower is not None and lower < 0)
            or (upper is not None and (upper < 0 or (lower is not None and upper < lower)))
        ):
            raise CliError(
                f"--symbol-range expects NAME=LO:HI with 0 <= LO <= HI (either may be "
                f"empty), got {text!r}",
                2,
            )
        if name.strip() in out:  # the last one silently won
            raise CliError(f"--symbol-range {name.strip()} is given twice", 2)
        out[name.strip()] = (lower, upper)
    return out


def parse_input_shapes(texts: Sequence[str]) -> dict[str, list[int | str | None]]:
    """``--input-shape NAME=D,D,...`` values: each ``D`` a size, a symbol name or ``?``."""
    out: dict[str, list[int | str | None]] = {}
    for text in texts:
        name, sep, dims = text.rpartition("=")  # the dims hold no "=", a name may
        if not sep or not name:
            raise CliError(
                f"--input-shape expects NAME=D,D,... (each D a size, a name or ?), got {text!r}",
                2,
            )
        parts = [d.strip() for d in dims.split(",")] if dims.strip() else []
        if name in out:  # the last one silently won
            raise CliError(f"--input-shape {name} is given twice", 2)
        out[name] = [int(d) if d.isdigit() else (None if d in ("", "?") else d) for d in parts]
    return out


def model_symbols(model: ir.Model, inputs_only: bool = False) -> set[str]:
    """Symbols of the declared dims (graph inputs, or inputs, outputs and value_info)."""
    from onnx_symdims import expr

    graph = model.graph
    values = list(graph.inputs)
    if not inputs_only:
        values += [*graph.outputs, *(v for n in graph for v in n.outputs)]
    names: set[str] = set()
    for value in values:
        for d in value.shape.dims if value.shape is not None else ():
            if not isinstance(d, int) and d.value:
                parsed = expr.parse_dim(d.value)
                if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
                    names |= parsed.symbols()
    return names


def wants_verify(args: argparse.Namespace) -> bool:
    """``--verify``, or ``--verify-runs``/``--verify-sizes``/``--verify-bind`` (imply it)."""
    return bool(args.verify or args.verify_sizes or args.verify_bind)


def require_onnxruntime(args: argparse.Namespace) -> None:
    """Fails before any work when ``--verify`` is asked for without onnxruntime."""
    if wants_verify(args) and importlib.util.find_spec("onnxruntime") is None:
        raise CliError("--verify needs onnxruntime: pip install 'onnx-symdims[verify]'", 2)


def verify_options(args: argparse.Namespace, model: ir.Model) -> dict[str, Any]:
    """The checked ``--verify-*`` values, as keywords of ``verify_model``/``compare_models``.

    Call before writing anything: a bad value is a :class:`CliError` (exit 2).
    """
    sizes = parse_sizes(args.verify_sizes)
    if args.verify_runs == 0 and not sizes:
        # No draw and no given size: no run at all, which failed after the work as "no
        # onnxruntime run succeeded ... give sizes that run", blaming the model.
        raise CliError(
            "--verify-runs 0 draws no sizes and no --verify-sizes is given: nothing would "
            "be checked (give sizes with --verify-sizes NAME=V,... or a count >= 1)",
            2,
        )
    relations = parse_relations(args.verify_bind)
    inputs = model_symbols(model, inputs_only=True)
    for assignment in sizes:
        unknown = sorted(set(assignment) - inputs)
        if unknown:
            raise CliError(
                f"--verify-sizes: {', '.join(unknown)} is not a symbol of the graph inputs "
                f"(they use: {_name_list(inputs)})",
                2,
            )
    ranges = getattr(args, "symbol_ranges", None)  # optimize: with --input-shape's sizes
    if ranges is None:
        ranges = parse_ranges(args.symbol_range)
    nonempty = getattr(args, "assume_nonempty", False)
    for assignment in sizes:
        for name, size in assignment.items():
            lower, upper = ranges.get(name, (None, None))
            if nonempty:
                lower = max(lower or 0, 1)
            if (lower is not None and size < lower) or (upper is not None and size > upper):
                # Written dims are promised inside the ranges only: a run outside them
                # would report a mismatch that is no error.
                raise CliError(
                    f"--verify-sizes {name}={size} is outside the sizes assumed for it "
                    f"({'' if lower is None else lower}..{'' if upper is None else upper}, "
                    "from --symbol-range, --input-shape or --assume-nonempty)",
                    2,
                )
    for name, _ in relations:
        if name.name not in inputs:  # type: ignore[union-attr]
            raise CliError(
                f"--verify-bind: {name.name} is not a symbol of the graph inputs "  # type: ignore[union-attr]
                f"(they use: {_name_list(inputs)})",
                2,
            )
    return {"runs": args.verify_runs, "sizes": sizes, "equalities": relations}


# ----------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------
def _cmd_infer(args: argparse.Namespace) -> int:
    from onnx_symdims import _cli_infer

    return _cli_infer.run_infer(args)


def _cmd_optimize(args: argparse.Namespace) -> int:
    from onnx_symdims import _cli_optimize

    return _cli_optimize.run_optimize(args)


#: Why ``simplify`` has no canonical form to print, by ``DimExpr.unknown_reason``.
_UNKNOWN_REASONS = {
    "size": "its canonical form exceeds the expression size limits",
    "overflow": "a number in its canonical form is outside int64",
}


def _cmd_simplify(args: argparse.Namespace) -> int:
    from onnx_symdims import expr

    try:
        dim = expr.parse_expr(args.expr)
        reason = getattr(dim, "unknown_reason", None)
        if reason is not None:
            # The canonical form outgrew the engine's limits (17 distinct factors, a
            # product of sums; a coefficient past int64): it was "cannot print an
            # unknown (size)".
            why = _UNKNOWN_REASONS.get(reason, f"the expression engine gave up ({reason})")
            raise CliError(f"cannot simplify {args.expr!r}: {why}", 2)
        print(expr.to_onnx(dim))
    except (expr.ExprError, ArithmeticError) as e:
        raise CliError(str(e), 2) from e
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors, like every other failure."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="onnx-symdims",
        description="Sound symbolic shape inference for ONNX models.",
        epilog="exit codes: 0 success, 1 the model failed (load, save, strict, verify), "
        f"2 bad usage, 3 internal error. {DEBUG_ENV}=1 or --debug shows tracebacks.",
    )
    parser.add_argument("--version", action="version", version=f"onnx-symdims {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    infer = sub.add_parser(
        "infer",
        help="infer the shapes of a model and summarize them",
        description="Infer a symbolic shape for every value of MODEL and print a summary. "
        "Nothing is written without -o/-i/--json.",
        epilog="example: onnx-symdims infer model.onnx -o out.onnx --json report.json "
        "--verify",
    )
    infer.add_argument("model", nargs="?", help="the .onnx file (default: a bundled example)")
    add_output_args(infer)
    _add_debug(infer)
    infer.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    infer.add_argument(
        "--policy",
        choices=("refine", "strict", "override", "skip"),
        default="refine",
        help="declared vs inferred shapes of intermediate values: refine (default) keeps "
        "declared dims and adds inferred ones; strict fails on a conflict; override "
        "writes inferred shapes over declared ones; skip leaves shaped values alone",
    )
    infer.add_argument(
        "--strict", action="store_true", help="fail (exit 1) on the first error diagnostic"
    )
    infer.add_argument(
        "--symbol-range",
        action="append",
        default=[],
        metavar="NAME=LO:HI",
        help="a known range of a symbol, e.g. seq_len=1: or batch=1:64 (repeatable); "
        "written dims then hold for sizes in the range",
    )
    infer.add_argument(
        "--assume-nonempty",
        action="store_true",
        help="assume every graph-input dim is >= 1, past_seq_len included (simpler dims; "
        "not valid for an empty KV cache: prefer --symbol-range seq_len=1:)",
    )
    infer.add_argument(
        "--constant-initializers",
        action="store_true",
        help="treat initializers that are also graph inputs as constants (their shape "
        "and small contents), for a model whose such inputs are never fed; models of "
        "IR version < 4 are read so always",
    )
    infer.add_argument(
        "--value-info-anchors",
        action="store_true",
        help="also use the model's declared value_info shapes as anchors for renames",
    )
    infer.add_argument(
        "--no-anchors",
        action="store_true",
        help="skip the anchor-constraint propagation pass (keep engine-made symbol names)",
    )
    add_verify_args(infer)
    infer.set_defaults(func=_cmd_infer)
    optimize = sub.add_parser(
        "optimize",
        help="optimize a model with proven shapes (and onnxscript's optimizer)",
        description="Make MODEL smaller with rewrites its shapes prove, inside onnxscript's "
        "optimizer loop; dims are written in the model's own names. Nothing is written "
        "without -o/-i/--json.",
        epilog="example: onnx-symdims optimize model.onnx -o small.onnx --verify",
    )
    optimize.add_argument(
        "model", nargs="?", help="the .onnx file (default: a bundled example)"
    )
    add_output_args(optimize)
    _add_debug(optimize)
    optimize.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    optimize.add_argument(
        "--fusions",
        choices=("ort", "onnx"),
        default=None,
        help="also run onnxscript's onnxruntime (ort) or ONNX-op (onnx) fusions, guarded: "
        "a fusion that changes a proven shape is undone",
    )
    optimize.add_argument(
        "--inexact-floats",
        action="store_true",
        help="also fold float constants that numpy computes otherwise than onnxruntime "
        "(MatMul, Exp, ...) and fuse BatchNormalization into Conv/Gemm: smaller, but float "
        "outputs equal only up to rounding (default: bit for bit)",
    )
    optimize.add_argument(
        "--symbol-range",
        action="append",
        default=[],
        metavar="NAME=LO:HI",
        help="the sizes the model will run with, e.g. seq_len=1: or batch=1:64 "
        "(repeatable): outputs stay identical for sizes in the range, and the written "
        "dims and the fusion guard rely on it; LO=HI fixes the size (batch=1:1 writes 1 "
        "into the inputs' dims, shapes computed from it fold, and onnxruntime then "
        "refuses other sizes)",
    )
    optimize.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D,D,...",
        help="the shape input NAME will have, each D a size, a dim name or ? (keep), e.g. "
        "pixel_values=1,3,?,? (repeatable; onnxsim's --overwrite-input-shape): a size for "
        "a declared name fixes it as --symbol-range NAME=D:D does, a size or a name for "
        "an unnamed dim is written there; a declared size or name is never changed",
    )
    optimize.add_argument(
        "--max-rounds",
        type=_positive_int,
        default=6,
        metavar="N",
        help="most rounds of the rewrite loop (default 6)",
    )
    optimize.add_argument(
        "--max-constant-elements",
        type=_positive_int,
        default=1024,
        metavar="N",
        help="largest ConstantOfShape output written out as a constant (default 1024; a "
        "larger one stays a node: a weight built by ConstantOfShape would grow the file "
        "by its size)",
    )
    add_verify_args(optimize, what="that every output is unchanged")
    optimize.set_defaults(func=_cmd_optimize)
    simplify = sub.add_parser(
        "simplify",
        help="print the canonical form of a dim expression",
        description="Print the canonical form of a dim expression, e.g. '(a-3)//2+1'.",
    )
    simplify.add_argument("expr", help="e.g. '(a + b) - a' or '-a + 2*a'")
    _add_debug(simplify)
    simplify.set_defaults(func=_cmd_simplify)
    return parser


def _add_debug(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's default must not undo ``onnx-symdims --debug CMD``.
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def _normalize(argv: list[str]) -> list[str]:
    """Argument spellings argparse cannot express.

    ``--verify N`` / ``--verify=N`` set the run count (an all-digit N that is not a file),
    so ``--verify model.onnx`` leaves the model alone; ``simplify -a`` is an expression,
    not an option.
    """
    if argv[:1] == ["simplify"] and len(argv) > 1 and argv[1] not in ("-h", "--help", "--"):
        return ["simplify", "--", *argv[1:]]
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--verify="):
            out += ["--verify", "--verify-runs", token.partition("=")[2]]
        elif (
            token == "--verify"
            and i + 1 < len(argv)
            and argv[i + 1].isdigit()
            and not os.path.exists(argv[i + 1])
        ):
            out += ["--verify", "--verify-runs", argv[i + 1]]
            i += 1
        else:
            out.append(token)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``onnx-symdims`` command."""
    global _started_at
    _started_at = time.perf_counter()
    argv = _normalize(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # name the command's own --help, where its options are listed
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "verify_runs", 3) is None:
        args.verify_runs = 3
    elif hasattr(args, "verify_runs"):
        args.verify = True  # ``--verify-runs N`` alone asks for a verify, as the others do
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    # The optimizer logs each note (a fusion step undone) and also returns it as a
    # diagnostic, which the summary prints once under its op; unconfigured, logging would
    # print it a second time at the top, bare, and even under -q.
    quiet_rewrite = logging.NullHandler()
    if not debug:
        logging.getLogger("onnx_symdims.rewrite").addHandler(quiet_rewrite)
    global _warning_lines
    _warning_lines = _WarningLines(debug)
    root = logging.getLogger()
    root.addHandler(_warning_lines)
    show_warning = warnings.showwarning
    warnings.showwarning = _warning_lines.show_warning
    try:
        return args.func(args)
    except CliError as e:
        if debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the promise: one line, never a traceback, unless asked
        if debug:
            raise
        from onnx_symdims._modelio import one_line

        print(
            f"error: internal error: {type(e).__name__}: {one_line(str(e), 300)} "
            f"(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 3
    finally:
        logging.getLogger("onnx_symdims.rewrite").removeHandler(quiet_rewrite)
        root.removeHandler(_warning_lines)
        warnings.showwarning = show_warning
        _warning_lines = None
