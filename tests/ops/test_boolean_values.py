"""Symbolic comparisons as exact 0/1 values, and what they decide (Where, If).

A comparison of shape values that the scope cannot decide becomes an exact indicator
expression (``N > 3`` is ``min(max(N-3, 0), 1)``); boolean values hold only 0/1
elements, so ``Not``/``And``/``Or``/``Where`` compute with them and an ``If`` on such a
condition selects the branch dims exactly. onnxruntime checks both regimes.
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer_graph

IF_ON_SHAPE = """
g (float[N, C] x, float[N, N] y) => (out) <int64 three = {3}> {
    shape = Shape(x)
    n = Gather<axis=0>(shape, three_idx)
    cond = Greater(n, three)
    out = If(cond) <
        then_branch = then_g () => (float[N, C] t) { t = Identity(x) },
        else_branch = else_g () => (float[N, N] e) { e = Identity(y) }
    >
}""".replace("<int64 three = {3}>", "<int64 three = {3}, int64 three_idx = {0}>")


@pytest.mark.parametrize("n", [0, 2, 3, 4, 6])
def test_if_on_a_symbolic_condition_selects_the_branch_dims_exactly(n):
    inferred = check_against_ort(
        f'<ir_version: 10, opset_import: ["" : 21]>\n{IF_ON_SHAPE}', [{"N": n, "C": 5}]
    )
    (d0, d1) = inferred.dims("out")
    assert d0 == expr.sym("N")
    assert not inferred.context.is_generated(str(d1))
    assert expr.evaluate(d1, {"N": n, "C": 5}) == (5 if n > 3 else n)


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("Greater", lambda a, b: a > b),
        ("GreaterOrEqual", lambda a, b: a >= b),
        ("Less", lambda a, b: a < b),
        ("LessOrEqual", lambda a, b: a <= b),
        ("Equal", lambda a, b: a == b),
    ],
)
def test_symbolic_comparisons_are_exact_indicators(op, expected):
    inferred = infer_graph(
        f"""g (float[A] x, float[B] y) => (r, s) {{
            a = Shape(x)
            b = Shape(y)
            r = {op}(a, b)
            s = Not(r)
        }}"""
    )
    (r,) = inferred.context.value_of("r")
    (s,) = inferred.context.value_of("s")
    for a in range(5):
        for b in range(5):
            bindings = {"A": a, "B": b}
            assert expr.evaluate(r, bindings) == int(expected(a, b))
            assert expr.evaluate(s, bindings) == int(not expected(a, b))


@pytest.mark.parametrize(("a", "b"), [(0, 0), (2, 5), (5, 2), (3, 3)])
def test_where_on_a_symbolic_condition_picks_elements(a, b):
    inferred = check_against_ort(
        """<ir_version: 10, opset_import: ["" : 21]>
        g (float[A] x, float[B] y) => (z) {
            sa = Shape(x)
            sb = Shape(y)
            bigger = Greater(sa, sb)
            both = And(bigger, bigger)
            m = Where(both, sa, sb)
            z = ConstantOfShape(m)
        }""",
        [{"A": a, "B": b}],
    )
    (z,) = inferred.dims("z")
    assert expr.evaluate(z, {"A": a, "B": b}) == max(a, b)
