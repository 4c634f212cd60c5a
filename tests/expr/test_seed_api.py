"""The seed-compatible string API: documented examples and the origins' bugs as must-nots."""

from __future__ import annotations

import itertools

import pytest

from onnx_symdims.expr import BroadcastError, ExprError, ExprSyntaxError, InexactDivisionError
from onnx_symdims.expr._parse import BinOp, Constant, Name
from onnx_symdims.expr._seed_api import (
    compare_expressions,
    dim_add,
    dim_div,
    dim_exact_div,
    dim_max,
    dim_min,
    dim_mod,
    dim_mul,
    dim_multi_mul,
    dim_sub,
    evaluate_expression,
    parse_expression,
    parse_expression_tokens,
    rename_dynamic_dimensions,
    rename_dynamic_expression,
    rename_expression,
    simplify_expression,
    simplify_two_expressions,
    unparse,
)

UNDEFINED = (ZeroDivisionError, InexactDivisionError, BroadcastError)


def assert_same_function(original: str, result: str | int, values=range(-5, 6)) -> None:
    """``result`` evaluates like ``original`` wherever ``original`` is defined.

    This is the property the origins' printers break: text that looks right but parses back
    to a different function.
    """
    names = sorted(parse_expression_tokens(original) | parse_expression_tokens(str(result)))
    checked = 0
    for combo in itertools.product(values, repeat=len(names)):
        env = dict(zip(names, combo))
        try:
            expected = evaluate_expression(original, env)
        except UNDEFINED:
            continue
        assert evaluate_expression(str(result), env) == expected, (original, result, env)
        checked += 1
    assert checked, f"{original} is undefined on the whole grid"


# ------------------------------------------------------------------------------------------
# simplify_expression: the seed's documented examples (seed 003, research §2.3)
# ------------------------------------------------------------------------------------------

SIMPLIFY_CASES = [
    # constant results are ints, never strings
    ("2*batch//batch", 2),
    ("batch*seq*4/:(batch*seq*2)", 2),
    ("2*(H/:2)", "H"),  # exact division cancels across multiplication
    ("(2*H)//2", "H"),  # 2*H is always even
    ("(2*H)/:2", "H"),
    ("2*(H//2)", "2*(H//2)"),  # NOT H: 2*(3//2) == 2
    ("(a-3)//2+1", "(a-1)//2"),  # floor((a-3)/2)+1 == floor((a-1)/2) for every integer a
    ("x//2+(x+1)//2", "x"),  # the floor-division ring
    ("x//5//2", "x//10"),
    ("a+b-a", "b"),
    ("a + b - a", "b"),
    ("3*x+2*x", "5*x"),
    ("1024*a//2", "512*a"),
    ("(2*x + 4) // 2", "x+2"),
    ("(2*b+2*c+3)//2", "b+c+1"),
    ("6*a//4", "3*a//2"),
    ("4096*a*b + 8*a*b", "4104*a*b"),
    ("a * b + c", "a*b+c"),
    ("5 + x - 2 + 3", "x+6"),  # linear form, constant last
    ("1 - x", "1-x"),  # a subtraction, never a leading minus before a positive part
    ("-1+x", "x-1"),
    ("x-x", 0),
    ("0*x", 0),
    ("2^2", 2),
    ("2*batch//batch^2", 2),
    ("Max(a, b)", "a^b"),
    ("max(a, b)", "a^b"),
    ("Min(a, b)", "a&b"),  # the origins left Min opaque
    ("b^a", "a^b"),  # max/min arguments are sorted like + and *
    ("b&a", "a&b"),
    ("x^x", "x"),
    ("x&x", "x"),
    # constants the origins did not fold (research §5.1 #7)
    ("2*3%4", 2),
    ("-2^3", 3),
    ("2&1", 1),
    ("x%1", 0),
    ("0//x", 0),
    ("CeilToInt(-3, 2)", -1),
    ("broadcast(a, a)", "a"),
    ("broadcast(a, 1)", "a"),
    ("broadcast(4, a)", 4),
]


@pytest.mark.parametrize(("text", "expected"), SIMPLIFY_CASES)
def test_simplify_documented_examples(text, expected):
    result = simplify_expression(text)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("CeilToInt(n, 8)", "(n+7)//8"),
        ("(a + b) * c", "a*c+b*c"),
        ("a*b", "b*a"),
        ("a+b", "b+a"),
        ("Max(a, b) + 1", "(a^b)+1"),
        ("seq+past_seq", "past_seq+seq"),
    ],
)
def test_simplify_is_canonical(text, same_as):
    assert simplify_expression(text) == simplify_expression(same_as)


