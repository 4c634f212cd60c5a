"""Extrema, broadcast and opaque calls: ``dmax``, ``dmin``, ``broadcast``, ``call``.

``max``/``min`` flatten nested extrema, keep one argument per non-constant part (the
extreme constant), and with a scope drop the arguments it proves are never the result;
``broadcast`` follows numpy (1 yields to the other, otherwise equal). Results are memoized
per scope version.
"""

from __future__ import annotations

from collections.abc import Iterable

from onnx_symdims.expr._atoms import (
    BCAST,
    CALL,
    INT64_MAX,
    INT64_MIN,
    MAX,
    MAX_SCOPED_EXTREMUM_ARGS,
    MIN,
    BroadcastError,
    ExprError,
    _dim_key,
    _make_atom,
    _memoized_scoped,
)
from onnx_symdims.expr._dimexpr import (
    Dim,
    DimExpr,
    _atom_expr,
    _check_dim,
    _poison,
    _term,
    unknown,
)
from onnx_symdims.expr._floor_bounds import difference_bounds, has_floor_term
from onnx_symdims.expr._ring import sub

#: Above this many arguments the pairwise floor-quotient comparisons are skipped.
_MAX_FLOOR_COMPARED_ARGS = 8


def _flatten_args(kind: str, args: Iterable[Dim]) -> list[Dim]:
    out: list[Dim] = []
    for a in args:
        a = _check_dim(a)
        atom = a.atom if isinstance(a, DimExpr) else None
        if atom is not None and atom.kind == kind:
            out.extend(atom.args)
        else:
            out.append(a)
    return out


def _extremum(kind: str, args: tuple[Dim, ...], scope: object | None) -> Dim:
    if not args:
        raise ExprError(f"{'max' if kind == MAX else 'min'} needs at least one argument")
    flat = _flatten_args(kind, args)
    if (p := _poison(*flat)) is not None:
        return p
    pick = max if kind == MAX else min
    ints = [a for a in flat if isinstance(a, int)]
    # Arguments with the same non-constant part differ by a constant: only the extreme one
    # can be the result. One dict pass (linear) instead of comparing every pair.
    best: dict[tuple, DimExpr] = {}
    for a in flat:
        if isinstance(a, DimExpr):
            seen = best.get(a.terms)
            if seen is None or pick(seen.const, a.const) != seen.const:
                best[a.terms] = a
    kept: list[Dim] = [pick(ints)] if ints else []
    if ints and not INT64_MIN <= kept[0] <= INT64_MAX:
        return unknown("overflow")  # no printed dim may carry a literal outside int64
    kept.extend(best.values())
    if 1 < len(kept) <= _MAX_FLOOR_COMPARED_ARGS and any(has_floor_term(a) for a in kept):
        kept = _drop_floor_dominated(kind, kept)
    if scope is not None and 1 < len(kept) <= MAX_SCOPED_EXTREMUM_ARGS:
        kept = _drop_dominated(kind, kept, scope)
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=_dim_key)
    return _atom_expr(_make_atom(kind, "", tuple(kept)))


def _drop_floor_dominated(kind: str, kept: list[Dim]) -> list[Dim]:
    """Drops arguments that another one bounds for every integer (floor quotients).

    ``min((H-1)//3, H//3) == (H-1)//3``: ``(H-1)//3 - H//3`` lies in ``[-1, 0]`` for every
    integer ``H`` (:func:`._floor_bounds.difference_bounds`). Arguments that are equal
    everywhere keep the first in the canonical order, so the result does not depend on
    the order of the arguments.
    """
    ordered = sorted(kept, key=_dim_key)
    result: list[Dim] = []
    for i, x in enumerate(ordered):
        dominated = False
        for j, y in enumerate(ordered):
            if i == j or not (has_floor_term(x) or has_floor_term(y)):
                continue
            bounds = difference_bounds(y, x) if kind == MAX else difference_bounds(x, y)
            if bounds is None or bounds[0] < 0:
                continue  # y does not dominate x everywhere
            if bounds[1] > 0 or j < i:  # on ties (equal everywhere) keep the earlier one
                dominated = True
                break
        if not dominated:
            result.append(x)
    return result


