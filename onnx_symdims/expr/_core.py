"""Canonical, hash-consed integer dimension expressions.

A dimension is ``Dim = int | DimExpr``. A constant is always a plain ``int``; a
``DimExpr`` is a polynomial with integer coefficients over *atoms*: symbols and
opaque function terms (floor division, modulo, exact division, max, min,
broadcast, unknown calls). The canonical form is built at construction:
like terms are collected, constants folded, monomials and terms sorted by a
structural key, and every rewrite applied holds for **all** integer values of
the symbols (negative ones too). Structurally equal expressions are the same
object, so equality and hashing are O(1) identity checks.

Coefficients and constants are kept inside int64. A result that would leave
that range, or grow past the size guard, is an *unknown*: an opaque value that
poisons any arithmetic it takes part in and never equals anything but itself.

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

import math
from collections.abc import Iterable, Mapping

__all__ = [
    "BroadcastError",
    "Dim",
    "DimExpr",
    "ExprError",
    "ExprSyntaxError",
    "InexactDivisionError",
    "add",
    "as_int",
    "broadcast",
    "call",
    "ceildiv",
    "coefficients",
    "dmax",
    "dmin",
    "evaluate",
    "exact_div",
    "floordiv",
    "is_symbolic",
    "mod",
    "mul",
    "neg",
    "replace_subexpressions",
    "sub",
    "substitute",
    "sym",
    "truncdiv",
    "unknown",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: A polynomial with more terms than this degrades to an unknown.
MAX_TERMS = 128
#: Function terms nested deeper than this degrade to an unknown.
MAX_DEPTH = 24
#: A monomial with more atoms than this (powers counted) degrades to an unknown: without
#: it a chain of reshapes multiplies one fresh symbol after another into a single product
#: whose size grows with the model (quadratic time and memory over the chain).
MAX_DEGREE = 16
#: Above this many arguments, max/min only fold constant differences (linear); the
#: pairwise scope proofs are quadratic and are skipped (keeping an argument is sound).
MAX_SCOPED_EXTREMUM_ARGS = 32


class ExprError(ValueError):
    """Base class of the algebra's errors."""


class ExprSyntaxError(ExprError):
    """The text is not an expression of the grammar."""


class BroadcastError(ExprError):
    """Two dims can never be broadcast together (e.g. 2 and 3)."""


class InexactDivisionError(ArithmeticError):
    """An exact division ``a /: b`` whose operands are known not to divide."""


# Atom kinds; the character also prefixes the structural sort key of function terms,
# so that symbols sort first (by name) and function terms after them.
SYM = "s"
FLOOR = "f"
MOD = "m"
EXACT = "e"
MAX = "x"
MIN = "n"
BCAST = "b"
CALL = "c"
_FUNCTION_KEY_PREFIX = "~"


class Atom:
    """A multiplicative factor of a monomial: a symbol or a function term.

    Atoms are interned: build them only through the module's constructors.
    """

    __slots__ = ("args", "depth", "key", "kind", "name", "size")

    kind: str
    name: str
    args: tuple[Dim, ...]
    key: str
    depth: int
    size: int  # nodes in the atom's tree: 1 + the sizes of its arguments

    # Interned, so equality is identity and the (fast, C-level) identity hash is right.

    def __repr__(self) -> str:
        return f"Atom({self.key})"


_ATOMS: dict[tuple, Atom] = {}


def _dim_key(d: Dim) -> str:
    return str(d) if isinstance(d, int) else d.key


def _make_atom(kind: str, name: str, args: tuple[Dim, ...]) -> Atom:
    cache_key = (kind, name, args)
    atom = _ATOMS.get(cache_key)
    if atom is not None:
        return atom
    atom = Atom()
    atom.kind = kind
    atom.name = name
    atom.args = args
    if kind == SYM:
        atom.key = name
        atom.depth = 0
        atom.size = 1
    else:
        inner = ",".join(_dim_key(a) for a in args)
        atom.key = f"{_FUNCTION_KEY_PREFIX}{kind}{name}({inner})"
        atom.depth = 1 + max((a.depth for a in args if isinstance(a, DimExpr)), default=0)
        atom.size = 1 + sum(a.size if isinstance(a, DimExpr) else 1 for a in args)
    _ATOMS[cache_key] = atom
    return atom


Monomial = tuple  # tuple[Atom, ...], sorted by Atom.key, repeated atoms are powers


_MONO_KEYS: dict[Monomial, str] = {}