def test_simplify_floor_division_in_denominator_is_not_cancelled():
    # research §5.1 #3: x//(x//2) is 3 at x=3, the origins said 2
    result = simplify_expression("x//(x//2)")
    assert result != 2
    assert evaluate_expression(str(result), {"x": 3}) == 3


@pytest.mark.parametrize("text", ["input::0", "batch size", "?", "a+", ""])
def test_simplify_returns_unparsable_text_unchanged(text):
    assert simplify_expression(text) == text


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("7/:2", InexactDivisionError),  # research §5.1 #4: the origin folded it to 3
        ("6/:4", InexactDivisionError),
        ("x//0", ZeroDivisionError),
        ("broadcast(2, 3)", BroadcastError),
    ],
)
def test_simplify_raises_on_expressions_undefined_everywhere(text, error):
    with pytest.raises(error):
        simplify_expression(text)


# ------------------------------------------------------------------------------------------
# Bugs of the origins (research §5.1): the printed text must keep its meaning
# ------------------------------------------------------------------------------------------

MEANING_CASES = [
    # #1 same-precedence right operand of * lost its parentheses
    "a*(b//c)",
    "a*(b%c)",
    "A*(H//2)",
    "2*(H//2)*b",
    "(S+2*(S//2))//3",
    "(x+1)*(y%3)",
    "a*(b/:c)*c",
    # #2 the linear collector lost parentheses around ^, & and negated //
    "(a^b)+1",
    "2*(a^b)",
    "-(a^b)",
    "c-(a^b)",
    "(a&b)+1",
    "-(x//2)",
    "-(x%3)",
    "3-(x//2)",
    "(a^b)*(c&d)",
    "(a^b)//2",
    "-(a-b)//2",
    # #6 rounding: CeilToInt on negatives
    "CeilToInt(a, 2)",
    "CeilToInt(a-b, 3)",
]


@pytest.mark.parametrize("text", MEANING_CASES)
def test_simplified_text_keeps_its_meaning(text):
    assert_same_function(text, simplify_expression(text), values=range(-4, 5))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a*(b//c)", "a*(b//c)"), ("a*(b%c)", "a*(b%c)"), ("-(x//2)", "-(x//2)")],
)
def test_needed_parentheses_are_printed(text, expected):
    assert simplify_expression(text) == expected


def test_rename_dynamic_expression_keeps_parentheses():
    # research §5.1 #1: the origin printed x*b//c
    assert rename_dynamic_expression("a*(b//c)", {"a": "x"}) == "x*(b//c)"


@pytest.mark.parametrize(
    "text",
    ["4611686018427387904*4*x", "1048576*1048576*1048576*1048576", "9223372036854775807+1"],
)
def test_simplify_overflow_raises(text):
    # research §5.1 #5: the origin wrapped to 0
    with pytest.raises(OverflowError, match="outside int64"):
        simplify_expression(text)


def test_simplify_literal_overflow_raises():
    with pytest.raises(OverflowError, match="Integer literal"):
        simplify_expression("99999999999999999999+x")


# ------------------------------------------------------------------------------------------
# simplify_two_expressions / compare_expressions
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("x+1", "y", {"x": 1, "y": -1}),
        ("x+1", "x", {}),
        ("2*a+b", "a", {"a": 1, "b": 1}),
        ("a*(b//2)", "0", {"a*(b//2)": 1}),
    ],
)
def test_simplify_two_expressions(a, b, expected):
    assert simplify_two_expressions(a, b) == expected


def test_simplify_two_expressions_raises_on_bad_input():
    with pytest.raises(ExprSyntaxError):
        simplify_two_expressions("x+", "y")


