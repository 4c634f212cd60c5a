"""Bounds of a sum of floor quotients of shifted numerators, for every integer value.

``(H-1)//3 - H//3`` is ``-1`` or ``0`` whatever ``H`` is: floor division by a positive
constant is monotone, and two numerators that differ by a constant give quotients that
differ by a bounded amount. :func:`difference_bounds` finds such bounds, so that
``min((H-1)//3, H//3)`` is ``(H-1)//3`` and ``min(4*((s+3)//4), s)`` is ``s``.

The terms of the expression are grouped by ``(Y, d)``: every ``c_i * ((Y + a_i) // d)``
with the same non-constant part ``Y`` of the numerator and the same divisor ``d > 0``,
plus an ``e * Y`` term taken from the rest. With ``u`` standing for ``Y``,
``g(u) = e*u + sum(c_i * ((u + a_i) // d))`` is periodic with period ``d`` exactly when
``sum(c_i) == -e*d`` (each floor grows by 1 when ``u`` grows by ``d``); otherwise it is
unbounded. A periodic ``g`` is linear with slope ``e`` between the points where a floor
steps (``u + a_i`` a multiple of ``d``), so its extreme values are at those points and
just before them. Bounding ``g`` over *every* integer ``u`` bounds it over the values
``Y`` actually takes. Groups are bounded independently (a sum of bounds is a bound even
when groups share symbols); what is left must be a constant.
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import FLOOR, Monomial
from onnx_symdims.expr._dimexpr import Dim, DimExpr

__all__ = ["difference_bounds", "has_floor_term"]

#: At most this many floor terms are grouped (the bounds cost one pass per step point).
_MAX_FLOOR_TERMS = 16


def has_floor_term(d: Dim) -> bool:
    """True when some term of ``d`` is a single floor quotient by a positive constant."""
    if isinstance(d, int):
        return False
    for mono, _ in d.terms:
        if len(mono) == 1 and mono[0].kind == FLOOR:
            den = mono[0].args[1]
            if isinstance(den, int) and den > 0:
                return True
    return False


def difference_bounds(x: Dim, y: Dim) -> tuple[int, int] | None:
    """``(lo, hi)`` with ``lo <= x - y <= hi`` for every integer value of the symbols, or None.

    Only sums of floor groups (see the module docstring) and a constant are bounded here;
    anything else gives None. The difference is taken term by term, without building it
    (building a sum may fold it into an extremum, which compares its arguments here).
    """
    for d in (x, y):
        if isinstance(d, DimExpr) and d.unknown_reason is not None:
            return None
    terms: dict[Monomial, int] = {}
    const = 0
    for d, sign in ((x, 1), (y, -1)):
        if isinstance(d, int):
            const += sign * d
            continue
        const += sign * d.const
        for mono, coeff in d.terms:
            terms[mono] = terms.get(mono, 0) + sign * coeff
    return _bounds(terms, const)


def _bounds(terms: dict[Monomial, int], const: int) -> tuple[int, int] | None:
    groups: dict[tuple[tuple, int], list[tuple[int, int]]] = {}
    rest: dict[Monomial, int] = {}
    floors = 0
    for mono, coeff in terms.items():
        if not coeff:
            continue
        atom = mono[0] if len(mono) == 1 else None
        if atom is not None and atom.kind == FLOOR:
            num, den = atom.args
            if isinstance(den, int) and den > 0 and isinstance(num, DimExpr):
                floors += 1
                groups.setdefault((num.terms, den), []).append((num.const, coeff))
                continue
        rest[mono] = coeff
    if not groups or floors > _MAX_FLOOR_TERMS:
        return None
    lo = hi = const
    for (base_terms, den), shifted in groups.items():
        total = sum(c for _, c in shifted)
        if total % den:
            return None
        slope = -total // den
        if slope:
            # The group needs slope*Y from the rest: take it out (or give up).
            for mono, coeff in base_terms:
                if rest.get(mono) != slope * coeff:
                    return None
                del rest[mono]
        glo, ghi = _periodic_bounds(slope, shifted, den)
        lo += glo
        hi += ghi
    if rest:
        return None
    return lo, hi


def _periodic_bounds(slope: int, shifted: list[tuple[int, int]], den: int) -> tuple[int, int]:
    """Min and max of ``slope*u + sum(c * ((u + a) // den))`` over every integer ``u``."""

    def value(u: int) -> int:
        return slope * u + sum(c * ((u + a) // den) for a, c in shifted)

    points = set()
    for a, _ in shifted:
        step = (-a) % den  # u + a is a multiple of den: a floor steps here
        points.add(step)
        points.add(step - 1)
    values = [value(u) for u in points]
    return min(values), max(values)
