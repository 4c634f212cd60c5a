"""Assumptions about symbols, and the questions they answer.

The algebra's rewrites hold for every integer. Facts that only hold for some
values — "every tensor dim is >= 0", "s >= 1", "nnz <= N*M" — live in an
explicit :class:`Scope` (tract's ``SymbolScope`` is the model) and are used
only where a caller passes the scope: comparisons and scope-aware rewrites
such as ``max(x, 0) -> x``.

Example::

    >>> from onnx_symdims.expr import Scope, sym, dmax
    >>> x = sym("x")
    >>> dmax(x, 0) is x
    False
    >>> dmax(x, 0, scope=Scope(nonnegative=True)) is x
    True
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import (
    BCAST,
    EXACT,
    FLOOR,
    INT64_MIN,
    MAX,
    MIN,
    MOD,
    SYM,
    Atom,
    _memoized,
)
from onnx_symdims.expr._dimexpr import Dim, DimExpr, _atom_expr
from onnx_symdims.expr._ring import _add_impl, neg, sub
from onnx_symdims.expr._substitute import replace_subexpressions, substitute

__all__ = ["DIM_SCOPE", "Scope"]

Bound = "int | None"

_MAX_SUBSTITUTION_DEPTH = 3
#: Memoized intervals (and proofs) per scope before the memo starts over (bounds its
#: memory).
_MAX_MEMOIZED = 50_000
#: Case splits kept per scope before they start over.
_MAX_CASES = 256

#: A scope's facts are named by their history (see Scope._history): the root
#: ``(class, nonnegative)`` or an int. (history, fact) -> the history after the fact.
_HISTORIES: dict[tuple, int] = {}
_MAX_HISTORIES = 4096
_next_history = [0]
#: history -> the memo tables every scope with that history shares.
_SHARED_MEMOS: dict[object, dict[str, dict]] = {}
_MAX_SHARED_MEMOS = 32


def _floor_div(v: int | None, d: int) -> int | None:
    return None if v is None else v // d


def _ceil_div(v: int | None, d: int) -> int | None:
    return None if v is None else -((-v) // d)


def _mul_interval(
    a: tuple[int | None, int | None], b: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    (alo, ahi), (blo, bhi) = a, b
    if None not in (alo, ahi, blo, bhi):
        products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]  # type: ignore[operator]
        return min(products), max(products)
    if alo is not None and blo is not None and alo >= 0 and blo >= 0:
        hi = ahi * bhi if ahi is not None and bhi is not None else None
        return alo * blo, hi
    return None, None


def _as_term_interval(
    iv: tuple[int | None, int | None],
) -> tuple[int | None, int | None]:
    """``_mul_interval((1, 1), iv)`` without the products: a one-factor monomial's interval."""
    lo, hi = iv
    if lo is not None and hi is not None:
        return iv if lo <= hi else (hi, lo)
    return (lo, None) if lo is not None and lo >= 0 else (None, None)