@pytest.mark.parametrize(
    ("a", "b", "result", "difference"),
    [
        ("x+1", "x", "Greater", -1),
        ("x", "x+1", "Smaller", 1),
        ("x", "x", "Equal", 0),
        ("a+b", "b+a", "Equal", 0),
        ("x", "-1", "Greater", "-x-1"),
        ("2*x+1", "x", "Greater", None),
        ("2*x", "x", "Unknown", None),  # x may be 0: 2*x == x
        ("x", "y", "Unknown", None),
        ("x*y", "x", "Unknown", None),
        ("x//2", "x", "Unknown", None),  # x//2 <= x for x >= 0, but equal at 0
        ("x//2+1", "x//2", "Greater", -1),
    ],
)
def test_compare_expressions(a, b, result, difference):
    got_result, got_difference = compare_expressions(a, b)
    assert got_result == result
    assert_same_function(f"({b})-({a})", got_difference, values=range(4))
    if difference is not None:
        assert got_difference == difference


# ------------------------------------------------------------------------------------------
# evaluate_expression / parse_expression / unparse / tokens
# ------------------------------------------------------------------------------------------

EVALUATE_CASES = [
    ("-7%3", {}, 2),  # research §5.1 #6: floor modulo, the origin said -1
    ("-7//2", {}, -4),
    ("CeilToInt(-3, 2)", {}, -1),  # the origin said 0
    ("CeilToInt(n, 8)", {"n": 17}, 3),
    ("a^b", {"a": 3, "b": 4}, 4),
    ("a&b", {"a": 3, "b": 4}, 3),
    ("Max(a, b)", {"a": 3, "b": 4}, 4),
    ("min(a, b)", {"a": 3, "b": 4}, 3),
    ("broadcast(a, b)", {"a": 1, "b": 4}, 4),
    ("a/:2", {"a": 8}, 4),
    ("x//(x//2)", {"x": 3}, 3),
    ("2*(H//2)", {"H": 3}, 2),
]


@pytest.mark.parametrize(("text", "env", "value"), EVALUATE_CASES)
def test_evaluate_expression(text, env, value):
    assert evaluate_expression(text, env) == value


@pytest.mark.parametrize(
    ("text", "env", "error"),
    [
        ("a/:2", {"a": 7}, InexactDivisionError),
        ("a//b", {"a": 7, "b": 0}, ZeroDivisionError),
        ("a+b", {"a": 1}, KeyError),
        ("foo(a)", {"a": 1}, ExprError),
        ("a+", {}, ExprSyntaxError),
        ("a*b", {"a": 2**62, "b": 4}, OverflowError),
    ],
)
def test_evaluate_expression_errors(text, env, error):
    with pytest.raises(error):
        evaluate_expression(text, env)


def test_parse_expression_and_unparse():
    tree = parse_expression("a * (b // 2)")
    assert tree == BinOp("*", Name("a"), BinOp("//", Name("b"), Constant(2)))
    assert unparse(tree) == "a*(b//2)"
    assert unparse(parse_expression("(a^b) + 1")) == "(a^b)+1"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Max(s1, s2)", {"s1", "s2"}),  # function names are not tokens (yobx included them)
        ("batch*seq+1", {"batch", "seq"}),
        ("a-a", {"a"}),
        ("3", set()),
        ("a::b", {"a::b"}),  # unparsable: the text itself
    ],
)
def test_parse_expression_tokens(text, tokens):
    assert parse_expression_tokens(text) == tokens


# ------------------------------------------------------------------------------------------
# Renaming
# ------------------------------------------------------------------------------------------


def test_rename_expression_is_simultaneous():
    # no chaining: s0 -> s1 and s1 -> batch renames s0 to s1, not to batch
    assert rename_expression("s0+2*s1", {"s0": "s1", "s1": "batch"}) == "s1+2*batch"


def test_rename_expression_outputs_the_seed_dialect_without_simplifying():
    assert rename_expression("Max(s0, s1)", {"s0": "a", "s1": "b"}) == "a^b"
    assert rename_expression("s0 - s1", {"s0": "n", "s1": "n"}) == "n-n"


def test_rename_expression_raises_on_bad_input():
    with pytest.raises(ExprSyntaxError):
        rename_expression("input::0", {})


