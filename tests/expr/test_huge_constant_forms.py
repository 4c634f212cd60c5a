"""One canonical form whatever the order of construction, near the int64 limits too.

A rewrite that checks int64 before it normalizes a sign or a common factor can leave two
equal expressions in two forms (or print a form that re-parses to another one): here the
same value is built in different orders, with constants near ``±2**62`` and ``-2**63``,
and the results must be the very same object, print to text that reads back to it, and
evaluate like the raw tree. Found by the hypothesis strategies below; each case that
failed is kept as an example or a pair.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from onnx_symdims.expr import (
    BroadcastError,
    DimExpr,
    InexactDivisionError,
    add,
    dmax,
    dmin,
    evaluate,
    exact_div,
    floordiv,
    mod,
    mul,
    neg,
    parse_expr,
    sym,
    to_onnx,
    to_seed,
)
from onnx_symdims.expr._atoms import EXACT
from onnx_symdims.expr._parse import (
    BinOp,
    Constant,
    Name,
    UnaryOp,
    evaluate_tree,
    parse_tree,
    tree_to_dim,
)

UNDEFINED = (ZeroDivisionError, InexactDivisionError, BroadcastError)
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
MIN64 = -(2**63)
M = "(-9223372036854775808)"
BIG = [
    2**31,
    2**32,
    2**61,
    2**62,
    2**62 + 1,
    3 * 2**61,
    2**63 - 1,
    MIN64,
    -(2**62),
    -(2**62) - 1,
]
BIG += [3037000499, 3037000500, -3037000500, 715827882, 3 * 2**60]


def _same(x, y) -> bool:
    return x is y or (isinstance(x, int) and x == y)


def _known(d) -> bool:
    return not (isinstance(d, DimExpr) and d.is_unknown)


def _round_trips(d) -> None:
    if isinstance(d, DimExpr) and not d.is_unknown:
        assert parse_expr(to_onnx(d)) is d, to_onnx(d)
        assert parse_expr(to_seed(d)) is d, to_seed(d)


# ------------------------------------------------------------------------------------------
# Pairs found by the strategies: both spellings give the same object
# ------------------------------------------------------------------------------------------

SAME = [
    # a product with integer quotients is one quotient, however it was built
    ("(a*2)*(a/:4)", "a*(2*(a/:4))"),
    ("2*b*(a/:4)", "b*(2*(a/:4))"),
    ("b*(a/:2)", "(a*b)/:2"),
    ("b*((a/:2)*(c/:2))", "(b*(a/:2))*(c/:2)"),
    ("2*((a/:2)*(c/:3))", "(2*(a/:2))*(c/:3)"),
    ("(2*(b/:2))*(a/:2)", "2*(a/:2)*(b/:2)"),
    ("6*((x-x%2)/:4)", "3*(x//2)"),
    ("a*2147483648*(a/:4294967296)", "a*(2147483648*(a/:4294967296))"),
    # the coefficient cancels against each divisor before the product of divisors overflows
    (
        "2147483648*(a/:4)*(c/:3074457345618258602)",
        "(a/:4)*(2147483648*(c/:3074457345618258602))",
    ),
    # an overflowing symbolic absorption still moves the sign and the monomial in
    ("-2305843009213693952*(2147483648/:a)", "2305843009213693952*(-(2147483648/:a))"),
    ("2147483648*(4294967296/:a)*b", "2147483648*((4294967296/:a)*b)"),
    # common factors cancel before a numerator or divisor quotient is cleared
    ("(4611686018427387904*(y/:3))/:4611686018427387904", "y/:3"),
    ("(4611686018427387904*x)/:(4611686018427387904*(y/:3))", "x/:(y/:3)"),
    # a divisor -2**63 gets the other divisors' normalizations
    (f"(2*x)//{M}", "x//(-4611686018427387904)"),
    (f"(2*x)%{M}", "2*(x%(-4611686018427387904))"),
    (f"(4611686018427387904*a)//{M}", "(-a)//2"),
    (f"(-a)/:{M}", f"-(a/:{M})"),
    (f"(-9223372036854775807*x+5)//{M}", f"x+(x+5)//{M}"),
    (f"(x%3-5)//{M}", "0"),
    # nested residues unwrap to a fixed point
    ("((a%6)%4)%2", "a%2"),
    ("((a%715827882)%4)%2", "a%2"),
]


@pytest.mark.parametrize(("one", "other"), SAME)
def test_equal_spellings_give_one_object(one, other):
    d, e = parse_expr(one), parse_expr(other)
    assert _same(d, e), (to_seed(d), to_seed(e))
    _round_trips(d)
    for a, b, c, x in ((4, 8, 12, 6), (-8, 2**33, -(2**62), 2**62), (0, 0, 0, 0)):
        env = {"a": a, "b": b, "c": c, "x": x, "y": c}
        try:
            expected = evaluate(e, env)
        except UNDEFINED:
            continue
        assert evaluate(d, env) == expected


def test_a_product_over_a_huge_divisor_cancels_before_it_overflows():
    a = sym("a")
    quotient = exact_div(add(a, 2**62), -3037000500)
    merged = exact_div(mul(-2, add(a, 2**62)), -3037000500)  # -2**63 still fits
    assert mul(-2, quotient) is merged
    assert to_seed(merged) == "(4611686018427387904+a)/:1518500250"


@pytest.mark.parametrize(
    "text",
    [
        "(max(h+4611686018427387904,-9223372036854775808))//3",
        "(min(h-4611686018427387904,9223372036854775807))//3",
        "(max(-h+4611686018427387904,-9223372036854775808)+5)//3",
        "max((h+7)//4, -9223372036854775808)//2",
    ],
)
def test_a_shifted_extremum_prints_int64_literals(text):
    # the shift of max(h+2**62, -2**63)//3 printed the literal -13835058055282163711
    d = parse_expr(text)
    _round_trips(d)
    for h in (-(2**62), -7, 0, 5, 2**62):
        assert evaluate(d, {"h": h}) == evaluate_tree(parse_tree(text), {"h": h})


def test_an_identity_whose_product_overflows_keeps_its_terms():
    # 4*sum((2**62*a + i)//3 for i < 3) is 4*2**62*a, no int64 coefficient: the terms stay
    # (the unknown product's empty terms made the sum 0)
    a = sym("a")
    y = mul(2**62, a)
    total = 0
    for i in range(3):
        total = add(total, mul(4, floordiv(add(y, i), 3)))
    assert isinstance(total, DimExpr) and not total.is_unknown
    assert evaluate(total, {"a": 1}) == 2**64
    _round_trips(total)


def test_a_residue_whose_unwrapped_product_overflows_keeps_its_value():
    # 2*(X % K) % (-2*K): unwrapping X % K multiplied (K-1)*(K-1) past int64, and the
    # unknown's empty terms made the modulo 0
    k = 3074457345618258603
    x = neg(mod(sym("a"), -k))
    d = mod(mul(2, x), -2 * k)
    _round_trips(d)
    for v in (1, 2, -5, k + 3):
        assert evaluate(d, {"a": v}) == (2 * (-(v % -k))) % (-2 * k)


def test_an_exact_division_whose_numerator_cannot_be_negated_is_an_unknown():
    # a - 2**63 over a negative divisor: -(a - 2**63) leaves int64 (was an IndexError)
    d = exact_div(add(sym("a"), MIN64), -3037000500)
    assert isinstance(d, DimExpr) and d.is_unknown
    assert dmax(sym("a"), 2**70).is_unknown  # no extremum keeps a constant past int64


# ------------------------------------------------------------------------------------------
# Strategies: huge constants, integer divisors, products and sums in any order
# ------------------------------------------------------------------------------------------


def _constant(v: int):
    return Constant(v) if v >= 0 else UnaryOp("-", Constant(-v))


constants = st.one_of(
    st.integers(-4, 6),
    st.sampled_from(BIG),
    st.sampled_from(BIG).map(lambda v: v // 2),
    st.sampled_from(BIG).map(lambda v: v // 3),
)
divisors = constants.filter(bool)
leaves = st.one_of(st.sampled_from(("a", "b", "c")).map(Name), constants.map(_constant))


def _extend(children):
    return st.one_of(
        st.builds(BinOp, st.sampled_from(("+", "-", "*")), children, children),
        st.builds(
            BinOp, st.sampled_from(("//", "%", "/:")), children, divisors.map(_constant)
        ),
        st.builds(UnaryOp, st.just("-"), children),
    )


# Integer divisors only: a symbolic quotient hides its numerator's sign and content from the
# division around it (``-(a/:b)`` is ``(-a)/:b``), a gap of the canonical form left alone.
trees = st.recursive(leaves, _extend, max_leaves=6)
values = st.one_of(st.integers(-7, 7), st.sampled_from([2**31, 2**62, -(2**62), MIN64]))
envs = st.lists(st.fixed_dictionaries(dict.fromkeys("abc", values)), min_size=1, max_size=6)


def _lower(tree):
    try:
        d = tree_to_dim(tree)
    except (*UNDEFINED, OverflowError):
        return None
    return d if _known(d) else None


@SETTINGS
@given(trees, envs)
@example(
    BinOp("%", BinOp("%", BinOp("%", Name("a"), _constant(6)), _constant(4)), _constant(2)),
    [{"a": 5, "b": 0, "c": 0}],
)
@example(
    BinOp("//", BinOp("*", _constant(2**62), Name("a")), _constant(MIN64)),
    [{"a": 3, "b": 0, "c": 0}],
)
def test_huge_constants_round_trip_and_evaluate(tree, bindings):
    d = _lower(tree)
    assume(d is not None)
    _round_trips(d)
    for env in bindings:
        try:
            expected = evaluate_tree(tree, env)
        except UNDEFINED:
            continue
        assert evaluate(d, env) == expected


@SETTINGS
@given(st.lists(trees, min_size=2, max_size=4), st.randoms(use_true_random=False))
@example(
    [Name("a"), _constant(2**31), BinOp("/:", Name("a"), _constant(2**32))], random.Random(1)
)
@example(
    [
        _constant(2**31),
        BinOp("/:", Name("a"), _constant(4)),
        BinOp("/:", Name("c"), _constant(3074457345618258602)),
    ],
    random.Random(2),
)
@example(  # the modulus absorbed -1 % 2**32 into the quotient: 1431655765*(a-b), unreduced
    [
        Name("a"),
        BinOp(
            "%", BinOp("/:", BinOp("-", Name("b"), Name("a")), _constant(3)), _constant(2**32)
        ),
    ],
    random.Random(3),
)
def test_sums_and_products_in_any_order_give_one_object(parts, rnd):
    dims = [_lower(t) for t in parts]
    assume(all(d is not None for d in dims))
    shuffled = list(dims)
    rnd.shuffle(shuffled)
    # Beyond int64 the product's integer quotients stay apart, grouped as built (a known
    # second spelling, equal values: test_quotients_beyond_int64_keep_their_grouping).
    ops = (add, mul) if _integer_divisors_product(dims) <= 2**63 - 1 else (add,)
    for op in ops:
        try:
            left = dims[0]
            for d in dims[1:]:
                left = op(left, d)
            right = shuffled[-1]
            for d in reversed(shuffled[:-1]):
                right = op(d, right)
        except UNDEFINED:
            continue
        if _known(left) and _known(right):
            assert _same(left, right), (to_seed(left), to_seed(right))
            _round_trips(left)
    for fn in (dmax, dmin):
        assert _same(fn(*dims), fn(*shuffled))


def _integer_divisors_product(dims) -> int:
    """The product of every integer divisor of an exact quotient in ``dims`` (nested too)."""
    product = 1
    stack = [d for d in dims if isinstance(d, DimExpr)]
    while stack:
        d = stack.pop()
        for monomial, _ in d.terms:
            for atom in monomial:
                args = [a for a in atom.args if isinstance(a, DimExpr)]
                stack.extend(args)
                if atom.kind == EXACT and isinstance(atom.args[1], int):
                    product *= abs(atom.args[1])
    return product


@pytest.mark.xfail(strict=True, reason="known: merged divisor beyond int64, grouped as built")
def test_quotients_beyond_int64_keep_their_grouping():
    # a * (a/:2**32) * (a/:2**31) is a**3 /: 2**63 and 2**63 leaves int64: the quotients
    # stay apart, and a*(a/:2**32) merged first keeps its merge. Both spellings evaluate
    # alike (checked); one canonical form would need a divisor beyond int64.
    a = sym("a")
    one = mul(mul(a, exact_div(a, 2**32)), exact_div(a, 2**31))
    other = mul(a, mul(exact_div(a, 2**31), exact_div(a, 2**32)))
    for value in (0, 2**32, -(2**32), 3 * 2**32):
        assert evaluate(one, {"a": value}) == evaluate(other, {"a": value})
    assert one is other, (to_seed(one), to_seed(other))


@SETTINGS
@given(trees, divisors, st.sampled_from([2, 3, 4, 6, 2**31, 2**61, 2**62, 3 * 2**60]))
@example(Name("x"), -(2**62), 2)  # (2*x)//(-2**63) and x//(-2**62)
@example(BinOp("%", Name("a"), _constant(715827882)), 2, 2)
def test_a_common_factor_cancels_whatever_the_divisor(tree, k, g):
    x = _lower(tree)
    assume(isinstance(x, DimExpr) and "/:" not in to_seed(x))
    gx, gk = mul(g, x), g * k
    assume(_known(gx) and MIN64 <= gk < 2**63)
    for fn in (floordiv, exact_div):
        try:
            one, other = fn(gx, gk), fn(x, k)
        except UNDEFINED:
            continue
        _round_trips(one)
        if _known(one) and _known(other):
            assert _same(one, other), (to_seed(one), to_seed(other))
    one, other = mod(gx, gk), mod(x, k)
    _round_trips(one)
    if _known(one) and _known(other):
        assert _same(one, mul(g, other)), (to_seed(one), to_seed(other))


@SETTINGS
@given(trees, divisors)
@example(Name("a"), MIN64 // 4)  # -(a/:4)/:-2**61 and (-a)/:-2**63
def test_the_sign_of_an_integer_divisor_moves_to_the_numerator(tree, k):
    x = _lower(tree)
    assume(isinstance(x, DimExpr) and "/:" not in to_seed(x))
    nx = neg(x)
    assume(_known(nx) and MIN64 <= -k < 2**63)
    pairs = [(floordiv(x, k), floordiv(nx, -k)), (mod(x, k), neg(mod(nx, -k)))]
    try:
        if "%" not in to_seed(x):
            # (b - b%K)/:K is b//K, and (b%K - b)/:K is -((K-1-b)//K): a floor keeps the
            # sign of its numerator, a gap of the canonical form left alone.
            pairs.append((exact_div(x, k), exact_div(nx, -k)))
            pairs.append((exact_div(x, k), neg(exact_div(x, -k))))
    except UNDEFINED:
        pass
    for one, other in pairs:
        if _known(one) and _known(other):
            assert _same(one, other), (to_seed(one), to_seed(other))


@SETTINGS
@given(trees, st.sampled_from([-2, -1, 2, 3, 6, 2**31, -(2**31), 2**61]), divisors)
@example(BinOp("+", Name("a"), _constant(2**62)), -2, -3037000500)
def test_a_coefficient_moves_into_an_integer_quotient_in_one_form(tree, c, k):
    x = _lower(tree)
    # (c - c%K)/:K is c//K, but (c - c%K)/:(K/2) stays: a gap of the canonical form left
    # alone, so no residue in x
    assume(isinstance(x, DimExpr) and "/:" not in to_seed(x) and "%" not in to_seed(x))
    try:
        q, cq = exact_div(x, k), exact_div(mul(c, x), k)
    except UNDEFINED:
        return
    scaled = mul(c, q) if _known(q) else q
    if _known(scaled) and _known(cq):
        assert _same(scaled, cq), (to_seed(scaled), to_seed(cq))