def _drop_dominated(kind: str, kept: list[Dim], scope) -> list[Dim]:
    """Drops arguments the scope proves are never the extremum (quadratic: small lists)."""
    result: list[Dim] = []
    for i, x in enumerate(kept):
        dominated = False
        for j, y in enumerate(kept):
            if i == j:
                continue
            diff = sub(y, x) if kind == MAX else sub(x, y)  # >= 0: y dominates x
            if isinstance(diff, int):
                if diff > 0 or (diff == 0 and j < i):
                    dominated = True
                    break
            elif scope.prove_nonneg(diff):
                # On ties (both directions provable) keep the earlier one only.
                reverse = sub(x, y) if kind == MAX else sub(y, x)
                if not scope.prove_nonneg(reverse) or j < i:
                    dominated = True
                    break
        if not dominated:
            result.append(x)
    return result


def _max_impl(args: tuple[Dim, ...], scope: object | None) -> Dim:
    return _extremum(MAX, args, scope)


def _min_impl(args: tuple[Dim, ...], scope: object | None) -> Dim:
    return _extremum(MIN, args, scope)


def dmax(*args: Dim, scope: object | None = None) -> Dim:
    """``max(args)``; with a scope, arguments proven not to be the maximum are dropped."""
    return _memoized_scoped("max", _max_impl, args, scope)


def dmin(*args: Dim, scope: object | None = None) -> Dim:
    """``min(args)``; with a scope, arguments proven not to be the minimum are dropped."""
    return _memoized_scoped("min", _min_impl, args, scope)


def broadcast(*args: Dim, scope: object | None = None) -> Dim:
    """The numpy broadcast of dims: 1 yields to the other, otherwise they must be equal.

    ``broadcast(x, 64)`` is 64 for every valid execution (x is 1 or 64), but it
    does *not* prove ``x == 64``. With a scope, an argument ``a`` wins outright
    when ``a != 1`` is proven, and ``b`` yields to ``a`` when ``1 <= b <= a`` or
    ``b == min(a, X)`` with ``X >= 1`` are proven (then ``a == 1`` forces ``b == 1``).

    Raises:
        BroadcastError: two constants other than 1 differ.
    """
    return _memoized_scoped("broadcast", _broadcast_impl, args, scope)


def _broadcast_impl(args: tuple[Dim, ...], scope: object | None) -> Dim:
    flat = _flatten_args(BCAST, args)
    if (p := _poison(*flat)) is not None:
        return p
    ints = {a for a in flat if isinstance(a, int) and a != 1}
    if len(ints) > 1:
        raise BroadcastError(f"cannot broadcast dims {sorted(ints)}")
    if ints:
        return ints.pop()
    exprs: list[DimExpr] = []
    for a in flat:
        if isinstance(a, DimExpr) and a not in exprs:
            exprs.append(a)
    if not exprs:
        return 1
    if len(exprs) > 1 and scope is not None:
        exprs = _broadcast_with_scope(exprs, scope)
    if len(exprs) == 1:
        return exprs[0]
    exprs.sort(key=lambda e: e.key)
    return _atom_expr(_make_atom(BCAST, "", tuple(exprs)))


def _yields_in_broadcast(b: DimExpr, a: DimExpr, scope) -> bool:
    """True when ``broadcast(a, b) == a`` for every valid execution."""
    if scope.prove_ge(b, 1) and scope.prove_ge(a, b):
        return True
    atom = b.atom
    if atom is not None and atom.kind == MIN and a in atom.args:
        return all(x is a or scope.prove_ge(x, 1) for x in atom.args)
    return False


def _broadcast_with_scope(exprs: list[DimExpr], scope) -> list[DimExpr]:
    # broadcast(a, ...) == a when a != 1: every other argument is 1 or equal to a.
    for a in exprs:
        if scope.prove_ge(a, 2) or scope.prove_ge(0, a):
            return [a]
    kept = list(exprs)
    for b in exprs:
        if any(a is not b and a in kept and _yields_in_broadcast(b, a, scope) for a in kept):
            kept.remove(b)
    return kept


def call(name: str, args: Iterable[Dim]) -> DimExpr:
    """An opaque function term ``name(args)`` the algebra does not interpret."""
    args = tuple(_check_dim(a) for a in args)
    if (p := _poison(*args)) is not None:
        return p
    return _term(CALL, args, name)
