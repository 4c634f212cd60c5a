"""Node counts and time of ONNX optimizers, every result checked in onnxruntime.

Usage::

    python benchmarks/optimize_bench.py [--corpus ../shared/dev_corpus] [--model PATH ...]
        [--generated] [--skip-peers] [--variants] [--tools A,B] [--reps N] [--json OUT]

Models: ``tests/data/*.onnx``, the dev corpus (``<corpus>/models/*/model.onnx``, skipped
with a note when missing), the bundled ``onnx_symdims/data/tiny_decoder.onnx`` and the
generated TorchScript-style decoders of ``_ts_models`` (``gen:ts_decoder_2`` and
``gen:ts_decoder_nokv_2`` by default; ``--generated`` adds 16 and 40 layers, 7.6k and
18.9k nodes); ``--model`` (a path or ``gen:ts_decoder[_nokv]_<layers>``) replaces
all of them.

Pipelines: ``raw``, ``onnxscript.optimizer.optimize`` (default arguments), ours
(``onnx_symdims.optimize``, ``n/a`` while it does not exist), ``onnxslim.slim`` and
``onnxsim.simplify`` (their defaults; ``--skip-peers`` drops them); ``--variants`` adds
``optimize(onnx_shape_inference=False)`` alone and after ``infer_symbolic_shapes``. Every tool gets a fresh ``ModelProto`` parsed from
the same bytes and returns a ``ModelProto``; the time (median of ``--reps``) covers that
call only. A cell reads ``nodes/shape-ops time check``: main-graph nodes without
``Constant``, of which shape computations (see :func:`count_nodes`), and the onnxruntime
check of the result against the raw model on the input sizes chosen by
:func:`choose_sizes` (``exact``: every output equal bit for bit; ``ok``: ints exactly and
floats to rtol 1e-5, atol 1e-6; ``DIFF``; ``fail``: does not load or run), followed by
``+domain`` for each op domain outside the ONNX standard that the result uses and the
raw model does not (``+com.microsoft``: it runs in onnxruntime only). Totals count a
failed tool's model with its raw nodes.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import glob
import io
import itertools
import json
import logging
import operator
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "dev_corpus"))
# --generated adds these layer counts: 7.6k and 18.9k nodes
GENERATED = (16, 40)
sys.path.insert(0, HERE)

import _ts_models  # noqa: E402

# --- node counts ----------------------------------------------------------------------

_INTS = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
_ALWAYS_SHAPE = {"Shape", "Size", "ConstantOfShape", "Range"}
_SHAPE_IF_INT = {
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Concat",
    "Slice",
    "Cast",
    "Where",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Equal",
}
_BOOL_OUT = {
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "IsNaN",
    "IsInf",
}
_INT64_OUT = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"}


def _elem_types(graph: onnx.GraphProto) -> dict[str, int]:
    """Element types of the main graph's values: declared ones, else propagated forward
    with the few rules that matter for integer shape arithmetic."""
    types: dict[str, int] = {}
    for vi in itertools.chain(graph.input, graph.value_info, graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        first = types.get(node.input[0]) if node.input else None
        if node.op_type == "Constant":
            if "value" in attrs:
                out = attrs["value"].t.data_type
            elif "value_int" in attrs or "value_ints" in attrs:
                out = onnx.TensorProto.INT64
            else:
                out = onnx.TensorProto.FLOAT
        elif node.op_type in _INT64_OUT:
            out = onnx.TensorProto.INT64
        elif node.op_type == "Cast":
            out = attrs["to"].i
        elif node.op_type == "ConstantOfShape":
            out = attrs["value"].t.data_type if "value" in attrs else onnx.TensorProto.FLOAT
        elif node.op_type in _BOOL_OUT:
            out = onnx.TensorProto.BOOL
        elif node.op_type == "Where":
            out = types.get(node.input[1])
        else:
            out = first
        for name in node.output:
            if out and name not in types:
                types[name] = out
    return types


def count_nodes(model: onnx.ModelProto) -> tuple[int, int]:
    """``(nodes, shape_ops)`` of the main graph, ``Constant`` nodes not counted.

    A shape op is a ``Shape``, ``Size``, ``ConstantOfShape`` or ``Range``; a ``Gather``,
    ``Unsqueeze``, ``Squeeze``, ``Concat``, ``Slice``, ``Where``, ``Add``, ``Sub``, ``Mul``
    or ``Div`` with an int32/int64 output; an ``Equal`` of ints; a ``Cast`` from or to ints;
    or any node that produces the target of a ``Reshape``.
    """
    graph = model.graph
    types = _elem_types(graph)
    targets = {node.input[1] for node in graph.node if node.op_type == "Reshape"}
    nodes = shape = 0
    for node in graph.node:
        if node.op_type == "Constant":
            continue
        nodes += 1
        out_int = bool(node.output) and types.get(node.output[0]) in _INTS
        in_int = bool(node.input) and types.get(node.input[0]) in _INTS
        if (
            node.op_type in _ALWAYS_SHAPE
            or (node.op_type in _SHAPE_IF_INT and out_int)
            or (node.op_type in ("Equal", "Cast") and in_int)
            or any(o in targets for o in node.output)
        ):
            shape += 1
    return nodes, shape


# --- input sizes and the onnxruntime check ----------------------------------------------

# (batch, seq, past) tried in this order; the larger ones for image models
_PATTERNS = [
    (1, 3, 0),
    (2, 1, 4),
    (2, 5, 4),
    (1, 1, 0),
    (2, 3, 4),
    (1, 5, 0),
    (2, 16, 0),
    (1, 32, 0),
    (2, 64, 0),
    (1, 48, 0),
]
_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
}


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {init.name for init in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def _symbols(model: onnx.ModelProto) -> list[str]:
    seen: dict[str, None] = {}
    for vi in _graph_inputs(model):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                seen[d.dim_param] = None
    return list(seen)


def _evaluate(text: str, values: dict[str, int]) -> int | None:
    """The value of a dim written as an expression (``past_seq_len + seq_len``), or None."""

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(text)

    try:
        return ev(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
        return None


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


def _candidates(symbols: list[str], truth_bindings: list[dict]) -> list[dict[str, int]]:
    """Assignments of the input symbols: ``past``/``total``/``batch``/other, the totals
    (names with ``total``, ``all`` or ``mask``) as past + seq, other symbols distinct,
    symbols written as expressions of the others evaluated."""
    exprs = [
        s
        for s in symbols
        if not s.isidentifier() and _evaluate(s, dict.fromkeys(symbols, 1)) is not None
    ]
    symbols = [s for s in symbols if s not in exprs]
    low = {s: s.lower() for s in symbols}
    past = [s for s in symbols if "past" in low[s]]
    total = [
        s
        for s in symbols
        if s not in past and any(k in low[s] for k in ("total", "all", "mask"))
    ]
    batch = [s for s in symbols if s not in past and s not in total and "batch" in low[s]]
    other = [s for s in symbols if s not in past and s not in total and s not in batch]
    out = []
    for b, seq, p in _PATTERNS:
        a = dict.fromkeys(batch, b)
        a.update(dict.fromkeys(past, p))
        a.update({s: seq + k for k, s in enumerate(other)})
        seq_value = next((a[s] for s in other if "seq" in low[s]), seq)
        a.update(dict.fromkeys(total, (p if past else 0) + seq_value))
        out.append(a)
    out += [
        {s: int(binding[s]) for s in symbols}
        for binding in truth_bindings
        if all(s in binding for s in symbols)
    ]
    for a in out:
        a.update({s: _evaluate(s, a) for s in exprs})
    return out


def make_feeds(model: onnx.ModelProto, sizes: dict[str, int], seed: int = 0) -> dict:
    """Inputs for ``sizes``: masks of ones, positions ``past..past+n-1`` on the last axis,
    token types 0, other ints in ``[0, 2)``, bools true, floats standard normal."""
    rng = np.random.default_rng(seed)
    start = next((v for s, v in sizes.items() if "past" in s.lower()), 0)
    feeds = {}
    for vi in _graph_inputs(model):
        tt = vi.type.tensor_type
        dims = [
            sizes.get(d.dim_param, 1)
            if d.dim_param
            else (d.dim_value if d.HasField("dim_value") else 1)
            for d in tt.shape.dim
        ]
        name = vi.name.lower()
        if tt.elem_type in _FLOAT_TYPES:
            feeds[vi.name] = rng.standard_normal(dims).astype(_FLOAT_TYPES[tt.elem_type])
        elif tt.elem_type == onnx.TensorProto.BOOL:
            feeds[vi.name] = np.ones(dims, bool)
        else:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
            if "mask" in name:
                value = np.ones(dims)
            elif "position" in name and dims:
                value = np.broadcast_to(np.arange(start, start + dims[-1]), dims)
            elif "token_type" in name:
                value = np.zeros(dims)
            else:
                value = rng.integers(0, 2, dims)
            feeds[vi.name] = np.ascontiguousarray(value).astype(dtype)
    return feeds


def _session(model_bytes: bytes):
    """An onnxruntime CPU session in a child process (``IsolatedSession``).

    The sizes :func:`choose_sizes` tries include edge ones, and onnxruntime crashes on some
    instead of raising (bit_dynamo of the attack2 corpus: SIGSEGV on a 1x1 image): in this
    process that would end the whole benchmark. The child runs without graph optimizations
    (the models are compared, not onnxruntime's rewrites of them) and without prepacking
    (a folded weight must not switch kernels; see onnx_symdims/_verify_worker.py).
    """
    from onnx_symdims._verify_worker import IsolatedSession

    return IsolatedSession(model_bytes)


def _truth_bindings(path: str | None) -> list[dict]:
    if not path:
        return []
    for candidate in (
        os.path.join(os.path.dirname(path), "truth.json"),
        os.path.splitext(path)[0] + ".truth.json",
        os.path.join(
            REPO, "tests", "data", os.path.basename(os.path.splitext(path)[0]) + ".truth.json"
        ),
    ):
        if os.path.exists(candidate):
            with open(candidate) as f:
                return json.load(f).get("bindings", [])
    return []


def choose_sizes(model: onnx.ModelProto, model_bytes: bytes, path: str | None, n: int = 3):
    """The first ``n`` distinct assignments the raw model runs on, with its outputs:
    ``[(sizes, feeds, {output: array})]``."""
    sess = _session(model_bytes)
    names = [o.name for o in sess.get_outputs()]
    chosen, seen = [], set()
    for sizes in _candidates(_symbols(model), _truth_bindings(path)):
        key = tuple(sorted(sizes.items()))
        if key in seen:
            continue
        seen.add(key)
        feeds = make_feeds(model, sizes)
        try:
            outs = sess.run(names, feeds)
        except Exception:  # a size the model does not accept (or crashes on): the next one
            continue
        chosen.append((sizes, feeds, dict(zip(names, outs))))
        if len(chosen) == n:
            break
    return chosen


def _same(a: np.ndarray, b: np.ndarray) -> tuple[bool, float]:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, float("inf")
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            err = float(np.nanmax(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)), err
    return bool(np.array_equal(a, b)), 0.0


def check(result: onnx.ModelProto, sizes) -> tuple[str, str]:
    """``("exact" | "ok" | "DIFF" | "fail", detail)`` of ``result`` against the raw outputs."""
    if not sizes:
        return "n/a", "no input sizes on which the raw model runs"
    try:
        sess = _session(result.SerializeToString())
    except Exception as e:
        return "fail", f"load: {type(e).__name__}: {str(e)[:160]}"
    names = [o.name for o in sess.get_outputs()]
    worst, exact = 0.0, True
    for binding, feeds, expected in sizes:
        try:
            inputs = {i.name for i in sess.get_inputs()}
            outs = sess.run(names, {k: v for k, v in feeds.items() if k in inputs})
        except Exception as e:
            return "fail", f"run {binding}: {type(e).__name__}: {str(e)[:160]}"
        got = dict(zip(names, outs))
        if set(got) != set(expected):  # renamed outputs: compare in order
            got = dict(zip(expected, outs))
        for name, want in expected.items():
            same, err = _same(want, got[name]) if name in got else (False, float("inf"))
            worst = max(worst, err)
            if not same:
                return "DIFF", f"{name} at {binding}: max abs err {err:.3g}"
            exact = exact and np.array_equal(
                want, got[name], equal_nan=want.dtype.kind in "fc"
            )
    return ("exact" if exact else "ok"), f"max abs err {worst:.3g}"


# --- the tools ------------------------------------------------------------------------


def _onnxscript(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(model)


def _ours_fn() -> Callable | None:
    """``onnx_symdims.optimize``, else ``onnx_symdims.rewrite.optimize`` (before the
    package exports it), else None."""
    import importlib

    for module in ("onnx_symdims", "onnx_symdims.rewrite"):
        try:
            fn = getattr(importlib.import_module(module), "optimize", None)
        except ImportError:
            fn = None
        if fn is not None:
            return fn
    return None


def _onnxslim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxslim

    return onnxslim.slim(model)


def _onnxsim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    simplified, _ = onnxsim.simplify(model)
    return simplified


def _onnxscript_no_si(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(model, onnx_shape_inference=False)


def _symdims_then_onnxscript(model: onnx.ModelProto) -> onnx.ModelProto:
    """Our shapes on every value, then onnxscript without its per-node shape inference."""
    import onnx_ir as ir
    import onnxscript.optimizer

    import onnx_symdims

    ir_model = onnx_symdims.infer_symbolic_shapes(ir.serde.deserialize_model(model))
    onnxscript.optimizer.optimize(ir_model, onnx_shape_inference=False)
    return ir.serde.serialize_model(ir_model)


def tools(skip_peers: bool, variants: bool = False) -> dict[str, Callable | None]:
    """The pipelines by column name; ``None`` marks one that is not available (``n/a``)."""
    table: dict[str, Callable | None] = {"onnxscript": _onnxscript, "ours": _ours_fn()}
    if variants:
        table["onnxscript(no-si)"] = _onnxscript_no_si
        table["symdims+onnxscript(no-si)"] = _symdims_then_onnxscript
    if not skip_peers:
        table["onnxslim"] = _onnxslim
        table["onnxsim"] = _onnxsim
    return table


def run_tool(
    fn: Callable, model_bytes: bytes, reps: int
) -> tuple[onnx.ModelProto, list[float]]:
    """Runs ``fn`` ``reps`` times on fresh copies; returns the last result and the times."""
    times, result = [], None
    for _ in range(reps):
        model = onnx.load_from_string(model_bytes)
        with contextlib.redirect_stdout(io.StringIO()):  # onnxslim/onnxsim print summaries
            t0 = time.perf_counter()
            result = fn(model)
            times.append(time.perf_counter() - t0)
    if isinstance(result, onnx.ModelProto):
        return result, times
    import onnx_ir as ir  # an ir.Model from a pipeline that returns one

    return ir.to_proto(result), times


# --- the bench ------------------------------------------------------------------------


def model_list(args) -> list[tuple[str, str | None, Callable[[], bytes]]]:
    """``(name, path or None, bytes loader)`` for the models to bench."""

    def from_path(path):
        return lambda: onnx.load(path, load_external_data=False).SerializeToString()

    def generated(layers, kv_cache=True):
        return lambda: _ts_models.ts_decoder(layers, kv_cache=kv_cache).SerializeToString()

    if args.model:
        out = []
        for p in args.model:
            if p.startswith("gen:ts_decoder_"):
                *_, layers = p.split("_")
                out.append((p, None, generated(int(layers), kv_cache="_nokv_" not in p)))
            else:
                out.append((os.path.relpath(p, REPO), p, from_path(p)))
        return out
    out = [
        (os.path.relpath(p, REPO), p, from_path(p))
        for p in sorted(glob.glob(os.path.join(REPO, "tests", "data", "*.onnx")))
    ]
    corpus = glob.glob(os.path.join(args.corpus, "models", "*", "model.onnx"))
    if not corpus:
        print(f"note: no dev corpus at {args.corpus}, skipped", flush=True)
    out += [
        (f"corpus:{os.path.basename(os.path.dirname(p))}", p, from_path(p))
        for p in sorted(corpus)
    ]
    tiny = os.path.join(REPO, "onnx_symdims", "data", "tiny_decoder.onnx")
    out.append(("tiny_decoder", tiny, from_path(tiny)))
    out.append(("gen:ts_decoder_2", None, generated(2)))
    out.append(("gen:ts_decoder_nokv_2", None, generated(2, kv_cache=False)))
    if args.generated:
        out += [(f"gen:ts_decoder_{layers}", None, generated(layers)) for layers in GENERATED]
    return out


def bench_model(name, path, model_bytes, table, reps) -> dict:
    model = onnx.load_from_string(model_bytes)
    nodes, shape = count_nodes(model)
    row = {"model": name, "raw": {"nodes": nodes, "shape": shape}}
    sizes = choose_sizes(model, model_bytes, path)
    row["sizes"] = [s for s, _, _ in sizes]
    for tool, fn in table.items():
        if fn is None:
            row[tool] = {"error": "n/a"}
            continue
        try:
            result, times = run_tool(fn, model_bytes, reps)
        except Exception as e:
            row[tool] = {
                "error": f"failed: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
            }
            continue
        n, s = count_nodes(result)
        status, detail = check(result, sizes)
        row[tool] = {
            "nodes": n,
            "shape": s,
            "seconds": statistics.median(times),
            "times": times,
            "check": status,
            "detail": detail,
            "new_domains": sorted(_domains(result) - _domains(model)),
        }
    return row


def _domains(model: onnx.ModelProto) -> set[str]:
    """Op domains of the main graph's nodes outside the ONNX standard."""
    return {n.domain for n in model.graph.node if n.domain not in ("", "ai.onnx")}


def _cell(entry: dict) -> str:
    if "error" in entry:
        return entry["error"]
    if "seconds" not in entry:
        return f"{entry['nodes']}/{entry['shape']}"
    cell = f"{entry['nodes']}/{entry['shape']} {entry['seconds']:.2f}s {entry['check']}"
    # a runtime-specific result (e.g. com.microsoft fusions): it runs in that runtime only
    return cell + "".join(f" +{d}" for d in entry.get("new_domains", ()))


def print_table(rows: list[dict], columns: list[str]) -> None:
    header = ["model", "raw", *columns]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print(
            "| "
            + " | ".join([row["model"], *(_cell(row[c]) for c in ["raw", *columns])])
            + " |"
        )
    totals = [
        "**total**",
        f"{sum(r['raw']['nodes'] for r in rows)}/{sum(r['raw']['shape'] for r in rows)}",
    ]
    for c in columns:
        done = [r for r in rows if "nodes" in r[c]]
        if not done:
            totals.append("n/a")
            continue
        failed = [r for r in rows if "nodes" not in r[c]]
        n = sum(r[c]["nodes"] for r in done) + sum(r["raw"]["nodes"] for r in failed)
        s = sum(r[c]["shape"] for r in done) + sum(r["raw"]["shape"] for r in failed)
        ok = sum(r[c]["check"] in ("exact", "ok") for r in done)
        exact = sum(r[c]["check"] == "exact" for r in done)
        cell = (
            f"{n}/{s} {sum(r[c]['seconds'] for r in done):.1f}s {ok}/{len(rows)} ok"
            f" ({exact} exact)"
        )
        if failed:
            cell += f" ({len(failed)} failed, counted raw)"
        totals.append(cell)
    print("| " + " | ".join(totals) + " |")
    for row in rows:  # the reasons behind DIFF/fail cells
        for c in columns:
            if row[c].get("check") in ("DIFF", "fail"):
                print(f"  {row['model']} / {c}: {row[c]['check']}: {row[c]['detail']}")
        if not row["sizes"]:
            print(f"  {row['model']}: no input sizes found on which the raw model runs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", action="append", default=[], help="bench only these (repeatable)"
    )
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument(
        "--generated", action="store_true", help="add ts_decoder 16 and 40 layers"
    )
    parser.add_argument("--skip-peers", action="store_true", help="no onnxslim / onnxsim")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="add onnxscript without its shape inference, alone and after ours",
    )
    parser.add_argument("--tools", help="comma-separated columns to run (e.g. ours,onnxslim)")
    parser.add_argument("--reps", type=int, default=1, help="median of N runs per tool")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    table = tools(args.skip_peers, args.variants)
    if args.tools:
        wanted = args.tools.split(",")
        unknown = sorted(set(wanted) - set(table))
        if unknown:
            parser.error(f"unknown tools {unknown}; known: {sorted(table)}")
        table = {name: fn for name, fn in table.items() if name in wanted}
    rows = []
    t_start = time.perf_counter()
    for name, path, load in model_list(args):
        t0 = time.perf_counter()
        row = bench_model(name, path, load(), table, max(1, args.reps))
        rows.append(row)
        print(
            f"{name}: {time.perf_counter() - t0:.1f}s  "
            + "  ".join(f"{c}={_cell(row[c])}" for c in ["raw", *table])
            + f"  sizes={[list(s.values()) for s in row['sizes']]}",
            flush=True,
        )
    print()
    print_table(rows, list(table))
    print(f"\nbench wall time {time.perf_counter() - t_start:.1f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