@pytest.mark.parametrize(
    ("text", "replacements", "expected"),
    [
        ("s0*2", {"s0": "batch"}, "batch*2"),  # leaf renames keep the structure
        # compound keys match modulo the canonical form, also as a sub-sum
        ("seq+past_seq", {"past_seq+seq": "total"}, "total"),
        ("past_seq+seq+1", {"past_seq+seq": "total"}, "total+1"),
        ("(c+past_seq)+seq", {"past_seq+seq": "total"}, "c+total"),
        ("2*(seq+past_seq)", {"past_seq+seq": "total"}, "2*total"),
        ("(seq+past_seq)//2", {"past_seq+seq": "total"}, "total//2"),
        # broadcast of two names that become the same collapses
        ("broadcast(s0, s1)", {"s0": "N", "s1": "N"}, "N"),
        ("broadcast(s0, N)", {"s0": "N"}, "N"),
        # unparsable input is returned unchanged
        ("input::0", {"input": "x"}, "input::0"),
        ("batch size", {}, "batch size"),
    ],
)
def test_rename_dynamic_expression(text, replacements, expected):
    assert rename_dynamic_expression(text, replacements) == expected


def test_rename_dynamic_expression_ignores_bad_keys():
    assert rename_dynamic_expression("s0+1", {"a::b": "x", "2": "y", "s0": "n"}) == "n+1"


def test_rename_dynamic_expression_with_a_cycle_is_simultaneous():
    assert rename_dynamic_expression("a+2*b", {"a": "b", "b": "a"}) == "b+2*a"


@pytest.mark.parametrize(
    ("constraints", "original", "expected"),
    [
        # the ban is a filter: batch is chosen although DYN0 sorts first (the origin vetoed)
        (
            {"s0": {"DYN0", "batch"}},
            {"DYN0", "batch"},
            {"DYN0": "DYN0", "batch": "batch", "s0": "batch"},
        ),
        # full transitive closure (the origin stopped after ~2 hops)
        (
            {"s1": {"s2"}, "s2": {"s3"}, "s3": {"N"}},
            {"N"},
            {"N": "N", "s1": "N", "s2": "N", "s3": "N"},
        ),
        # byte order: uppercase sorts before lowercase
        ({"s0": {"batch", "B"}}, {"batch", "B"}, {"B": "B", "batch": "batch", "s0": "B"}),
        # two linked preferred names are never renamed (yobx swapped them)
        ({"batch": {"N"}, "N": {"batch"}}, {"batch", "N"}, {"N": "N", "batch": "batch"}),
        # only banned names in the class: nothing is renamed
        ({"s0": {"DYN0"}}, {"DYN0"}, {"DYN0": "DYN0"}),
        # no preferred name in the class
        ({"s0": {"s1"}}, {"batch"}, {"batch": "batch"}),
    ],
)
def test_rename_dynamic_dimensions(constraints, original, expected):
    assert rename_dynamic_dimensions(constraints, original) == expected


def test_rename_dynamic_dimensions_does_not_depend_on_order():
    pairs = [("s0", "s1"), ("s1", "batch"), ("s2", "seq"), ("s3", "s2"), ("s4", "DYN1")]
    results = set()
    for perm in itertools.permutations(pairs):
        constraints: dict[str, set[str]] = {}
        for k, v in perm:
            constraints.setdefault(k, set()).add(v)
        results.add(
            tuple(rename_dynamic_dimensions(constraints, {"batch", "seq", "DYN1"}).items())
        )
    assert results == {
        (
            ("DYN1", "DYN1"),
            ("batch", "batch"),
            ("s0", "batch"),
            ("s1", "batch"),
            ("s2", "seq"),
            ("s3", "seq"),
            ("seq", "seq"),
        )
    }


def test_rename_dynamic_dimensions_custom_and_empty_ban():
    constraints = {"s0": {"TMP_a", "zeta"}}
    assert rename_dynamic_dimensions(constraints, {"TMP_a", "zeta"}, ban_prefix="TMP")[
        "s0"
    ] == ("zeta")
    assert (
        rename_dynamic_dimensions(constraints, {"TMP_a", "zeta"}, ban_prefix="")["s0"]
        == "TMP_a"
    )


# ------------------------------------------------------------------------------------------
# Dimension arithmetic
# ------------------------------------------------------------------------------------------

