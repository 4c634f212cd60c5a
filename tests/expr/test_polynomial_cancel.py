"""Exact division cancels common polynomial factors (sums), and merges quotients.

``a /: b`` is defined where ``b != 0`` and ``b`` divides ``a``; a rewrite must give the same
value at every such point (it may be defined at more points: ``(g*x) /: (g*y)`` is
``x /: y``, which is defined where ``g == 0`` too, but no run evaluates the original
there). Checked by brute force on small integers, negative ones included.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from onnx_symdims.expr import (
    DimExpr,
    InexactDivisionError,
    add,
    dmax,
    evaluate,
    exact_div,
    floordiv,
    mod,
    mul,
    sym,
    to_onnx,
)
from onnx_symdims.expr._polygcd import MAX_GCD_TERMS, poly_divide, poly_gcd
from tests.expr.test_properties import PROPERTY_SETTINGS

a, b, c = sym("a"), sym("b"), sym("c")
ATOMS = (a, b, c, mod(a, 2), dmax(a, b), exact_div(b, c))
POINTS = [dict(zip("abc", v, strict=True)) for v in itertools.product(range(-3, 4), repeat=3)]


def _product(factors):
    out = 1
    for f in factors:
        out = mul(out, f)
    return out


monomials = st.builds(
    lambda k, fs: mul(k, _product(fs)),
    st.integers(-3, 3).filter(bool),
    st.lists(st.sampled_from(ATOMS), max_size=2),
)


def _sum(parts):
    out = 0
    for p in parts:
        out = add(out, p)
    return out


polys = st.lists(monomials, min_size=1, max_size=3).map(_sum).filter(lambda p: p != 0)


def _value(d, env):
    """The value of ``d`` at ``env``, or None where it is undefined."""
    try:
        return evaluate(d, env)
    except (ZeroDivisionError, InexactDivisionError):
        return None


def _assert_quotient_agrees(result, num, den):
    for env in POINTS:
        n, d = _value(num, env), _value(den, env)
        if n is None or d is None or d == 0 or n % d:
            continue  # the exact division is undefined here
        assert evaluate(result, env) == n // d, (to_onnx(result), env)


def _has_exact_quotient(d) -> bool:
    return isinstance(d, DimExpr) and any(
        t.function == "exact_div" or any(_has_exact_quotient(x) for x in t.args)
        for t in d.function_terms()
    )


def _has_extremum(d) -> bool:
    return isinstance(d, DimExpr) and any(
        t.function in ("max", "min") or any(_has_extremum(x) for x in t.args)
        for t in d.function_terms()
    )


def _constant_ratio(p, q) -> bool:
    """True when ``p == r*q`` for a rational ``r``: ``p /: q`` is then a constant or undefined."""
    if isinstance(p, int) or isinstance(q, int):
        return isinstance(p, int) and isinstance(q, int)
    ratios = {(p.const, q.const)} if p.const or q.const else set()
    if dict(p.terms).keys() != dict(q.terms).keys():
        return False
    qs = dict(q.terms)
    ratios |= {(c, qs[m]) for m, c in p.terms}
    first = next(iter(ratios))
    return all(x * first[1] == y * first[0] for x, y in ratios)


def _exact_or_none(num, den):
    try:
        return exact_div(num, den)
    except InexactDivisionError:
        return None  # constant ratios that do not divide: undefined everywhere


@PROPERTY_SETTINGS
@given(polys, polys, polys)
def test_a_common_polynomial_factor_cancels(g, p, q):
    num, den = mul(g, p), mul(g, q)
    if any(isinstance(d, DimExpr) and d.is_unknown for d in (num, den)) or den == 0:
        return
    result = _exact_or_none(num, den)
    if result is None:
        return
    _assert_quotient_agrees(result, num, den)
    cofactors = _exact_or_none(p, q)
    if (
        cofactors is not None
        and not any(_has_exact_quotient(d) or _has_extremum(d) for d in (g, p, q))
        and not _constant_ratio(p, q)
    ):
        # The factor is gone: the same object as dividing the cofactors. (A quotient
        # atom is not: -(b/:c) is the atom (-b)/:c, so the divisor's sign may differ;
        # and (a+1) /: (2*a+2), undefined everywhere, stays as written instead of raising.
        # Nor a factor with a max or min: the ring folds a sum of extrema into another
        # atom, max(a,b) - a into max(b-a,0), in one operand and not the other.)
        assert result is cofactors, (to_onnx(num), to_onnx(den), to_onnx(result))


@PROPERTY_SETTINGS
@given(polys, polys, polys)
def test_quotients_over_one_symbolic_divisor_merge(p, q, den):
    if isinstance(den, int):
        return
    left, right = _exact_or_none(p, den), _exact_or_none(q, den)
    if left is None or right is None:
        return
    total = add(left, right)
    for env in POINTS:
        lv, rv = _value(left, env), _value(right, env)
        if lv is None or rv is None:
            continue
        assert evaluate(total, env) == lv + rv, (to_onnx(total), env)


raw_monomials = st.tuples(
    st.lists(st.sampled_from(ATOMS[:5]), max_size=2).map(
        lambda atoms: tuple(sorted((x.atom for x in atoms), key=lambda t: t.key))
    ),
    st.integers(-3, 3).filter(bool),
)
raw_polys = st.lists(raw_monomials, min_size=1, max_size=3).map(dict)


def _raw_mul(p, q):
    out = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = tuple(sorted(m1 + m2, key=lambda t: t.key))
            out[m] = out.get(m, 0) + c1 * c2
    return {m: k for m, k in out.items() if k}


@PROPERTY_SETTINGS
@given(raw_polys, raw_polys, raw_polys)
def test_the_gcd_divides_both_and_holds_the_common_factor(g, p, q):
    num, den = _raw_mul(g, p), _raw_mul(g, q)
    gcd = poly_gcd(num, den)
    assert gcd is not None
    assert poly_divide(num, gcd) is not None
    assert poly_divide(den, gcd) is not None
    assert poly_divide(gcd, g) is not None
    quotient = poly_divide(num, g)
    assert quotient is not None and _raw_mul(quotient, g) == num


def test_the_mask_ops_legacy_reshape_chain_cancels():
    # TorchScript's pixel-unshuffle after a "same" pad: x [batch, 4, h', w'] with
    # h' = height + height%2, w' = width + width%2, reshaped to [0, 0, -1, 2, 0],
    # [0, 0, 0, 0, -1, 2], then [0, -1, 1, 1, 0, 0].
    batch, height, width = sym("batch"), sym("height"), sym("width")
    h2, w2 = add(height, mod(height, 2)), add(width, mod(width, 2))
    rows = exact_div(_product([batch, 4, h2, 1, w2]), _product([batch, 4, 2, w2]))
    assert rows is exact_div(h2, 2)
    cols = exact_div(_product([batch, 4, rows, 2, w2]), _product([batch, 4, rows, 2, 2]))
    assert cols is exact_div(w2, 2)
    channels = exact_div(_product([batch, 4, 2, 2, rows, cols]), _product([batch, rows, cols]))
    assert channels == 16
    # (h + h%2) /: 2 is ceil(h/2) for every integer h.
    assert rows is floordiv(add(height, 1), 2)


def test_a_symbolic_quotient_in_a_divisor_moves_up():
    # a /: (N /: D) == (a*D) /: N wherever the left side is defined.
    inner = exact_div(mul(a, b), add(c, 1))
    result = exact_div(mul(4, a), inner)
    assert result is exact_div(add(mul(4, c), 4), b)
    _assert_quotient_agrees(result, mul(4, a), inner)


def test_a_sum_quotient_merge_cancels_the_divisor():
    w = add(c, 1)
    assert add(exact_div(mul(a, w), add(mul(b, w), 0)), 0) is exact_div(a, b)
    assert add(exact_div(a, w), exact_div(mul(b, c), w)) is exact_div(add(a, mul(b, c)), w)
    assert add(exact_div(a, w), exact_div(add(c, 1 - 0) * 0 + mul(b, w) - a, w)) is b


def test_past_the_size_cap_the_quotient_stays_uncancelled():
    # More terms than the gcd examines: no cancellation (sound), and no blow-up.
    symbols = [sym(f"s{i}") for i in range(MAX_GCD_TERMS // 2 + 8)]
    big = _sum(symbols)
    num = mul(big, add(a, 1))
    if isinstance(num, DimExpr) and num.is_unknown:
        return  # the size guard of the algebra itself
    result = exact_div(num, mul(big, add(b, 1)))
    assert isinstance(result, DimExpr) and result.function == "exact_div"


@PROPERTY_SETTINGS
@given(polys, st.integers(2, 5))
def test_a_rounded_multiple_divides_to_its_floor_or_ceiling(x, d):
    # X - X%d == d*floor(X/d) and X + (-X)%d == d*ceil(X/d) for every integer X.
    down, up = add(x, mul(-1, mod(x, d))), add(x, mod(mul(-1, x), d))
    for numerator, expected in ((down, floordiv(x, d)), (up, floordiv(add(x, d - 1), d))):
        for divided in (exact_div(numerator, d), floordiv(numerator, d)):
            for env in POINTS:
                value = _value(x, env)
                if value is not None:
                    assert evaluate(divided, env) == evaluate(expected, env), (
                        to_onnx(divided),
                        env,
                    )


def test_a_padded_to_even_size_halves_to_a_ceiling():
    h = sym("h")
    assert exact_div(add(h, mod(h, 2)), 2) is floordiv(add(h, 1), 2)
    assert floordiv(add(h, mod(h, 2)), 2) is floordiv(add(h, 1), 2)
    assert exact_div(add(h, mul(-1, mod(h, 3))), 3) is floordiv(h, 3)
