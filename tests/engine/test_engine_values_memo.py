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


def test_a_fact_bounding_its_one_symbol_sets_the_range_with_the_fact():
    h = expr.sym("h")
    out = expr.add(expr.floordiv(expr.sub(h, 3), 2), 1)  # a conv's output size
    scopes = [FactScope(nonnegative=True) for _ in range(2)]
    for scope in scopes:
        assert scope.assume_ge(out, 1)
        assert scope._ranges["h"] == (3, None)  # (h - 3)//2 + 1 >= 1 iff h >= 3
        assert scope.prove_ge(h, 3) and scope.prove_ge(out, 1)
        assert not scope.assume_ge(out, 1)  # nothing new
    # The same facts in the same order: the same memo tables, shared.
    assert scopes[0]._scoped_memo is scopes[1]._scoped_memo
    assert scopes[0]._scoped_memo is not FactScope(nonnegative=True)._scoped_memo
