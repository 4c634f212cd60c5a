"""``broadcast`` is printed with binary calls only.

Scorers and onnx-ir based tools read ``broadcast(a,b)`` and nothing else, so a broadcast
of three or more dims prints as the left fold ``broadcast(broadcast(a,b),c)`` (canonical
argument order). The parser still reads the n-ary form, and both spellings — and any
other nesting — lower to the very same interned expression.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnx_symdims.expr import (
    BroadcastError,
    DimExpr,
    broadcast,
    dmax,
    evaluate,
    sym,
    to_onnx,
    to_seed,
)
from onnx_symdims.expr._parse import Call, parse_expr, parse_tree

a, b, c, d = sym("a"), sym("b"), sym("c"), sym("d")


def _broadcast_arities(node) -> list[int]:
    """The argument counts of every ``broadcast`` call in a raw parse tree."""
    found: list[int] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Call):
            if n.func == "broadcast":
                found.append(len(n.args))
            stack.extend(n.args)
        else:
            stack.extend(
                child
                for child in (
                    getattr(n, "left", None),
                    getattr(n, "right", None),
                    getattr(n, "operand", None),
                )
                if child is not None
            )
    return found


SPELLINGS = [
    (broadcast(a, b), "broadcast(a,b)"),
    (broadcast(c, a, b), "broadcast(broadcast(a,b),c)"),
    (broadcast(d, c, b, a), "broadcast(broadcast(broadcast(a,b),c),d)"),
    (broadcast(a, b + 1, 2 * c) + 1, "broadcast(broadcast(b+1,2*c),a)+1"),
    (2 * broadcast(a, b, c), "2*broadcast(broadcast(a,b),c)"),
    (dmax(broadcast(a, b, c), d), "max(d,broadcast(broadcast(a,b),c))"),
]


@pytest.mark.parametrize(("e", "text"), SPELLINGS)
def test_nary_broadcast_prints_as_a_left_fold(e, text):
    assert to_onnx(e) == text
    assert parse_expr(text) is e
    assert parse_expr(to_seed(e)) is e
    assert all(n == 2 for n in _broadcast_arities(parse_tree(to_seed(e))))


@pytest.mark.parametrize(
    "text",
    [
        "broadcast(a,b,c)",
        "broadcast(broadcast(a,b),c)",
        "broadcast(a,broadcast(b,c))",
        "broadcast(c,broadcast(b,a))",
        "broadcast(broadcast(c,a),b)",
        "broadcast(broadcast(a,b),broadcast(b,c))",
        "broadcast(broadcast(a,1),broadcast(c,b))",
    ],
)
def test_every_nesting_reads_as_the_same_object(text):
    assert parse_expr(text) is broadcast(a, b, c)


@pytest.mark.parametrize(
    "text",
    [
        "broadcast(a,b,c,d)",
        "broadcast(broadcast(broadcast(a,b),c),d)",
        "broadcast(broadcast(a,b),broadcast(c,d))",
        "broadcast(d,broadcast(c,broadcast(b,a)))",
    ],
)
def test_four_operands_read_as_the_same_object(text):
    e = broadcast(a, b, c, d)
    assert parse_expr(text) is e
    assert to_onnx(e) == "broadcast(broadcast(broadcast(a,b),c),d)"


@pytest.mark.parametrize("n", [16, 17, 40, 150, 1000])
def test_many_operands_stay_binary_and_within_the_parser_depth(n):
    e = broadcast(*[sym(f"s{i}") for i in range(n)])
    for text in (to_onnx(e), to_seed(e)):
        assert parse_expr(text) is e
        arities = _broadcast_arities(parse_tree(text))
        assert arities == [2] * (n - 1)
    if n <= 16:
        assert to_onnx(e).startswith("broadcast(" * (n - 1) + "s0,s1)")


# Small argument expressions: symbols, sums, products and an extremum.
_SYMS = ("a", "b", "c", "d")
_argument = st.one_of(
    st.sampled_from(_SYMS).map(sym),
    st.tuples(st.sampled_from(_SYMS), st.integers(-2, 3)).map(lambda t: sym(t[0]) + t[1]),
    st.tuples(st.sampled_from(_SYMS), st.sampled_from(_SYMS)).map(
        lambda t: sym(t[0]) * sym(t[1])
    ),
    st.tuples(st.sampled_from(_SYMS), st.sampled_from(_SYMS)).map(
        lambda t: dmax(sym(t[0]), sym(t[1]) + 1)
    ),
    st.sampled_from((1, 1, 4)),
)


def _numpy_broadcast(values: list[int]) -> int:
    others = {v for v in values if v != 1}
    if len(others) > 1:
        raise BroadcastError(str(others))
    return others.pop() if others else 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_argument, min_size=2, max_size=6),
    st.lists(st.fixed_dictionaries({s: st.integers(-3, 4) for s in _SYMS}), max_size=8),
)
def test_printed_broadcast_round_trips_and_evaluates_like_numpy(args, envs):
    try:
        e = broadcast(*args)
    except BroadcastError:
        return
    for text in (to_onnx(e), to_seed(e)):
        assert parse_expr(text) is e, text
        assert all(n == 2 for n in _broadcast_arities(parse_tree(text))), text
    if not isinstance(e, DimExpr):
        return
    for env in envs:
        values = [x if isinstance(x, int) else evaluate(x, env) for x in args]
        try:
            expected = _numpy_broadcast(values)
        except BroadcastError:
            continue
        assert evaluate(parse_expr(to_onnx(e)), env) == expected
