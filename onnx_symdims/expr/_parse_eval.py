"""Evaluation of a raw tree with integer values: the brute-force reference semantics.

:func:`evaluate_tree` computes what a raw tree means for given symbol values, without the
algebra: the tests check every lowering (:mod:`._parse_lower`) and every rewrite of the core
against it. ``/`` is exact division node by node, like the lowering; the argument of a
rounding function (``floor``, ``ceiling``, ...) is evaluated as an exact rational.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from onnx_symdims.expr._atoms import BroadcastError, ExprError, InexactDivisionError
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

__all__ = ["evaluate_tree"]


def _check_divisor(value: int) -> int:
    if value == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    return value


def _eval_exact_div(a: int, b: int) -> int:
    q, r = divmod(a, _check_divisor(b))
    if r:
        raise InexactDivisionError(f"{a} is not divisible by {b}")
    return q


def _eval_broadcast(*values: int) -> int:
    result = 1
    for v in values:
        if v == result or v == 1:
            continue
        if result != 1:
            raise BroadcastError(f"cannot broadcast dimensions {values}")
        result = v
    return result


def _eval_ceildiv(a: int, b: int) -> int:
    return -(-a // _check_divisor(b))


_EVAL_INT_BINOPS: dict[str, Callable[[int, int], int]] = {
    "//": lambda a, b: a // _check_divisor(b),
    "%": lambda a, b: a % _check_divisor(b),
    "/:": _eval_exact_div,
    "^": max,
    "&": min,
}

_EVAL_INT_FUNCTIONS: dict[str, tuple[Arity, Callable[..., int]]] = {
    "max": ((1, None), lambda *v: max(v)),
    "Max": ((1, None), lambda *v: max(v)),
    "min": ((1, None), lambda *v: min(v)),
    "Min": ((1, None), lambda *v: min(v)),
    "broadcast": ((1, None), _eval_broadcast),
    "CeilToInt": ((2, 2), _eval_ceildiv),
    "CeilDiv": ((2, 2), _eval_ceildiv),
    "FloorDiv": ((2, 2), _EVAL_INT_BINOPS["//"]),
    "CleanDiv": ((2, 2), _eval_exact_div),
    "PythonMod": ((2, 2), _EVAL_INT_BINOPS["%"]),
    "Mod": ((2, 2), _EVAL_INT_BINOPS["%"]),
    "mod": ((2, 2), _EVAL_INT_BINOPS["%"]),
    "ModularIndexing": ((3, 3), lambda a, b, c: (a // _check_divisor(b)) % _check_divisor(c)),
    "Identity": ((1, 1), lambda a: a),
}

_EVAL_ROUNDING: dict[str, Callable[[Fraction], int]] = {
    "floor": math.floor,
    "FloorToInt": math.floor,
    "ceiling": math.ceil,
    "ceil": math.ceil,
    "CeilToInt": math.ceil,
    "TruncToInt": math.trunc,
}


def _eval_power(base: int, exponent: int) -> int:
    if abs(exponent) > MAX_POW:
        raise ExprError(f"Exponent {exponent} is too large to evaluate")
    power = base ** abs(exponent)
    return power if exponent >= 0 else _eval_exact_div(1, power)


def _eval(node: Node, bindings: Mapping[str, int]) -> int:
    """Integer evaluation; ``/`` is exact division node by node, like the lowering."""
    if isinstance(node, Constant):
        return node.value
    if isinstance(node, Name):
        try:
            value = bindings[node.id]
        except KeyError:
            raise KeyError(f"No value for symbol {node.id!r}") from None
        if type(value) is not int:
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise TypeError(
                    f"The value of {node.id!r} is a {type(value).__name__}, not an int"
                )
            value = int(value)  # numpy integers
        return value
    if isinstance(node, BinOp):
        op = node.op
        left = _eval(node.left, bindings)
        right = _eval(node.right, bindings)
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op == "/":
            return _eval_exact_div(left, right)
        if op == "**":
            return _eval_power(left, right)
        fn = _EVAL_INT_BINOPS.get(op)
        if fn is None:
            raise ExprError(f"Unknown operator {op!r}")
        return fn(left, right)
    if isinstance(node, UnaryOp):
        value = _eval(node.operand, bindings)
        return -value if node.op == "-" else value
    if isinstance(node, Call):
        func, args = node.func, node.args
        if len(args) == 1 and func in _EVAL_ROUNDING:
            return _EVAL_ROUNDING[func](_eval_rational(args[0], bindings))
        if func == "IntTrueDiv" and len(args) == 2:
            return _eval_exact_div(_eval(args[0], bindings), _eval(args[1], bindings))
        known = _EVAL_INT_FUNCTIONS.get(func)
        if known is None or not arity_ok(known[0], len(args)):
            raise ExprError(f"Cannot evaluate function {func} with {len(args)} argument(s)")
        return known[1](*[_eval(a, bindings) for a in args])
    raise TypeError(f"Not an expression tree node: {node!r}")


def _eval_rational(node: Node, bindings: Mapping[str, int]) -> Fraction:
    """Exact rational evaluation of the argument of a rounding function."""
    if not is_arith(node):
        return Fraction(_eval(node, bindings))
    if isinstance(node, UnaryOp):
        value = _eval_rational(node.operand, bindings)
        return -value if node.op == "-" else value
    if isinstance(node, Call):  # IntTrueDiv(a, b)
        left, right = (_eval_rational(a, bindings) for a in node.args)
        op = "/"
    else:
        op = node.op
        left = _eval_rational(node.left, bindings)
        if op == "**":
            exponent = _eval(node.right, bindings)
            if abs(exponent) > MAX_POW:
                raise ExprError(f"Exponent {exponent} is too large to evaluate")
            if exponent < 0 and left == 0:
                raise ZeroDivisionError("zero raised to a negative power")
            return left**exponent
        right = _eval_rational(node.right, bindings)
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        raise ZeroDivisionError("division by zero")
    return left / right


def evaluate_tree(tree: Node, bindings: Mapping[str, int]) -> int:
    """Evaluates a raw tree with integer values for its symbols (reference semantics).

    ``//`` and ``%`` floor like Python, ``/:`` and ``/`` require an exact quotient, ``^``/``&``
    are max/min. Inside ``floor``/``ceiling``/``FloorToInt``/``CeilToInt``/``TruncToInt`` the
    argument is evaluated as an exact rational, so ``floor(a/2)`` is ``a//2``.

    Raises:
        KeyError: a symbol has no value.
        ZeroDivisionError: a division or modulo by zero.
        InexactDivisionError: an inexact ``/:`` or ``/``.
        BroadcastError: incompatible ``broadcast`` arguments.
        ExprError: an unknown function.
    """
    return _eval(tree, bindings)
