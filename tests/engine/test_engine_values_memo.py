"""Integer ``Div`` of symbolic elements, kept with the scope's facts, answers as computed."""

from __future__ import annotations

from onnx_symdims import expr
from onnx_symdims.shapes import FactScope, element_div
from onnx_symdims.shapes._values import _symbolic_div


def test_a_kept_quotient_is_the_computed_one():
    scope = FactScope(nonnegative=True)
    t = expr.sym("t")
    for a, b in [
        (expr.add(expr.mul(t, 3), 1), 2),
        (expr.sub(t, 5), 2),
        (expr.mul(t, 4), 4),
        (6, expr.add(t, 1)),
    ]:
        first = element_div(scope, a, b)
        assert element_div(scope, a, b) is first
        assert first == _symbolic_div(scope, a, b)
    assert element_div(scope, expr.sub(t, 5), 2) == expr.sub(
        expr.floordiv(expr.dmax(expr.sub(t, 5), 0, scope=scope), 2),
        expr.floordiv(expr.dmax(expr.sub(5, t), 0, scope=scope), 2),
    )


def test_a_fact_added_later_gives_the_quotient_it_proves():
    scope = FactScope(nonnegative=True)
    n, m = expr.sym("n"), expr.sym("m")
    before = element_div(scope, n, m)
    assert before.is_unknown  # m may be 0: nothing known, and nothing kept
    assert element_div(scope, n, m) is not before  # a fresh unknown each time
    scope.assume_divides(m, n)
    assert element_div(scope, n, m) == expr.exact_div(n, m)
