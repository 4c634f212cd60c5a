"""The ONNX backend node tests as a shape-inference conformance suite.

Every node test case of ``onnx.backend.test.case`` is generated in memory. The
declared output shapes are removed, a tool infers them again, and each output
is judged against the declared shape:

* ``exact``: rank and every concrete dim match;
* ``incomplete``: no shape, or a symbolic dim where a number is expected;
* ``wrong``: a rank, dtype or concrete dim contradicts the declared shape (unsound);
* ``exception``: the tool raised on the model.

Two modes: ``pure`` keeps the test inputs as graph inputs; ``inject`` turns them into
initializers, so that shape-computing inputs (Reshape's shape, Slice's starts...) are known.
"""

from __future__ import annotations

import collections
import dataclasses
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

Dims = tuple[object, list[object] | None]


def _dims(tp: onnx.TypeProto) -> Dims:
    if tp.WhichOneof("value") != "tensor_type":
        return ("nontensor", None)
    tt = tp.tensor_type
    if not tt.HasField("shape"):
        return (tt.elem_type, None)
    return (
        tt.elem_type,
        [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tt.shape.dim
        ],
    )


def judge(expected: Dims, got: Dims) -> str:
    """Classifies one inferred output against the declared one."""
    exp_type, exp_dims = expected
    got_type, got_dims = got
    if exp_type == "nontensor" or exp_dims is None:
        return "skip"
    if got_dims is None:
        return "incomplete"
    if got_type not in (0, exp_type) or len(got_dims) != len(exp_dims):
        return "wrong"
    verdict = "exact"
    for e, g in zip(exp_dims, got_dims):
        if isinstance(e, int):
            if isinstance(g, int):
                if g != e:
                    return "wrong"
            else:
                verdict = "incomplete"
    return verdict


@dataclasses.dataclass
class Case:
    name: str
    model: onnx.ModelProto
    expected: dict[str, Dims]
    #: The test's first data set for the graph inputs left (0-d ones as 0-d arrays).
    feeds: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: Every test input is a tensor (no sequence or optional): ``feeds`` runs the model.
    runnable: bool = False


def cases(mode: str) -> Iterator[Case]:
    """Yields the node test cases with their output shapes stripped."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        all_cases = node.collect_testcases(None)
    for case in all_cases:
        if case.kind != "node":
            continue
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        inputs = case.data_sets[0][0] if case.data_sets else []
        names = [i.name for i in model.graph.input]
        tensors = {  # 0-d inputs come as numpy scalars (np.float32(...)), not arrays
            name: np.asarray(array)
            for name, array in zip(names, inputs)
            if isinstance(array, (np.ndarray, np.generic))
        }
        runnable = bool(case.data_sets) and len(tensors) == len(inputs) == len(names)
        if mode == "inject" and case.data_sets:
            for name, array in tensors.items():
                model.graph.initializer.append(numpy_helper.from_array(array, name))
            # An initializer that stays a graph input is only a default (it can be fed at
            # run time), so the injected inputs are removed to make them true constants.
            kept = [i for i in model.graph.input if i.name not in tensors]
            del model.graph.input[:]
            model.graph.input.extend(kept)
        expected = {o.name: _dims(o.type) for o in model.graph.output}
        for o in model.graph.output:
            if o.type.WhichOneof("value") == "tensor_type":
                o.type.tensor_type.ClearField("shape")
        feeds = {i.name: tensors[i.name] for i in model.graph.input if i.name in tensors}
        yield Case(case.name, model, expected, feeds, runnable)


def model_cases() -> Iterator[Case]:
    """The model tests shipped in the onnx wheel, with their first data set.

    ``pytorch-converted``, ``pytorch-operator``, ``simple`` and ``real`` (where the model
    is in the wheel) come with their inputs; the ``light`` classic CNNs (IR version 3,
    weights built by ``ConstantOfShape``) get random inputs of their static input shapes.
    """
    import glob
    import os

    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for kind in ("pytorch-converted", "pytorch-operator", "simple", "real"):
        for folder in sorted(glob.glob(os.path.join(root, kind, "*"))):
            path = os.path.join(folder, "model.onnx")
            if not os.path.exists(path):
                continue
            model = onnx.load(path)
            weights = {t.name for t in model.graph.initializer}
            names = [i.name for i in model.graph.input if i.name not in weights]
            files = sorted(glob.glob(os.path.join(folder, "test_data_set_0", "input_*.pb")))
            feeds = {}
            for name, file in zip(names, files):
                tensor = onnx.TensorProto()
                with open(file, "rb") as f:
                    tensor.ParseFromString(f.read())
                feeds[name] = numpy_helper.to_array(tensor)
            runnable = len(feeds) == len(names) == len(files)
            yield Case(f"{kind}/{os.path.basename(folder)}", model, {}, feeds, runnable)
    rng = np.random.default_rng(0)
    for path in sorted(glob.glob(os.path.join(root, "light", "*.onnx"))):
        model = onnx.load(path)
        weights = {t.name for t in model.graph.initializer}
        feeds = {
            i.name: rng.standard_normal(
                [d.dim_value for d in i.type.tensor_type.shape.dim]
            ).astype(np.float32)
            for i in model.graph.input
            if i.name not in weights
        }
        yield Case(f"light/{os.path.basename(path)}", model, {}, feeds, True)


def run(
    tool: Callable[[onnx.ModelProto], onnx.ModelProto], mode: str
) -> tuple[collections.Counter, list[tuple[str, str, object, object]], list[tuple[str, str]]]:
    """Runs ``tool`` on every case; returns (counts, wrong outputs, exceptions)."""
    counts: collections.Counter = collections.Counter()
    wrong: list[tuple[str, str, object, object]] = []
    errors: list[tuple[str, str]] = []
    for case in cases(mode):
        try:
            result = tool(case.model)
            if result is None:  # onnxruntime's tool returns None when it gives up
                raise RuntimeError("the tool returned no model")
        except Exception as e:  # a tool failure is a result here, not a crash
            n = sum(1 for t, d in case.expected.values() if d is not None and t != "nontensor")
            counts["exception"] += n
            errors.append((case.name, f"{type(e).__name__}: {e}"))
            continue
        got = {o.name: _dims(o.type) for o in result.graph.output}
        for name, exp in case.expected.items():
            verdict = judge(exp, got.get(name, (0, None)))
            if verdict == "skip":
                continue
            counts[verdict] += 1
            if verdict == "wrong":
                wrong.append((case.name, name, exp[1], got.get(name, (0, None))[1]))
    return counts, wrong, errors


# --- optimize as a rewrite oracle ------------------------------------------------------


def _same(a: object, b: object, tolerance: tuple[float, float] | None = None) -> bool:
    """Equal outputs: floats bit for bit under ``==`` (NaN equals NaN), or within
    ``tolerance`` (rtol, atol) when given; sequences item by item."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y, tolerance) for x, y in zip(a, b))
        )
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        if tolerance is not None:
            from onnx_symdims._verify_compare import _tolerance_for

            rtol, atol = _tolerance_for(a.dtype, *tolerance)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            return bool(np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True))
        return bool(np.array_equal(a, b, equal_nan=True))
    if a.dtype.kind == "O":
        return a.tolist() == b.tolist()
    return bool(np.array_equal(a, b))


