"""expr.evaluator: a dim compiled to a function agrees with DimExpr.evaluate everywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_symdims import expr
from onnx_symdims.expr import ExprError, evaluate, evaluator, parse_dim
from tests.expr.test_properties import PROPERTY_SETTINGS, SYMBOLS, UNDEFINED, _canonical, trees

points = st.lists(st.tuples(*(st.integers(-7, 9) for _ in SYMBOLS)), min_size=1, max_size=12)


@PROPERTY_SETTINGS
@given(trees, points)
def test_the_compiled_dim_evaluates_like_the_dim(tree, values):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        return
    if d is None:
        return
    f = evaluator(d, SYMBOLS)
    for point in values:
        env = dict(zip(SYMBOLS, point))
        try:
            expected = evaluate(d, env)
        except UNDEFINED:
            with pytest.raises(UNDEFINED):
                f(*point)
            continue
        assert f(*point) == expected, (expr.to_onnx(d), env)


@pytest.mark.parametrize(
    ("text", "point", "value"),
    [
        ("min(seq+min(8,past),8)", (3, 2), 5),
        ("max(w+31,32)//32", (0,), 1),
        ("(a+b)/:2", (3, 5), 4),  # an exact division that divides
        ("broadcast(a,1)", (5,), 5),
        ("7", (), 7),
    ],
)
def test_values(text, point, value):
    d = parse_dim(text)
    names = tuple(sorted(d.symbols())) if not isinstance(d, int) else ()
    assert evaluator(d, names)(*point) == value


@pytest.mark.parametrize(
    ("text", "point", "error"),
    [
        ("a/:2", (3,), expr.InexactDivisionError),
        ("a//b", (3, 0), ZeroDivisionError),
        ("broadcast(a,b)", (2, 3), expr.BroadcastError),
    ],
)
def test_undefined_points_raise_as_evaluate_does(text, point, error):
    d = parse_dim(text)
    f = evaluator(d, tuple(sorted(d.symbols())))
    with pytest.raises(error):
        f(*point)


def test_a_symbol_not_named_and_an_unknown_raise():
    with pytest.raises(KeyError):
        evaluator(parse_dim("a+b"), ("a",))(1)
    with pytest.raises(ExprError):
        evaluator(expr.unknown("opaque"), ())()


def test_the_same_function_is_returned_again():
    d = parse_dim("a+1")
    assert evaluator(d, ("a",)) is evaluator(d, ("a",))
