"""Bounds on a symbol from a lower bound on a monotone expression of it alone.

A successful run of a convolution over ``audio_len`` samples proves
``(audio_len - 400)//320 + 1 >= 1``; every dim of that run then has ``audio_len >= 400``.
When an expression of one symbol only is monotone in it (built from the symbol, ``+``,
positive or negative multiples, ``//`` by a positive int, ``max`` and ``min``), the set of
values where it is ``>= k`` is a ray, and its end, found by evaluating the expression, is
a bound on the symbol that holds exactly where the fact holds.

Example::

    >>> from onnx_symdims.expr import parse_dim
    >>> symbol_bound_from_lower(parse_dim("(x-400)//320+1"), 1, lowest=0)
    ('x', 400, None)
    >>> symbol_bound_from_lower(parse_dim("10-x"), 0, lowest=0)
    ('x', None, 10)
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import FLOOR, MAX, MIN, SYM, Atom
from onnx_symdims.expr._compile import evaluator
from onnx_symdims.expr._dimexpr import Dim, DimExpr

__all__ = ["symbol_bound_from_lower"]

#: The search for the end of the ray stops here (a bound beyond it is useless for dims).
_SEARCH_LIMIT = 2**40


def _atom_direction(atom: Atom) -> int | None:
    """+1 when nondecreasing in its one symbol, -1 when nonincreasing, None otherwise."""
    kind = atom.kind
    if kind == SYM:
        return 1
    if kind == FLOOR:
        numerator, divisor = atom.args
        if not isinstance(divisor, int) or divisor <= 0:
            return None
        return _direction(numerator)
    if kind in (MAX, MIN):
        found = 0
        for arg in atom.args:
            direction = _direction(arg)
            if direction is None:
                return None
            if direction and found and direction != found:
                return None
            found = found or direction
        return found
    return None


def _direction(d: Dim) -> int | None:
    """0 for a constant, +1 nondecreasing, -1 nonincreasing, None when not provably either."""
    if isinstance(d, int):
        return 0
    found = 0
    for mono, coeff in d.terms:
        if len(mono) != 1:
            return None  # a product or a power: its monotony depends on signs
        direction = _atom_direction(mono[0])
        if direction is None:
            return None
        direction *= 1 if coeff > 0 else -1
        if direction and found and direction != found:
            return None
        found = found or direction
    return found


def symbol_bound_from_lower(
    d: DimExpr, k: int, lowest: int | None
) -> tuple[str, int | None, int | None] | None:
    """The bound ``d >= k`` puts on the one symbol of ``d``, when ``d`` is monotone in it.

    Args:
        d: An expression of exactly one symbol.
        k: The lower bound of ``d`` that holds.
        lowest: The least value the symbol can take (``None``: unbounded below; then only
            a nondecreasing ``d`` is searched, from ``-2**40``).

    Returns:
        ``(name, lower, upper)`` with one of them set, or None when ``d`` is not monotone,
        the fact gives nothing or no value up to ``2**40`` satisfies it.
    """
    names = d.symbols()
    if len(names) != 1 or d.is_unknown:
        return None
    direction = _direction(d)
    if not direction:
        return None
    (name,) = names

    at = evaluator(d, (name,))  # compiled: the search evaluates d up to ~80 times

    def holds(x: int) -> bool:
        return at(x) >= k

    start = -_SEARCH_LIMIT if lowest is None else lowest
    if direction > 0:
        if holds(start):
            return None  # already true at the least value
        last_false = _last_alike(holds, start)
        return None if last_false is None else (name, last_false + 1, None)
    if lowest is None or not holds(start):
        return None  # no least value to search up from, or the fact cannot hold
    last_true = _last_alike(holds, start)
    return None if last_true is None else (name, None, last_true)


def _last_alike(test, start: int) -> int | None:
    """The largest ``x >= start`` with ``test(x) == test(start)``, ``test`` monotone.

    An exponential search for a value where ``test`` changes, then a bisection; ``None``
    when it does not change up to :data:`_SEARCH_LIMIT`.
    """
    first = test(start)
    last, step = start, 1
    while test(last + step) == first:
        last += step
        step *= 2
        if last + step > _SEARCH_LIMIT:
            return None
    beyond = last + step
    while beyond - last > 1:
        middle = (last + beyond) // 2
        if test(middle) == first:
            last = middle
        else:
            beyond = middle
    return last
