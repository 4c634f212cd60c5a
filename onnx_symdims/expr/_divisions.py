"""Divisions of dims: floor division, modulo, exact division (``/:``), C-style and ceiling.

Each cancels common integer and monomial factors, splits off the part of a numerator the
divisor divides (``(d*Q + R) // d == Q + R // d``), and folds a division whose numerator
is bounded for *every* value of the symbols (:func:`_range`: ``(x % 2) // 2 == 0``). An
exact division is the exact quotient, so it cancels across multiplication
(``2 * (H /: 2) == H``); the sum-level absorption of coefficients is in :mod:`._sums`.
"""

from __future__ import annotations

import math

from onnx_symdims.expr._atoms import (
    BCAST,
    CALL,
    EXACT,
    FLOOR,
    INT64_MIN,
    MAX,
    MIN,
    MOD,
    SYM,
    Atom,
    InexactDivisionError,
    Monomial,
    _memoized,
)
from onnx_symdims.expr._dimexpr import (
    Dim,
    DimExpr,
    _check_dim,
    _from_terms,
    _in_int64,
    _poison,
    _term,
    unknown,
)
from onnx_symdims.expr._extremum import _extremum, dmax
from onnx_symdims.expr._polygcd import poly_divide, poly_gcd
from onnx_symdims.expr._ring import _finish, add, mul, neg, sub


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
                return _divide_by_int64_min(FLOOR, a)
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


