"""Exact division and greatest common divisor of polynomials over the atoms.

The canonical form of a dim is a polynomial with integer coefficients whose variables are
atoms (symbols and function terms, :mod:`._atoms`). This module treats those atoms as
independent variables and works on the raw form ``{monomial: coefficient}`` (the
monomial ``()`` holds the constant), with Python's unbounded ints: the caller turns the
results back into dims (which checks int64).

An identity between such polynomials holds for *every* value of the variables, so it
holds for every integer value of the symbols whatever the atoms stand for (``x % 2``
and ``x`` are two variables here; an identity that needs their relation is never
found, which only costs a missed simplification).

* :func:`poly_divide` is the quotient ``q`` with ``p == q * d`` in ``Z[atoms]``, if any:
  recursive division in a main variable, each leading coefficient divided exactly in the
  remaining variables (no monomial order needed; every step cancels the leading degree).
* :func:`poly_gcd` is a greatest common divisor in ``Z[atoms]`` (up to sign): the
  recursive primitive-remainder-sequence algorithm (Gauss: ``Z[y][x]`` is a UFD,
  ``gcd(a, b) = gcd(cont(a), cont(b)) * gcd(pp(a), pp(b))`` and the primitive part of a
  pseudo-remainder keeps the gcd of primitive polynomials).

Both are cheap for the small polynomials dims are made of, and bounded for any input:
every product of polynomials is charged to a budget of term multiplications and the
computation gives up (returns None: no cancellation, which is always sound) once it runs
out, or when the inputs are larger than :data:`MAX_GCD_TERMS` terms or have more than
:data:`MAX_GCD_VARIABLES` variables.
"""

from __future__ import annotations

import math

from onnx_symdims.expr._atoms import Atom, Monomial
from onnx_symdims.expr._ring import _mono_mul

Poly = dict  # dict[Monomial, int], no zero coefficient; {} is the zero polynomial

#: Inputs with more terms than this are not examined (the answer would be "no cancellation").
MAX_GCD_TERMS = 64
#: Inputs over more distinct atoms than this are not examined (the recursion is per atom).
MAX_GCD_VARIABLES = 12
#: Term multiplications one gcd or division may spend before it gives up (a few
#: milliseconds at most; dims share their factors far below it).
BUDGET = 4_000


