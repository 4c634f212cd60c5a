"""Elementwise arithmetic on "values as shape" (small integer tensors of dims).

Elements are ``int`` or ``DimExpr``; an element that cannot be computed soundly is an
*unknown* ``DimExpr`` (it poisons arithmetic and equals nothing), so a value can be
partially known. Elements are integers, not dims: they may be negative, and integer
``Div``/``Mod`` follow ONNX (C-style truncation for ``Div`` as onnxruntime computes it).
"""

from __future__ import annotations

__all__ = [
    "UNKNOWN_REASON",
    "boolean_of",
    "broadcast_elements",
    "element_compare",
    "element_div",
    "element_mod",
    "element_pow",
    "is_fully_unknown",
    "unknown_element",
]

import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from onnx_symdims import expr
from onnx_symdims.shapes._context import MAX_VALUE_ELEMENTS
from onnx_symdims.shapes._facts import FactScope

logger = logging.getLogger(__name__)

Dim = expr.Dim
UNKNOWN_REASON = "value"


def unknown_element() -> expr.DimExpr:
    """A fresh unknown element."""
    return expr.unknown(UNKNOWN_REASON)


def _is_unknown(d: Dim) -> bool:
    return isinstance(d, expr.DimExpr) and d.is_unknown


def is_fully_unknown(elements: Sequence[Dim]) -> bool:
    """True when no element is known (then the value is better stored as ``None``)."""
    # A loop rather than all(<generator>) of _is_unknown: hooks ask it of every value
    # they build, and a known element (the usual case) ends it at once.
    for e in elements:  # noqa: SIM110
        if not (isinstance(e, expr.DimExpr) and e.is_unknown):
            return False
    return True


def _object_array(elements: Sequence[Dim], shape: Sequence[int]) -> np.ndarray:
    array = np.empty(len(elements), dtype=object)
    for i, e in enumerate(elements):  # element-wise: numpy must not look inside DimExpr
        array[i] = e
    return array.reshape(tuple(shape))


def broadcast_elements(
    fn: Callable[..., Dim],
    operands: Sequence[tuple[Sequence[int], Sequence[Dim] | None]],
) -> tuple[tuple[int, ...], tuple[Dim, ...]] | None:
    """Applies ``fn`` elementwise with numpy broadcasting.

    Args:
        fn: Function of one element per operand.
        operands: ``(static shape, elements or None)`` per operand; ``None`` elements
            are all unknown.

    Returns:
        ``(output shape, elements)``, or ``None`` when the output is too large, the
        shapes do not broadcast, or nothing is known.
    """
    columns = []
    for shape, elements in operands:
        size = math.prod(shape)
        if elements is None:
            elements = (
                [unknown_element() for _ in range(size)]
                if size <= MAX_VALUE_ELEMENTS
                else None
            )
        if elements is None or len(elements) != size:
            return None
        columns.append((tuple(shape), elements))
    if all(len(shape) <= 1 for shape, _ in columns):
        return _broadcast_vectors(fn, columns)
    arrays = [_object_array(elements, shape) for shape, elements in columns]
    try:
        out_shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return None
    if math.prod(out_shape) > MAX_VALUE_ELEMENTS:
        return None
    result = np.frompyfunc(fn, len(arrays), 1)(*arrays)
    flat = tuple(np.asarray(result, dtype=object).reshape(-1).tolist())
    if is_fully_unknown(flat):
        return None
    return tuple(int(d) for d in out_shape), flat


def _broadcast_vectors(
    fn: Callable[..., Dim], columns: Sequence[tuple[tuple[int, ...], Sequence[Dim]]]
) -> tuple[tuple[int, ...], tuple[Dim, ...]] | None:
    """:func:`broadcast_elements` for scalars and 1-D operands, without numpy.

    Shape computations are such values (``Shape`` outputs, scalars, ``[1]`` axes);
    numpy's object arrays cost more than the arithmetic on them.
    """
    sizes = [shape[0] if shape else 1 for shape, _ in columns]
    n = next((k for k in sizes if k != 1), 1)
    if any(k not in (1, n) for k in sizes):
        return None  # does not broadcast
    if n > MAX_VALUE_ELEMENTS:
        return None
    out_shape = (n,) if any(shape for shape, _ in columns) else ()
    spread = [
        elements if len(elements) == n else tuple(elements) * n for _, elements in columns
    ]
    flat = tuple(fn(*args) for args in zip(*spread))
    if is_fully_unknown(flat):
        return None
    return out_shape, flat


#: Entries of a scope's memo element_div adds before it starts over (as the context's).
_MAX_SCOPED_MEMO = 50_000