DIM_OP_CASES = [
    # documented examples (the design page said "1+batch"; the implementation prints batch+1)
    (dim_add, "batch", 1, "batch+1"),
    (dim_mul, 2, "seq_length", "2*seq_length"),
    (dim_div, "2*seq_length", 2, "seq_length"),
    (dim_div, "2*n", "n", 2),
    (dim_exact_div, "batch*4", 2, "2*batch"),
    (dim_exact_div, "2*batch*seq", "batch*seq", 2),
    # ints are computed exactly with floor semantics (research §5.1 #6)
    (dim_add, 2, 3, 5),
    (dim_sub, 2, 3, -1),
    (dim_mul, 4, 5, 20),
    (dim_div, -7, 2, -4),
    (dim_mod, -7, 3, 2),
    (dim_mod, 7, -3, -2),
    (dim_exact_div, -8, 2, -4),
    (dim_max, 2, 3, 3),
    (dim_min, 2, 3, 2),
    # constant symbolic results are ints
    (dim_sub, "a+1", "a", 1),
    (dim_sub, "a", "a", 0),
    (dim_mod, "2*a", 2, 0),
    (dim_max, "a", "a", "a"),
    (dim_max, "a+1", "a", "a+1"),
    (dim_min, "a+1", "a", "a"),
    (dim_max, "b", "a", "a^b"),
    (dim_min, "b", "a", "a&b"),
    (dim_mul, "a+1", "a-1", "a*a-1"),
    (dim_div, "x", "x//2", "x//(x//2)"),
]


@pytest.mark.parametrize(("fn", "a", "b", "expected"), DIM_OP_CASES)
def test_dim_operations(fn, a, b, expected):
    result = fn(a, b)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("fn", "a", "b", "error"),
    [
        (dim_exact_div, 7, 2, InexactDivisionError),
        (dim_exact_div, 4, 0, ZeroDivisionError),
        (dim_exact_div, "a", 0, ZeroDivisionError),
        (dim_div, 3, 0, ZeroDivisionError),
        (dim_div, "a", 0, ZeroDivisionError),
        (dim_mod, 3, 0, ZeroDivisionError),
        (dim_mul, 2**62, 4, OverflowError),  # the origin returned 0
        (dim_add, 2**63 - 1, 1, OverflowError),
        (dim_sub, -(2**63), 1, OverflowError),
        (dim_add, 2**63, 0, OverflowError),
        (dim_mul, "4611686018427387904*x", 4, OverflowError),
        (dim_add, "a::b", 1, ExprSyntaxError),
        (dim_add, 1.5, 1, TypeError),
        (dim_add, True, 1, TypeError),
    ],
)
def test_dim_operation_errors(fn, a, b, error):
    with pytest.raises(error):
        fn(a, b)


@pytest.mark.parametrize(
    ("dims", "expected"),
    [
        ([], 1),
        ([2, 3, 4], 24),
        ([2, "a", 3], "6*a"),
        (["a", "b", "a"], "a*a*b"),
        (["n", 0], 0),
        ([2**62, 4, 0], 0),  # only the final product must fit int64
    ],
)
def test_dim_multi_mul(dims, expected):
    result = dim_multi_mul(dims)
    assert result == expected
    assert type(result) is type(expected)


def test_dim_multi_mul_overflow():
    with pytest.raises(OverflowError):
        dim_multi_mul([2**32, 2**32])
    with pytest.raises(OverflowError):
        dim_multi_mul(["x", 2**32, 2**32])


def test_string_api_is_exported_from_the_package():
    from onnx_symdims import expr

    assert expr.simplify_expression("2*(H/:2)") == "H"
    assert expr.dim_add("batch", 1) == "batch+1"
    for name in (
        "simplify_two_expressions",
        "compare_expressions",
        "evaluate_expression",
        "parse_expression",
        "unparse",
        "parse_expression_tokens",
        "rename_expression",
        "rename_dynamic_expression",
        "rename_dynamic_dimensions",
        "dim_sub",
        "dim_mul",
        "dim_div",
        "dim_exact_div",
        "dim_mod",
        "dim_max",
        "dim_min",
        "dim_multi_mul",
    ):
        assert callable(getattr(expr, name)), name


def test_operation_memo_keeps_types_apart():
    assert dim_add(1, "a") == "a+1"
    with pytest.raises(TypeError):
        dim_add(1.0, "a")  # 1.0 == 1 and hashes alike: the memo must not answer for it


def test_operation_memo_returns_the_same_results_after_clearing():
    from onnx_symdims.expr._seed_api import clear_caches

    first = [dim_mul("a+1", "b"), dim_div("x", 2), dim_max("p", "q")]
    clear_caches()
    assert [dim_mul("a+1", "b"), dim_div("x", 2), dim_max("p", "q")] == first
