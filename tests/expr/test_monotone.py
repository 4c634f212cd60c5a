"""``symbol_bound_from_lower`` against brute force: the bound holds wherever the fact does.

A fact ``d >= k`` about an expression of one symbol ``x`` gives a bound on ``x`` only when
``d`` is monotone in ``x``; the bound must hold at every ``x`` where the fact holds
(soundness) and the fact must hold at the bound (nothing weaker than the truth).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_symdims import expr
from onnx_symdims.expr import symbol_bound_from_lower
from tests.expr.test_properties import PROPERTY_SETTINGS

X = expr.sym("x")
WINDOW = 300


def _combine(children):
    pairs = st.tuples(children, children)
    return st.one_of(
        pairs.map(lambda p: expr.add(*p)),
        pairs.map(lambda p: expr.sub(*p)),
        st.tuples(children, st.integers(-3, 4)).map(lambda p: expr.mul(*p)),
        st.tuples(children, st.integers(1, 7)).map(lambda p: expr.floordiv(*p)),
        st.tuples(children, st.integers(-5, 5)).map(lambda p: _div_by(p[1], p[0])),
        st.tuples(children, st.integers(2, 5)).map(lambda p: expr.mod(*p)),
        pairs.map(lambda p: expr.dmax(*p)),
        pairs.map(lambda p: expr.dmin(*p)),
        pairs.map(lambda p: expr.mul(*p)),
    )


def _div_by(numerator, d):
    """``numerator // (d + 9)``: a division by an expression (not monotone in general)."""
    divisor = expr.add(d, 9)
    if isinstance(divisor, int) and divisor == 0:
        return numerator
    return expr.floordiv(numerator, divisor)


dims = st.recursive(st.one_of(st.just(X), st.integers(-8, 8)), _combine, max_leaves=6).filter(
    lambda d: isinstance(d, expr.DimExpr) and not d.is_unknown
)


def _holds(d, k, x):
    try:
        return expr.evaluate(d, {"x": x}) >= k
    except ArithmeticError:
        return False  # undefined there: no run has that x


@PROPERTY_SETTINGS
@given(dims, st.integers(-6, 12), st.sampled_from([None, 0, 3]))
def test_the_bound_holds_wherever_the_fact_does(d, k, lowest):
    found = symbol_bound_from_lower(d, k, lowest)
    if found is None:
        return
    name, lower, upper = found
    assert name == "x"
    assert (lower is None) != (upper is None)
    start = -WINDOW if lowest is None else lowest
    for x in range(start, start + 2 * WINDOW):
        if _holds(d, k, x):
            assert lower is None or x >= lower, (str(d), k, x, lower)
            assert upper is None or x <= upper, (str(d), k, x, upper)
    bound = lower if lower is not None else upper
    assert _holds(d, k, bound), (str(d), k, bound)


@pytest.mark.parametrize(
    ("text", "k", "lowest", "expected"),
    [
        ("(x-400)//320+1", 1, 0, ("x", 400, None)),
        ("max(x-3,0)//2-1", 0, 0, ("x", 5, None)),
        ("min(x,7)-5", 0, 0, ("x", 5, None)),
        ("10-x", 0, 0, ("x", None, 10)),
        ("x-3", 0, 5, None),  # already true at the least value
        ("x%4", 1, 0, None),  # not monotone
        ("x*x-9", 0, 0, None),  # a product: its monotony depends on signs
        ("min(x,3)-5", 0, 0, None),  # never true: no bound, no claim
        ("y+x", 0, 0, None),  # two symbols
    ],
)
def test_bounds(text, k, lowest, expected):
    assert symbol_bound_from_lower(expr.parse_dim(text), k, lowest) == expected
