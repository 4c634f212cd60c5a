"""Differential fuzzing: inferred dims against onnxruntime on random exporter-like graphs.

``test_random_graphs`` checks a fixed (derandomized) set of generated graphs, bounded to
a few seconds per core; ``benchmarks/fuzz_long.py`` runs the same for as long as asked.
Every inferred dim must evaluate to the size onnxruntime computes (see
``tests/fuzz/oracle.py`` for the exact rules).

Bugs the fuzzer found are kept below as minimal reproducers: ``FIXED_BUGS`` are
regression tests; ``OPEN_BUGS`` are marked ``xfail(strict=True)`` and flip to a failure
(XPASS) once fixed: then move the entry to ``FIXED_BUGS`` and drop its ``KNOWN_BUGS``
pattern, which keeps the random test quiet about it meanwhile.
"""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import graph_gen, oracle

#: Findings the random test tolerates while a bug is open, each tracked by an xfail
#: entry in ``OPEN_BUGS``: (op or None for any op, kind, regex on the message).
KNOWN_BUGS: list[tuple[str | None, str, str]] = []


def _unexpected(findings: list[oracle.Finding]) -> list[oracle.Finding]:
    return [
        f
        for f in findings
        if not any(
            op in (None, f.op_type) and f.kind == kind and re.search(pattern, f.message)
            for op, kind, pattern in KNOWN_BUGS
        )
    ]


@settings(
    max_examples=2000,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_random_graphs(seed: int) -> None:
    case = graph_gen.generate(seed)
    outcome = oracle.check_case_quietly(case)
    unexpected = _unexpected(outcome.findings)
    assert not unexpected, "\n\n".join(oracle.report(case, f) for f in unexpected)


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_random_graphs_with_the_memo(seed: int) -> None:
    """The same, with the engine's memo on although the graphs are small."""
    from onnx_symdims.passes import _inference

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_inference.InferenceEngine, "memo_min_nodes", 0)
        test_random_graphs.hypothesis.inner_test(seed)


def test_generator_is_deterministic() -> None:
    first, second = graph_gen.generate(12345), graph_gen.generate(12345)
    assert first.model == second.model
    assert first.bindings == second.bindings


def test_oracle_catches_a_wrong_dim() -> None:
    """The checker is not vacuous: a dim that is off by one is reported."""
    case = oracle.case_from_text(
        """
        <ir_version: 10, opset_import: ["" : 21]>
        g (float[N, 3] x) => (float[] y) { y = Relu (x) }
        """,
        [{"N": 2}, {"N": 0}],
    )
    model, context = oracle.infer(case)
    y = next(v for v in model.graph.outputs if v.name == "y")
    context.set_shape(y, (context.shape_of(y)[0] + 1, 3))
    checker = oracle._RunChecker(case, model, context, 0)
    findings = checker.check({"y": case.feeds[0]["x"]})
    assert [f.kind for f in findings] == ["dim"]