class _OutOfBudget(Exception):
    """Raised inside a computation that spent its budget; the entry points return None."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def charge(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _OutOfBudget


# ---------------------------------------------------------------------------------------
# Monomials and polynomials
# ---------------------------------------------------------------------------------------


def _degree(m: Monomial, x: Atom) -> int:
    return m.count(x)


def _without(m: Monomial, x: Atom) -> Monomial:
    return tuple(a for a in m if a is not x)


def _variables(p: Poly) -> set[Atom]:
    return {a for m in p for a in m}


def _mul(p: Poly, q: Poly, budget: _Budget) -> Poly:
    budget.charge(len(p) * len(q))
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = _mono_mul(m1, m2)
            c = out.get(m, 0) + c1 * c2
            if c:
                out[m] = c
            else:
                out.pop(m, None)
    return out


def _sub(p: Poly, q: Poly, budget: _Budget) -> Poly:
    budget.charge(len(q))
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, 0) - c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def _is_constant(p: Poly) -> bool:
    return all(not m for m in p)


def _int_content(p: Poly) -> int:
    return math.gcd(*p.values())


def _by_degree(p: Poly, x: Atom) -> dict[int, Poly]:
    """``p`` as a polynomial in ``x``: ``{k: coefficient of x**k}`` (free of ``x``)."""
    out: dict[int, Poly] = {}
    for m, c in p.items():
        k = _degree(m, x)
        out.setdefault(k, {})[_without(m, x) if k else m] = c
    return out


def _leading(p: Poly, x: Atom) -> tuple[int, Poly]:
    """The degree of ``p`` in ``x`` and its leading coefficient (free of ``x``)."""
    n = max(_degree(m, x) for m in p)
    return n, {_without(m, x): c for m, c in p.items() if _degree(m, x) == n}


def _times_power(p: Poly, x: Atom, k: int) -> Poly:
    if not k:
        return p
    return {_mono_mul(m, (x,) * k): c for m, c in p.items()}


def _main_variable(p: Poly) -> Atom:
    # The atom of the smallest key: a deterministic choice (any choice is correct).
    return min(_variables(p), key=lambda a: a.key)


# ---------------------------------------------------------------------------------------
# Exact division
# ---------------------------------------------------------------------------------------


def _divide(p: Poly, d: Poly, budget: _Budget) -> Poly | None:
    """``q`` with ``p == q * d`` in ``Z[atoms]``, or None (``d`` non-zero)."""
    if not p:
        return {}
    if _is_constant(d):
        k = d[()]
        if any(c % k for c in p.values()):
            return None
        return {m: c // k for m, c in p.items()}
    x = _main_variable(d)
    n, lead = _leading(d, x)
    quotient: Poly = {}
    rest = p
    while rest:
        m, rest_lead = _leading(rest, x)
        if m < n:
            return None  # a non-zero remainder of lower degree in x
        t = _divide(rest_lead, lead, budget)
        if t is None:
            return None
        term = _times_power(t, x, m - n)
        for tm, tc in term.items():
            quotient[tm] = quotient.get(tm, 0) + tc
        # The leading coefficient cancels exactly, so the degree in x drops every step.
        rest = _sub(rest, _mul(term, d, budget), budget)
    return {m: c for m, c in quotient.items() if c}


# ---------------------------------------------------------------------------------------
# Greatest common divisor
# ---------------------------------------------------------------------------------------


def _content(p: Poly, x: Atom, budget: _Budget) -> Poly:
    """The gcd of the coefficients of ``p`` as a polynomial in ``x``."""
    g: Poly = {}
    for coeff in _by_degree(p, x).values():
        g = _gcd(g, coeff, budget)
        if _is_constant(g) and abs(g[()]) == 1:
            break
    return g


def _primitive_part(p: Poly, x: Atom, budget: _Budget) -> Poly:
    content = _content(p, x, budget)
    q = _divide(p, content, budget)
    assert q is not None  # the content divides every coefficient
    return q


def _pseudo_remainder(a: Poly, b: Poly, x: Atom, budget: _Budget) -> Poly:
    """``lc(b)**k * a mod b`` in ``x`` for some ``k >= 0`` (the power is left out)."""
    n, lead = _leading(b, x)
    rest = a
    while rest:
        m, rest_lead = _leading(rest, x)
        if m < n:
            break
        # lead*rest - rest_lead*x**(m-n)*b: the x**m terms cancel.
        rest = _sub(
            _mul(lead, rest, budget),
            _mul(_times_power(rest_lead, x, m - n), b, budget),
            budget,
        )
    return rest


def _normalized(p: Poly) -> Poly:
    """``p`` or ``-p``: the one whose first term (by monomial key) is positive."""
    first = min(p, key=lambda m: "*".join(a.key for a in m))
    return {m: -c for m, c in p.items()} if p[first] < 0 else p


def _gcd(a: Poly, b: Poly, budget: _Budget) -> Poly:
    if not a:
        return _normalized(b) if b else {}
    if not b:
        return _normalized(a)
    if _is_constant(a) or _is_constant(b):
        return {(): math.gcd(_int_content(a), _int_content(b))}
    va, vb = _variables(a), _variables(b)
    # A variable of only one side is not in the gcd: reduce that side to its content.
    if only_a := va - vb:
        return _gcd(_content(a, min(only_a, key=lambda v: v.key), budget), b, budget)
    if only_b := vb - va:
        return _gcd(a, _content(b, min(only_b, key=lambda v: v.key), budget), budget)
    x = min(va, key=lambda v: v.key)
    content_a, content_b = _content(a, x, budget), _content(b, x, budget)
    content = _gcd(content_a, content_b, budget)
    pa = _divide(a, content_a, budget)
    pb = _divide(b, content_b, budget)
    assert pa is not None and pb is not None
    if _leading(pa, x)[0] < _leading(pb, x)[0]:
        pa, pb = pb, pa
    while True:
        if _leading(pb, x)[0] == 0:
            primitive: Poly = {(): 1}  # pb is primitive in x and free of x: a unit
            break
        r = _pseudo_remainder(pa, pb, x, budget)
        if not r:
            primitive = pb
            break
        pa, pb = pb, _primitive_part(r, x, budget)
    return _normalized(_mul(content, primitive, budget))


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


def _small_enough(*polys: Poly) -> bool:
    if any(len(p) > MAX_GCD_TERMS for p in polys):
        return False
    variables: set[Atom] = set()
    for p in polys:
        variables |= _variables(p)
    return len(variables) <= MAX_GCD_VARIABLES


def poly_divide(p: Poly, d: Poly) -> Poly | None:
    """``q`` with ``p == q * d`` in ``Z[atoms]``; None when there is none or it is too costly.

    ``d`` must be non-zero.
    """
    if not _small_enough(p, d):
        return None
    try:
        return _divide(p, d, _Budget(BUDGET))
    except _OutOfBudget:
        return None


def poly_gcd(a: Poly, b: Poly) -> Poly | None:
    """A gcd of ``a`` and ``b`` in ``Z[atoms]`` (its first term positive), or None if too costly.

    Every common divisor of ``a`` and ``b`` divides it, and it divides both.
    """
    if not _small_enough(a, b):
        return None
    if not _variables(a) & _variables(b):
        # A common factor is free of every variable of a or of b: a constant.
        return {(): math.gcd(_int_content(a), _int_content(b))} if a and b else None
    try:
        return _gcd(a, b, _Budget(BUDGET))
    except _OutOfBudget:
        return None
