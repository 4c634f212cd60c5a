"""``drop_zero_guards``: ``R*min(1, X) -> R`` when ``X >= 0`` and ``X == 0`` forces ``R == 0``.

Exact examples, the cases that must stay (the rule needs the scope, and a guard whose
argument can vanish without ``R`` is not redundant), and a brute-force property: on every
point of a small grid that satisfies the scope, the rewritten expression evaluates like
the original one.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnx_symdims.expr import (
    DIM_SCOPE,
    BroadcastError,
    DimExpr,
    InexactDivisionError,
    Scope,
    broadcast,
    dmax,
    dmin,
    drop_zero_guards,
    evaluate,
    floordiv,
    mod,
    parse_expr,
    sym,
    to_onnx,
)

h, w, a = sym("h"), sym("w"), sym("a")
UNDEFINED = (ZeroDivisionError, InexactDivisionError, BroadcastError)

CASES = [
    # the PoolFormer group norm: Reshape(x, [0, 1, -1]) -> ... -> Reshape(Shape(x))
    ("h*(16*w-16*w*min(1,h)+1)", "h"),
    ("((h+3)//4)*(16*((w+3)//4)-16*((w+3)//4)*min(1,(h+3)//4)+1)", "(h+3)//4"),
    ("h*min(1,h)", "h"),
    ("3*h*w*min(1,h)+2", "3*h*w+2"),
    ("h*w*min(1,h*w)", "h*w"),
    ("h*w*min(1,h,w)", "h*w"),
    ("h*w*min(1,2*h)", "h*w"),
    # a sum of nonnegative terms is 0 only when each is: h + w == 0 forces h == 0
    ("h*min(1,h+w)", "h"),
    ("h*min(1,h+2*w*a)", "h"),
    # a repeated guard is one guard (0 or 1 either way)
    ("min(1,h)*min(1,h)", "min(1,h)"),
    ("h*min(1,h)*min(1,h)", "h"),
    # only the guard that vanishes with the rest goes
    ("h*min(1,h+w)*min(1,w)", "h*min(1,w)"),
    # inside function arguments too
    ("broadcast(h*(16*w-16*w*min(1,h)+1),h)", "h"),
    ("max(3,h*(16*w-16*w*min(1,h)+1))", "max(3,h)"),
    ("(h*(w-w*min(1,h)+1))//2", "h//2"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_redundant_guards_go(text, expected):
    d = parse_expr(text)
    assert drop_zero_guards(d, DIM_SCOPE) is parse_expr(expected)


KEPT = [
    "h*min(1,h*w)",  # h = 1, w = 0: the guard is 0, h is not
    "h*min(1,w)",
    "min(1,h)",  # nothing else in the monomial
    "5*min(1,h)+h",
    "h*min(2,h)",  # min(2, h) is not 0/1
    "h*min(1,h-w)",  # h - w may be negative
    "h*min(1,h-w+1)",  # 0 at h = w - 1, where h need not be 0
    "h*min(1,h+w-a)",  # not a sum of nonnegative terms
]


@pytest.mark.parametrize("text", KEPT)
def test_guards_that_are_not_redundant_stay(text):
    d = parse_expr(text)
    assert drop_zero_guards(d, DIM_SCOPE) is d


def test_needs_the_scope():
    # For every integer, h*min(1, h) is h*h at h = -2: nothing is dropped without h >= 0.
    d = parse_expr("h*(16*w-16*w*min(1,h)+1)")
    assert drop_zero_guards(d, Scope()) is d
    scope = Scope()
    scope.set_range("h", lower=0)
    assert drop_zero_guards(d, scope) is h


def test_ints_and_expressions_without_guards_are_returned_as_is():
    assert drop_zero_guards(5, DIM_SCOPE) == 5
    for d in (h, h * w + 1, dmin(h, w) * h, dmax(1, h) * h):
        assert drop_zero_guards(d, DIM_SCOPE) is d


# ------------------------------------------------------------------------------------------
# Brute force: equal at every nonnegative point of a grid, wherever the original is defined
# ------------------------------------------------------------------------------------------
SYMBOLS = (h, w, a)
GRID = [dict(zip("hwa", values)) for values in itertools.product(range(4), repeat=3)]

_symbol = st.sampled_from(SYMBOLS)
_atom = st.one_of(
    _symbol,
    st.tuples(_symbol, st.integers(0, 3), st.integers(2, 4)).map(
        lambda t: floordiv(t[0] + t[1], t[2])
    ),
    st.tuples(_symbol, st.integers(2, 3)).map(lambda t: mod(t[0], t[1])),
    st.tuples(_symbol, _symbol).map(lambda t: dmax(t[0], t[1])),
)


def _product(atoms):
    out = 1
    for x in atoms:
        out = out * x
    return out


# Guard arguments: products and sums of atoms, sometimes with a negative part or a
# constant (the rule must then keep the guard unless it is still provably redundant).
_guard_arg = st.one_of(
    st.lists(_atom, min_size=1, max_size=2).map(_product),
    st.tuples(_atom, _atom, st.integers(-1, 2)).map(lambda t: t[0] + t[2] * t[1]),
    st.tuples(_atom, st.integers(-1, 1)).map(lambda t: t[0] + t[1]),
)
_guard = st.lists(_guard_arg, min_size=1, max_size=2).map(lambda xs: dmin(1, *xs))
_monomial = st.tuples(
    st.integers(-3, 3),
    st.lists(_atom, max_size=3),
    st.lists(_guard, max_size=2),
).map(lambda t: t[0] * _product(t[1]) * _product(t[2]))
_expression = st.tuples(st.lists(_monomial, min_size=1, max_size=3), st.integers(-2, 2)).map(
    lambda t: sum(t[0], t[1])
)


def _broadcast_or_first(x, y):
    try:
        return broadcast(x, y)
    except BroadcastError:  # two different constants
        return x


_wrapped = st.one_of(
    _expression,
    st.tuples(_expression, _expression).map(lambda t: _broadcast_or_first(t[0], t[1])),
    st.tuples(_expression, st.integers(1, 3)).map(lambda t: floordiv(t[0], t[1])),
    st.tuples(_expression, _expression).map(lambda t: dmax(t[0], t[1])),
)


def _value(d, env):
    try:
        return evaluate(d, env)
    except UNDEFINED:
        return None


def _check_equal_on(d, scope, points):
    new = drop_zero_guards(d, scope)
    for env in points:
        before = _value(d, env)
        if before is None:
            continue  # undefined there: any value is sound
        assert _value(new, env) == before, (to_onnx(d), to_onnx(new), env)
    return new


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wrapped)
def test_rewrite_agrees_with_brute_force_under_the_dim_scope(d):
    if isinstance(d, DimExpr) and d.is_unknown:
        return
    _check_equal_on(d, DIM_SCOPE, GRID)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wrapped, st.integers(0, 2))
def test_rewrite_agrees_with_brute_force_under_a_lower_bound(d, low):
    if isinstance(d, DimExpr) and d.is_unknown:
        return
    scope = Scope()
    scope.set_range("h", lower=low)
    scope.set_range("w", lower=0)
    scope.set_range("a", lower=0)
    points = [env for env in GRID if env["h"] >= low]
    _check_equal_on(d, scope, points)


def test_rewrite_fires_on_generated_expressions():
    # The property above is not vacuous: the PoolFormer shape and its variants shrink.
    for r in (h, floordiv(h + 3, 4), h * w, dmax(h, w)):
        c = 16 * r * floordiv(w + 3, 4)
        d = r + c * (1 - dmin(1, r))
        assert d is not r
        assert _check_equal_on(d, DIM_SCOPE, GRID) is r
