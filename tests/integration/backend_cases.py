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
        [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim],
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
        if mode == "inject" and case.data_sets:
            inputs = case.data_sets[0][0]
            names = [i.name for i in model.graph.input]
            injected = set()
            for name, array in zip(names, inputs):
                # 0-d inputs come as numpy scalars (np.float32(...)), not arrays.
                if isinstance(array, (np.ndarray, np.generic)):
                    array = np.asarray(array)
                    model.graph.initializer.append(numpy_helper.from_array(array, name))
                    injected.add(name)
            # An initializer that stays a graph input is only a default (it can be fed at
            # run time), so the injected inputs are removed to make them true constants.
            kept = [i for i in model.graph.input if i.name not in injected]
            del model.graph.input[:]
            model.graph.input.extend(kept)
        expected = {o.name: _dims(o.type) for o in model.graph.output}
        for o in model.graph.output:
            if o.type.WhichOneof("value") == "tensor_type":
                o.type.tensor_type.ClearField("shape")
        yield Case(case.name, model, expected)


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
