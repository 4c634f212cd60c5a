"""Sum-level identities over function terms, applied by :func:`._ring._finish`.

Each holds for every integer value of the symbols:

* an exact division absorbs the factors of its monomial: all of them, but a coefficient
  prime to an integer divisor (``c*m*(N /: D) == (c*m*N) /: D``), and the quotients of a
  product merge into one;
* ``d`` consecutive floors collapse (``sum((y+i)//d for i in range(d)) == y``) and so does
  the division identity (``d*(y//d) + y % d == y``);
* a sum with an extremum folds into it when that is smaller
  (``x - max(x-8, 0) == min(8, x)``).

They sit above the divisions and extrema they build, so the ring reaches them through
:data:`._atoms.late`.
"""

from __future__ import annotations

import math

from onnx_symdims.expr._atoms import (
    _ATOMS,
    EXACT,
    FLOOR,
    INT64_MAX,
    INT64_MIN,
    MAX,
    MIN,
    MOD,
    Atom,
    ExprError,
    Monomial,
)
from onnx_symdims.expr._dimexpr import Dim, DimExpr, _atom_expr, _from_terms, _split
from onnx_symdims.expr._divisions import exact_div
from onnx_symdims.expr._extremum import _extremum
from onnx_symdims.expr._ring import add, mul, sub


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
        if any(isinstance(a, DimExpr) and a.unknown_reason is not None for a in args):
            continue  # an argument left int64: the known sum stays as it is
        if not any(isinstance(a, int) or len(a.terms) < len(rest_terms) for a in args):
            continue
        flips = c == -1
        kind = (MIN if atom.kind == MAX else MAX) if flips else atom.kind
        folded = _extremum(kind, tuple(args), None)
        if _size(folded) < _size(rest) + 1 + _size(_atom_expr(atom)):
            return folded
    return None


def _merge_same_divisor(terms: dict[Monomial, int], const: int) -> Dim | None:
    """``N1 /: D + N2 /: D == (N1 + N2) /: D`` for a symbolic divisor ``D``.

    Where the left side is defined, ``D != 0`` divides both numerators, hence their sum,
    and the rational quotients add up; the right side is defined there too (and maybe at
    more points: its condition is weaker). One quotient per symbolic divisor is also one
    spelling, and the merged numerator may cancel with ``D``
    (``(a*w+a)/:(w+1) + (b*w+b)/:(w+1) == a+b``). A symbolic quotient has absorbed every
    factor outside it (:func:`_absorb_exact_divisions`), so the terms are single atoms.
    Returns None when no divisor has two quotients, or the merged one leaves the guards.
    """
    by_divisor: dict[object, list[Monomial]] = {}
    for m in terms:
        if len(m) == 1 and m[0].kind == EXACT and not isinstance(m[0].args[1], int):
            by_divisor.setdefault(m[0].args[1], []).append(m)
    groups = [ms for ms in by_divisor.values() if len(ms) >= 2]
    if not groups:
        return None
    rest = dict(terms)
    merged: list[Dim] = []
    for ms in groups:
        numerator: Dim = 0
        for m in ms:
            numerator = add(numerator, mul(rest.pop(m), m[0].args[0]))
        try:
            quotient = exact_div(numerator, ms[0][0].args[1])
        except (
            ArithmeticError,
            ExprError,
        ):  # pragma: no cover - defensive: a sum never raises
            return None
        if isinstance(quotient, DimExpr) and quotient.unknown_reason is not None:
            return None
        merged.append(quotient)
    result: Dim = _from_terms(rest, const) if rest else const
    for q in merged:
        result = add(result, q)
    return result


def _absorb_exact_divisions(terms: dict[Monomial, int], const: int) -> Dim | None:
    """Cancels ``c * m * (N /: D)`` when c or m shares a factor with D.

    Holds because ``N /: D`` is the exact quotient: ``c*(N/:D) == (c*N)/:D``. Then
    quotients over the same symbolic divisor are merged (:func:`_merge_same_divisor`).
    Returns None when nothing changes.
    """
    absorbed = _absorb_factors(terms, const)
    if absorbed is not None:
        return absorbed
    return _merge_same_divisor(terms, const)


def _absorb_factors(terms: dict[Monomial, int], const: int) -> Dim | None:
    """``c * m * (N /: D) == (c*m*N) /: D`` unless it is ``c*(N/:d)``, c prime to d; or None."""
    changed = False
    out: dict[Monomial, int] = {}
    extra: list[Dim] = []
    for m, c in terms.items():
        exacts = [a for a in m if a.kind == EXACT]
        if not exacts:
            out[m] = out.get(m, 0) + c
            continue
        rest = tuple(a for a in m if a.kind != EXACT)
        if all(isinstance(a.args[1], int) for a in exacts):
            reduced = _absorb_into_integer_quotients(rest, c, exacts)
            if reduced is None:
                out[m] = out.get(m, 0) + c
                continue
            changed = True
            extra.append(reduced)
            continue
        if len(exacts) == 1 and c == 1 and not rest:
            out[m] = out.get(m, 0) + c  # a symbolic quotient alone
            continue
        # A symbolic quotient keeps nothing outside: c*m*(N/:D) -> (c*m*N)/:D.
        num_product: Dim = _from_terms({rest: c}, 0) if rest else c
        den_product: Dim = 1
        for atom in exacts:
            num_product = mul(num_product, atom.args[0])
            den_product = mul(den_product, atom.args[1])
        merged = exact_div(num_product, den_product)
        if isinstance(merged, DimExpr) and merged.unknown_reason is not None:
            # The merged numerator or denominator leaves int64 (60 exact divisions by
            # 2..61): the product of the separate quotients is just as exact. The
            # factor outside still moves into a symbolic quotient, as with one quotient,
            # so that the form does not depend on the order the product was built in.
            merged = _absorb_into_symbolic_quotient(rest, c, exacts)
            if merged is None:
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


