"""Parser, unparser and lowering of dimension expressions (``onnx_symdims.expr._parse``)."""

from __future__ import annotations

import pytest

from onnx_symdims.expr import (
    BroadcastError,
    ExprError,
    ExprSyntaxError,
    InexactDivisionError,
    broadcast,
    call,
    ceildiv,
    dmax,
    dmin,
    evaluate,
    exact_div,
    floordiv,
    mod,
    sym,
)
from onnx_symdims.expr._parse import (
    MAX_TREE_DEPTH,
    BinOp,
    Call,
    Constant,
    Name,
    UnaryOp,
    evaluate_tree,
    parse_dim,
    parse_expr,
    parse_tree,
    tree_to_dim,
    unparse,
)

a, b, c, x = Name("a"), Name("b"), Name("c"), Name("x")


def C(v: int) -> Constant:
    return Constant(v)


def neg(node):
    return UnaryOp("-", node)


# ------------------------------------------------------------------------------------------
# Grammar and precedence
# ------------------------------------------------------------------------------------------

PRECEDENCE_CASES = [
    # unary binds tighter than //: (-7)//2, the seed's documented reading
    ("-7//2", BinOp("//", neg(C(7)), C(2))),
    # ^ is the loosest operator: a^b+c is max(a, b+c)
    ("a^b+c", BinOp("^", a, BinOp("+", b, c))),
    ("a+b^c", BinOp("^", BinOp("+", a, b), c)),
    # & binds tighter than ^
    ("a^b&c", BinOp("^", a, BinOp("&", b, c))),
    ("a&b^c", BinOp("^", BinOp("&", a, b), c)),
    # + - looser than * // /: % /
    ("a+b*c", BinOp("+", a, BinOp("*", b, c))),
    ("a-b//c", BinOp("-", a, BinOp("//", b, c))),
    ("a&b+c", BinOp("&", a, BinOp("+", b, c))),
    # left associativity at every level
    ("a-b-c", BinOp("-", BinOp("-", a, b), c)),
    ("a//b*c", BinOp("*", BinOp("//", a, b), c)),
    ("a*b//c", BinOp("//", BinOp("*", a, b), c)),
    ("a/:b*c", BinOp("*", BinOp("/:", a, b), c)),
    ("a%b%c", BinOp("%", BinOp("%", a, b), c)),
    ("a^b^c", BinOp("^", BinOp("^", a, b), c)),
    ("a/b/c", BinOp("/", BinOp("/", a, b), c)),
    # parentheses override
    ("a*(b//c)", BinOp("*", a, BinOp("//", b, c))),
    ("(a^b)+1", BinOp("+", BinOp("^", a, b), C(1))),
    ("-(x//2)", neg(BinOp("//", x, C(2)))),
    # ** is right-associative and tighter than a unary minus on its left (Python)
    ("a**b**c", BinOp("**", a, BinOp("**", b, c))),
    ("-a**2", neg(BinOp("**", a, C(2)))),
    ("(-a)**2", BinOp("**", neg(a), C(2))),
    ("a**-2", BinOp("**", a, neg(C(2)))),
    ("2*a**3", BinOp("*", C(2), BinOp("**", a, C(3)))),
    # unary chains and unary plus
    ("--a", neg(neg(a))),
    ("+a", UnaryOp("+", a)),
    ("a--b", BinOp("-", a, neg(b))),
    # calls, dotted names, spaces anywhere
    ("f(a, b+1)", Call("f", (a, BinOp("+", b, C(1))))),
    ("f()", Call("f", ())),
    ("Max ( a , b )", Call("Max", (a, b))),
    ("decoder_input_ids.45_dim_1 + 1", BinOp("+", Name("decoder_input_ids.45_dim_1"), C(1))),
    ("\ta\n*\r b ", BinOp("*", a, b)),
    (" a /: b ", BinOp("/:", a, b)),
    ("007", C(7)),
]


@pytest.mark.parametrize(("text", "tree"), PRECEDENCE_CASES)
def test_parse_tree_precedence(text, tree):
    assert parse_tree(text) == tree


