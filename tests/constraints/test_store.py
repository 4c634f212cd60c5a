"""The constraint stores of ``ShapesContext``: equalities, upper bounds, leaf derivation."""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from onnx_symdims.shapes import ShapesContext

d = expr.parse_dim


def test_equalities_are_unordered_canonical_and_deduplicated():
    ctx = ShapesContext()
    assert ctx.add_constraint("nnz", "N")
    assert not ctx.add_constraint("N", "nnz")  # same pair, other order
    assert not ctx.add_constraint(d("N"), d("nnz"))  # same pair, as dims
    assert not ctx.add_constraint("a", "a")  # a == a is dropped
    assert not ctx.add_constraint("", "a")  # empty operand
    assert ctx.constraints() == [("N", "nnz")]  # byte order: "N" < "n"
    assert ctx.constraints_size() == 1
    assert ctx.has_constraint("nnz", "N") and ctx.has_constraint("N", "nnz")
    assert ctx.has_constraint("zz", "zz")
    assert not ctx.has_constraint("N", "M")


def test_upper_bounds_are_ordered():
    ctx = ShapesContext()
    assert ctx.add_less_equal_constraint("nnz", "A*B")
    assert not ctx.add_less_equal_constraint("nnz", "A*B")
    assert not ctx.add_less_equal_constraint("x", "x")  # self bound
    assert not ctx.add_less_equal_constraint("", "x")
    assert ctx.has_less_equal_constraint("nnz", "A*B")
    assert not ctx.has_less_equal_constraint("A*B", "nnz")
    assert ctx.less_equal_constraints() == [("nnz", "A*B")]
    assert ctx.less_equal_constraints_size() == 1
    ctx.add_constraint("a", "b")
    ctx.clear()
    assert ctx.constraints_size() == 0
    assert ctx.less_equal_constraints_size() == 0


def test_bounds_are_used_by_the_scope():
    ctx = ShapesContext()
    nnz, a, b = d("nnz"), d("A"), d("B")
    assert not ctx.scope.prove_ge(a * b, nnz)
    ctx.add_less_equal_constraint(nnz, a * b)
    assert ctx.scope.prove_ge(a * b, nnz)
    assert ctx.scope.prove_ge(a * b + 1, nnz)
    assert expr.dmax(nnz, a * b, scope=ctx.scope) is a * b


LEAF_DERIVED = [
    ("2*NonZero_nz_nnz", "2*dnz", ("NonZero_nz_nnz", "dnz")),
    ("x+z", "y+z", ("x", "y")),
    ("3*x", "3*y", ("x", "y")),
]


@pytest.mark.parametrize(("a", "b", "leaf"), LEAF_DERIVED)
def test_leaf_derivation(a, b, leaf):
    ctx = ShapesContext()
    assert ctx.add_symbolic_constraint_with_leaf_derivation(d(a), d(b))
    assert ctx.has_constraint(d(a), d(b))
    assert ctx.has_constraint(*leaf)


# The origins derive x == y from each of these; all are wrong for some values.
UNSOUND = [
    ("x+1", "y", {"x": 0, "y": 1}),
    ("2*x", "2*y+2", {"x": 1, "y": 0}),
    ("x//2", "y//2", {"x": 2, "y": 3}),
    ("2*(a//2)", "2*(b//2)", {"a": 2, "b": 3}),
    ("x", "2*y", {"x": 2, "y": 1}),
    ("2*x", "3*y", {"x": 3, "y": 2}),
]


@pytest.mark.parametrize(("a", "b", "witness"), UNSOUND)
def test_no_unsound_leaf_derivation(a, b, witness):
    # the witness satisfies a == b but not x == y: deriving it would be wrong
    da, db = d(a), d(b)
    assert expr.evaluate(da, witness) == expr.evaluate(db, witness)
    left, right = sorted(witness)
    assert witness[left] != witness[right]
    ctx = ShapesContext()
    ctx.add_symbolic_constraint_with_leaf_derivation(da, db)
    assert ctx.constraints_size() == 1
    assert not ctx.has_constraint(left, right)
