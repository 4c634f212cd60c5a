"""Substitution of symbols and replacement of sub-expressions, re-canonicalised.

Rebuilding a function term over new arguments goes through the public constructors, so the
result is canonical again; where it is undefined everywhere (a divisor became 0) it is an
unknown rather than an exception.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx_symdims.expr._atoms import (
    BCAST,
    EXACT,
    FLOOR,
    MAX,
    MIN,
    MOD,
    SYM,
    Atom,
    BroadcastError,
    InexactDivisionError,
)
from onnx_symdims.expr._dimexpr import Dim, DimExpr, _atom_expr, _from_terms, unknown
from onnx_symdims.expr._divisions import exact_div, floordiv, mod
from onnx_symdims.expr._extremum import broadcast, call, dmax, dmin
from onnx_symdims.expr._ring import add, mul


def _rebuild_atom(atom: Atom, args: tuple[Dim, ...]) -> Dim:
    """The atom over new arguments; an unknown where that is undefined everywhere.

    Substituting can turn a divisor into the constant 0 (``batch/:((-1)//max(-5,batch))``
    with ``max(-5,batch) -> -5``) or a quotient into an inexact one: the expression has no
    value there, so any value is sound, and callers (proofs by cases, renames) must never
    see an exception for a valid expression.
    """
    try:
        return _rebuild_atom_raw(atom, args)
    except (ZeroDivisionError, InexactDivisionError, BroadcastError):
        return unknown("undefined")


def _rebuild_atom_raw(atom: Atom, args: tuple[Dim, ...]) -> Dim:
    kind = atom.kind
    if kind == FLOOR:
        return floordiv(*args)
    if kind == MOD:
        return mod(*args)
    if kind == EXACT:
        return exact_div(*args)
    if kind == MAX:
        return dmax(*args)
    if kind == MIN:
        return dmin(*args)
    if kind == BCAST:
        return broadcast(*args)
    return call(atom.name, args)


def _map_atoms(d: Dim, atom_fn, arg_fn, targets: Mapping[Atom, Dim] | None = None) -> Dim:
    """Rebuilds ``d`` with ``atom_fn(atom)`` for symbols and ``arg_fn`` on function args.

    An atom of ``targets`` (a symbol or a function term) becomes its target instead.
    """
    if isinstance(d, int) or d.unknown_reason is not None:
        return d
    result: Dim = d.const
    for mono, coeff in d.terms:
        term: Dim = coeff
        for atom in mono:
            if targets and atom in targets:
                factor = targets[atom]
            elif atom.kind == SYM:
                factor = atom_fn(atom)
            else:
                new_args = tuple(arg_fn(a) for a in atom.args)
                factor = (
                    _atom_expr(atom)
                    if new_args == atom.args
                    else _rebuild_atom(atom, new_args)
                )
            term = mul(term, factor)
        result = add(result, term)
    return result


def substitute(d: Dim, mapping: Mapping[str, Dim]) -> Dim:
    """Replaces symbols by dims simultaneously (no chaining) and re-canonicalises."""
    if not mapping or isinstance(d, int) or not (d.symbols() & mapping.keys()):
        return d

    def on_symbol(atom: Atom) -> Dim:
        return mapping.get(atom.name, _atom_expr(atom))

    def on_arg(a: Dim) -> Dim:
        return substitute(a, mapping)

    return _map_atoms(d, on_symbol, on_arg)


class SubexpressionReplacer:
    """Replaces sub-expressions equal (in canonical form) to a key of a fixed mapping.

    What :func:`replace_subexpressions` does, for many expressions under one mapping:
    the mapping's split into atom keys and compound keys is made once, and the result
    for each sub-expression is kept (results are pure functions of it and the mapping;
    an unknown result is never kept: each stands for a value of its own). The mapping
    must not change while the replacer is used.
    """

    __slots__ = ("_atom_targets", "_compound", "_key_symbols", "_mapping", "_memo")

    def __init__(self, mapping: Mapping[DimExpr, Dim]) -> None:
        self._mapping = mapping
        # A key occurs in an expression only with all its symbols: an expression with
        # none of the keys' symbols stays as it is. ``None``: some key has no symbol
        # (an unknown), so no expression can be passed over.
        key_symbols = [key.symbols() for key in mapping]
        self._key_symbols: frozenset[str] | None = (
            frozenset().union(*key_symbols) if all(key_symbols) else None
        )
        # Compound keys, in the mapping's order (the first that matches is used).
        self._compound = [
            (key, target) for key, target in mapping.items() if key.atom is None and key.terms
        ]
        self._atom_targets = {
            key.atom: target for key, target in mapping.items() if key.atom is not None
        }
        self._memo: dict[DimExpr, Dim] = {}

    def replace(self, d: Dim, max_rounds: int = 8) -> Dim:
        """:func:`replace_subexpressions` of ``d`` under the mapping."""
        if not self._mapping:
            return d
        if (
            self._key_symbols is not None
            and d.__class__ is DimExpr
            and self._key_symbols.isdisjoint(d.symbols())
        ):
            return d
        for _ in range(max_rounds):
            new = self.once(d)
            if new is d or new == d:
                return new
            d = new
        return d

    def once(self, d: Dim) -> Dim:
        """One round of replacement (see :func:`replace_subexpressions`)."""
        if d.__class__ is int or isinstance(d, int) or d.unknown_reason is not None:
            return d
        result = self._memo.get(d)
        if result is None:
            result = self._once(d)
            if isinstance(result, int) or result.unknown_reason is None:
                if len(self._memo) >= _MAX_REPLACED:
                    self._memo.clear()
                self._memo[d] = result
        return result

    def _once(self, d: DimExpr) -> Dim:
        hit = self._mapping.get(d)
        if hit is not None:
            return hit
        # A compound key that is a sub-sum, term by term: d == k*key + rest.
        if self._compound:
            d_terms = dict(d.terms)
            for key, target in self._compound:
                lead_m, lead_c = key.terms[0]
                c = d_terms.get(lead_m)
                if c is None or c % lead_c:
                    continue
                k = c // lead_c
                if any(d_terms.get(m) != k * kc for m, kc in key.terms):
                    continue
                remaining = {
                    m: dc for m, dc in d_terms.items() if all(m != km for km, _ in key.terms)
                }
                rest = (
                    _from_terms(remaining, d.const - k * key.const)
                    if remaining
                    else (d.const - k * key.const)
                )
                return add(mul(k, target), self.once(rest))
        return _map_atoms(d, _atom_expr, self.once, self._atom_targets)


#: Results a :class:`SubexpressionReplacer` keeps before it starts over.
_MAX_REPLACED = 50_000


def _replace_once(d: Dim, mapping: Mapping[DimExpr, Dim]) -> Dim:
    """One round of :func:`replace_subexpressions`."""
    return SubexpressionReplacer(mapping).once(d)


def replace_subexpressions(d: Dim, mapping: Mapping[DimExpr, Dim], max_rounds: int = 8) -> Dim:
    """Replaces sub-expressions equal (in canonical form) to a key, to a fixed point.

    A key matches a whole expression, an atom anywhere (also inside function
    terms), or a sub-sum: with the key ``past_seq+seq``, ``past_seq+seq+1``
    becomes ``target+1``. Broadcast terms whose arguments become equal collapse.
    """
    if not mapping:
        return d
    return SubexpressionReplacer(mapping).replace(d, max_rounds)