UNPARSE_CASES = [
    # needed parentheses are kept (the origins drop these, research §5.1 #1 and #2)
    (BinOp("*", a, BinOp("//", b, c)), "a*(b//c)"),
    (BinOp("*", a, BinOp("%", b, c)), "a*(b%c)"),
    (neg(BinOp("//", x, C(2))), "-(x//2)"),
    (BinOp("+", BinOp("^", a, b), C(1)), "(a^b)+1"),
    (BinOp("+", BinOp("&", a, b), C(1)), "(a&b)+1"),
    (BinOp("*", C(2), BinOp("^", a, b)), "2*(a^b)"),
    (neg(BinOp("^", a, b)), "-(a^b)"),
    (BinOp("-", c, BinOp("^", a, b)), "c-(a^b)"),
    (BinOp("-", a, BinOp("-", b, c)), "a-(b-c)"),
    (BinOp("^", a, BinOp("^", b, c)), "a^(b^c)"),
    (BinOp("**", BinOp("**", a, b), c), "(a**b)**c"),
    (BinOp("**", neg(a), C(2)), "(-a)**2"),
    (BinOp("**", a, BinOp("+", b, c)), "a**(b+c)"),
    # unnecessary parentheses are not printed
    (BinOp("^", BinOp("+", a, b), c), "a+b^c"),
    (BinOp("*", BinOp("//", a, b), c), "a//b*c"),
    (BinOp("**", a, neg(C(2))), "a**-2"),
    (BinOp("**", a, BinOp("**", b, c)), "a**b**c"),
    (BinOp("-", a, neg(b)), "a--b"),
    (neg(BinOp("**", a, C(2))), "-a**2"),
    (Call("f", (BinOp("^", a, b), c)), "f(a^b,c)"),
    (neg(C(7)), "-7"),
    (BinOp("**", C(-3), C(2)), "(-3)**2"),
]


@pytest.mark.parametrize(("tree", "text"), UNPARSE_CASES)
def test_unparse_minimal_parentheses(tree, text):
    assert unparse(tree) == text
    if not (isinstance(tree, BinOp) and tree.left == C(-3)):
        assert parse_tree(text) == tree


SYNTAX_ERRORS = [
    "",
    "   ",
    "a+",
    "(a",
    "a)",
    "2d",
    "a b",
    "batch size",
    "?",
    "input:0_dim_0",
    "a,b",
    "f(a,)",
    "f(,)",
    "a//",
    "*a",
    "a / : b",
    "1e5",
    "0x10",
    "a::b",
    "1.5",
    "é",
    "a = b",
    "a ** ",
    "()",
]


@pytest.mark.parametrize("text", SYNTAX_ERRORS)
def test_syntax_errors(text):
    with pytest.raises(ExprSyntaxError):
        parse_tree(text)
    with pytest.raises(ExprSyntaxError):
        parse_expr(text)


def test_syntax_error_message_points_at_the_problem():
    with pytest.raises(ExprSyntaxError, match=r"Unexpected character '\?' at position 2"):
        parse_tree("a+?")


def test_non_string_is_a_syntax_error():
    with pytest.raises(ExprSyntaxError):
        parse_tree(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "9223372036854775808",
        "a-9223372036854775808",  # binary minus: the literal itself is out of range
        "-9223372036854775808**1",  # the literal is the base of **, not negated first
        "99999999999999999999999*x",
        "f(18446744073709551616)",
    ],
)
def test_literal_outside_int64_is_overflow(text):
    with pytest.raises(OverflowError, match="outside int64"):
        parse_tree(text)
    with pytest.raises(OverflowError):
        parse_expr(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("-9223372036854775807", -(2**63) + 1),
    ],
)
def test_int64_limits_are_accepted(text, value):
    assert parse_expr(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "(" * 1000 + "a" + ")" * 1000,
        "-" * 1000 + "a",
        "a+" * 1000 + "a",
        "f(" * 1000 + "a" + ")" * 1000,
        "a**" * 1000 + "a",
    ],
)
def test_deep_nesting_is_a_clean_syntax_error(text):
    with pytest.raises(ExprSyntaxError, match="nested deeper"):
        parse_tree(text)
    assert parse_dim(text) is sym(text)