def _mono_key(mono: Monomial) -> str:
    key = _MONO_KEYS.get(mono)
    if key is None:
        key = _MONO_KEYS[mono] = "*".join(a.key for a in mono)
    return key


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
        "const",
        "depth",
        "key",
        "size",
        "terms",
        "unknown_reason",
    )

    terms: tuple[tuple[Monomial, int], ...]
    const: int
    key: str
    depth: int
    unknown_reason: str | None

    # Interned: equality is identity and so is the (fast, C-level) hash.

    # -- inspection ---------------------------------------------------------------
    @property
    def is_unknown(self) -> bool:
        """True for an opaque unknown (overflow or size guard)."""
        return self.unknown_reason is not None

    @property
    def is_symbol(self) -> bool:
        """True when the expression is exactly one symbol."""
        return self.atom is not None and self.atom.kind == SYM

    @property
    def atom(self) -> Atom | None:
        """The single atom when the expression is exactly one atom, else None."""
        if self.const == 0 and len(self.terms) == 1:
            mono, coeff = self.terms[0]
            if coeff == 1 and len(mono) == 1:
                return mono[0]
        return None

    @property
    def name(self) -> str | None:
        """The symbol's name when the expression is a bare symbol."""
        atom = self.atom
        return atom.name if atom is not None and atom.kind == SYM else None

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

    # -- printing -------------------------------------------------------------------
    def __str__(self) -> str:
        from onnx_symdims.expr import _print

        return _print.to_onnx(self)

    def __repr__(self) -> str:
        if self.unknown_reason is not None:
            return f"DimExpr(<unknown: {self.unknown_reason}>)"
        return f"DimExpr({self!s})"

    # -- arithmetic -------------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        return add(self, other)

    def __radd__(self, other: Dim) -> Dim:
        return add(other, self)

    def __sub__(self, other: Dim) -> Dim:
        return sub(self, other)

    def __rsub__(self, other: Dim) -> Dim:
        return sub(other, self)

    def __mul__(self, other: Dim) -> Dim:
        return mul(self, other)

    def __rmul__(self, other: Dim) -> Dim:
        return mul(other, self)

    def __floordiv__(self, other: Dim) -> Dim:
        return floordiv(self, other)

    def __rfloordiv__(self, other: Dim) -> Dim:
        return floordiv(other, self)

    def __mod__(self, other: Dim) -> Dim:
        return mod(self, other)

    def __rmod__(self, other: Dim) -> Dim:
        return mod(other, self)

    def __neg__(self) -> Dim:
        return neg(self)

    def __pos__(self) -> DimExpr:
        return self

    def exact_div(self, other: Dim) -> Dim:
        """Exact division ``self /: other`` (the caller asserts it divides)."""
        return exact_div(self, other)

    def __reduce__(self):
        # Pickle/copy through the canonical text so interning survives.
        from onnx_symdims.expr import _print

        return (_unpickle, (_print.to_seed(self),))


def _unpickle(text: str) -> Dim:
    from onnx_symdims.expr import _parse

    return _parse.parse_expr(text)


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
    raise TypeError(f"expected int or DimExpr, got {type(d).__name__}")


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
        rebuilt = _absorb_exact_divisions(terms, const)
        if rebuilt is not None:
            return rebuilt
    if sum(1 for m in terms if len(m) == 1 and m[0].kind in (FLOOR, MOD)) >= 2:
        terms, const = _collapse_floor_identities(terms, const)
    if len(terms) + bool(const) >= 2:
        folded = _fold_sum_into_extremum(terms, const)
        if folded is not None:
            return folded
    return _from_terms(terms, const)


def _size(d: Dim) -> int:
    return 1 if isinstance(d, int) else d.size


_MAX_FOLDED_EXTREMUM_ARGS = 8


def _fold_sum_into_extremum(terms: dict[Monomial, int], const: int) -> Dim | None:
    """``r - max(a, b) == min(r-a, r-b)`` (and the three sibling identities), when smaller.

    Exact for all integers; used only when it shrinks the expression, e.g.
    ``x - max(x-8, 0) == min(8, x)``.
    """
    for m, c in terms.items():
        if len(m) != 1 or c not in (1, -1) or m[0].kind not in (MAX, MIN):
            continue
        atom = m[0]
        if len(atom.args) > _MAX_FOLDED_EXTREMUM_ARGS:
            continue  # rebuilding every argument on every sum would be quadratic
        rest_terms = dict(terms)
        del rest_terms[m]
        rest = _from_terms(rest_terms, const) if rest_terms else const
        if isinstance(rest, DimExpr) and rest.unknown_reason is not None:
            return None
        args = [add(rest, a) if c == 1 else sub(rest, a) for a in atom.args]
        if not any(isinstance(a, int) or len(a.terms) < len(rest_terms) for a in args):
            continue
        flips = c == -1
        kind = (MIN if atom.kind == MAX else MAX) if flips else atom.kind
        folded = _extremum(kind, tuple(args), None)
        if _size(folded) < _size(rest) + 1 + _size(_atom_expr(atom)):
            return folded
    return None


