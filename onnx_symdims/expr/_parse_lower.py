"""Lowering of a raw tree to its canonical ``Dim``: the dialect readers.

:func:`tree_to_dim` builds the ``Dim`` through the core constructors and reads every spelling
found in real models: the seed dialect (``// /: % ^ &``, ``CeilToInt(a, b)``), onnx-ir/SymPy
(``floor(a/2 + 1/2)``, ``Max``, ``Mod``, ``a/2 + 1/2``) and torch (``FloorDiv``, ``CleanDiv``,
``PythonMod``, ``ModularIndexing``, ``IntTrueDiv``, ``FloorToInt``, ``TruncToInt``, ...).
A function it does not know stays an opaque :func:`call`.

``/`` is read as exact division, node by node: ``a/b`` -> ``a /: b``. That is what our
onnx printer writes for an exact quotient, so ``parse(to_onnx(e)) is e``. SymPy (onnx-ir)
however writes ``(a+1)/2`` as ``a/2 + 1/2``, where a single term is not an integer. When an
arithmetic sub-tree (+ - * / unary ``**``) cannot be read node by node because a quotient
of constants does not divide, the whole sub-tree is re-read as one rational pair
``(numerator, denominator)`` and then turned into ``numerator /: denominator``. Arguments
of ``floor``/``ceiling``/``FloorToInt``/``CeilToInt`` are always read as a rational pair, so
``floor(a/2 + 1/2)`` becomes ``(a+1)//2``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from onnx_symdims.expr._atoms import ExprSyntaxError, InexactDivisionError
from onnx_symdims.expr._dimexpr import Dim, sym
from onnx_symdims.expr._divisions import ceildiv, exact_div, floordiv, mod
from onnx_symdims.expr._extremum import broadcast, call, dmax, dmin
from onnx_symdims.expr._parse_tree import (
    MAX_POW,
    Arity,
    BinOp,
    Call,
    Constant,
    Name,
    Node,
    UnaryOp,
    arity_ok,
    is_arith,
)
from onnx_symdims.expr._ring import add, mul, neg, sub

__all__ = ["tree_to_dim"]

_Rational = tuple[Dim, Dim]


def _is_one(d: Dim) -> bool:
    return isinstance(d, int) and d == 1


def _normalise(num: Dim, den: Dim) -> _Rational:
    if isinstance(den, int):
        if den == 0:
            raise ZeroDivisionError("Division by zero in expression")
        if den < 0:
            num, den = neg(num), -den
        if isinstance(num, int):
            g = math.gcd(num, den)
            if g > 1:
                num, den = num // g, den // g
    return num, den


def _rat_add(x: _Rational, y: _Rational, sign: int) -> _Rational:
    (xn, xd), (yn, yd) = x, y
    combine = add if sign > 0 else sub
    if xd is yd or (isinstance(xd, int) and isinstance(yd, int) and xd == yd):
        return _normalise(combine(xn, yn), xd)
    if isinstance(xd, int) and isinstance(yd, int):
        lcm = xd * yd // math.gcd(xd, yd)
        return _normalise(combine(mul(xn, lcm // xd), mul(yn, lcm // yd)), lcm)
    return _normalise(combine(mul(xn, yd), mul(yn, xd)), mul(xd, yd))


def _rat_mul(x: _Rational, y: _Rational) -> _Rational:
    return _normalise(mul(x[0], y[0]), mul(x[1], y[1]))


def _rat_div(x: _Rational, y: _Rational) -> _Rational:
    if isinstance(y[0], int) and y[0] == 0:
        raise ZeroDivisionError("Division by zero in expression")
    return _normalise(mul(x[0], y[1]), mul(x[1], y[0]))


def _int_power(base: Dim, exponent: int) -> Dim:
    result: Dim = 1
    while exponent:
        if exponent & 1:
            result = mul(result, base)
        exponent >>= 1
        if exponent:
            base = mul(base, base)
    return result


def _to_dim(x: _Rational) -> Dim:
    num, den = x
    return num if _is_one(den) else exact_div(num, den)


def _lower_rational(node: Node) -> _Rational:
    if isinstance(node, BinOp):
        op = node.op
        if op in ("+", "-"):
            return _rat_add(
                _lower_rational(node.left), _lower_rational(node.right), 1 if op == "+" else -1
            )
        if op == "*":
            return _rat_mul(_lower_rational(node.left), _lower_rational(node.right))
        if op == "/":
            return _rat_div(_lower_rational(node.left), _lower_rational(node.right))
        if op == "**":
            exponent = _lower(node.right)
            if isinstance(exponent, int) and abs(exponent) <= MAX_POW:
                num, den = _lower_rational(node.left)
                if exponent < 0:
                    num, den, exponent = den, num, -exponent
                    if isinstance(den, int) and den == 0:
                        raise ZeroDivisionError("Zero raised to a negative power")
                return _normalise(_int_power(num, exponent), _int_power(den, exponent))
            return call("pow", (_lower(node.left), exponent)), 1
    elif isinstance(node, UnaryOp):
        num, den = _lower_rational(node.operand)
        return (neg(num) if node.op == "-" else num), den
    elif isinstance(node, Call) and node.func == "IntTrueDiv" and len(node.args) == 2:
        return _rat_div(_lower_rational(node.args[0]), _lower_rational(node.args[1]))
    return _lower(node), 1


def _floor_of(node: Node) -> Dim:
    num, den = _lower_rational(node)
    return num if _is_one(den) else floordiv(num, den)


def _ceil_of(node: Node) -> Dim:
    num, den = _lower_rational(node)
    return num if _is_one(den) else ceildiv(num, den)


def _trunc_of(node: Node) -> Dim:
    num, den = _lower_rational(node)
    # Truncation of a true quotient has no canonical form here; keep it opaque (sound).
    return num if _is_one(den) else call("TruncDiv", (num, den))


def _modular_indexing(a: Dim, b: Dim, c: Dim) -> Dim:
    return mod(floordiv(a, b), c)


# Functions whose arguments are integers: name -> (arity, lowering).
_INT_FUNCTIONS: dict[str, tuple[Arity, Callable[..., Dim]]] = {
    "max": ((1, None), dmax),
    "Max": ((1, None), dmax),
    "min": ((1, None), dmin),
    "Min": ((1, None), dmin),
    "broadcast": ((1, None), broadcast),
    "CeilToInt": ((2, 2), ceildiv),
    "CeilDiv": ((2, 2), ceildiv),
    "FloorDiv": ((2, 2), floordiv),
    "CleanDiv": ((2, 2), exact_div),
    "PythonMod": ((2, 2), mod),
    "Mod": ((2, 2), mod),
    "mod": ((2, 2), mod),
    "ModularIndexing": ((3, 3), _modular_indexing),
    "Identity": ((1, 1), lambda a: a),
}

# Single-argument rounding functions whose argument may be a true quotient.
_ROUNDING_FUNCTIONS: dict[str, Callable[[Node], Dim]] = {
    "floor": _floor_of,
    "FloorToInt": _floor_of,
    "ceiling": _ceil_of,
    "ceil": _ceil_of,
    "CeilToInt": _ceil_of,
    "TruncToInt": _trunc_of,
}

_INT_BINOPS: dict[str, Callable[[Dim, Dim], Dim]] = {
    "//": floordiv,
    "%": mod,
    "/:": exact_div,
    "^": dmax,
    "&": dmin,
}


def _lower_call(node: Call) -> Dim:
    func, args = node.func, node.args
    if len(args) == 1 and func in _ROUNDING_FUNCTIONS:
        return _ROUNDING_FUNCTIONS[func](args[0])
    known = _INT_FUNCTIONS.get(func)
    lowered = tuple(_lower(a) for a in args)
    if known is None:
        return call(func, lowered)
    arity, fn = known
    if not arity_ok(arity, len(args)):
        raise ExprSyntaxError(f"{func} does not take {len(args)} argument(s)")
    return fn(*lowered)


class _NeedRational(Exception):
    """A quotient of constants in an arithmetic sub-tree does not divide (``1/2``)."""


def _lower_operand(node: Node) -> Dim:
    return _lower_structural(node) if is_arith(node) else _lower(node)


def _quotient(num: Dim, den: Dim) -> Dim:
    try:
        return exact_div(num, den)
    except InexactDivisionError:
        raise _NeedRational from None


def _lower_structural(node: Node) -> Dim:
    """Lowers an arithmetic node reading every ``/`` as exact division."""
    if isinstance(node, UnaryOp):
        operand = node.operand
        if node.op == "+":
            return _lower_operand(operand)
        if isinstance(operand, Constant):
            return -operand.value  # also reaches INT64_MIN from the literal 2**63
        return neg(_lower_operand(operand))
    if isinstance(node, Call):  # IntTrueDiv(a, b)
        return _quotient(_lower_operand(node.args[0]), _lower_operand(node.args[1]))
    assert isinstance(node, BinOp)
    op = node.op
    if op == "**":
        exponent = _lower(node.right)
        if not (isinstance(exponent, int) and abs(exponent) <= MAX_POW):
            return call("pow", (_lower(node.left), exponent))
        power = _int_power(_lower_operand(node.left), abs(exponent))
        return power if exponent >= 0 else _quotient(1, power)
    left, right = _lower_operand(node.left), _lower_operand(node.right)
    if op == "+":
        return add(left, right)
    if op == "-":
        return sub(left, right)
    if op == "*":
        return mul(left, right)
    return _quotient(left, right)


def _lower(node: Node) -> Dim:
    if isinstance(node, Constant):
        return node.value
    if isinstance(node, Name):
        return sym(node.id)
    if is_arith(node):
        try:
            return _lower_structural(node)
        except _NeedRational:
            # SymPy spells (a+1)/2 as a/2 + 1/2: read the sub-tree as one true quotient.
            return _to_dim(_lower_rational(node))
    if isinstance(node, BinOp):
        fn = _INT_BINOPS.get(node.op)
        if fn is None:
            raise ExprSyntaxError(f"Unknown operator {node.op!r}")
        return fn(_lower(node.left), _lower(node.right))
    if isinstance(node, Call):
        return _lower_call(node)
    raise TypeError(f"Not an expression tree node: {node!r}")


def tree_to_dim(tree: Node) -> Dim:
    """Lowers a raw tree to its canonical ``Dim`` through the core constructors.

    Args:
        tree: a raw tree.

    Returns:
        An ``int`` or a canonical ``DimExpr``; a result past int64 is an unknown ``DimExpr``
        with reason ``"overflow"`` (core contract).

    Raises:
        ExprSyntaxError: a known function called with the wrong number of arguments.
        ZeroDivisionError, InexactDivisionError, BroadcastError: the expression is undefined
            for every value of its symbols (e.g. ``a//0``, ``7/:2``, ``broadcast(2,3)``).
    """
    return _lower(tree)