def _divide_by_int64_min(kind: str, a: Dim) -> Dim:
    """``a // -2**63`` (``kind`` FLOOR) or ``a % -2**63`` (MOD) in one canonical form.

    ``-b`` is outside int64, so the divisor keeps its sign, but the other normalizations
    still apply, so that equal expressions get one form (else ``(2*x)//(-2**63)`` stayed
    while ``x//(-2**62)`` is ``(-x)//2**62``). For every integer value of the symbols:

    * a common factor ``g`` (a power of two) cancels first: ``(g*X)//(g*d) == X//d`` and
      ``(g*X) % (g*d) == g*(X % d)`` for ``g > 0``, and ``d = b/g`` takes the ordinary
      path (a residue shift below keeps the power of two of every odd multiple);
    * a coefficient or constant ``c`` is replaced by its residue ``r`` in
      ``[-2**62, 2**62)`` with ``c == r + k*(-2**63)``: ``(X + b*k*m) // b == X//b + k*m``
      and ``(X + b*k*m) % b == X % b``;
    * a numerator bounded for every value with one quotient folds (:func:`_range`).
    """
    if isinstance(a, int):
        return floordiv(a, INT64_MIN) if kind == FLOOR else mod(a, INT64_MIN)
    g, _ = _content_and_common_monomial(a)
    g &= -g  # the power of two in the content: the common factor with 2**63
    if g > 1:
        reduced = _divide_out(a, g, ())
        if kind == FLOOR:
            return floordiv(reduced, INT64_MIN // g)
        return mul(g, mod(reduced, INT64_MIN // g))
    half = -(INT64_MIN // 2)
    rest: dict[Monomial, int] = {}
    moved: dict[Monomial, int] = {}
    for m, c in a.terms:
        r = (c + half) % (2 * half) - half
        if r:
            rest[m] = r
        if c != r:
            moved[m] = (c - r) // INT64_MIN
    k = (a.const + half) % (2 * half) - half
    k_moved = (a.const - k) // INT64_MIN
    numerator = _finish(rest, k) if rest else k
    quotient: Dim = _from_terms(moved, k_moved) if moved else k_moved
    if isinstance(numerator, int):
        return (
            add(quotient, numerator // INT64_MIN) if kind == FLOOR else numerator % INT64_MIN
        )
    if numerator.unknown_reason is not None:
        return numerator
    lo, hi = _range(numerator)
    if lo is not None and hi is not None and lo // INT64_MIN == hi // INT64_MIN:
        q = lo // INT64_MIN
        if kind == FLOOR:
            return add(quotient, q)
        return sub(numerator, INT64_MIN * q)
    if kind == FLOOR:
        return add(quotient, _term(FLOOR, (numerator, INT64_MIN)))
    return _term(MOD, (numerator, INT64_MIN))


def _floordiv_by_int(a: DimExpr, d: int) -> Dim:
    """``a // d`` for ``d > 1``: ``(d*Q + R) // d == Q + R // d`` for integer Q."""
    lo, hi = _range(a)
    if lo is not None and hi is not None and lo // d == hi // d:
        # lo <= a <= hi for every value of the symbols: (x % 2) // 2 == 0.
        return lo // d
    if (normalized := _extremum_numerator(a, d)) is not None:
        return normalized
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
    if (rounded := _rounded_multiple_quotient(numerator, d)) is not None:
        return add(q, rounded)  # (h + h%2) // 2 == (h+1) // 2
    return add(q, _term(FLOOR, (numerator, d)))


def _extremum_numerator(a: DimExpr, d: int) -> Dim | None:
    """``(ext(Y, K) + k) // d`` in one canonical spelling, ``ext`` a max or min, or None.

    Two identities, for every integer value of the symbols:

    * a constant shift moves through an extremum, ``max(Y, K) + k == max(Y-s, K-s) + k+s``;
      ``s`` is chosen so that ``k + s`` is a multiple of ``d`` (it leaves the quotient) and
      the constant of ``Y - s`` lies in ``[0, d)`` (the constant argument, when ``Y``'s
      leading coefficient is negative): ``max(h-1, 0)//8 + 1`` and ``max(h+7, 8)//8``
      are both ``max(h+7, 8)//8``;
    * a monotone non-decreasing ``f`` commutes with an extremum,
      ``max(f(X), f(x0)) == f(max(X, x0))``: with ``f(x) == c*((x+a)//e) + p``, ``c, e > 0``
      and ``K == f(x0)`` for ``x0 = q*e - a``, ``max((h+7)//4, 2)//2`` is
      ``(max(h, 1)+7)//4//2``, hence ``max(h+7, 8)//8`` too.

    Applies to a numerator that is one extremum (coefficient 1) of one constant and one
    expression, plus a constant; a negated extremum is first written as the other one of
    the negated arguments (``-max(A, B) == min(-A, -B)``). None when it has another shape
    or is canonical already.
    """
    if len(a.terms) != 1:
        return None
    ((mono, coeff),) = a.terms
    if coeff == -1 and len(mono) == 1 and mono[0].kind in (MAX, MIN):
        # -max(A, B) == min(-A, -B): one spelling whichever way the numerator was built
        # (a ceiling of a quotient by a negative number negates a max).
        flipped = _extremum(
            MIN if mono[0].kind == MAX else MAX, tuple(neg(x) for x in mono[0].args), None
        )
        if isinstance(flipped, DimExpr) and flipped.terms and flipped.terms[0][1] == 1:
            return floordiv(add(flipped, a.const), d)
        return None
    if (
        coeff != 1
        or len(mono) != 1
        or mono[0].kind not in (MAX, MIN)
        or len(mono[0].args) != 2
    ):
        return None
    kind = mono[0].kind
    bound, inner = mono[0].args
    if isinstance(inner, int):
        bound, inner = inner, bound
    if not isinstance(bound, int) or not isinstance(inner, DimExpr):
        return None
    k = a.const
    if (pushed := _extremum_through_floor(kind, inner, bound)) is not None:
        result = floordiv(add(pushed, k), d)
        if not (isinstance(result, DimExpr) and result.unknown_reason is not None):
            return result
    if inner.terms[0][1] > 0:
        shift = inner.const - (inner.const + k) % d  # Y's constant in [0, d)
    else:
        shift = bound - (bound + k) % d  # a decreasing Y: the constant argument in [0, d)
    if shift == 0 or not _in_int64(bound - shift):
        return None  # (a shifted bound past int64 would print as no int64 literal)
    shifted = _extremum(kind, (sub(inner, shift), bound - shift), None)
    result = floordiv(add(shifted, k + shift), d)
    if isinstance(result, DimExpr) and result.unknown_reason is not None:
        return None  # a shifted part left int64: the quotient stays as written
    return result


def _extremum_through_floor(kind: str, g: DimExpr, bound: int) -> Dim | None:
    """``ext(c*((X+a)//e) + p, bound)`` as ``c*((ext(X, x0)+a)//e) + p``, or None.

    ``f(x) = c*((x+a)//e) + p`` is non-decreasing for ``c, e > 0``, so
    ``ext(f(X), f(x0)) == f(ext(X, x0))`` for every integer; ``x0 = q*e - a`` with
    ``f(x0) == c*q + p == bound`` (None when ``bound`` is not a value of ``f``).
    """
    if len(g.terms) != 1:
        return None
    ((mono, c),) = g.terms
    if c <= 0 or len(mono) != 1 or mono[0].kind != FLOOR:
        return None
    num, e = mono[0].args
    if not isinstance(e, int) or e <= 0 or not isinstance(num, DimExpr):
        return None
    p = g.const
    if (bound - p) % c:
        return None
    q = (bound - p) // c
    a = num.const
    if not _in_int64(q * e - a):
        return None  # the argument x0 would be no int64 literal
    x = sub(num, a)
    inner = _extremum(kind, (x, q * e - a), None)
    return add(mul(c, floordiv(add(inner, a), e)), p)


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
    q: Dim = (
        _from_terms(quotient, a.const // d if const_divides else 0)
        if quotient
        else (a.const // d)
    )
    r: Dim = _from_terms(rest, 0 if const_divides else a.const)
    return add(q, exact_div(r, d))


def _rounded_multiple_quotient(a: DimExpr, d: int) -> Dim | None:
    """``(X - X%d) /: d == X // d`` and ``(X + (-X)%d) /: d == ceildiv(X, d)``, ``d > 1``.

    ``X - X%d`` is ``d*floor(X/d)`` and ``X + (-X)%d`` is ``d*ceil(X/d)`` for every
    integer ``X`` (floor modulo), so both divisions are exact everywhere: TorchScript pads
    ``h`` to ``h + h%2`` and halves it, which is ``(h+1)//2``, the form a stride-2
    convolution or pooling writes for the same size. Also a floor division's numerator.
    None when ``a`` has no such shape.
    """
    for m, c in a.terms:
        if c not in (1, -1) or len(m) != 1 or m[0].kind != MOD or m[0].args[1] != d:
            continue
        residue = _from_terms({m: 1}, 0)
        x = sub(a, mul(c, residue))
        if c == -1 and mod(x, d) is residue:
            return floordiv(x, d)
        if c == 1 and mod(neg(x), d) is residue:
            return ceildiv(x, d)
    return None


def _residue_modulo_multiple(atom: Atom | None, b: int) -> bool:
    """Whether ``atom`` is ``X % k`` for a constant ``k > 0`` that ``b`` divides."""
    if atom is None or atom.kind != MOD:
        return False
    k = atom.args[1]
    return isinstance(k, int) and k > 0 and k % b == 0


def _unwrap_mods(a: DimExpr, b: int) -> Dim:
    """Replaces each term ``c*(X % k)`` with ``b | k`` by ``c*X`` (same residue mod b)."""
    if not any(len(m) == 1 and m[0].kind == MOD for m, _ in a.terms):
        return a
    result: Dim = a.const
    changed = False
    for m, c in a.terms:
        atom = m[0] if len(m) == 1 else None
        if _residue_modulo_multiple(atom, b):
            # X % k == X - k*floor(X/k), and b | k; X's own such terms too, so that the
            # result is a fixed point: ((a%6)%4)%2 is a%2, as its printed (a%6)%2 reads.
            inner = atom.args[0]
            if isinstance(inner, DimExpr):
                inner = _unwrap_mods(inner, b)
            result = add(result, mul(c, inner))
            changed = True
        else:
            result = add(result, _from_terms({m: c}, 0))
    if isinstance(result, DimExpr) and result.unknown_reason is not None:
        # c*X left int64 (c and X's coefficients near 2**62; the unknown's empty terms
        # made 2*(X%K) % (2*K) read as 0): the same residue with every product reduced
        # modulo b on the way, which the caller does next anyway.
        reduced = _unwrap_mods_reduced(a, b)
        return (
            a
            if isinstance(reduced, DimExpr) and reduced.unknown_reason is not None
            else reduced
        )
    return result if changed else a


def _unwrap_mods_reduced(a: DimExpr, b: int) -> Dim:
    """:func:`_unwrap_mods` with every coefficient reduced modulo ``b > 0`` (fits int64)."""
    terms: dict[Monomial, int] = {}
    const = 0

    def collect(d: DimExpr, factor: int) -> None:
        nonlocal const
        const += factor * d.const
        for m, c in d.terms:
            atom = m[0] if len(m) == 1 else None
            if _residue_modulo_multiple(atom, b) and isinstance(atom.args[0], DimExpr):
                collect(atom.args[0], factor * c % b)
            else:
                terms[m] = (terms.get(m, 0) + factor * c) % b

    collect(a, 1)
    return _finish({m: c for m, c in terms.items() if c}, const % b)


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
            alo, ahi = (
                (None if ahi is None else coeff * ahi),
                (None if alo is None else coeff * alo),
            )
        else:
            alo, ahi = (
                (None if alo is None else coeff * alo),
                (None if ahi is None else coeff * ahi),
            )
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
                return _divide_by_int64_min(MOD, a)  # -b is outside int64
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
        if numerator.const != k or any(
            not 0 <= c < b or rest.get(m) != c for m, c in numerator.terms
        ):
            # _finish absorbed an exact quotient into its coefficient and left others
            # than the reduced ones: (-((a-b)/:3)) % 2**32 reduces the coefficient to
            # 2**32-1, which absorbs to 1431655765*a - 1431655765*b. Reducing again gives
            # the form its printed text parses to (each absorption removes a quotient).
            return mod(numerator, b)
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


def _as_poly(d: DimExpr) -> dict[Monomial, int]:
    poly = dict(d.terms)
    if d.const:
        poly[()] = d.const
    return poly


def _from_poly(poly: dict[Monomial, int]) -> Dim:
    const = poly.pop((), 0)
    return _finish(poly, const) if poly else const


def _parts(d: Dim) -> int:
    return 1 if isinstance(d, int) else len(d.terms) + bool(d.const)


def _cancel_polynomial_factor(a: Dim, b: DimExpr) -> tuple[Dim, Dim] | None:
    """``(a / G, b / G)`` for ``G`` the polynomial gcd of ``a`` and ``b``, if it is a sum.

    Integer and monomial common factors are cancelled before (:func:`_cancel_common_factor`);
    this finds a common factor that is a sum, such as ``w + w%2`` in
    ``(h + h%2)*(w + w%2) /: (2*(w + w%2))``. ``a == G*A'`` and ``b == G*B'`` are identities
    of polynomials, so wherever ``b != 0`` (then ``G != 0``) the rational quotients agree:
    ``a/b == A'/B'``. None when there is none, when it is too costly to find
    (:mod:`._polygcd` caps the work), or when a cofactor leaves int64.
    """
    if isinstance(a, int) or _parts(a) < 2 or _parts(b) < 2:
        return None  # a monomial shares only monomial factors, cancelled already
    pa, pb = _as_poly(a), _as_poly(b)
    g = poly_gcd(pa, pb)
    if g is None or all(not m for m in g):
        return None
    qa, qb = poly_divide(pa, g), poly_divide(pb, g)
    if qa is None or qb is None:
        return None
    na, nb = _from_poly(qa), _from_poly(qb)
    if any(isinstance(d, DimExpr) and d.unknown_reason is not None for d in (na, nb)):
        return None
    if isinstance(na, int) and isinstance(nb, int) and na % nb:
        # (x+y) /: (2*x+2*y) is undefined everywhere; like (2*x+3) /: 2 it stays as
        # written rather than raising (a sum that absorbs such a quotient must not raise).
        return None
    return na, nb


def _clear_divisor_quotient(a: Dim, b: Dim) -> Dim | None:
    """``a /: (c*m*(N /: D)) == (a*D) /: (c*m*N)``: no exact quotient stays in a divisor.

    Where the left side is defined, ``b = c*m*N/D`` is a non-zero integer (so ``N != 0``)
    dividing ``a``: ``a = k*b`` gives ``a*D = k*c*m*N``, and the quotients are equal. The
    right side may be defined at more points (its condition is weaker). None when the
    divisor is not one monomial with one exact quotient, or the products leave the size or
    int64 guards (the quotient then stays as written).
    """
    if isinstance(b, int) or b.const or len(b.terms) != 1:
        return None
    ((mono, coeff),) = b.terms
    inner = [atom for atom in mono if atom.kind == EXACT]
    if len(inner) != 1:
        return None
    if coeff < 0 and coeff != INT64_MIN:
        # The divisor's sign moves to ``a`` first, as the sign normalization would: else
        # ``2*a /: -(a /: 2**62)`` overflows in ``2*a * 2**62`` and stays, while its
        # printed form ``(-2*a)/(a/2**62)`` re-parses to -2**63 (found by hypothesis).
        a, coeff = neg(a), -coeff
        if isinstance(a, DimExpr) and a.unknown_reason is not None:
            return None
    rest = list(mono)
    rest.remove(inner[0])
    num, den = inner[0].args
    outside: Dim = _from_terms({tuple(rest): coeff}, 0) if rest else coeff
    new_a, new_b = mul(a, den), mul(outside, num)
    if any(isinstance(d, DimExpr) and d.unknown_reason is not None for d in (new_a, new_b)):
        return None
    if new_b == 0:
        return None  # pragma: no cover - b != 0 as an expression, so N != 0
    return exact_div(new_a, new_b)


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
    # Common factors cancel before any product is formed below: (2**62*(y/:3)) /: 2**62
    # would overflow in 3*2**62, and 2**62*x /: (2**62*(y/:3)) in 3*2**62*x, where the
    # cancelled forms y/:3 and (3*x)/:y are what the same values built otherwise give.
    a, b = _cancel_common_factor(a, b)
    if isinstance(a, int) and isinstance(b, int):
        return exact_div(a, b)
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
    if (moved := _clear_divisor_quotient(a, b)) is not None:
        return moved
    if not isinstance(b, int):
        if isinstance(a, DimExpr) and (q := _as_multiple(a, b)) is not None:
            return q
        if (cancelled := _cancel_polynomial_factor(a, b)) is not None:
            a, b = cancelled
            if isinstance(b, int):
                return exact_div(a, b)
        if _leading_sign(b) < 0:
            a, b = neg(a), neg(b)
        # Nothing is pulled out of a symbolic quotient: c*(N/:D) is exact only when D | N,
        # which (c*N)/:D does not promise. Coefficients are absorbed instead (_finish).
        return _term(EXACT, (a, b))
    if b < 0 and b != INT64_MIN:  # -b is outside int64: that divisor keeps its sign
        a, b = neg(a), -b
        if isinstance(a, DimExpr) and a.unknown_reason is not None:
            return a  # -a left int64 (a constant -2**63): no form, and no sign to read
    if b == 1:
        return a
    if isinstance(a, int):
        raise InexactDivisionError(f"{a} /: {b} is not exact")  # pragma: no cover
    if b > 0:
        split = _split_exact_quotient(a, b)
        if split is not None:
            return split
        if (rounded := _rounded_multiple_quotient(a, b)) is not None:
            return rounded
    # Pull the numerator's content and sign out: (c*N)/:d == c*(N/:d) because
    # gcd(c, d) == 1 here (the common factor was cancelled), so d | c*N implies d | N.
    content, _ = _content_and_common_monomial(a)
    if _leading_sign(a) < 0:
        content = -content
    numerator = _divide_out(a, content, ()) if content not in (0, 1) else a
    return mul(content, _term(EXACT, (numerator, b)))


# ---------------------------------------------------------------------------------------
# Memoized entry points
# ---------------------------------------------------------------------------------------


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

    Semantics: ``a /: b`` has a value only where ``b != 0`` and ``b`` divides ``a``. It
    stands for a division a run performs (a Reshape's ``-1``: onnxruntime fails when the
    other dims' product is 0 or does not divide, ``reshape_helper.h``; a split into equal
    parts), so a run where ``b == 0`` fails and has no dims to describe. Every rewrite
    gives the same value wherever the original is defined and may be defined at more
    points: common factors cancel, integer, monomial and polynomial ones
    (``(h*w + h*(w%2)) /: (2*w + 2*(w%2)) == h /: 2``: where the divisor is non-zero so is
    the common factor ``G``, and the rational quotients agree), so at a zero of ``G`` the
    result has a value where the original had none. Nothing may be concluded from that
    value alone (no run has it), nor from a missing one: the result does not encode
    ``b != 0`` or ``b | a`` (a caller that knows them records them as facts). A caller may
    rely on the extra definedness only where the value does not matter, as
    ``A * min(1, t)`` (0 at ``t == 0`` whatever ``A`` is) does.

    Raises:
        ZeroDivisionError: ``b`` is 0.
        InexactDivisionError: both are constants and ``b`` does not divide ``a``.
    """
    return _memoized("/:", _exact_div_impl, a, b)
