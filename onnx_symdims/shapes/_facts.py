"""Facts that hold in every successful run, and the scope that proves with them.

Shape inference describes runs that succeed, and a successful run tells more than the
symbols' ranges:

* every dim of a tensor that exists is ``>= 0`` (also a compound dim such as
  ``n - m``, which the interval prover cannot show nonnegative on its own);
* a divisor that an integer ``Div``/``Mod`` divided by is nonzero;
* an exact division that executed (a split into equal parts, a ``Reshape`` ``-1``)
  divides.

:class:`FactScope` is an :class:`~onnx_symdims.expr.Scope` that also holds such
facts about expressions, and uses them in its proofs (``prove_nonneg``, ``bounds``, so
also ``dmax``/``dmin``/comparisons). Facts are added while the walk goes on, at the
node where they start to hold, and only in the main graph (code in a subgraph may not
run): values computed before keep what they had. Adding a new fact moves the scope's
``version``, which keys every memo that depends on proofs.

What belongs in :mod:`onnx_symdims.expr` later: lower bounds of expressions (not only
of symbols), nonzero and divisibility facts in :class:`~onnx_symdims.expr.Scope`
itself, and a scope-aware ``simplify`` (:func:`refine_dim` here).
"""

from __future__ import annotations

__all__ = ["FactScope", "refine_dim"]

import logging

from onnx_symdims import expr

logger = logging.getLogger(__name__)

Dim = expr.Dim
Terms = tuple

#: expr.symbol_bound_from_lower's answers by (d, k, lowest), its only inputs: a search that
#: evaluates d dozens of times, for the same facts in every inference of a model.
_SYMBOL_BOUNDS: dict[tuple[expr.DimExpr, int, int | None], tuple | None] = {}
_MAX_SYMBOL_BOUNDS = 20_000
_MISSING = object()

#: More facts than this and new ones are dropped (proofs stay fast; dropping is sound).
MAX_FACTS = 20000

#: What ``_nonzero`` and ``_divides`` hold until their first fact: most models record
#: none, and a scope is made on every call (an empty set made and freed costs more than
#: storing this). A write to it fails loudly (frozensets have no ``add``).
_NO_FACTS: frozenset = frozenset()


