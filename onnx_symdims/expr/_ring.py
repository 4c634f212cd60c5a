"""The ring operations on dims: ``+``, ``-``, ``*`` (fully distributed).

Also the step that turns collected terms into a canonical dim (:func:`_finish`).
``_finish`` applies the sum-level identities that involve function terms (exact divisions
absorbing a coefficient, floor/modulo identities, sums folded into an extremum); they live
with their functions in :mod:`._sums`, reached through :data:`._atoms.late`.
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import (
    EXACT,
    FLOOR,
    MAX_TERMS,
    MOD,
    Monomial,
    _memoized,
    late,
)
from onnx_symdims.expr._dimexpr import (
    Dim,
    DimExpr,
    _check_dim,
    _from_terms,
    _in_int64,
    _intern,
    _poison,
    unknown,
)

# ---------------------------------------------------------------------------------------
# Ring operations
# ---------------------------------------------------------------------------------------


def _add_impl(a: Dim, b: Dim) -> Dim:
    """``a + b``."""
    if type(a) is int and type(b) is int:
        r = a + b
        return r if _in_int64(r) else unknown("overflow")
    a, b = _check_dim(a), _check_dim(b)
    if (p := _poison(a, b)) is not None:
        return p
    if isinstance(b, int):
        a, b = b, a
    if isinstance(a, int):
        # Adding a constant changes no monomial: no sum-level rewrite can fire.
        const = b.const + a  # type: ignore[union-attr]
        if not a:
            return b
        return _intern(b.terms, const) if _in_int64(const) else unknown("overflow")  # type: ignore[union-attr]
    terms, const = dict(a.terms), a.const
    for m, c in b.terms:
        terms[m] = terms.get(m, 0) + c
    return _finish(terms, const + b.const)


def neg(a: Dim) -> Dim:
    """``-a``."""
    return mul(-1, a)


def sub(a: Dim, b: Dim) -> Dim:
    """``a - b``."""
    if type(a) is int and type(b) is int:
        r = a - b
        return r if _in_int64(r) else unknown("overflow")
    # One memo lookup for the two steps below (a negation and a sum, each memoized):
    # shape arithmetic subtracts in every slice, window and split.
    return _memoized("-", _sub_impl, a, b)


def _sub_impl(a: Dim, b: Dim) -> Dim:
    """``a - b`` as ``a + (-1)*b``.

    The memo keeps only known results, so an unknown operand or step mints its unknown
    on every call, as the two steps do.
    """
    return add(a, mul(-1, b))


def _mono_mul(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    return tuple(sorted(m1 + m2, key=lambda a: a.key))


def _mul_impl(a: Dim, b: Dim) -> Dim:
    """``a * b`` (fully distributed)."""
    if type(a) is int and type(b) is int:
        r = a * b
        return r if _in_int64(r) else unknown("overflow")
    a, b = _check_dim(a), _check_dim(b)
    if (p := _poison(a, b)) is not None:
        return p
    if isinstance(a, int):
        a, b = b, a
    assert isinstance(a, DimExpr)
    if isinstance(b, int):
        if b == 0:
            return 0
        if b == 1:
            return a
        if not any(atom.kind == EXACT for m, _ in a.terms for atom in m):
            # Scaling keeps monomials, order and the equal-coefficient ring groups.
            scaled = tuple((m, c * b) for m, c in a.terms)
            const = a.const * b
            if _in_int64(const) and all(_in_int64(c) for _, c in scaled):
                return _intern(scaled, const)
            return unknown("overflow")
        return _finish({m: c * b for m, c in a.terms}, a.const * b)
    if (len(a.terms) + 1) * (len(b.terms) + 1) > 4 * MAX_TERMS:
        return unknown("size")
    terms: dict[Monomial, int] = {}
    a_items = [*a.terms, ((), a.const)] if a.const else list(a.terms)
    b_items = [*b.terms, ((), b.const)] if b.const else list(b.terms)
    const = 0
    for m1, c1 in a_items:
        for m2, c2 in b_items:
            m = _mono_mul(m1, m2)
            if m:
                terms[m] = terms.get(m, 0) + c1 * c2
            else:
                const += c1 * c2
    return _finish(terms, const)


# ---------------------------------------------------------------------------------------
# Sum-level canonicalisation
# ---------------------------------------------------------------------------------------


def _finish(terms: dict[Monomial, int], const: int) -> Dim:
    """Applies the sum-level rewrites, then interns."""
    terms = {m: c for m, c in terms.items() if c}
    if not terms:
        return const if _in_int64(const) else unknown("overflow")
    if any(a.kind == EXACT for m in terms for a in m):
        rebuilt = late.absorb_exact_divisions(terms, const)
        if rebuilt is not None:
            return rebuilt
    if sum(1 for m in terms if len(m) == 1 and m[0].kind in (FLOOR, MOD)) >= 2:
        terms, const = late.collapse_floor_identities(terms, const)
    if len(terms) + bool(const) >= 2:
        folded = late.fold_sum_into_extremum(terms, const)
        if folded is not None:
            return folded
    return _from_terms(terms, const)


# ---------------------------------------------------------------------------------------
# Memoized entry points
# ---------------------------------------------------------------------------------------


# The shortcuts below return what the implementations return for an identity operand
# (0 for +, 1 for *) and a known expression, without a memo lookup: rebuilding an
# expression term by term starts every sum at 0 and every product at 1.


def add(a: Dim, b: Dim) -> Dim:
    """``a + b``."""
    if type(a) is int:
        if type(b) is int:
            r = a + b
            return r if _in_int64(r) else unknown("overflow")
        if not a and b.__class__ is DimExpr and b.unknown_reason is None:  # type: ignore[union-attr]
            return b
    elif type(b) is int and not b and a.__class__ is DimExpr and a.unknown_reason is None:  # type: ignore[union-attr]
        return a
    return _memoized("+", _add_impl, a, b)


def mul(a: Dim, b: Dim) -> Dim:
    """``a * b`` (fully distributed)."""
    if type(a) is int:
        if type(b) is int:
            r = a * b
            return r if _in_int64(r) else unknown("overflow")
        if a == 1 and b.__class__ is DimExpr and b.unknown_reason is None:  # type: ignore[union-attr]
            return b
    elif type(b) is int and b == 1 and a.__class__ is DimExpr and a.unknown_reason is None:  # type: ignore[union-attr]
        return a
    return _memoized("*", _mul_impl, a, b)