def test_depth_limit_allows_realistic_expressions():
    text = "(" * (MAX_TREE_DEPTH // 2) + "a" + ")" * (MAX_TREE_DEPTH // 2)
    assert parse_expr(text) is sym("a")


# ------------------------------------------------------------------------------------------
# Lowering: every dialect reads into the canonical algebra
# ------------------------------------------------------------------------------------------

A, B, S0 = sym("a"), sym("b"), sym("s0")

DIALECT_CASES = [
    # seed dialect
    ("a^b", dmax(A, B)),
    ("a&b", dmin(A, B)),
    ("a/:2", exact_div(A, 2)),
    ("CeilToInt(a, 8)", ceildiv(A, 8)),
    ("Max(a, b)", dmax(A, B)),
    ("max(a, b)", dmax(A, B)),
    ("max(a, b, 3)", dmax(A, B, 3)),
    ("Min(a, b)", dmin(A, B)),
    ("min(a, b)", dmin(A, B)),
    ("broadcast(a, b)", broadcast(A, B)),
    # onnx-ir / SymPy output
    ("floor(a/2)", floordiv(A, 2)),
    ("floor(a/2 + 1/2)", floordiv(A + 1, 2)),
    ("ceiling(a/2)", ceildiv(A, 2)),
    ("ceil(a/b)", ceildiv(A, B)),
    ("Mod(a, 3)", mod(A, 3)),
    ("mod(a, 3)", mod(A, 3)),
    ("a/2", exact_div(A, 2)),
    # SymPy prints (a+1)/2 as a/2 + 1/2: the quotient is exact as a whole, not per term
    ("a/2 + 1/2", exact_div(A + 1, 2)),
    ("3*a/2", exact_div(3 * A, 2)),
    ("a**3", A * A * A),
    ("a**0", 1),
    ("a**-1", exact_div(1, A)),
    ("floor(a)", A),
    ("floor(a**2/4)", floordiv(A * A, 4)),
    # torch
    ("(s0//2)", floordiv(S0, 2)),
    ("FloorDiv(s0, 2)", floordiv(S0, 2)),
    ("CleanDiv(s0, 2)", exact_div(S0, 2)),
    ("CeilDiv(s0, 4)", ceildiv(S0, 4)),
    ("PythonMod(s0, 3)", mod(S0, 3)),
    ("ModularIndexing(s0, 2, 4)", mod(floordiv(S0, 2), 4)),
    ("IntTrueDiv(s0, 2)", exact_div(S0, 2)),
    ("TruncToInt(s0)", S0),
    ("FloorToInt(s0)", S0),
    ("CeilToInt(s0)", S0),
    ("FloorToInt(IntTrueDiv(s0, 2))", floordiv(S0, 2)),
    ("CeilToInt(IntTrueDiv(s0, 2))", ceildiv(S0, 2)),
    ("Identity(s0)", S0),
    # unknown functions stay opaque; dotted names are one symbol
    ("foo(a, 2)", call("foo", (A, 2))),
    ("sqrt(a)", call("sqrt", (A,))),
    ("a.b + 1", sym("a.b") + 1),
]


@pytest.mark.parametrize(("text", "expected"), DIALECT_CASES)
def test_dialects_lower_to_the_canonical_form(text, expected):
    if isinstance(expected, int):
        assert parse_expr(text) == expected
    else:
        assert parse_expr(text) is expected


def test_truncation_of_a_true_quotient_stays_opaque():
    # trunc(a/2) is not a floor or ceil division for every sign of a: keep it uninterpreted
    d = parse_expr("TruncToInt(a/2)")
    assert d is call("TruncDiv", (A, 2))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a//0", ZeroDivisionError),
        ("a%0", ZeroDivisionError),
        ("a/:0", ZeroDivisionError),
        ("a/(b-b)", ZeroDivisionError),
        ("7/:2", InexactDivisionError),
        ("7/2", InexactDivisionError),
        ("broadcast(2, 3)", BroadcastError),
        ("FloorDiv(a)", ExprSyntaxError),
        ("ModularIndexing(a, 2)", ExprSyntaxError),
        ("max()", ExprSyntaxError),
    ],
)
def test_expressions_undefined_everywhere_raise(text, error):
    with pytest.raises(error):
        parse_expr(text)
    # ... but a dim_param never makes the engine fail: it is one opaque symbol
    assert parse_dim(text) is sym(text)