class FactScope(expr.Scope):
    """A scope with facts about expressions: lower bounds, nonzero values, divisors.

    Args:
        nonnegative: When True every symbol is assumed ``>= 0`` (tensor dims).

    A lower bound ``e >= k`` is stored under ``e``'s terms (its constant moved into
    ``k``), so ``e + 3 >= k + 3`` is the same fact. A fact on a bare symbol becomes its
    range, where the base prover reads it.
    """

    # d -> known_nonzero(d), until a fact is added (every Reshape with a -1 asks again
    # about the same dims, layer after layer).
    _MEMO_TABLES = (*expr.Scope._MEMO_TABLES, "_nonzero_known")

    def __init__(self, nonnegative: bool = True) -> None:
        # Sets the memo tables, _nonzero_known included (the base named: one call per
        # inference, where super() builds a proxy object first).
        expr.Scope.__init__(self, nonnegative)
        self._nonzero_known: dict[expr.DimExpr, bool]
        # terms of e -> (the lower bound of e with constant 0, e with constant 0)
        self._lower: dict[Terms, tuple[int, expr.DimExpr]] = {}
        # Made on the first fact (see _NO_FACTS).
        self._nonzero: set[Dim] = _NO_FACTS  # type: ignore[assignment]
        # (divisor, dividend) pairs: divisor divides dividend exactly.
        self._divides: set[tuple[Dim, Dim]] = _NO_FACTS  # type: ignore[assignment]

    @classmethod
    def from_scope(cls, scope: expr.Scope) -> FactScope:
        """A fact scope holding ``scope``'s ranges and bounds (``scope`` is unchanged)."""
        other = cls(scope.nonnegative)
        other._ranges = dict(scope._ranges)
        other._upper = {k: list(v) for k, v in scope._upper.items()}
        other.version = scope.version
        history = getattr(scope, "_history", None)
        if other._ranges or other._upper:  # the same facts as a fact scope made so
            other._follow(history, ("from_scope", type(scope), cls))
        return other

    def copy(self) -> FactScope:
        """An independent copy, facts included (the case split of the prover uses it)."""
        other = FactScope(self.nonnegative)
        other._ranges = dict(self._ranges)
        other._upper = {k: list(v) for k, v in self._upper.items()}
        other._lower = dict(self._lower)
        other._nonzero = set(self._nonzero)
        other._divides = set(self._divides)
        if type(self) is FactScope:
            other._history = self._history  # the same facts: the same memos
            other._use_memos()
        else:
            other._follow(None, None)
        return other

    def _full(self) -> bool:
        return len(self._lower) + len(self._nonzero) + len(self._divides) >= MAX_FACTS

    # -- recording -------------------------------------------------------------------
    def assume_ge(self, d: Dim, k: int) -> bool:
        """Records ``d >= k``; returns whether anything new was learnt."""
        if isinstance(d, int) or d.is_unknown:
            return False
        if self.prove_ge(d, k):
            return False
        name = d.name
        if name is not None:
            self.set_range(name, lower=k)
            return True
        if self._full():
            return False
        bound = k - d.const
        known = self._lower.get(d.terms)
        if known is not None and known[0] >= bound:
            return False
        self._lower[d.terms] = (bound, d.without_constant())
        found = self._symbol_bound(d, k)
        if found is None:
            self._facts_changed(("lower", d.terms, bound))
            return True
        # The symbol's range too, in one move of the scope: what set_range(name, lower,
        # upper) does after its own move (the range is a function of the fact and the
        # ranges before, so the one fact names both changes).
        name, lower, upper = found
        self._facts_changed(("lower", d.terms, bound, "range", name, lower, upper))
        self._narrow_range(name, lower, upper)
        return True

    def _symbol_bound(
        self, d: expr.DimExpr, k: int
    ) -> tuple[str, int | None, int | None] | None:
        """``d >= k`` for ``d`` monotone in its one symbol bounds the symbol's range.

        Returns:
            The symbol and its bounds (``None``: open), or ``None`` when none follow.
        """
        names = d.symbols()
        if len(names) != 1:
            return None
        (name,) = names
        lowest = self._ranges.get(name, (None, None))[0]
        if self.nonnegative:
            lowest = 0 if lowest is None else max(lowest, 0)
        key = (d, k, lowest)
        found = _SYMBOL_BOUNDS.get(key, _MISSING)
        if found is _MISSING:
            found = expr.symbol_bound_from_lower(d, k, lowest)
            if len(_SYMBOL_BOUNDS) >= _MAX_SYMBOL_BOUNDS:
                _SYMBOL_BOUNDS.clear()
            _SYMBOL_BOUNDS[key] = found
        return None if found is None else (name, found[1], found[2])

    def assume_nonneg(self, d: Dim) -> bool:
        """Records ``d >= 0`` (e.g. a dim of a tensor that exists)."""
        return self.assume_ge(d, 0)

    def assume_nonzero(self, d: Dim) -> bool:
        """Records ``d != 0`` (a divisor a node divided by); ``d >= 1`` when ``d >= 0``."""
        if isinstance(d, int) or d.is_unknown or self.known_nonzero(d):
            return False
        if self.prove_nonneg(d):
            return self.assume_ge(d, 1)
        if self.prove_nonneg(expr.neg(d)):
            return self.assume_ge(expr.neg(d), 1)
        if self._full():
            return False
        if self._nonzero is _NO_FACTS:
            self._nonzero = set()
        self._nonzero.add(d)
        self._facts_changed(("nonzero", d))
        return True

    def assume_divides(self, divisor: Dim, dividend: Dim) -> bool:
        """Records that ``divisor`` divides ``dividend`` exactly (and is nonzero)."""
        new = self.assume_nonzero(divisor)
        if isinstance(divisor, int) and isinstance(dividend, int):
            return new
        if self.known_divides(divisor, dividend) or self._full():
            return new
        if self._divides is _NO_FACTS:
            self._divides = set()
        self._divides.add((divisor, dividend))
        self._facts_changed(("divides", divisor, dividend))
        return True

    # -- questions -------------------------------------------------------------------
    def known_nonzero(self, d: Dim) -> bool:
        """True when ``d != 0`` is recorded or proven."""
        if isinstance(d, int):
            return d != 0
        known = self._nonzero_known.get(d)
        if known is None:
            if len(self._nonzero_known) >= MAX_FACTS:
                self._nonzero_known.clear()
            known = self._nonzero_known[d] = (
                d in self._nonzero or self.prove_gt(d, 0) or self.prove_gt(0, d)
            )
        return known

    def known_divides(self, divisor: Dim, dividend: Dim) -> bool:
        """True when ``divisor`` divides ``dividend`` by a recorded fact or by value."""
        if isinstance(divisor, int) and isinstance(dividend, int):
            return divisor != 0 and dividend % divisor == 0
        if dividend == 0:
            return self.known_nonzero(divisor)
        return (divisor, dividend) in self._divides

    def has_facts(self) -> bool:
        """True when some fact about an expression (not only ranges) is recorded."""
        return bool(self._lower or self._nonzero or self._divides)

    # -- the prover --------------------------------------------------------------------
    def _compute_interval(self, d: expr.DimExpr, depth: int) -> tuple[int | None, int | None]:
        lo, hi = super()._compute_interval(d, depth)
        if self._lower:
            known = self._lower.get(d.terms)
            if known is not None:
                fact = known[0] + d.const
                lo = fact if lo is None else max(lo, fact)
        return lo, hi

    def _prove_nonneg(self, d: expr.DimExpr, _depth: int) -> bool:
        if super()._prove_nonneg(d, _depth):
            return True
        if not self._lower or _depth >= 2:
            return False
        # d - f >= 0 for a recorded f >= k >= 0 proves d >= 0: e.g. d = f + s.
        syms = d.symbols()
        for bound, fact in list(self._lower.values())[-64:]:
            if bound < 0:
                continue
            if not fact.symbols() <= syms:
                continue
            rest = expr.sub(d, fact)
            smaller = isinstance(rest, int) or rest.size < d.size
            if smaller and self.prove_nonneg(expr.add(rest, bound), _depth + 1):
                return True
        return False

    def __repr__(self) -> str:
        return (
            f"Fact{super().__repr__()[:-1]}, facts={len(self._lower)} lower, "
            f"{len(self._nonzero)} nonzero, {len(self._divides)} divides)"
        )


