"""Property tests: every rewrite and every printer against brute-force evaluation.

Random raw trees over a few symbols and small constants, evaluated under random integer
assignments (negative values included) by the reference evaluator of the raw tree, must agree
with the canonical ``DimExpr`` wherever the raw tree is defined; both printers must round
trip to the very same object; the onnx printer's text must be read by ``onnx_ir``.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from onnx_symdims.expr import (
    BroadcastError,
    DimExpr,
    ExprError,
    InexactDivisionError,
    evaluate,
    to_onnx,
    to_seed,
)
from onnx_symdims.expr._parse import (
    BinOp,
    Call,
    Constant,
    Name,
    UnaryOp,
    evaluate_tree,
    parse_expr,
    parse_tree,
    tree_to_dim,
    unparse,
)

SYMBOLS = ("a", "b", "c")
UNDEFINED = (ZeroDivisionError, InexactDivisionError, BroadcastError)
PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _constant(v: int):
    return Constant(v) if v >= 0 else UnaryOp("-", Constant(-v))


leaves = st.one_of(
    st.sampled_from(SYMBOLS).map(Name),
    st.integers(-4, 6).map(_constant),
)

SEED_BINOPS = ("+", "-", "*", "//", "/:", "%", "^", "&")


def _extend(children):
    binop = st.builds(BinOp, st.sampled_from(SEED_BINOPS), children, children)
    true_div = st.builds(BinOp, st.just("/"), children, children)
    power = st.builds(BinOp, st.just("**"), children, st.integers(0, 3).map(Constant))
    negation = st.builds(UnaryOp, st.just("-"), children)
    extremum = st.builds(
        Call,
        st.sampled_from(("max", "min", "Max", "Min")),
        st.lists(children, min_size=1, max_size=3).map(tuple),
    )
    two_args = st.builds(
        Call,
        st.sampled_from(
            ("CeilToInt", "FloorDiv", "CeilDiv", "CleanDiv", "Mod", "PythonMod", "broadcast")
        ),
        st.tuples(children, children),
    )
    indexing = st.builds(
        Call, st.just("ModularIndexing"), st.tuples(children, children, children)
    )
    rounding = st.builds(
        Call,
        st.sampled_from(("floor", "ceiling", "FloorToInt", "CeilToInt")),
        st.tuples(true_div),
    )
    return st.one_of(
        binop, binop, binop, negation, extremum, two_args, indexing, rounding, true_div, power
    )


trees = st.recursive(leaves, _extend, max_leaves=10)
assignment = st.fixed_dictionaries({s: st.integers(-6, 6) for s in SYMBOLS})
assignments = st.lists(assignment, min_size=1, max_size=12)
positive_assignment = st.fixed_dictionaries({s: st.integers(1, 7) for s in SYMBOLS})


def _canonical(tree) -> object:
    """Lowers ``tree``; returns None when the algebra gave up (unknown: size/overflow)."""
    d = tree_to_dim(tree)
    if isinstance(d, DimExpr) and d.is_unknown:
        return None
    return d


@PROPERTY_SETTINGS
@given(trees, assignments)
def test_canonical_form_evaluates_like_the_raw_tree(tree, envs):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        # Lowering proved the expression undefined everywhere: the raw tree must agree.
        for env in envs:
            with pytest.raises(UNDEFINED):
                evaluate_tree(tree, env)
        return
    assume(d is not None)
    for env in envs:
        try:
            expected = evaluate_tree(tree, env)
        except UNDEFINED:
            continue
        got = evaluate(d, env)
        assert got == expected, (unparse(tree), env, to_seed(d))


def _lowered(tree):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        d = None
    assume(d is not None)
    return d


@PROPERTY_SETTINGS
@example(parse_tree("ceiling(max(a^-1)/-2)"))  # -max(a,-1) over 2: one spelling, not two
@given(trees)
def test_seed_printer_round_trips(tree):
    d = _lowered(tree)
    text = to_seed(d)
    back = parse_expr(text)
    assert back is d or (isinstance(d, int) and back == d), (unparse(tree), text)


@PROPERTY_SETTINGS
@given(trees)
def test_onnx_printer_round_trips(tree):
    d = _lowered(tree)
    text = to_onnx(d)
    back = parse_expr(text)
    assert back is d or (isinstance(d, int) and back == d), (unparse(tree), text)


@PROPERTY_SETTINGS
@given(trees)
def test_unparse_round_trips_the_raw_tree(tree):
    assert parse_tree(unparse(tree)) == tree


@PROPERTY_SETTINGS
@given(st.sampled_from(("+", "*", "^", "&")), trees, trees)
def test_commutative_operators_give_the_same_object(op, left, right):
    try:
        one = _canonical(BinOp(op, left, right))
        other = _canonical(BinOp(op, right, left))
    except UNDEFINED:
        return
    assume(one is not None and other is not None)
    assert one is other or (isinstance(one, int) and one == other), (
        unparse(BinOp(op, left, right)),
        to_seed(one),
        to_seed(other),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees, st.lists(positive_assignment, min_size=1, max_size=4))
def test_onnx_ir_reads_and_evaluates_the_onnx_printer_output(tree, envs):
    d = _lowered(tree)
    assume(isinstance(d, DimExpr))
    text = to_onnx(d)
    assume("broadcast" not in text)  # no peer grammar has broadcast
    # SymPy 1.14 rewrites Mod(2*Mod(c, a), 3) into Mod(2*Mod(c, a)**2, 3) (wrong at a=3, c=2):
    # with two or more '%' the oracle itself is unreliable.
    assume(text.count("%") <= 1)
    # onnx-ir declares its symbols positive integers: compare on positive assignments only.
    try:
        dim = ir.SymbolicDim(text) + 0  # onnx-ir parses the text (SymPy-backed) or raises
    except (ZeroDivisionError, ValueError):
        # SymPy folded a divisor to 0 using positivity (e.g. Mod(1, min(a, 0)), or
        # max(a, a/min(a, 0)) -> "zoo is not comparable"): only acceptable if the
        # expression really is undefined for positive values (our evaluation may meet
        # another undefined part first: ModularIndexing(a, CleanDiv(a, b), min(a, 0)) at
        # a=1, b=2 stops at the inexact 1 /: 2 before the modulo by 0).
        for env in envs:
            with pytest.raises(UNDEFINED):
                evaluate(d, env)
        return
    for env in envs:
        try:
            expected = evaluate(d, env)
        except (*UNDEFINED, ExprError):
            continue
        got = dim.evaluate(env)
        if got != expected:
            # SymPy 1.14's subs (used by SymbolicDim.evaluate) mis-evaluates e.g.
            # Max(a, floor(a/(b*c))) at a=1, b=1, c=2 (gives 0); xreplace is exact. The
            # property is about how onnx-ir *reads* our text, so use the exact substitution.
            expr = dim._expr
            got = expr.xreplace({s: env[str(s)] for s in expr.free_symbols})
        if got != expected:
            # SymPy 1.14 reads max(1,(-1)//((-a)//b)) as floor(-1/floor(-a/b)): it drops the
            # Max under its positive-integer assumptions (wrong at a=2, b=1). A Max or Min
            # that SymPy removed tests SymPy's simplifier, not how our text is read.
            kept = sum(str(expr).count(f) for f in ("Max", "Min"))
            assume(kept == text.count("max(") + text.count("min("))
        assert got == expected, (text, env)
