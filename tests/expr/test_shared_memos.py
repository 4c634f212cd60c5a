"""Memos shared between scopes with the same facts, and the one-mapping replacer (issue 14).

What a scope proves depends only on its facts, so scopes that hold the same facts (named
by their history: the root, then each fact in order) share their memo tables; a scope
that adds a fact moves to the tables of its new history and never changes another's.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given

from onnx_symdims import expr
from onnx_symdims.expr import DimExpr, Scope, SubexpressionReplacer, _scope, sym
from onnx_symdims.shapes import FactScope
from tests.expr.test_properties import PROPERTY_SETTINGS, UNDEFINED, _canonical, trees

a, b = sym("a"), sym("b")


@pytest.mark.parametrize("cls", [Scope, FactScope])
def test_fresh_scopes_share_their_proofs(cls):
    one, other = cls(nonnegative=True), cls(nonnegative=True)
    assert one._proofs is other._proofs
    assert one._intervals is other._intervals
    # Another class or another root assumption: other tables.
    assert cls(nonnegative=False)._proofs is not one._proofs


def test_a_fact_moves_one_scope_to_its_own_tables():
    one, other = Scope(nonnegative=True), Scope(nonnegative=True)
    shared = one._proofs
    assert not one.prove_ge(a, 1)
    one.set_range("a", lower=1)
    assert one.prove_ge(a, 1)
    assert one._proofs is not shared
    assert not other.prove_ge(a, 1)  # the fact did not leak
    assert other._proofs is shared


def test_the_same_facts_in_the_same_order_share_tables():
    one, other = FactScope(), FactScope()
    for scope in (one, other):
        scope.set_range("a", lower=2)
        scope.assume_nonneg(expr.sub(b, a))
    assert one._history == other._history
    assert one._proofs is other._proofs
    assert one.prove_ge(b, a) and other.prove_ge(b, a)
    third = FactScope()
    third.assume_nonneg(expr.sub(b, a))
    third.set_range("a", lower=2)  # the same facts in another order: other tables
    assert third._proofs is not one._proofs


def test_a_copy_shares_until_it_diverges():
    scope = FactScope()
    scope.set_range("a", lower=3)
    copy = scope.copy()
    assert copy._proofs is scope._proofs
    copy.set_range("b", upper=4)
    assert copy._proofs is not scope._proofs
    assert not scope.prove_ge(4, b)
    assert copy.prove_ge(4, b)


def test_the_shared_tables_stay_bounded():
    for k in range(3 * _scope._MAX_SHARED_MEMOS):
        FactScope().set_range(f"s{k}", lower=k)
    assert len(_scope._SHARED_MEMOS) <= _scope._MAX_SHARED_MEMOS
    assert len(_scope._HISTORIES) <= _scope._MAX_HISTORIES


@given(trees, trees, trees)
@PROPERTY_SETTINGS
def test_one_replacer_for_many_expressions_replaces_like_one_call_each(x, y, key):
    try:
        dims = [_canonical(t) for t in (x, y, key)]
    except UNDEFINED:
        assume(False)
    assume(all(d is not None for d in dims))
    first, second, pattern = dims
    assume(isinstance(pattern, DimExpr))
    mapping = {pattern: sym("k")}
    replacer = SubexpressionReplacer(mapping)
    for d in (first, second, first):
        assert replacer.replace(d) is expr.replace_subexpressions(d, mapping)


@given(trees)
@PROPERTY_SETTINGS
def test_cached_structure_matches_the_terms(tree):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        assume(False)
    assume(isinstance(d, DimExpr))
    single = (
        d.terms[0][0][0]
        if d.const == 0
        and len(d.terms) == 1
        and d.terms[0][1] == 1
        and len(d.terms[0][0]) == 1
        else None
    )
    assert d.atom is single
    assert d.is_symbol == (single is not None and single.kind == "s")
    assert d.name == (single.name if d.is_symbol else None)
    assert d.is_unknown is False


def test_an_unknown_has_no_structure():
    u = expr.unknown("test")
    assert u.is_unknown and not u.is_symbol and u.atom is None and u.name is None


@pytest.mark.parametrize("k", [0, 1, 5])
def test_identity_shortcuts_of_add_and_mul(k):
    d = expr.add(a, k * b) if k else a
    assert expr.add(0, d) is d and expr.add(d, 0) is d
    assert expr.mul(1, d) is d and expr.mul(d, 1) is d
    u = expr.unknown("test")
    assert expr.add(0, u) is not u and expr.add(0, u).is_unknown  # a new unknown, as ever