def _absorb_exact_divisions(terms: dict[Monomial, int], const: int) -> Dim | None:
    """Cancels ``c * m * (N /: D)`` when c or m shares a factor with D.

    Holds because ``N /: D`` is the exact quotient: ``c*(N/:D) == (c*N)/:D``.
    Returns None when nothing cancels.
    """
    changed = False
    out: dict[Monomial, int] = {}
    extra: list[Dim] = []
    for m, c in terms.items():
        exacts = [a for a in m if a.kind == EXACT]
        if not exacts:
            out[m] = out.get(m, 0) + c
            continue
        rest = tuple(a for a in m if a.kind != EXACT)
        if len(exacts) == 1:
            den = exacts[0].args[1]
            if isinstance(den, int):
                shares = math.gcd(c, den) > 1
            else:
                # A symbolic quotient keeps nothing outside: c*m*(N/:D) -> (c*m*N)/:D.
                shares = c != 1 or bool(rest)
            if not shares:
                out[m] = out.get(m, 0) + c
                continue
        num_product: Dim = _from_terms({rest: c}, 0) if rest else c
        den_product: Dim = 1
        for atom in exacts:
            num_product = mul(num_product, atom.args[0])
            den_product = mul(den_product, atom.args[1])
        merged = exact_div(num_product, den_product)
        if isinstance(merged, DimExpr) and merged.unknown_reason is not None:
            # The merged numerator or denominator leaves int64 (60 exact divisions by
            # 2..61): the product of the separate quotients is just as exact.
            out[m] = out.get(m, 0) + c
            continue
        changed = True
        extra.append(merged)
    if not changed:
        return None
    result: Dim = _from_terms(out, const) if out else const
    for e in extra:
        result = add(result, e)
    return result


def _collapse_floor_identities(
    terms: dict[Monomial, int], const: int
) -> tuple[dict[Monomial, int], int]:
    """Applies two identities that hold for every integer ``y`` and ``d > 0``.

    * ring: ``sum(c*((y+i)//d) for i in range(d)) == c*y``;
    * division identity: ``c*d*(y//d) + c*(y % d) == c*y``.
    """
    groups: dict[tuple[object, int], dict[int, tuple[Monomial, int]]] = {}
    mods: list[tuple[Monomial, int]] = []
    for m, c in terms.items():
        if len(m) != 1 or m[0].kind not in (FLOOR, MOD):
            continue
        num, den = m[0].args
        if not isinstance(den, int) or not isinstance(num, DimExpr):
            continue
        if m[0].kind == MOD:
            mods.append((m, c))
            continue
        base = sub(num, num.const)
        groups.setdefault((base, den), {})[num.const] = (m, c)
    replacement: list[tuple[Dim, int]] = []
    for (base, den), by_offset in groups.items():
        if len(by_offset) != den:
            continue
        coeffs = {c for _, c in by_offset.values()}
        if len(coeffs) != 1:
            continue
        for m, _ in by_offset.values():
            del terms[m]
        replacement.append((base, coeffs.pop()))
    for m, c in mods:
        num, den = m[0].args
        floor_atom = _ATOMS.get((FLOOR, "", (num, den)))
        if floor_atom is None or terms.get((floor_atom,)) != c * den or m not in terms:
            continue
        del terms[m]
        del terms[(floor_atom,)]
        replacement.append((num, c))
    for base, c in replacement:
        b_terms, b_const = _split(mul(base, c))
        for bm, bc in b_terms.items():
            terms[bm] = terms.get(bm, 0) + bc
        const += b_const
    return {m: c for m, c in terms.items() if c}, const


# ---------------------------------------------------------------------------------------
# Divisions
# ---------------------------------------------------------------------------------------


def _content_and_common_monomial(d: Dim) -> tuple[int, Monomial]:
    """The gcd of all coefficients (and constant) and the monomial dividing every term."""
    if isinstance(d, int):
        return abs(d), ()
    g = abs(d.const)
    for _, c in d.terms:
        g = math.gcd(g, c)
    if d.const:
        return g, ()
    common: list[Atom] | None = None
    for m, _ in d.terms:
        if common is None:
            common = list(m)
        else:
            remaining = list(m)
            kept = []
            for a in common:
                if a in remaining:
                    remaining.remove(a)
                    kept.append(a)
            common = kept
        if not common:
            break
    return g, tuple(common or ())