def _outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # a folded weight must not switch kernels (see onnx_symdims/_verify_worker.py)
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def checker_problem(model: onnx.ModelProto) -> str:
    """What ``onnx.checker`` finds wrong with ``model`` (node schemas of its opsets), or ''."""
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        return str(e).splitlines()[0][:300]
    return ""


def compare_optimized(
    case: Case,
    optimize: Callable[[onnx.ModelProto], onnx.ModelProto],
    tolerance: tuple[float, float] | None = None,
) -> tuple[str, str]:
    """Runs ``case`` before and after ``optimize`` in onnxruntime on the test's inputs.

    Returns ``(verdict, detail)``: ``same`` (every output equal), ``close`` (floats
    within ``tolerance``, ``(rtol, atol)``, when given), ``diff``, ``invalid``
    (``onnx.checker`` rejects the optimized model, not the original), ``raised``
    (``optimize`` raised), ``broken`` (the optimized model does not load or run),
    or ``skip`` (the case has non-tensor inputs, or the original does not run in
    onnxruntime).
    """
    if not case.runnable:
        return "skip", "non-tensor inputs"
    try:
        expected = _outputs(case.model, case.feeds)
    except Exception as e:  # onnxruntime lacks the op or departs: nothing to compare
        return "skip", f"original: {type(e).__name__}"
    try:
        optimized = optimize(case.model)
    except Exception as e:
        return "raised", f"{type(e).__name__}: {e}"
    problem = checker_problem(optimized)
    if problem and not checker_problem(case.model):
        return "invalid", problem  # onnxruntime may run it; another runtime may not
    try:
        got = _outputs(optimized, case.feeds)
    except Exception as e:
        return "broken", f"{type(e).__name__}: {str(e)[:300]}"
    if len(got) != len(expected):
        return "diff", f"{len(got)} outputs, expected {len(expected)}"
    verdict = "same"
    for index, (a, e) in enumerate(zip(got, expected)):
        if _same(a, e):
            continue
        if tolerance is None or not _same(a, e, tolerance):
            return "diff", f"output {index} differs"
        verdict = "close"
    return verdict, ""
