"""``broadcast_elements``: the scalar/1-D fast path agrees with numpy broadcasting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_symdims import expr
from onnx_symdims.shapes import _values

_SHAPES = st.sampled_from([(), (0,), (1,), (2,), (3,)])
_ELEMENT = st.one_of(st.integers(-5, 5), st.sampled_from([expr.sym("a"), expr.sym("b")]))


def _operand(shape):
    size = shape[0] if shape else 1
    return st.one_of(st.none(), st.lists(_ELEMENT, min_size=size, max_size=size)).map(
        lambda elements: (shape, elements)
    )


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(_SHAPES.flatmap(_operand), min_size=1, max_size=3))
def test_vector_path_matches_numpy_path(operands):
    fn = {1: expr.neg, 2: expr.add, 3: lambda a, b, c: expr.add(expr.mul(a, b), c)}[
        len(operands)
    ]
    fast = _values.broadcast_elements(fn, operands)
    # The same operands with a leading 1 axis go through numpy's object arrays.
    lifted = [((1, *shape), elements) for shape, elements in operands]
    slow = _values.broadcast_elements(fn, lifted)
    if slow is None:
        assert fast is None
        return
    assert fast is not None
    assert (1, *fast[0]) == slow[0]
    assert [_known(e) for e in fast[1]] == [_known(e) for e in slow[1]]


def _known(e):
    """``e``, or ``"?"`` for an unknown (a fresh object each time)."""
    return "?" if isinstance(e, expr.DimExpr) and e.is_unknown else e


def test_scalar_and_vector_broadcast():
    a = expr.sym("a")
    assert _values.broadcast_elements(expr.add, [((), [1]), ((3,), [a, 2, 3])]) == (
        (3,),
        (expr.add(a, 1), 3, 4),
    )
    assert _values.broadcast_elements(expr.add, [((2,), [1, 2]), ((3,), [1, 2, 3])]) is None


_N, _M = expr.sym("N"), expr.sym("M")


@pytest.mark.parametrize(
    ("element", "kept"),
    [
        (_N * 2**20, True),  # in range for every dim below 2**32
        (_N * 2**40, False),  # 0 in int64 at N = 2**24
        (_N * _M * 64, True),  # an element count (below 2**48) times 64
        (expr.floordiv(_N * 2**24, 3) * _M, False),  # a factor beyond a count (2**56)
        (expr.floordiv(_N * _M, 2) * expr.dmin(1, expr.dmax(_N - 1, 0)), True),  # counts
        (expr.dmax(_N * 2**40, 1), False),  # max is as large as its largest argument
    ],
    ids=str,
)
def test_int64_elements_are_kept_only_where_they_cannot_wrap(element, kept):
    from onnx_symdims.shapes._node_context import _fits_64_bits

    assert _fits_64_bits(element) is kept