def _mono_common(m1: Monomial, m2: Monomial) -> Monomial:
    remaining = list(m2)
    kept = []
    for a in m1:
        if a in remaining:
            remaining.remove(a)
            kept.append(a)
    return tuple(kept)


def _mono_div(m: Monomial, by: Monomial) -> Monomial:
    remaining = list(m)
    for a in by:
        remaining.remove(a)
    return tuple(remaining)


def _divide_out(d: Dim, g: int, mono: Monomial) -> Dim:
    """``d / (g * mono)`` for a common factor (exact by construction)."""
    if isinstance(d, int):
        return d // g
    terms: dict[Monomial, int] = {}
    const = d.const // g
    for m, c in d.terms:
        reduced = _mono_div(m, mono)
        if reduced:
            terms[reduced] = c // g
        else:
            const += c // g
    return _finish(terms, const)


def _cancel_common_factor(a: Dim, b: Dim) -> tuple[Dim, Dim]:
    """Divides ``a`` and ``b`` by their common positive integer and monomial factors."""
    ga, ma = _content_and_common_monomial(a)
    gb, mb = _content_and_common_monomial(b)
    g = math.gcd(ga, gb)
    mono = _mono_common(ma, mb)
    if g <= 1 and not mono:
        return a, b
    g = max(g, 1)
    return _divide_out(a, g, mono), _divide_out(b, g, mono)


