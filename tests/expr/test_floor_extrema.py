"""max/min of floor quotients: dropped arguments and one spelling of a floored extremum.

``min((H-1)//3, H//3)`` is ``(H-1)//3`` and ``max(h-1, 0)//8 + 1`` is ``max(h+7, 8)//8``
for *every* integer (negative ones too): checked against brute-force evaluation of the
expression as built, operation by operation, with Python's own ``//``, ``max`` and ``min``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_symdims.expr import (
    add,
    dmax,
    dmin,
    evaluate,
    floordiv,
    mul,
    parse_dim,
    simplify_expression,
    sym,
    to_onnx,
)
from onnx_symdims.expr._floor_bounds import difference_bounds
from tests.expr.test_properties import PROPERTY_SETTINGS

VALUES = range(-40, 41)

shifts = st.integers(-9, 9)
divisors = st.integers(1, 7)
coefficients = st.integers(1, 3)


def _floor_affine(c: int, a: int, e: int, p: int):
    """``c*((h+a)//e) + p`` built with the algebra, and the same as a Python function."""
    built = add(mul(c, floordiv(add(sym("h"), a), e)), p)
    return built, lambda h: c * ((h + a) // e) + p


@PROPERTY_SETTINGS
@given(
    st.lists(st.tuples(st.integers(-3, 3), shifts), min_size=1, max_size=4),
    divisors,
    st.integers(-2, 2),
)
def test_difference_bounds_hold_and_are_reached(group, d, slope):
    built = mul(slope, sym("h"))
    for c, a in group:
        built = add(built, mul(c, floordiv(add(sym("h"), a), d)))
    bounds = difference_bounds(built)
    values = [evaluate(built, {"h": h}) for h in VALUES]
    if bounds is None:
        return
    lo, hi = bounds
    assert all(lo <= v <= hi for v in values)
    assert lo in values and hi in values  # exact over a period, and 81 values span many


@PROPERTY_SETTINGS
@given(
    st.sampled_from([dmax, dmin]),
    st.tuples(coefficients, shifts, divisors, shifts),
    st.tuples(coefficients, shifts, divisors, shifts),
)
def test_an_extremum_of_floor_quotients_keeps_its_value(op, first, second):
    x, fx = _floor_affine(*first)
    y, fy = _floor_affine(*second)
    pick = max if op is dmax else min
    built = op(x, y)
    assert op(y, x) is built  # one form whatever the order
    for h in VALUES:
        assert evaluate(built, {"h": h}) == pick(fx(h), fy(h))


@PROPERTY_SETTINGS
@given(
    st.sampled_from([dmax, dmin]),
    st.tuples(coefficients, shifts, divisors, shifts),
    st.integers(-12, 12),
    shifts,
    divisors,
    divisors,
)
def test_a_floored_extremum_keeps_its_value(op, inner, bound, k, d, d2):
    g, fg = _floor_affine(*inner)
    pick = max if op is dmax else min
    for numerator, f in (
        (op(g, bound), lambda h: pick(fg(h), bound)),
        (op(add(sym("h"), inner[1]), bound), lambda h: pick(h + inner[1], bound)),
    ):
        built = floordiv(floordiv(add(numerator, k), d), d2)
        assert parse_dim(to_onnx(built)) is built
        for h in VALUES:
            assert evaluate(built, {"h": h}) == (f(h) + k) // d // d2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ceil_mode MaxPool, kernel 2, stride 3 (attack5 pool_ops_dynamo)
        ("min((H-1)//3,H//3)+1", "(2+H)//3"),
        ("max((H-1)//3,H//3)", "H//3"),
        ("max(h//2,(h+1)//2)", "(1+h)//2"),
        ("min(4*((seq_len+3)//4),seq_len)", "seq_len"),
        ("64*min(4*((seq_len+3)//4),seq_len)//seq_len", 64),
        ("min(2*(h//2),h-1)", "h-1"),
        ("max(2*(h//2),h)", "h"),
        # one spelling of a floored max: ceil-mode pooling, conv and a max of quotients
        ("max(height-1,0)//8+1", "(8^7+height)//8"),
        ("max((height+7)//4,2)//2", "(8^7+height)//8"),
        ("max((height+31)//4,8)//8", "(32^31+height)//32"),
        ("max(height+7,8)//16", "(8^7+height)//16"),
        (
            "max(height-1,0)//8+(max(height-1,0)//8)*(max(width-1,0)//8)+max(width-1,0)//8+1",
            "((8^7+height)//8)*((8^7+width)//8)",
        ),
        ("max(3-h,0)//2", "(0^3-h)//2"),
    ],
)
def test_seen_in_the_corpora(text, expected):
    assert simplify_expression(text) == expected


def test_a_difference_that_is_not_bounded_keeps_both():
    # 3*(h//2) - h grows without bound both ways: neither bounds the other everywhere.
    assert simplify_expression("min(3*(h//2),h)") == "h&3*(h//2)"