def _scale_interval(
    c: int, iv: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    lo, hi = iv
    if c >= 0:
        return (None if lo is None else c * lo), (None if hi is None else c * hi)
    return (None if hi is None else c * hi), (None if lo is None else c * lo)


class Scope:
    """Facts about symbols: integer ranges and symbolic upper bounds.

    Args:
        nonnegative: when True every symbol is assumed ``>= 0`` (tensor dims).
    """

    #: The memo tables (attribute names): pure functions of the facts.
    _MEMO_TABLES: tuple[str, ...] = ("_proofs", "_intervals", "_cases", "_scoped_memo")

    def __init__(self, nonnegative: bool = False) -> None:
        self.nonnegative = nonnegative
        self._ranges: dict[str, tuple[int | None, int | None]] = {}
        self._upper: dict[str, list[Dim]] = {}
        # Proofs and intervals are pure functions of the facts: memoized per state of
        # the facts (see _use_memos). The same atoms (max(1, s), s//2) recur in most of a
        # model's expressions, so the intervals of sub-expressions are reused too.
        self._proofs: dict[DimExpr, bool]
        self._intervals: dict[DimExpr, tuple[int | None, int | None]]
        # (symbol, lower, upper) -> this scope with that range added (see _case)
        self._cases: dict[tuple[str, int | None, int | None], Scope]
        # (operation, arguments) -> the result of a scoped operation (dmax, dmin,
        # broadcast) under the facts of now; see _atoms._memoized_scoped.
        self._scoped_memo: dict[tuple, object]
        # What determines the facts: the root (class, nonnegative), then each fact added
        # in order (interned to an int); None when a fact was added that is not named.
        self._history: object = (type(self), nonnegative)
        self._use_memos()
        #: Incremented whenever a fact is added (keys the algebra's scoped memo).
        self.version = 0

    def _use_memos(self) -> None:
        """Takes the memo tables of the scope's history, shared with every scope that has it.

        Two scopes with one history hold the same facts (each fact is applied the same
        way to the same state), so they prove the same: most models add no fact at all
        (every dim is merely ``>= 0``) or the same few on every run, and their proofs do
        not change from one run to the next. The tables are bounded like a scope's own,
        and so is the number of histories kept.
        """
        history = self._history
        tables = None if history is None else _SHARED_MEMOS.get(history)
        if tables is None:
            tables = {name: {} for name in self._MEMO_TABLES}
            if history is not None:
                if len(_SHARED_MEMOS) >= _MAX_SHARED_MEMOS:
                    _SHARED_MEMOS.clear()  # scopes keep the tables they hold
                _SHARED_MEMOS[history] = tables
        # Plain stores for the tables every scope has (every fact a node records moves
        # the scope to new tables, twice for a fact that also bounds a symbol); not
        # self.__dict__.update, which would turn the instance's attributes into a dict
        # and slow every later read of them.
        self._proofs = tables["_proofs"]
        self._intervals = tables["_intervals"]
        self._cases = tables["_cases"]
        self._scoped_memo = tables["_scoped_memo"]
        for name in self._MEMO_TABLES[4:]:  # a subclass's own tables
            setattr(self, name, tables[name])

    def _follow(self, history: object, fact: object) -> None:
        """Sets the history ``history`` followed by ``fact`` (``None``: no fact) and its memos."""
        if history is not None and fact is not None:
            key = (history, fact)
            found = _HISTORIES.get(key)
            if found is None:
                if len(_HISTORIES) >= _MAX_HISTORIES:
                    _HISTORIES.clear()  # ids are never reused: forgotten ones are new
                _next_history[0] += 1
                found = _HISTORIES[key] = _next_history[0]
            self._history = found
        else:
            self._history = None
        self._use_memos()

    def copy(self) -> Scope:
        """An independent copy of the scope."""
        other = Scope(self.nonnegative)
        other._ranges = dict(self._ranges)
        other._upper = {k: list(v) for k, v in self._upper.items()}
        if type(self) is Scope:
            other._history = self._history  # the same facts: the same memos
            other._use_memos()
        else:
            other._follow(None, None)
        return other

    def _facts_changed(self, fact: object = None) -> None:
        """Moves to the memos of the facts after ``fact`` and moves :attr:`version`.

        ``fact`` names the change (hashable, and the same change of the same facts
        always gives the same new facts); ``None``: an unnamed change, whose memos are
        the scope's own from here on.
        """
        self._follow(self._history, fact)
        self.version += 1

    def set_range(self, name: str, lower: int | None = None, upper: int | None = None) -> None:
        """Records ``lower <= name <= upper`` (intersected with what is known)."""
        self._facts_changed(("range", name, lower, upper))
        self._narrow_range(name, lower, upper)

    def _narrow_range(self, name: str, lower: int | None, upper: int | None) -> None:
        """Intersects ``name``'s range with ``[lower, upper]`` (the caller moved the scope)."""
        lo, hi = self._ranges.get(name, (None, None))
        if lower is not None:
            lo = lower if lo is None else max(lo, lower)
        if upper is not None:
            hi = upper if hi is None else min(hi, upper)
        self._ranges[name] = (lo, hi)

    def add_upper_bound(self, name: str, bound: Dim) -> None:
        """Records ``name <= bound`` for a symbolic (or integer) bound."""
        if isinstance(bound, int):
            self.set_range(name, upper=bound)
            return
        bounds = self._upper.setdefault(name, [])
        if bound not in bounds:
            bounds.append(bound)
            self._facts_changed(("upper", name, bound))

    def upper_bounds(self, name: str) -> list[Dim]:
        """The symbolic upper bounds recorded for ``name``."""
        return list(self._upper.get(name, ()))

    # -- intervals -------------------------------------------------------------------
    def _symbol_interval(self, name: str, depth: int) -> tuple[int | None, int | None]:
        lo, hi = self._ranges.get(name, (None, None))
        if self.nonnegative:
            lo = 0 if lo is None else max(lo, 0)
        if depth < _MAX_SUBSTITUTION_DEPTH:
            for bound in self._upper.get(name, ()):
                bhi = self._interval(bound, depth + 1)[1]
                if bhi is not None:
                    hi = bhi if hi is None else min(hi, bhi)
        return lo, hi

    def _atom_interval(self, atom: Atom, depth: int) -> tuple[int | None, int | None]:
        kind = atom.kind
        if kind == SYM:
            return self._symbol_interval(atom.name, depth)
        args = atom.args
        if kind in (FLOOR, EXACT, MOD):
            num, den = args
            nlo, nhi = self._interval(num, depth)
            if isinstance(den, int) and den > 0:
                if kind == FLOOR:
                    return _floor_div(nlo, den), _floor_div(nhi, den)
                if kind == EXACT:
                    return _ceil_div(nlo, den), _floor_div(nhi, den)
                hi = den - 1 if nhi is None or nlo is None or nlo < 0 else min(den - 1, nhi)
                return 0, hi
            dlo, dhi = self._interval(den, depth)
            if dlo is not None and dlo >= 1 and nlo is not None and nlo >= 0:
                if kind == MOD:
                    return 0, None if dhi is None else dhi - 1
                return 0, nhi
            return None, None
        if kind in (MAX, MIN, BCAST):
            ivs = [self._interval(a, depth) for a in args]
            los = [lo for lo, _ in ivs]
            his = [hi for _, hi in ivs]
            known_los = [v for v in los if v is not None]
            known_his = [v for v in his if v is not None]
            if kind == MAX:
                return (max(known_los) if known_los else None), (
                    max(his) if None not in his else None  # type: ignore[type-var]
                )
            if kind == MIN:
                return (min(los) if None not in los else None), (  # type: ignore[type-var]
                    min(known_his) if known_his else None
                )
            # broadcast: the result is one of the arguments
            return (min(los) if None not in los else None), (  # type: ignore[type-var]
                max(his) if None not in his else None  # type: ignore[type-var]
            )
        return None, None

    def _interval(self, d: Dim, depth: int = 0) -> tuple[int | None, int | None]:
        if isinstance(d, int):
            return d, d
        if depth and self._upper:
            # Below the top, symbolic upper bounds are substituted less deeply. Without
            # any, the depth changes nothing: the memoized interval is the same.
            return self._compute_interval(d, depth)
        found = self._intervals.get(d)
        if found is None:
            if len(self._intervals) >= _MAX_MEMOIZED:
                self._intervals.clear()
            found = self._intervals[d] = self._compute_interval(d, 0)
        return found

    def _compute_interval(self, d: DimExpr, depth: int) -> tuple[int | None, int | None]:
        if d.unknown_reason is not None:
            return None, None
        lo: int | None = d.const
        hi: int | None = d.const
        for mono, coeff in d.terms:
            if len(mono) == 1:  # most terms: one factor, without the general loop
                iv = _as_term_interval(self._atom_interval(mono[0], depth))
            else:
                iv = self._monomial_interval(mono, depth)
            tlo, thi = _scale_interval(coeff, iv)
            lo = None if lo is None or tlo is None else lo + tlo
            hi = None if hi is None or thi is None else hi + thi
        return lo, hi

    def _monomial_interval(
        self, mono: tuple[Atom, ...], depth: int
    ) -> tuple[int | None, int | None]:
        iv: tuple[int | None, int | None] = (1, 1)
        i = 0
        while i < len(mono):
            atom = mono[i]
            power = 1
            while i + power < len(mono) and mono[i + power] is atom:
                power += 1
            aiv = self._atom_interval(atom, depth)
            if power % 2 == 0:
                alo, ahi = aiv
                if alo is not None and ahi is not None:
                    m = max(abs(alo), abs(ahi))
                    low = 0 if alo <= 0 <= ahi else min(abs(alo), abs(ahi))
                    piv: tuple[int | None, int | None] = (low**power, m**power)
                else:
                    piv = (0, None)
            else:
                piv = aiv
                for _ in range(power - 1):
                    piv = _mul_interval(piv, aiv)
            iv = _mul_interval(iv, piv)
            i += power
        return iv

    def bounds(self, d: Dim) -> tuple[int | None, int | None]:
        """A sound interval ``(lo, hi)`` for ``d``; None means unbounded on that side."""
        return self._interval(d)

    # -- questions -------------------------------------------------------------------
    def prove_nonneg(self, d: Dim, _depth: int = 0) -> bool:
        """True when ``d >= 0`` holds under the scope's facts."""
        if isinstance(d, int):
            return d >= 0
        if _depth == 0:
            proofs = self._proofs
            known = proofs.get(d)
            if known is None:
                known = self._prove_nonneg(d, 0)
                proofs = self._proofs  # a fact added meanwhile gave the scope new tables
                if len(proofs) >= _MAX_MEMOIZED:
                    proofs.clear()
                proofs[d] = known
            return known
        return self._prove_nonneg(d, _depth)

    def _prove_nonneg(self, d: DimExpr, _depth: int) -> bool:
        lo = self._interval(d)[0]
        if lo is not None and lo >= 0:
            return True
        if _depth < _MAX_SUBSTITUTION_DEPTH and self._prove_by_cases(d, _depth):
            return True
        if _depth >= _MAX_SUBSTITUTION_DEPTH or not self._upper:
            return False
        # -c*s >= -c*U when s <= U and c > 0: substitute a symbolic upper bound for a
        # symbol that appears only linearly with a negative coefficient.
        for name in d.symbols() & self._upper.keys():
            if not _only_negative_linear(d, name):
                continue
            for bound in self._upper[name]:
                if self.prove_nonneg(substitute(d, {name: bound}), _depth + 1):
                    return True
        return False

    def _prove_by_cases(self, d: DimExpr, depth: int) -> bool:
        """Splits on an atom ``min(s+c, k)`` / ``max(s+c, k)`` (symbol ``s``, ints ``c, k``).

        In the case ``s <= k-c`` the atom is ``s+c`` (for min) and ``s`` gets that range;
        in the case ``s >= k-c`` it is ``k``. ``d >= 0`` holds if it holds in both cases.
        The shift ``c`` matters: a floored extremum is spelled ``max(h+7, 8)//8``.
        """
        atom = _split_candidate(d)
        if atom is None:
            return False
        k, shifted = _int_and_shifted_symbol(atom)  # type: ignore[misc]
        name = shifted.terms[0][0][0].name
        threshold = k - shifted.const
        lower_case = shifted if atom.kind == MIN else k  # the atom's value when s+c <= k
        upper_case = k if atom.kind == MIN else shifted  # ... and when s+c >= k
        for value, bounds in (
            (lower_case, (None, threshold)),
            (upper_case, (threshold, None)),
        ):
            case = self._case(name, bounds[0], bounds[1])
            lo, hi = case._ranges[name]
            if lo is not None and hi is not None and lo > hi:
                continue  # the case cannot happen
            replaced = replace_subexpressions(d, {_atom_expr(atom): value})
            if not case.prove_nonneg(replaced, depth + 1):
                return False
        return True

    def _case(self, name: str, lower: int | None, upper: int | None) -> Scope:
        """A copy of the scope with ``lower <= name <= upper`` added, for a case split.

        Kept until a fact is added: the same splits recur (``min(s, 64)`` in many
        expressions), and a kept case keeps its memoized proofs and intervals too.
        """
        key = (name, lower, upper)
        case = self._cases.get(key)
        if case is None:
            case = self.copy()
            case.set_range(name, lower=lower, upper=upper)
            if len(self._cases) >= _MAX_CASES:
                self._cases.clear()
            self._cases[key] = case
        return case

    def prove_ge(self, a: Dim, b: Dim) -> bool:
        """True when ``a >= b`` is proven."""
        if b.__class__ is int and a.__class__ is DimExpr and a.unknown_reason is None:  # type: ignore[union-attr]
            if not b:
                return self.prove_nonneg(a)  # a - 0 is a: the most common question
            if b != INT64_MIN:
                # sub(a, b) is add(a, -b), whose memo this reads directly: facts noted
                # by every convolution (out >= 1) and every index check ask this.
                return self.prove_nonneg(_memoized("+", _add_impl, a, -b))
        return self.prove_nonneg(sub(a, b))

    def prove_gt(self, a: Dim, b: Dim) -> bool:
        """True when ``a > b`` is proven."""
        if b.__class__ is int and _is_known_expr(a):
            # One subtraction instead of two: the same canonical a - b - 1, and it
            # leaves int64 exactly when the two-step form does.
            return self.prove_nonneg(sub(a, b + 1))
        return self.prove_nonneg(sub(sub(a, b), 1))

    def prove_le(self, a: Dim, b: Dim) -> bool:
        """True when ``a <= b`` is proven."""
        return self.prove_ge(b, a)

    def prove_eq(self, a: Dim, b: Dim) -> bool:
        """True when ``a == b`` is proven (canonical equality, or both inequalities)."""
        diff = sub(a, b)
        if diff == 0:
            return True
        return self.prove_nonneg(diff) and self.prove_nonneg(neg(diff))

    def compare(self, a: Dim, b: Dim) -> str:
        """``"Equal"``, ``"Greater"`` (a > b), ``"Smaller"`` (a < b) or ``"Unknown"``."""
        if isinstance(a, DimExpr) and a.unknown_reason is not None:
            return "Unknown"
        if isinstance(b, DimExpr) and b.unknown_reason is not None:
            return "Unknown"
        if self.prove_eq(a, b):
            return "Equal"
        if self.prove_gt(a, b):
            return "Greater"
        if self.prove_gt(b, a):
            return "Smaller"
        return "Unknown"

    def __repr__(self) -> str:
        return (
            f"Scope(nonnegative={self.nonnegative}, ranges={self._ranges}, "
            f"upper={ {k: [str(b) for b in v] for k, v in self._upper.items()} })"
        )


def _is_known_expr(d: Dim) -> bool:
    """True for a ``DimExpr`` that is not an unknown.

    The proof shortcuts take only these: arithmetic on an unknown mints a new one, which
    the engine counts (its memo keys on that count), so that path must stay as it is.
    """
    return isinstance(d, DimExpr) and d.unknown_reason is None


def _int_and_shifted_symbol(atom: Atom) -> tuple[int, DimExpr] | None:
    """``(k, s+c)`` for a ``min``/``max`` atom over exactly an int and a symbol plus an int."""
    if atom.kind not in (MIN, MAX) or len(atom.args) != 2:
        return None
    k, s = atom.args
    if isinstance(s, int):
        k, s = s, k
    if not isinstance(k, int) or not isinstance(s, DimExpr) or len(s.terms) != 1:
        return None
    ((mono, coeff),) = s.terms
    if coeff != 1 or len(mono) != 1 or mono[0].kind != SYM:
        return None
    return k, s


def _split_candidate(d: DimExpr) -> Atom | None:
    """The first ``min``/``max`` atom of ``d`` over exactly a symbol plus an int and an int."""
    for mono, _ in d.terms:
        for atom in mono:
            if _int_and_shifted_symbol(atom) is not None:
                return atom
            if atom.kind not in (SYM,):
                for arg in atom.args:
                    if isinstance(arg, DimExpr):
                        inner = _split_candidate(arg)
                        if inner is not None:
                            return inner
    return None


def _only_negative_linear(d: DimExpr, name: str) -> bool:
    """True when symbol ``name`` occurs in ``d`` only as a bare term with a negative coefficient."""
    found = False
    for mono, coeff in d.terms:
        for atom in mono:
            if atom.kind == SYM:
                if atom.name == name:
                    if len(mono) != 1 or coeff > 0:
                        return False
                    found = True
            elif any(isinstance(a, DimExpr) and name in a.symbols() for a in atom.args):
                return False
    return found


#: Every symbol is a tensor dim: ``>= 0``. Read-only by convention: copy() it to add facts.
DIM_SCOPE = Scope(nonnegative=True)
