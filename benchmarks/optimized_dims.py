"""Checks every dim ``optimize`` writes against onnxruntime, on the optimized model itself.

Usage::

    python benchmarks/optimized_dims.py [--corpus DIR ...] [--model PATH ...]
        [--fusions ort|onnx] [--inexact-floats]

For each model (``tests/data/*.onnx``, the bundled tiny decoder and
``<corpus>/models/*/model.onnx`` of each ``--corpus``, the dev corpus by default; or only
the ``--model`` paths), ``onnx_symdims.optimize`` runs with the given options, every
value of the optimized main graph is exposed as an output, and the optimized model runs
in onnxruntime on the input sizes :func:`optimize_bench.choose_sizes` finds for the
original (edge sizes first). Each written dim that is an int or an expression in the
input symbols is evaluated under the sizes and compared with the runtime shape; fresh
symbols are skipped (any size). A rank mismatch or a different size is printed.

A declared graph-output dim the model's author wrote stays as written (the anchor
semantics), so a size the author's declaration rules out may show there: such lines
name a graph output. Runs with a ``Reshape`` the spec leaves undefined (a ``-1`` beside
dims that multiply to 0, which onnxruntime runs anyway) are left out, as in
``tests/integration/test_optimize_models.py``.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import sys
import warnings

import numpy as np
import onnx
import onnx_ir as ir

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

import optimize_bench  # noqa: E402

import onnx_symdims  # noqa: E402
from onnx_symdims import expr  # noqa: E402
from tests.integration.test_optimize_models import _runs_a_spec_invalid_reshape  # noqa: E402


def _written_shapes(model: ir.Model) -> dict[str, tuple[list, int]]:
    """``{value name: (dims as ints or texts, ONNX element type)}`` of the main graph."""
    shapes = {}
    for node in model.graph:
        for value in node.outputs:
            if (
                value.name
                and value.shape is not None
                and isinstance(value.type, ir.TensorType)
            ):
                dims = [d if isinstance(d, int) else d.value for d in value.shape]
                shapes[value.name] = (dims, int(value.dtype))
    return shapes


def _expected(dim: int | str | None, sizes: dict[str, int]) -> int | None:
    """The size ``dim`` gives under ``sizes``; ``None`` when it names a fresh symbol."""
    if dim is None or isinstance(dim, int):
        return dim
    parsed = expr.parse_dim(dim)
    if isinstance(parsed, int):
        return parsed
    if parsed.is_unknown or not parsed.symbols() <= set(sizes):
        return None
    return expr.evaluate(parsed, sizes)


def check_model(path: str, options: dict) -> tuple[int, list[str]]:
    """``(dims checked, problems)`` of the optimized ``path``."""
    import onnxruntime as ort

    raw = onnx.load(path)
    sizes = optimize_bench.choose_sizes(raw, raw.SerializeToString(), path)
    optimized = onnx_symdims.optimize(ir.load(path), **options)
    shapes = _written_shapes(optimized)
    outputs = {v.name for v in optimized.graph.outputs}
    proto = ir.serde.serialize_model(optimized)
    for name, (_, elem_type) in shapes.items():
        if name not in outputs:
            proto.graph.output.append(
                onnx.helper.make_tensor_value_info(name, elem_type, None)
            )
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session_options.log_severity_level = 4
    session = ort.InferenceSession(
        proto.SerializeToString(), session_options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    inputs = {i.name for i in session.get_inputs()}
    checked, problems = 0, []
    for binding, feeds, _ in sizes:
        results = session.run(None, {k: v for k, v in feeds.items() if k in inputs})
        if _runs_a_spec_invalid_reshape(proto, {**feeds, **dict(zip(names, results))}):
            continue  # onnxruntime runs what the spec leaves undefined: no dim to hold
        for name, array in zip(names, results):
            if name not in shapes or not isinstance(array, np.ndarray):
                continue
            dims = shapes[name][0]
            where = f"{name}{' (graph output)' if name in outputs else ''} at {binding}"
            if len(dims) != array.ndim:
                problems.append(
                    f"{where}: written rank {len(dims)}, onnxruntime {array.shape}"
                )
                continue
            for axis, dim in enumerate(dims):
                try:
                    expected = _expected(dim, binding)
                except (ArithmeticError, expr.ExprError) as error:  # e.g. an exact x/0
                    problems.append(f"{where} axis {axis}: written {dim}, undefined ({error})")
                    continue
                if expected is None:
                    continue
                checked += 1
                if expected != array.shape[axis]:
                    problems.append(
                        f"{where} axis {axis}: written {dim}, onnxruntime {array.shape[axis]}"
                    )
    return checked, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", action="append", default=None)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--fusions", choices=("ort", "onnx"), default=None)
    parser.add_argument("--inexact-floats", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    paths = list(args.model)
    if not paths:
        paths = sorted(glob.glob(os.path.join(REPO, "tests", "data", "*.onnx")))
        paths.append(str(onnx_symdims.data_path("tiny_decoder.onnx")))
        for corpus in args.corpus or [optimize_bench.DEFAULT_CORPUS]:
            found = sorted(glob.glob(os.path.join(corpus, "models", "*", "model.onnx")))
            if not found:
                print(f"note: no models under {corpus}")
            paths += found
    options = {"fusions": args.fusions, "exact_floats": not args.inexact_floats}
    total_checked, total_problems = 0, 0
    for path in paths:
        label = os.path.relpath(path, REPO)
        try:
            checked, problems = check_model(path, options)
        except Exception as error:  # a model onnxruntime cannot run: say so, go on
            print(f"{label}: not checked ({type(error).__name__}: {str(error)[:120]})")
            continue
        total_checked += checked
        total_problems += len(problems)
        print(f"{label}: {checked} dims checked, {len(problems)} differ", flush=True)
        for problem in problems[:5]:
            print(f"  {problem}")
    print(f"total: {total_checked} dims checked, {total_problems} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