_REFINED_FUNCTIONS = frozenset({"min", "max", "floordiv", "mod", "exact_div"})


def _refine_function(term: expr.DimExpr, scope: FactScope) -> Dim | None:
    """What the function term ``term`` is under the scope's facts, or ``None`` if unchanged."""
    raw = term.args
    args = tuple(refine_dim(a, scope) for a in raw)
    kind = term.function
    if kind == "min":
        new = expr.dmin(*args, scope=scope)
    elif kind == "max":
        new = expr.dmax(*args, scope=scope)
    elif kind == "exact_div":  # refined arguments may cancel: 2*b*(t-1)/(t-2*min(t-1,1)+1)
        new = expr.exact_div(*args)
    else:  # floordiv or mod
        num, den = args
        divides = scope.known_divides(den, num) or scope.known_divides(raw[1], raw[0])
        if kind == "floordiv":
            new = expr.exact_div(num, den) if divides else expr.floordiv(num, den)
        else:
            new = 0 if divides else expr.mod(num, den)
    return None if new is term or new == term else new


#: Refined dims a scope's memo keeps (with its other results) before it starts over.
_MAX_REFINED = 50_000


def refine_dim(d: Dim, scope: FactScope) -> Dim:
    """``d`` rewritten under the scope's facts: the case splits they make unnecessary go.

    ``min``/``max`` arguments the facts prove dominated are dropped (``min(1, t)`` is 1
    once ``t >= 1`` is known), a floor division or remainder by a recorded divisor
    becomes the exact division or 0, an exact division of refined arguments is taken
    again (its factors may cancel). Equal to ``d`` in every run the facts describe.
    """
    if isinstance(d, int) or d.is_unknown:
        return d
    # A pure function of d and the facts: kept with the scope's other results (shared
    # by every scope holding the same facts, see expr.Scope).
    memo = scope._scoped_memo
    key = ("refine", d)
    found = memo.get(key)
    if found is None:
        version = scope.version
        found = _refine_dim(d, scope)
        if version == scope.version and (isinstance(found, int) or not found.is_unknown):
            memo = scope._scoped_memo
            if len(memo) >= _MAX_REFINED:
                memo.clear()
            memo[key] = found
    return found


def _refine_dim(d: expr.DimExpr, scope: FactScope) -> Dim:
    mapping: dict[expr.DimExpr, Dim] = {}
    for term in d.function_terms():
        if term.function in _REFINED_FUNCTIONS:
            try:
                new = _refine_function(term, scope)
            except (ArithmeticError, expr.ExprError):
                new = None  # e.g. a division the refined arguments make undefined
            if new is not None:
                mapping[term] = new
    if not mapping:
        return d
    return expr.replace_subexpressions(d, mapping)