def _as_multiple(a: DimExpr, b: DimExpr) -> Dim | None:
    """The quotient ``q`` (an int or a single monomial) with ``a == q*b``, if any.

    ``32*b*p + 32*b*s`` over ``8*p + 8*s`` gives ``4*b``.
    """
    a_items = [*a.terms, ((), a.const)] if a.const else list(a.terms)
    b_items = [*b.terms, ((), b.const)] if b.const else list(b.terms)
    if len(a_items) != len(b_items) or not b.terms:
        return None
    lead_m, lead_c = b_items[0]
    for m, c in a_items:
        if c % lead_c:
            continue
        remaining = list(m)
        try:
            for atom in lead_m:
                remaining.remove(atom)
        except ValueError:
            continue
        q: Dim = _from_terms({tuple(remaining): c // lead_c}, 0) if remaining else c // lead_c
        if mul(q, b) == a:
            return q
        if isinstance(q, int):
            return None  # the integer candidate is unique
    return None


def _leading_sign(d: Dim) -> int:
    if isinstance(d, int):
        return -1 if d < 0 else 1
    return -1 if d.terms[0][1] < 0 else 1


def _floordiv_impl(a: Dim, b: Dim) -> Dim:
    """Floor division ``a // b`` (rounds toward negative infinity, like Python)."""
    if type(a) is int and type(b) is int:
        r = a // b
        return r if _in_int64(r) else unknown("overflow")
    a, b = _check_dim(a), _check_dim(b)
    if (p := _poison(a, b)) is not None:
        return p
    if isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("floor division by zero")
        if b < 0:
            if b == INT64_MIN:
                # -b is outside int64: the divisor stays negative (one spelling still).
                return _term(FLOOR, (a, b))
            # floor(a/b) == floor((-a)/(-b))
            return floordiv(neg(a), -b)
        if b == 1:
            return a
        return _floordiv_by_int(a, b)  # type: ignore[arg-type]
    if a == 0:
        return 0
    a, b = _cancel_common_factor(a, b)
    if isinstance(b, int):
        return floordiv(a, b)
    if isinstance(a, DimExpr) and (q := _as_multiple(a, b)) is not None:
        return q
    if _leading_sign(b) < 0:
        a, b = neg(a), neg(b)
    return _term(FLOOR, (a, b))


def _floordiv_by_int(a: DimExpr, d: int) -> Dim:
    """``a // d`` for ``d > 1``: ``(d*Q + R) // d == Q + R // d`` for integer Q."""
    lo, hi = _range(a)
    if lo is not None and hi is not None and lo // d == hi // d:
        # lo <= a <= hi for every value of the symbols: (x % 2) // 2 == 0.
        return lo // d
    quotient: dict[Monomial, int] = {}
    rest: dict[Monomial, int] = {}
    for m, c in a.terms:
        if c % d == 0:
            quotient[m] = c // d
        else:
            rest[m] = c
    if not rest:
        return add(_from_terms(quotient, 0) if quotient else 0, a.const // d)
    g = math.gcd(d, a.const, *rest.values())
    k = a.const
    if g > 1:
        # floor((g*X)/(g*d)) == floor(X/d) for g > 0
        rest = {m: c // g for m, c in rest.items()}
        k //= g
        d //= g
    k_quot, k_rem = divmod(k, d)
    q: Dim = _from_terms(quotient, k_quot) if quotient else k_quot
    if len(rest) == 1:
        ((m, c),) = rest.items()
        if (
            c == 1
            and len(m) == 1
            and m[0].kind == FLOOR
            and isinstance(m[0].args[1], int)
            and m[0].args[1] > 0
            and _in_int64(m[0].args[1] * d)
        ):
            # floor((floor(X/e) + r)/d) == floor((X + r*e)/(e*d)) for e, d > 0 (kept
            # nested when e*d leaves int64: x//2**32//2**32 is not x//2**64).
            inner_num, inner_den = m[0].args
            return add(q, floordiv(add(inner_num, k_rem * inner_den), inner_den * d))
    numerator = _finish(rest, k_rem)
    if isinstance(numerator, int) or numerator.unknown_reason is not None:
        return add(q, floordiv(numerator, d)) if isinstance(numerator, int) else numerator
    lo, hi = _range(numerator)
    if lo is not None and hi is not None and lo // d == hi // d:
        return add(q, lo // d)  # the reduced numerator may be bounded where a was not
    return add(q, _term(FLOOR, (numerator, d)))


def _split_exact_quotient(a: DimExpr, d: int) -> Dim | None:
    """``(d*Q + R) /: d == Q + R /: d`` for ``d > 1``, when ``R`` has a symbolic term.

    Defined on both sides exactly when ``d | R`` (``d | d*Q`` always), and then equal:
    ``(sequence-10)/:5 == sequence/:5 - 2``. Not applied when ``R`` is a constant (the
    expression is undefined everywhere; it stays as written rather than raising).
    """
    quotient: dict[Monomial, int] = {}
    rest: dict[Monomial, int] = {}
    for m, c in a.terms:
        if c % d == 0:
            quotient[m] = c // d
        else:
            rest[m] = c
    const_divides = a.const % d == 0
    if not rest or (not quotient and not (const_divides and a.const)):
        return None
    q: Dim = _from_terms(quotient, a.const // d if const_divides else 0) if quotient else (
        a.const // d
    )
    r: Dim = _from_terms(rest, 0 if const_divides else a.const)
    return add(q, exact_div(r, d))


def _unwrap_mods(a: DimExpr, b: int) -> Dim:
    """Replaces each term ``c*(X % k)`` with ``b | k`` by ``c*X`` (same residue mod b)."""
    if not any(len(m) == 1 and m[0].kind == MOD for m, _ in a.terms):
        return a
    result: Dim = a.const
    changed = False
    for m, c in a.terms:
        atom = m[0] if len(m) == 1 else None
        if (
            atom is not None
            and atom.kind == MOD
            and isinstance(atom.args[1], int)
            and atom.args[1] > 0
            and atom.args[1] % b == 0
        ):
            # X % k == X - k*floor(X/k), and b | k.
            result = add(result, mul(c, atom.args[0]))
            changed = True
        else:
            result = add(result, _from_terms({m: c}, 0))
    return result if changed else a


def _atom_range(atom: Atom) -> tuple[int | None, int | None]:
    kind = atom.kind
    if kind == SYM or kind in (CALL, BCAST):
        return None, None
    args = atom.args
    if kind == MOD:
        den = args[1]
        if isinstance(den, int):
            return (0, den - 1) if den > 0 else (den + 1, 0)
        return None, None
    if kind in (FLOOR, EXACT):
        num, den = args
        if not isinstance(den, int) or den <= 0:
            return None, None
        lo, hi = _range(num)
        if kind == FLOOR:
            return (None if lo is None else lo // den), (None if hi is None else hi // den)
        return (None if lo is None else -((-lo) // den)), (None if hi is None else hi // den)
    ranges = [_range(a) for a in args]
    los = [lo for lo, _ in ranges]
    his = [hi for _, hi in ranges]
    known_los = [v for v in los if v is not None]
    known_his = [v for v in his if v is not None]
    if kind == MAX:
        return (max(known_los) if known_los else None), (
            None if None in his else max(his)  # type: ignore[type-var]
        )
    return (None if None in los else min(los)), (  # type: ignore[type-var]
        min(known_his) if known_his else None
    )


def _range(d: Dim) -> tuple[int | None, int | None]:
    """Bounds of ``d`` that hold for *every* integer value of the symbols (no scope).

    Only residues (``x % k``), their quotients and extrema of them are bounded; a
    symbol is unbounded. Cached per expression.
    """
    if isinstance(d, int):
        return d, d
    cached = d._range
    if cached is not None:
        return cached
    lo: int | None = d.const
    hi: int | None = d.const
    for mono, coeff in d.terms:
        if lo is None and hi is None:
            break
        if len(mono) != 1:
            # A product of bounded atoms is bounded, but dims rarely have one: give up.
            lo = hi = None
            break
        alo, ahi = _atom_range(mono[0])
        if coeff < 0:
            alo, ahi = (None if ahi is None else coeff * ahi), (None if alo is None else coeff * alo)
        else:
            alo, ahi = (None if alo is None else coeff * alo), (None if ahi is None else coeff * ahi)
        lo = None if lo is None or alo is None else lo + alo
        hi = None if hi is None or ahi is None else hi + ahi
    d._range = (lo, hi)
    return lo, hi


def truncdiv(a: Dim, b: Dim, scope: object) -> Dim | None:
    """C-style division rounding toward zero (ONNX ``Div`` on integers), or None.

    Expressed with floor division only where the scope fixes the sign of ``a``
    (``b`` a positive constant): ``a >= 0`` gives ``a // b``; ``a >= 1 - b`` gives
    ``max(a, 0) // b`` (a small negative numerator truncates to 0); ``a <= 0`` gives
    ``-((-a) // b)``. Returns None when the sign is not known.
    """
    if type(a) is int and type(b) is int:
        if b == 0:
            raise ZeroDivisionError("integer division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if not isinstance(b, int) or b <= 0:
        return None
    if scope.prove_nonneg(a):  # type: ignore[attr-defined]
        return floordiv(a, b)
    if scope.prove_ge(a, 1 - b):  # type: ignore[attr-defined]
        return floordiv(dmax(a, 0, scope=scope), b)
    if scope.prove_nonneg(neg(a)):  # type: ignore[attr-defined]
        return neg(floordiv(neg(a), b))
    return None


def ceildiv(a: Dim, b: Dim) -> Dim:
    """Ceiling division: ``(a + b - 1) // b`` for a positive constant b, else ``-((-a)//b)``."""
    if isinstance(b, int) and b > 0:
        return floordiv(add(a, b - 1), b)
    return neg(floordiv(neg(a), b))


def _mod_impl(a: Dim, b: Dim) -> Dim:
    """Floor modulo ``a % b`` (the sign of the divisor, like Python)."""
    if type(a) is int and type(b) is int:
        return a % b
    a, b = _check_dim(a), _check_dim(b)
    if (p := _poison(a, b)) is not None:
        return p
    if isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("modulo by zero")
        if b < 0:
            if b == INT64_MIN:
                return _term(MOD, (a, b))  # -b is outside int64
            # a % b == -((-a) % -b)
            return neg(mod(neg(a), -b))
        if b == 1:
            return 0
        assert isinstance(a, DimExpr)
        lo, hi = _range(a)
        if lo is not None and hi is not None and lo // b == hi // b:
            # lo <= a <= hi with one quotient q everywhere: a % b == a - q*b
            # ((x % k) % k == x % k, (x % 3) % 5 == x % 3).
            return sub(a, b * (lo // b))
        # (a + b*k) % b == a % b: reduce every coefficient modulo b; a term
        # c*(X % k) with b | k is congruent to c*X ((x % 6) % 3 == x % 3).
        a = _unwrap_mods(a, b)
        if isinstance(a, int):
            return a % b
        rest = {m: c % b for m, c in a.terms if c % b}
        k = a.const % b
        if not rest:
            return k
        g = math.gcd(b, k, *rest.values())
        if g > 1:
            # (g*X) % (g*d) == g*(X % d) for g > 0
            inner = mod(_from_terms({m: c // g for m, c in rest.items()}, k // g), b // g)
            return mul(g, inner)
        numerator = _finish(rest, k)
        if isinstance(numerator, int):
            return numerator % b
        if numerator.unknown_reason is not None:
            return numerator
        lo, hi = _range(numerator)
        if lo is not None and hi is not None and lo // b == hi // b:
            # The reduced numerator may be bounded where a was not: -x%3 % 2.
            return sub(numerator, b * (lo // b))
        return _term(MOD, (numerator, b))
    if a == 0:
        return 0
    if isinstance(a, DimExpr):
        ca, cb = _cancel_common_factor(a, b)
        if isinstance(cb, int) and cb in (1, -1):
            return 0  # a is a multiple of b
        if isinstance(ca, DimExpr) and isinstance(cb, DimExpr) and _as_multiple(ca, cb):
            return 0
    return _term(MOD, (a, b))


def _exact_div_impl(a: Dim, b: Dim) -> Dim:
    """Exact division ``a /: b``: the caller asserts that ``b`` divides ``a``.

    Because the quotient is exact it cancels across multiplication:
    ``2 * (H /: 2) == H`` (unlike ``2 * (H // 2)``).

    Raises:
        ZeroDivisionError: ``b`` is 0.
        InexactDivisionError: both are constants and ``b`` does not divide ``a``.
    """
    if type(a) is int and type(b) is int:
        if b == 0:
            raise ZeroDivisionError("exact division by zero")
        if a % b:
            raise InexactDivisionError(f"{a} /: {b} is not exact")
        r = a // b
        return r if _in_int64(r) else unknown("overflow")
    a, b = _check_dim(a), _check_dim(b)
    if (p := _poison(a, b)) is not None:
        return p
    if b == 0:
        raise ZeroDivisionError("exact division by zero")
    if a == 0:
        return 0
    if isinstance(a, DimExpr) and len(a.terms) == 1 and not a.const:
        ((mono, coeff),) = a.terms
        inner = [atom for atom in mono if atom.kind == EXACT]
        if inner:
            # (c*m*(N/:D)) /: b == (c*m*N) /: (D*b): both are the same exact rational.
            rest = list(mono)
            rest.remove(inner[0])
            num, den = inner[0].args
            return exact_div(
                mul(_from_terms({tuple(rest): coeff}, 0) if rest else coeff, num), mul(den, b)
            )
    a, b = _cancel_common_factor(a, b)
    if isinstance(a, int) and isinstance(b, int):
        return exact_div(a, b)
    if not isinstance(b, int):
        if isinstance(a, DimExpr) and (q := _as_multiple(a, b)) is not None:
            return q
        if _leading_sign(b) < 0:
            a, b = neg(a), neg(b)
        # Nothing is pulled out of a symbolic quotient: c*(N/:D) is exact only when D | N,
        # which (c*N)/:D does not promise. Coefficients are absorbed instead (_finish).
        return _term(EXACT, (a, b))
    if b < 0:
        if b == INT64_MIN:
            return _term(EXACT, (a, b))  # -b is outside int64
        a, b = neg(a), -b
    if b == 1:
        return a
    if isinstance(a, int):
        raise InexactDivisionError(f"{a} /: {b} is not exact")  # pragma: no cover
    split = _split_exact_quotient(a, b)
    if split is not None:
        return split
    # Pull the numerator's content and sign out: (c*N)/:d == c*(N/:d) because
    # gcd(c, d) == 1 here (the common factor was cancelled), so d | c*N implies d | N.
    content, _ = _content_and_common_monomial(a)
    if _leading_sign(a) < 0:
        content = -content
    numerator = _divide_out(a, content, ()) if content not in (0, 1) else a
    return mul(content, _term(EXACT, (numerator, b)))


# ---------------------------------------------------------------------------------------
# Memoized entry points: shape inference repeats the same computations layer after layer,
# and interned operands make the memo key cheap to hash.
# ---------------------------------------------------------------------------------------
_MEMO: dict[tuple, Dim] = {}
_MEMO_LIMIT = 1 << 20


def _memoized(op: str, impl, a: Dim, b: Dim) -> Dim:
    key = (op, a, b)
    result = _MEMO.get(key)
    if result is None:
        result = impl(a, b)
        if isinstance(result, int) or result.unknown_reason is None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = result
    return result


def add(a: Dim, b: Dim) -> Dim:
    """``a + b``."""
    if type(a) is int and type(b) is int:
        r = a + b
        return r if _in_int64(r) else unknown("overflow")
    return _memoized("+", _add_impl, a, b)


def mul(a: Dim, b: Dim) -> Dim:
    """``a * b`` (fully distributed)."""
    if type(a) is int and type(b) is int:
        r = a * b
        return r if _in_int64(r) else unknown("overflow")
    return _memoized("*", _mul_impl, a, b)


def floordiv(a: Dim, b: Dim) -> Dim:
    """Floor division ``a // b`` (rounds toward negative infinity, like Python)."""
    if type(a) is int and type(b) is int:
        r = a // b
        return r if _in_int64(r) else unknown("overflow")
    return _memoized("//", _floordiv_impl, a, b)


def mod(a: Dim, b: Dim) -> Dim:
    """Floor modulo ``a % b`` (the sign of the divisor, like Python)."""
    if type(a) is int and type(b) is int:
        return a % b
    return _memoized("%", _mod_impl, a, b)


def exact_div(a: Dim, b: Dim) -> Dim:
    """Exact division ``a /: b``: the caller asserts that ``b`` divides ``a``.

    Because the quotient is exact it cancels across multiplication:
    ``2 * (H /: 2) == H`` (unlike ``2 * (H // 2)``).

    Raises:
        ZeroDivisionError: ``b`` is 0.
        InexactDivisionError: both are constants and ``b`` does not divide ``a``.
    """
    return _memoized("/:", _exact_div_impl, a, b)


# ---------------------------------------------------------------------------------------
# max / min / broadcast / opaque calls
# ---------------------------------------------------------------------------------------


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
    kept.extend(best.values())
    if scope is not None and 1 < len(kept) <= MAX_SCOPED_EXTREMUM_ARGS:
        kept = _drop_dominated(kind, kept, scope)
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=_dim_key)
    return _atom_expr(_make_atom(kind, "", tuple(kept)))


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


def _memoized_scoped(kind: str, impl, args: tuple[Dim, ...], scope: object | None) -> Dim:
    key = (kind, args, scope, getattr(scope, "version", None))
    result = _MEMO.get(key)
    if result is None:
        result = impl(args, scope)
        if isinstance(result, int) or result.unknown_reason is None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = result
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


# ---------------------------------------------------------------------------------------
# Evaluation, substitution
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


def _map_atoms(d: Dim, atom_fn, arg_fn) -> Dim:
    """Rebuilds ``d`` with ``atom_fn(atom)`` for symbols and ``arg_fn`` on function args."""
    if isinstance(d, int) or d.unknown_reason is not None:
        return d
    result: Dim = d.const
    for mono, coeff in d.terms:
        term: Dim = coeff
        for atom in mono:
            if atom.kind == SYM:
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


def _replace_once(d: Dim, mapping: Mapping[DimExpr, Dim]) -> Dim:
    if isinstance(d, int) or d.unknown_reason is not None:
        return d
    hit = mapping.get(d)
    if hit is not None:
        return hit
    # A compound key that is a sub-sum, term by term: d == k*key + rest.
    d_terms = dict(d.terms)
    for key, target in mapping.items():
        if key.atom is not None or not key.terms:
            continue
        lead_m, lead_c = key.terms[0]
        c = d_terms.get(lead_m)
        if c is None or c % lead_c:
            continue
        k = c // lead_c
        if any(d_terms.get(m) != k * kc for m, kc in key.terms):
            continue
        remaining = {m: dc for m, dc in d_terms.items() if all(m != km for km, _ in key.terms)}
        rest = (
            _from_terms(remaining, d.const - k * key.const)
            if remaining
            else (d.const - k * key.const)
        )
        return add(mul(k, target), _replace_once(rest, mapping))
    atom_targets = {
        key.atom: target for key, target in mapping.items() if key.atom is not None
    }

    def on_symbol(atom: Atom) -> Dim:
        return atom_targets.get(atom, _atom_expr(atom))

    result: Dim = d.const
    for mono, coeff in d.terms:
        term: Dim = coeff
        for atom in mono:
            if atom in atom_targets:
                factor = atom_targets[atom]
            elif atom.kind == SYM:
                factor = _atom_expr(atom)
            else:
                new_args = tuple(_replace_once(a, mapping) for a in atom.args)
                factor = (
                    _atom_expr(atom)
                    if new_args == atom.args
                    else _rebuild_atom(atom, new_args)
                )
            term = mul(term, factor)
        result = add(result, term)
    return result


def replace_subexpressions(d: Dim, mapping: Mapping[DimExpr, Dim], max_rounds: int = 8) -> Dim:
    """Replaces sub-expressions equal (in canonical form) to a key, to a fixed point.

    A key matches a whole expression, an atom anywhere (also inside function
    terms), or a sub-sum: with the key ``past_seq+seq``, ``past_seq+seq+1``
    becomes ``target+1``. Broadcast terms whose arguments become equal collapse.
    """
    if not mapping:
        return d
    for _ in range(max_rounds):
        new = _replace_once(d, mapping)
        if new is d or new == d:
            return new
        d = new
    return d