def element_div(scope: expr.Scope, a: Dim, b: Dim) -> Dim:
    """Integer ``Div`` (truncates toward zero, like onnxruntime)."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            return unknown_element()
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if _is_unknown(a) or _is_unknown(b):
        return unknown_element()
    # A pure function of a, b and the scope's facts (it proves, never records): kept
    # with the scope's other results, which move when a fact is added. Layers divide
    # the same dims (a head size by a constant); an unknown quotient is never kept
    # (each is a fresh unknown).
    memo = scope._scoped_memo
    key = ("element_div", a, b)
    found = memo.get(key)
    if found is None:
        found = _symbolic_div(scope, a, b)
        if not _is_unknown(found):
            if len(memo) >= _MAX_SCOPED_MEMO:
                memo.clear()
            memo[key] = found
    return found


def _symbolic_div(scope: expr.Scope, a: Dim, b: Dim) -> Dim:
    """:func:`element_div` of known elements, one of them symbolic."""
    if _known_divides(scope, b, a):
        return expr.exact_div(a, b)  # no rounding: the quotient is exact whatever the signs
    # Truncation equals floor division when the dividend is >= 0 and the divisor > 0.
    if scope.prove_nonneg(a) and scope.prove_gt(b, 0):
        return expr.floordiv(a, b)
    if isinstance(b, int) and b > 0:
        # For every integer a: trunc(a/b) = max(a,0)//b - max(-a,0)//b.
        return expr.sub(
            _floordiv_small(scope, expr.dmax(a, 0, scope=scope), b),
            _floordiv_small(scope, expr.dmax(expr.neg(a), 0, scope=scope), b),
        )
    return unknown_element()


def _known_divides(scope: expr.Scope, divisor: Dim, dividend: Dim) -> bool:
    """True when the scope records that ``divisor`` divides ``dividend`` (a fact scope)."""
    return (
        isinstance(scope, FactScope)
        and not isinstance(divisor, int)
        and (scope.known_divides(divisor, dividend))
    )


def _floordiv_small(scope: expr.Scope, x: Dim, b: int) -> Dim:
    """``x // b`` for ``x >= 0``, folded to 0 when the scope bounds ``x`` below ``b``."""
    if x == 0:
        return 0
    low, high = scope.bounds(x)
    if low is not None and low >= 0 and high is not None and high < b:
        return 0
    return expr.floordiv(x, b)


def element_mod(scope: expr.Scope, a: Dim, b: Dim, fmod: bool) -> Dim:
    """Integer ``Mod``: sign of the divisor (``fmod=0``) or of the dividend (``fmod=1``)."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            return unknown_element()
        if not fmod:
            return a % b
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if _is_unknown(a) or _is_unknown(b) or b == 0:
        return unknown_element()
    if _known_divides(scope, b, a):
        return 0
    if not fmod or (scope.prove_nonneg(a) and scope.prove_gt(b, 0)):
        return expr.mod(a, b)
    return unknown_element()


def element_pow(a: Dim, b: Dim) -> Dim:
    """Integer ``Pow`` for a small non-negative int exponent.

    onnxruntime computes an integer ``Pow`` as ``std::pow`` on ``double``s: exact only for
    results of at most ``2**53`` in magnitude (``99**8`` is ``...201``, onnxruntime gives
    ``...200``). A larger int, or a symbolic power (``N**3`` of a dim ``N > 208063``), is
    unknown.
    """
    if not isinstance(b, int) or not 0 <= b <= 8:
        return unknown_element()
    result: Dim = 1
    for _ in range(b):
        result = expr.mul(result, a)
    if b >= 2 and not (isinstance(result, int) and abs(result) <= 1 << 53):
        return unknown_element()
    return result


def element_compare(scope: expr.Scope, op: str, a: Dim, b: Dim) -> Dim:
    """``Equal``/``Greater``/``GreaterOrEqual``/``Less``/``LessOrEqual`` as 0/1 when provable."""
    if isinstance(a, int) and isinstance(b, int):
        return int(
            {
                "Equal": a == b,
                "Greater": a > b,
                "GreaterOrEqual": a >= b,
                "Less": a < b,
                "LessOrEqual": a <= b,
            }[op]
        )
    if _is_unknown(a) or _is_unknown(b):
        return unknown_element()
    if op in ("Less", "LessOrEqual"):
        op = "Greater" if op == "Less" else "GreaterOrEqual"
        a, b = b, a
    if op == "Equal":
        if a is b:
            return 1
        if scope.prove_gt(a, b) or scope.prove_gt(b, a):
            return 0
    elif op == "Greater":
        if scope.prove_gt(a, b):
            return 1
        if scope.prove_ge(b, a):
            return 0
    elif op == "GreaterOrEqual":
        if scope.prove_ge(a, b):
            return 1
        if scope.prove_gt(b, a):
            return 0
    return _indicator(scope, op, a, b)


def _indicator(scope: expr.Scope, op: str, a: Dim, b: Dim) -> Dim:
    """The comparison as an exact 0/1 expression, for every integer ``a``, ``b``.

    ``a > b`` is ``min(max(a-b, 0), 1)``; ``a >= b`` is ``min(max(a-b+1, 0), 1)``;
    ``a == b`` is ``1 - min(max(a-b, b-a), 1)``. Boolean values hold 0/1 elements
    only, so ``Not``, ``And``, ``Or``, ``Where`` and ``If`` can compute with them.
    """
    diff = expr.sub(a, b)
    if op == "Equal":
        distance = expr.dmax(diff, expr.neg(diff), scope=scope)
        return expr.sub(1, expr.dmin(distance, 1, scope=scope))
    if op == "GreaterOrEqual":
        diff = expr.add(diff, 1)
    return expr.dmin(expr.dmax(diff, 0, scope=scope), 1, scope=scope)


def boolean_of(scope: expr.Scope, e: Dim) -> Dim:
    """``bool(e)`` as a 0/1 element: ``min(max(e, -e), 1)``."""
    if isinstance(e, int):
        return int(e != 0)
    if _is_unknown(e):
        return unknown_element()
    return expr.dmin(expr.dmax(e, expr.neg(e), scope=scope), 1, scope=scope)
