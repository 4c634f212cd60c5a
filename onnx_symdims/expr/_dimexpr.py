"""The canonical, hash-consed dimension expression :class:`DimExpr`, and its constructors.

A constant is always a plain ``int``; a ``DimExpr`` is a polynomial with integer
coefficients over atoms (:mod:`._atoms`), interned: structurally equal expressions are the
same object. Coefficients and constants are kept inside int64. A result that would leave
that range, or grow past the size guard, is an *unknown*: an opaque value that poisons any
arithmetic it takes part in and never equals anything but itself.

The operators of a ``DimExpr`` are the ring's and the divisions' operations, its text is
the printer's: reached through :data:`._atoms.late` (those modules come after this one).

Example::

    >>> from onnx_symdims.expr import sym
    >>> b, s = sym("batch"), sym("seq")
    >>> (2 * s) // 2 is s
    True
    >>> (b + s - b) is s
    True
    >>> (2 * b) // b
    2
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx_symdims.expr._atoms import (
    BCAST,
    CALL,
    EXACT,
    FLOOR,
    INT64_MAX,
    INT64_MIN,
    MAX,
    MAX_DEGREE,
    MAX_DEPTH,
    MAX_TERMS,
    MIN,
    MOD,
    SYM,
    Atom,
    BroadcastError,
    ExprError,
    InexactDivisionError,
    Monomial,
    _make_atom,
    _mono_key,
    late,
)

#: The public name of each function-term kind (:attr:`DimExpr.function`).
FUNCTION_NAMES = {
    FLOOR: "floordiv",
    MOD: "mod",
    EXACT: "exact_div",
    MAX: "max",
    MIN: "min",
    BCAST: "broadcast",
    CALL: "call",
}
_DIVISION_KINDS = (FLOOR, MOD, EXACT)


class DimExpr:
    """A canonical symbolic integer expression (never a constant).

    Instances are interned; equality is identity. Use :func:`sym` and the
    arithmetic operators or module functions to build them.
    """

    __slots__ = (
        "__weakref__",
        "_coefficients",
        "_onnx",
        "_range",
        "_seed",
        "_seed_top",
        "_symbols",
        "atom",
        "const",
        "depth",
        "is_symbol",
        "is_unknown",
        "key",
        "name",
        "size",
        "terms",
        "unknown_reason",
    )

    terms: tuple[tuple[Monomial, int], ...]
    const: int
    key: str
    depth: int
    unknown_reason: str | None
    # Read on every shape the engine handles: computed once, when the expression is made
    # (see _intern and unknown), instead of on each read.
    #: True for an opaque unknown (overflow or size guard).
    is_unknown: bool
    #: True when the expression is exactly one symbol.
    is_symbol: bool
    #: The single atom when the expression is exactly one atom, else None.
    atom: Atom | None
    #: The symbol's name when the expression is a bare symbol, else None.
    name: str | None

    # Interned: equality is identity and so is the (fast, C-level) hash.

    # -- inspection ---------------------------------------------------------------

    def symbols(self) -> frozenset[str]:
        """The names of the leaf symbols (never function names)."""
        cached = self._symbols
        if cached is None:
            names: set[str] = set()
            for mono, _ in self.terms:
                for atom in mono:
                    if atom.kind == SYM:
                        names.add(atom.name)
                    else:
                        for arg in atom.args:
                            if isinstance(arg, DimExpr):
                                names |= arg.symbols()
            cached = self._symbols = frozenset(names)
        return cached

    def coefficients(self) -> tuple[dict[DimExpr, int], int]:
        """Returns ``({monomial: coefficient}, constant)``; monomials have coefficient 1."""
        cached = self._coefficients
        if cached is None:
            cached = self._coefficients = tuple(
                (_intern(((mono, 1),), 0), c) for mono, c in self.terms
            )
        return dict(cached), self.const

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        """Evaluates under ``bindings`` with floor semantics.

        Raises:
            KeyError: a symbol has no binding.
            InexactDivisionError: an exact division does not divide.
            BroadcastError: a broadcast term is invalid under the bindings.
            ZeroDivisionError: a division by zero.
        """
        if self.unknown_reason is not None:
            raise ExprError(f"cannot evaluate an unknown ({self.unknown_reason})")
        total = self.const
        for mono, coeff in self.terms:
            value = coeff
            for atom in mono:
                value *= _evaluate_atom(atom, bindings)
            total += value
        return total

    # -- structure, for code outside the algebra (no atom kinds needed) -------------
    def symbol_factors(self) -> tuple[str, ...] | None:
        """The symbols ``s1..sk`` when ``self == c*s1*...*sk`` with ``c > 0``, else None.

        A power repeats its symbol (``2*b*b`` gives ``("b", "b")``). Then ``self == 0``
        exactly when one of these symbols is 0. Read off the canonical terms: O(k).
        """
        terms = self.terms
        if self.const != 0 or len(terms) != 1:
            return None
        ((mono, coeff),) = terms
        if coeff <= 0:
            return None
        for atom in mono:
            if atom.kind != SYM:
                return None
        return tuple(atom.name for atom in mono)

    def has_division(self) -> bool:
        """True when a floor division, modulo or exact division occurs anywhere in it.

        Such an expression may not be defined for every value of its symbols.
        """
        return any(
            atom.kind in _DIVISION_KINDS
            or any(not isinstance(a, int) and a.has_division() for a in atom.args)
            for mono, _ in self.terms
            for atom in mono
        )

    def function_terms(self) -> tuple[DimExpr, ...]:
        """The function terms that are factors of its monomials, each once, as expressions.

        Only the top level: ``2*max(a, b//2) + a%3`` gives ``max(a,b//2)`` and ``a%3``
        (not ``b//2``); see :attr:`function` and :attr:`args` to read each one.
        """
        seen: dict[Atom, None] = {}
        for mono, _ in self.terms:
            for atom in mono:
                if atom.kind != SYM:
                    seen[atom] = None
        return tuple(_atom_expr(atom) for atom in seen)

    @property
    def function(self) -> str | None:
        """For one function term, its kind, else None.

        One of ``"floordiv"``, ``"mod"``, ``"exact_div"``, ``"max"``, ``"min"``,
        ``"broadcast"`` and ``"call"`` (an opaque function; its name is not given here).
        """
        atom = self.atom
        return None if atom is None else FUNCTION_NAMES.get(atom.kind)

    @property
    def args(self) -> tuple[Dim, ...]:
        """The arguments of one function term (``(numerator, divisor)``, ...), else ``()``."""
        atom = self.atom
        return () if atom is None else atom.args

    def without_constant(self) -> DimExpr:
        """``self - self.const``: the same terms, constant 0 (an unknown is returned as is)."""
        if not self.const or self.unknown_reason is not None:
            return self
        return _intern(self.terms, 0)

    # -- printing -------------------------------------------------------------------
    def __str__(self) -> str:
        return late.to_onnx(self)

    def __repr__(self) -> str:
        if self.unknown_reason is not None:
            return f"DimExpr(<unknown: {self.unknown_reason}>)"
        return f"DimExpr({self!s})"

    # -- arithmetic -------------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        return late.add(self, other)

    def __radd__(self, other: Dim) -> Dim:
        return late.add(other, self)

    def __sub__(self, other: Dim) -> Dim:
        return late.sub(self, other)

    def __rsub__(self, other: Dim) -> Dim:
        return late.sub(other, self)

    def __mul__(self, other: Dim) -> Dim:
        return late.mul(self, other)

    def __rmul__(self, other: Dim) -> Dim:
        return late.mul(other, self)

    def __floordiv__(self, other: Dim) -> Dim:
        return late.floordiv(self, other)

    def __rfloordiv__(self, other: Dim) -> Dim:
        return late.floordiv(other, self)

    def __mod__(self, other: Dim) -> Dim:
        return late.mod(self, other)

    def __rmod__(self, other: Dim) -> Dim:
        return late.mod(other, self)

    def __neg__(self) -> Dim:
        return late.neg(self)

    def __pos__(self) -> DimExpr:
        return self

    def exact_div(self, other: Dim) -> Dim:
        """Exact division ``self /: other`` (the caller asserts it divides)."""
        return late.exact_div(self, other)

    def __reduce__(self):
        # Pickle/copy through the canonical text so interning survives.
        return (_unpickle, (late.to_seed(self),))


def _unpickle(text: str) -> Dim:
    return late.parse_expr(text)


Dim = int | DimExpr

_EXPRS: dict[tuple, DimExpr] = {}
_unknown_counter = 0


def unknown(reason: str = "unknown") -> DimExpr:
    """A fresh opaque unknown: never equal to any other expression."""
    global _unknown_counter
    _unknown_counter += 1
    e = object.__new__(DimExpr)
    e.terms = ()
    e.const = 0
    e.key = f"?{_unknown_counter}"
    e.depth = 0
    e.size = 1
    e.unknown_reason = reason
    e.is_unknown = True
    e.is_symbol = False
    e.atom = e.name = None
    e._onnx = e._seed = e._seed_top = e._coefficients = e._range = None
    e._symbols = frozenset()
    return e


def unknowns_made() -> int:
    """How many unknowns :func:`unknown` has made so far (in this process).

    An unknown stands for one value: a caller reusing results (the engine's memo) must
    not hand the same unknown to two values that may differ.
    """
    return _unknown_counter


def _in_int64(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def _from_terms(terms: dict[Monomial, int], const: int) -> Dim:
    """Interns a polynomial from already-canonical monomials (no sum-level rewrites)."""
    items = [(m, c) for m, c in terms.items() if c]
    if not INT64_MIN <= const <= INT64_MAX or not all(
        INT64_MIN <= c <= INT64_MAX for _, c in items
    ):
        return unknown("overflow")
    if not items:
        return const
    if len(items) > MAX_TERMS:
        return unknown("size")
    items.sort(key=lambda mc: _mono_key(mc[0]))
    return _intern(tuple(items), const)


def _intern(tterms: tuple[tuple[Monomial, int], ...], const: int) -> DimExpr:
    """Interns sorted, non-zero, in-range terms (the caller guarantees all three)."""
    cache_key = (tterms, const)
    e = _EXPRS.get(cache_key)
    if e is not None:
        return e
    items = tterms
    depth = 0
    size = 1 if const else 0
    for m, _ in items:
        if len(m) > MAX_DEGREE:
            return unknown("size")
        size += 1
        for a in m:
            size += a.size
            if a.depth > depth:
                depth = a.depth
    if depth > MAX_DEPTH:
        return unknown("size")
    e = object.__new__(DimExpr)
    e.terms = tterms
    e.const = const
    e.is_unknown = False
    if not const and len(items) == 1 and items[0][1] == 1 and len(items[0][0]) == 1:
        atom = items[0][0][0]
        e.atom = atom
        e.is_symbol = atom.kind == SYM
        e.name = atom.name if e.is_symbol else None
    else:
        e.atom = e.name = None
        e.is_symbol = False
    parts = [f"{c}*{_mono_key(m)}" for m, c in items]
    if const:
        parts.append(str(const))
    e.key = "(" + "+".join(parts) + ")" if len(parts) > 1 or items[0][1] != 1 else parts[0][2:]
    e.depth = depth
    e.size = size
    e.unknown_reason = None
    e._onnx = e._seed = e._seed_top = e._coefficients = e._range = None
    e._symbols = None
    _EXPRS[cache_key] = e
    return e


def _atom_expr(atom: Atom) -> DimExpr:
    return _intern((((atom,), 1),), 0)


def _term(kind: str, args: tuple[Dim, ...], name: str = "") -> DimExpr:
    """The function term ``kind(args)``; an unknown when an int argument is outside int64.

    Every rule keeps its constants inside int64; this is the last line of defence so that
    no printed dim ever carries a literal that cannot be read back.
    """
    for a in args:
        if type(a) is int:
            if not INT64_MIN <= a <= INT64_MAX:
                return unknown("overflow")
        elif a.unknown_reason is not None:  # e.g. a sign flip of -2**63*b
            return unknown(a.unknown_reason)
    return _atom_expr(_make_atom(kind, name, args))


def sym(name: str) -> DimExpr:
    """The symbol called ``name`` (any non-empty text; it is not parsed)."""
    if not name:
        raise ExprError("a symbol needs a non-empty name")
    return _atom_expr(_make_atom(SYM, name, ()))


def as_int(d: object) -> int | None:
    """The value of a constant dim, else None."""
    return d if isinstance(d, int) and not isinstance(d, bool) else None


def is_symbolic(d: object) -> bool:
    """True for a (non-unknown) DimExpr."""
    return isinstance(d, DimExpr) and d.unknown_reason is None


def _split(d: Dim) -> tuple[dict[Monomial, int], int]:
    if isinstance(d, int):
        return {}, d
    return dict(d.terms), d.const


def _poison(*args: Dim) -> DimExpr | None:
    for a in args:
        if isinstance(a, DimExpr) and a.unknown_reason is not None:
            return unknown(a.unknown_reason)
    return None


def _check_dim(d: object) -> Dim:
    if isinstance(d, DimExpr):
        return d
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    if hasattr(d, "__index__"):  # numpy integers
        return int(d)  # type: ignore[call-overload]


# ---------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------


def evaluate(d: Dim, bindings: Mapping[str, int]) -> int:
    """Evaluates a dim under ``bindings`` (see :meth:`DimExpr.evaluate`)."""
    return d if isinstance(d, int) else d.evaluate(bindings)


def _evaluate_broadcast(values: list[int]) -> int:
    others = {v for v in values if v != 1}
    if len(others) > 1:
        raise BroadcastError(f"cannot broadcast dims {sorted(others)}")
    return others.pop() if others else 1


def _evaluate_atom(atom: Atom, bindings: Mapping[str, int]) -> int:
    if atom.kind == SYM:
        return bindings[atom.name]
    values = [evaluate(a, bindings) for a in atom.args]
    kind = atom.kind
    if kind == FLOOR:
        return values[0] // values[1]
    if kind == MOD:
        return values[0] % values[1]
    if kind == EXACT:
        num, den = values
        if den == 0:
            raise ZeroDivisionError("exact division by zero")
        if num % den:
            raise InexactDivisionError(f"{num} /: {den} is not exact")
        return num // den
    if kind == MAX:
        return max(values)
    if kind == MIN:
        return min(values)
    if kind == BCAST:
        return _evaluate_broadcast(values)
    raise ExprError(f"cannot evaluate unknown function {atom.name!r}")


def coefficients(d: Dim) -> tuple[dict[DimExpr, int], int]:
    """``({monomial: coefficient}, constant)`` of a dim; ``({}, d)`` for an int."""
    return ({}, d) if isinstance(d, int) else d.coefficients()