# ---------------------------------------------------------------------------------------
# Reproducers of bugs found by the fuzzer
# ---------------------------------------------------------------------------------------
FIXED_BUGS = [
    pytest.param(
        """
        <ir_version: 10, opset_import: ["" : 21]>
        g (float[N, K] x) => (float[] y) {
            s = Shape (x)
            i = Constant <value: tensor = int64[1] {1}> ()
            k = Gather (s, i)
            m1 = Constant <value: tensor = int64[1] {-1}> ()
            two = Constant <value: tensor = int64[1] {2}> ()
            t = Concat <axis: int = 0> (k, m1, two)
            y = Reshape (x, t)
        }
        """,
        {"N": 1, "K": 0},
        id="reshape_minus_one_inexact_when_copy_is_zero",
        # target [K, -1, 2]: for K = 0 the 0 copies N and -1 is 0; the engine wrote
        # dim 1 as (N/2)*min(1,K), whose N/:2 raises for N = 1 (a dim must hold for
        # every valid run).
    ),
    pytest.param(
        """
        <ir_version: 10, opset_import: ["" : 19]>
        g (float[N, 5, M] x) => (float[] y) {
            s = Shape (x)
            zero = Constant <value: tensor = int64[1] {0}> ()
            one = Constant <value: tensor = int64[1] {1}> ()
            n = Slice (s, zero, one)
            m1 = Constant <value: tensor = int64[1] {-1}> ()
            two = Constant <value: tensor = int64[1] {2}> ()
            t = Concat <axis: int = 0> (m1, n, one, two)
            y = Reshape (x, t)
        }
        """,
        {"N": 0, "M": 5},
        id="reshape_minus_one_inexact_with_empty_input",
        # target [-1, N, 1, 2] on [0, 5, 5]: onnxruntime gives [0, 5, 1, 2] (the 0
        # copies 5); the engine wrote dim 0 as 5*(M/2)*min(1,N), raising for M = 5.
    ),
    pytest.param(
        """
        <ir_version: 10, opset_import: ["" : 19]>
        g (float[K, K] x) => (float[] y) {
            four = Constant <value: tensor = int64[1] {4}> ()
            d1 = Shape <start: int = 1, end: int = 2> (x)
            r = Mod (d1, four)
            zeros = Constant <value: tensor = int64[3] {0, 0, 0}> ()
            pads = Concat <axis: int = 0> (zeros, r)
            p = Pad (x, pads)
            m1 = Constant <value_ints: ints = [-1]> ()
            last = Shape <start: int = -1> (p)
            t1 = Concat <axis: int = 0> (m1, last)
            a = Reshape (p, t1)
            head = Shape <start: int = 0, end: int = -1> (p)
            tail = Shape <start: int = 1> (a)
            t2 = Concat <axis: int = 0> (head, tail)
            y = Reshape (a, t2)
        }
        """,
        {"K": 3},
        id="reshape_copy_check_divides_by_zero",
        # reshape._vanishes_when_zero substituted 0 for the symbols of the target
        # element into a dim holding an exact division by an expression of them:
        # ZeroDivisionError, the hook crashed and the ONNX fallback took over.
    ),
    pytest.param(
        """
        <ir_version: 10, opset_import: ["" : 20]>
        g (float[K, M] x) => (int64[o] y) {
            q = Squeeze (x)
            s = Shape (q)
            one = Constant <value_ints: ints = [1]> ()
            two = Constant <value_ints: ints = [2]> ()
            tail = Slice (s, one, two)
            y = Concat <axis: int = 0> (tail, s)
        }
        """,
        {"K": 4, "M": 7},
        id="anchor_rename_recursion",
        # The rank r of the Squeeze output is minted; the declared output dim gives
        # o == r + max(0, min(r - 1, 1)) and renaming r recursed forever
        # (RecursionError out of infer_symbolic_shapes).
    ),
    pytest.param(
        """
        <ir_version: 10, opset_import: ["" : 20]>
        g (float[M] x) => (float[] y) {
            t = Constant <value: tensor = int64[2] {3, -1}> ()
            r = Reshape (x, t)
            y = Sub (r, x)
        }
        """,
        {"M": 3},
        id="broadcast_of_exact_division",
        # Broadcasting [3, M/3] with [M]: NodeContext.broadcast_dims (_one_forces_one)
        # substituted 1 for M into M/3 and raised InexactDivisionError; the hook crashed
        # and the ONNX fallback minted a symbol. Also seen through Where and Expand.
    ),
]


#: Open bugs: pytest.param(text, binding, id=..., marks=xfail(strict=True, reason=...)).
OPEN_BUGS: list[object] = []


@pytest.mark.parametrize(("text", "binding"), FIXED_BUGS + OPEN_BUGS)
def test_reproducer(text: str, binding: dict[str, int]) -> None:
    case = oracle.case_from_text(text, [binding])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = oracle.check_case(case)
    assert not outcome.findings, "\n\n".join(oracle.report(case, f) for f in outcome.findings)
    assert outcome.runs == 1, f"the reproducer must run in onnxruntime: {outcome}"