def test_large_exponent_stays_opaque():
    assert parse_expr("a**100") is call("pow", (A, 100))
    assert parse_expr("a**b") is call("pow", (A, B))


def test_computed_overflow_is_an_unknown_not_a_wrapped_value():
    d = parse_expr("4611686018427387904*4*x")
    assert d.is_unknown and d.unknown_reason == "overflow"


# ------------------------------------------------------------------------------------------
# parse_dim: never raises, memoized
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["input:0_dim_0", "batch size", "?", "2d", "unk__3", "a::b", "N#A", " "]
)
def test_parse_dim_non_expression_is_one_opaque_symbol(text):
    d = parse_dim(text)
    assert d is sym(text)
    assert d.symbols() == frozenset({text})


def test_parse_dim_reads_expressions_and_is_memoized():
    assert parse_dim("batch + 1") is sym("batch") + 1
    assert parse_dim("3") == 3
    assert parse_dim("seq*2") is parse_dim("seq*2")


def test_parse_dim_overflowing_literal_is_opaque():
    text = "99999999999999999999"
    assert parse_dim(text) is sym(text)


# ------------------------------------------------------------------------------------------
# Raw-tree evaluation (reference semantics used by the property tests)
# ------------------------------------------------------------------------------------------

EVAL_CASES = [
    ("-7%3", {}, 2),  # floor modulo, not C truncation
    ("7%-3", {}, -2),
    ("-7//2", {}, -4),
    ("CeilToInt(-3, 2)", {}, -1),
    ("a^b", {"a": 2, "b": 5}, 5),
    ("a&b", {"a": 2, "b": 5}, 2),
    ("a^b+c", {"a": 4, "b": 1, "c": 2}, 4),
    ("(a^b)+c", {"a": 4, "b": 1, "c": 2}, 6),
    ("a/:2", {"a": 6}, 3),
    ("floor(a/2)", {"a": -3}, -2),
    ("ceiling(a/2)", {"a": -3}, -1),
    ("TruncToInt(a/2)", {"a": -3}, -1),
    ("a/2 + 4/2", {"a": 6}, 5),
    ("floor(a/2 + 1/2)", {"a": 4}, 2),
    ("broadcast(1, a)", {"a": 5}, 5),
    ("ModularIndexing(a, 2, 4)", {"a": 13}, 2),
    ("max(a, b, c)", {"a": 1, "b": 7, "c": 3}, 7),
    ("a**3", {"a": -2}, -8),
]


@pytest.mark.parametrize(("text", "env", "value"), EVAL_CASES)
def test_evaluate_tree(text, env, value):
    assert evaluate_tree(parse_tree(text), env) == value


@pytest.mark.parametrize(
    ("text", "env", "error"),
    [
        ("7/:2", {}, InexactDivisionError),
        ("a/2", {"a": 3}, InexactDivisionError),
        # outside floor/ceiling "/" is exact node by node (the lowering is more lenient)
        ("a/2 + 1/2", {"a": 3}, InexactDivisionError),
        ("a//b", {"a": 1, "b": 0}, ZeroDivisionError),
        ("broadcast(a, b)", {"a": 2, "b": 3}, BroadcastError),
        ("a + z", {"a": 1}, KeyError),
        ("foo(a)", {"a": 1}, ExprError),
    ],
)
def test_evaluate_tree_errors(text, env, error):
    with pytest.raises(error):
        evaluate_tree(parse_tree(text), env)


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("floor(a/2 + 1/2)", {"a": 5}),
        ("ceiling(a/3)", {"a": -4}),
        ("ModularIndexing(a, 3, 4)", {"a": -17}),
        ("CeilDiv(a, b)", {"a": 7, "b": -2}),
        ("a/2 + b/2", {"a": 2, "b": 6}),
        ("a/(a/b)", {"a": 6, "b": 3}),
    ],
)
def test_lowering_agrees_with_raw_evaluation(text, env):
    assert evaluate(tree_to_dim(parse_tree(text)), env) == evaluate_tree(parse_tree(text), env)