def _absorb_into_integer_quotients(rest: Monomial, c: int, exacts: list[Atom]) -> Dim | None:
    """``c*m*(N1/:d1)*...`` over integer divisors in one canonical form, or None if it is one.

    The canonical form is one quotient with everything but a coefficient prime to its
    divisor inside, ``c'*((m*N1*...)/:d)``: ``c*m*(N1/:d1)*(N2/:d2) == (c*m*N1*N2)/:(d1*d2)``
    (where the left side is defined, each ``di | Ni``, so the right side is defined and
    equal; it may be defined at more points, as every rewrite of an exact division may).
    One quotient whatever the order the product was built in: ``2*b*(a/:4)``,
    ``b*(2*(a/:4))`` and ``(2*(a/:2))*(b/:2)`` are all ``(a*b)/:2``, as a symbolic
    quotient keeps nothing outside either. The coefficient is cancelled against each
    divisor first, ``c*(N/:d) == (c/g)*(N/:(d/g))`` for ``g = gcd(c, d)``, before any product
    is formed: ``c*N`` may leave int64 where the reduced quotient does not, and the form
    would then depend on that order. When the merged divisor leaves int64 the reduced
    quotients stay apart.
    """
    left = c
    factors: list[Dim] = [_from_terms({rest: 1}, 0)] if rest else []
    parts: list[tuple[Dim, int]] = []
    for atom in exacts:
        num, den = atom.args
        g = math.gcd(left, den)
        if g > 1:
            left //= g
            den //= g  # keeps its sign: only -2**63 is a negative divisor here
        if den == 1:
            factors.append(num)  # c*(N/:g) == (c/g)*N
        else:
            parts.append((num, den))
    if left == c and len(parts) == 1 and not rest:
        return None  # c*(N/:d) with c prime to d: canonical
    product = math.prod(den for _, den in parts)
    if INT64_MIN <= product <= INT64_MAX:
        numerator: Dim = 1
        for f in factors:
            numerator = mul(numerator, f)
        for num, _ in parts:
            numerator = mul(numerator, num)
        merged = mul(left, exact_div(numerator, product))
        if not (isinstance(merged, DimExpr) and merged.unknown_reason is not None):
            return merged
    if left == c:
        return None  # nothing cancelled, and the quotients stay apart
    # The merged divisor leaves int64: the reduced quotients stay apart.
    result: Dim = left
    for f in factors:
        result = mul(result, f)
    for num, den in parts:
        result = mul(result, exact_div(num, den))
    if isinstance(result, DimExpr) and result.unknown_reason is not None:
        return None
    return result


def _absorb_into_symbolic_quotient(rest: Monomial, c: int, exacts: list[Atom]) -> Dim | None:
    """``c*rest*(N/:D)*others`` as ``((c*rest*N)/:D)*others``, D the first symbolic divisor.

    When ``c*rest*N`` leaves int64, the sign of ``c`` and ``rest`` still move inside and
    ``|c|`` stays out: ``-2**61*(2**31/:a)`` is ``2**61*((-2**31)/:a)``, as
    ``2**61*(-(2**31/:a))`` builds it. None when there is nothing outside to move, no
    quotient with a symbolic divisor, or even the moved sign and monomial leave int64.
    """
    if c == 1 and not rest:
        return None
    target = next((a for a in exacts if not isinstance(a.args[1], int)), None)
    if target is None:
        return None
    outside: Dim = _from_terms({rest: c}, 0) if rest else c
    result = exact_div(mul(outside, target.args[0]), target.args[1])
    kept = 1
    if isinstance(result, DimExpr) and result.unknown_reason is not None:
        sign = -1 if c < 0 else 1
        if (sign == 1 and not rest) or c == INT64_MIN:
            return None
        kept = sign * c
        outside = _from_terms({rest: sign}, 0) if rest else sign
        result = exact_div(mul(outside, target.args[0]), target.args[1])
    for atom in exacts:
        if atom is not target:
            result = mul(result, _atom_expr(atom))
    result = mul(kept, result)
    if isinstance(result, DimExpr) and result.unknown_reason is not None:
        return None
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
    replacement: list[Dim] = []
    for (base, den), by_offset in groups.items():
        if len(by_offset) != den:
            continue
        coeffs = {c for _, c in by_offset.values()}
        if len(coeffs) != 1:
            continue
        scaled = mul(base, coeffs.pop())
        if isinstance(scaled, DimExpr) and scaled.unknown_reason is not None:
            # c*y leaves int64 (4*((2**62*a+i)//3) for i < 3): the floors stay, or the
            # unknown's empty terms would make the sum 0.
            continue
        for m, _ in by_offset.values():
            del terms[m]
        replacement.append(scaled)
    for m, c in mods:
        num, den = m[0].args
        floor_atom = _ATOMS.get((FLOOR, "", (num, den)))
        if floor_atom is None or terms.get((floor_atom,)) != c * den or m not in terms:
            continue
        scaled = mul(num, c)
        if isinstance(scaled, DimExpr) and scaled.unknown_reason is not None:
            continue  # c*y leaves int64: the quotient and residue stay
        del terms[m]
        del terms[(floor_atom,)]
        replacement.append(scaled)
    for scaled in replacement:
        b_terms, b_const = _split(scaled)
        for bm, bc in b_terms.items():
            terms[bm] = terms.get(bm, 0) + bc
        const += b_const
    return {m: c for m, c in terms.items() if c}, const
