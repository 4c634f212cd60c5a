"""Parser for dimension expressions: text -> raw tree -> canonical ``Dim``.

Three layers:

* :func:`parse_tree` tokenizes and parses text into a *raw tree* (:class:`Constant`,
  :class:`Name`, :class:`BinOp`, :class:`UnaryOp`, :class:`Call`) exactly as written, no
  simplification. Grammar and precedence follow the seed (low -> high)::

      ^  (max)  <  &  (min)  <  + -  <  * // /: % /  <  unary + -  <  **  <  atom

  Binary operators are left-associative except ``**`` (right-associative, binding tighter
  than a unary minus on its left, as in Python). ``-7//2`` is ``(-7)//2``; ``a^b+c`` is
  ``max(a, b+c)``.
* :func:`unparse` prints a raw tree back in the seed dialect with the fewest parentheses that
  keep the *same tree* (``parse_tree(unparse(t)) == t``).
* :func:`tree_to_dim` lowers a raw tree through the core constructors into the canonical
  ``Dim``, reading every spelling found in real models (seed, onnx-ir/SymPy, torch).

:func:`parse_expr` = lower(parse); :func:`parse_dim` never raises and turns any text that is
not an expression into one opaque symbol named by the text.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Callable, Mapping
from fractions import Fraction

from onnx_symdims.expr._atoms import (
    BroadcastError,
    ExprError,
    ExprSyntaxError,
    InexactDivisionError,
)
from onnx_symdims.expr._dimexpr import Dim, sym
from onnx_symdims.expr._divisions import ceildiv, exact_div, floordiv, mod
from onnx_symdims.expr._extremum import broadcast, call, dmax, dmin
from onnx_symdims.expr._ring import add, mul, neg, sub

logger = logging.getLogger(__name__)

__all__ = [
    "BinOp",
    "Call",
    "Constant",
    "MAX_TREE_DEPTH",
    "Name",
    "Node",
    "UnaryOp",
    "clear_parse_cache",
    "evaluate_tree",
    "parse_dim",
    "parse_expr",
    "parse_tree",
    "tree_names",
    "tree_to_dim",
    "unparse",
]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# Deeper trees (or deeper nesting of parentheses) are rejected so that parsing, lowering,
# printing and evaluation stay far below Python's recursion limit; real dimension
# expressions are a few levels deep.
MAX_TREE_DEPTH = 100

# Largest |exponent| expanded by ``**``; larger or symbolic exponents stay an opaque ``pow``.
MAX_POW = 32

# Bound on the memo caches; they are simply cleared when full (dims repeat a lot within one
# model, so a crude bound is enough and keeps memory flat over long runs).
_CACHE_LIMIT = 1 << 16


# --------------------------------------------------------------------------------------------
# Raw tree
# --------------------------------------------------------------------------------------------


class Node:
    """Base class of raw-tree nodes (immutable, structural equality)."""

    __slots__ = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Constant(Node):
    """Integer literal. The parser only produces non-negative values (``-3`` is a UnaryOp)."""

    value: int


@dataclasses.dataclass(frozen=True, slots=True)
class Name(Node):
    """A symbol reference such as ``batch`` or ``decoder_input_ids.45_dim_1``."""

    id: str


@dataclasses.dataclass(frozen=True, slots=True)
class BinOp(Node):
    """Binary operation; ``op`` is one of ``^ & + - * // /: % / **``."""

    op: str
    left: Node
    right: Node


@dataclasses.dataclass(frozen=True, slots=True)
class UnaryOp(Node):
    """Unary ``-`` or ``+``."""

    op: str
    operand: Node


@dataclasses.dataclass(frozen=True, slots=True)
class Call(Node):
    """Function call ``func(args...)``."""

    func: str
    args: tuple[Node, ...]


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

# One token per match, leading whitespace skipped; ``bad`` catches any other character so
# that one C-level ``findall`` scans the whole text. Digits and letters are ASCII only so that
# int() never sees a non-ASCII digit. Two-character operators come before their prefixes.
_TOKEN_RE = re.compile(
    r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_.]*)|(//|/:|\*\*|[-+*/%^&(),])|(\S))"
)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

_INT, _NAME, _OP, _END = 0, 1, 2, 3


def _position(text: str, index: int) -> int:
    """Character offset of token ``index`` (computed only for error messages)."""
    for i, m in enumerate(_TOKEN_RE.finditer(text)):
        if i == index:
            return m.end() - len(m.group(m.lastindex))  # type: ignore[arg-type]
    return len(text)


def _int_literal(digits: str, text: str) -> int:
    # int() refuses > 4300 digits; anything past 20 significant digits is too big anyway.
    significant = digits.lstrip("0")
    value = int(significant or "0") if len(significant) <= 20 else INT64_MAX + 2
    if value > INT64_MAX + 1:
        raise OverflowError(
            f"Integer literal {digits} is outside int64 in expression {text!r}"
        )
    return value


def _tokenize(text: str) -> list[tuple[int, object]]:
    """Splits ``text`` into ``(kind, value)`` tokens, ending with an END token.

    Raises:
        ExprSyntaxError: on a character that starts no token.
        OverflowError: on an integer literal larger than 2**63 (2**63 itself is let through
            so that ``-9223372036854775808`` can be written; the parser checks it).
    """
    tokens: list[tuple[int, object]] = []
    append = tokens.append
    for number, name, op, bad in _TOKEN_RE.findall(text):
        if op:
            append((_OP, op))
        elif name:
            append((_NAME, name))
        elif number:
            append((_INT, _int_literal(number, text)))
        else:
            raise ExprSyntaxError(
                f"Unexpected character {bad!r} at position {_position(text, len(tokens))} "
                f"in expression {text!r}"
            )
    append((_END, None))
    return tokens


# --------------------------------------------------------------------------------------------
# Parser (precedence climbing: one loop for the binary levels, recursion only for nesting)
# --------------------------------------------------------------------------------------------

# Binary precedence levels, low -> high. ``**`` is handled separately (right-associative).
_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({"^"}),
    frozenset({"&"}),
    frozenset({"+", "-"}),
    frozenset({"*", "//", "/:", "%", "/"}),
)
_UNARY_LEVEL = len(_LEVELS)  # 4
_POW_LEVEL = _UNARY_LEVEL + 1  # 5
_ATOM_LEVEL = _POW_LEVEL + 1  # 6
_BINARY_LEVEL: dict[str, int] = {op: i for i, ops in enumerate(_LEVELS) for op in ops}
_PRECEDENCE: dict[str, int] = {**_BINARY_LEVEL, "**": _POW_LEVEL}


class _Parser:
    """Precedence-climbing parser over a token list; methods return ``(node, depth)``.

    Long chains such as ``a+b+c+...`` are parsed by a loop; recursion happens only for
    parentheses, calls, unary operators and exponents, and that nesting is bounded so a
    hostile input gives an :class:`ExprSyntaxError`, never a ``RecursionError``.
    """

    __slots__ = ("nesting", "pos", "text", "tokens")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0
        self.nesting = 0

    def _error(self, message: str) -> ExprSyntaxError:
        kind, value = self.tokens[self.pos]
        found = "end of input" if kind == _END else repr(value)
        where = _position(self.text, self.pos)
        return ExprSyntaxError(
            f"{message}, found {found} at position {where} in expression {self.text!r}"
        )

    def _too_deep(self) -> ExprSyntaxError:
        return ExprSyntaxError(
            f"Expression nested deeper than {MAX_TREE_DEPTH} levels: {self.text[:80]!r}"
        )

    def _check_depth(self, depth: int) -> int:
        if depth > MAX_TREE_DEPTH:
            raise self._too_deep()
        return depth

    def _enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_TREE_DEPTH:
            raise self._too_deep()

    def _peek_op(self) -> object:
        kind, value = self.tokens[self.pos]
        return value if kind == _OP else None

    def parse(self) -> Node:
        node, _ = self._expr(0)
        if self.tokens[self.pos][0] != _END:
            raise self._error("Expected an operator or end of input")
        return node

    def _expr(self, min_level: int) -> tuple[Node, int]:
        left, depth = self._unary()
        while True:
            level = _BINARY_LEVEL.get(self._peek_op(), -1)  # type: ignore[arg-type]
            if level < min_level:
                return left, depth
            op = self.tokens[self.pos][1]
            self.pos += 1
            # Left-associative: the right operand only takes tighter operators.
            right, rdepth = self._expr(level + 1)
            left = BinOp(op, left, right)  # type: ignore[arg-type]
            depth = self._check_depth(max(depth, rdepth) + 1)

    def _unary(self) -> tuple[Node, int]:
        op = self._peek_op()
        if op not in ("-", "+"):
            return self._power()
        self.pos += 1
        kind, value = self.tokens[self.pos]
        if (
            op == "-"
            and kind == _INT
            and value == INT64_MAX + 1
            and self.tokens[self.pos + 1][1] != "**"
        ):
            # ``-9223372036854775808`` is INT64_MIN: the only place the literal 2**63 fits.
            self.pos += 1
            return UnaryOp("-", Constant(value)), 2
        self._enter()
        operand, depth = self._unary()
        self.nesting -= 1
        return UnaryOp(op, operand), self._check_depth(depth + 1)  # type: ignore[arg-type]

    def _power(self) -> tuple[Node, int]:
        base, depth = self._atom()
        if self._peek_op() != "**":
            return base, depth
        self.pos += 1
        # Python: the exponent is a unary expression, and ``**`` is right-associative.
        self._enter()
        exponent, edepth = self._unary()
        self.nesting -= 1
        return BinOp("**", base, exponent), self._check_depth(max(depth, edepth) + 1)

    def _atom(self) -> tuple[Node, int]:
        kind, value = self.tokens[self.pos]
        if kind == _INT:
            self.pos += 1
            if value > INT64_MAX:  # type: ignore[operator]
                raise OverflowError(
                    f"Integer literal {value} is outside int64 in expression {self.text!r}"
                )
            return Constant(value), 1  # type: ignore[arg-type]
        if kind == _NAME:
            self.pos += 1
            if self._peek_op() == "(":
                return self._call(value)  # type: ignore[arg-type]
            return Name(value), 1  # type: ignore[arg-type]
        if value == "(":
            self.pos += 1
            self._enter()
            node, depth = self._expr(0)
            self.nesting -= 1
            if self._peek_op() != ")":
                raise self._error("Expected ')'")
            self.pos += 1
            return node, depth
        raise self._error("Expected a number, a name or '('")

    def _call(self, func: str) -> tuple[Node, int]:
        self.pos += 1  # '('
        self._enter()
        args: list[Node] = []
        depth = 0
        if self._peek_op() != ")":
            while True:
                arg, adepth = self._expr(0)
                args.append(arg)
                depth = max(depth, adepth)
                if self._peek_op() != ",":
                    break
                self.pos += 1
            if self._peek_op() != ")":
                raise self._error(f"Expected ',' or ')' in the arguments of {func}")
        self.pos += 1
        self.nesting -= 1
        return Call(func, tuple(args)), self._check_depth(depth + 1)


def parse_tree(text: str) -> Node:
    """Parses ``text`` into a raw tree without any simplification.

    Args:
        text: the expression, e.g. ``"(a + b)//2"``; spaces are allowed anywhere between tokens.

    Returns:
        The raw tree.

    Raises:
        ExprSyntaxError: if ``text`` is not an expression (also when not a ``str``).
        OverflowError: if an integer literal is outside int64.
    """
    if not isinstance(text, str):
        raise ExprSyntaxError(f"Expected an expression string, got {type(text).__name__}")
    return _Parser(text).parse()


# --------------------------------------------------------------------------------------------
# Unparser (seed dialect, structure-preserving minimal parentheses)
# --------------------------------------------------------------------------------------------


def _precedence(node: Node) -> int:
    if isinstance(node, BinOp):
        return _PRECEDENCE[node.op]
    if isinstance(node, UnaryOp):
        return _UNARY_LEVEL
    if isinstance(node, Constant) and node.value < 0:
        return _UNARY_LEVEL  # printed with a leading '-': behaves like a unary minus
    return _ATOM_LEVEL


def _wrap(text: str, needed: bool) -> str:
    return f"({text})" if needed else text


def unparse(node: Node) -> str:
    """Prints a raw tree with the fewest parentheses that re-parse to the same tree.

    A left operand is parenthesised when it binds looser than its operator, a right operand
    when it binds looser *or equally* (all binary operators but ``**`` are left-associative, so
    ``a*(b//c)``, ``a-(b-c)`` and ``a*(b*c)`` keep their parentheses). No spaces.

    Args:
        node: a raw tree (from :func:`parse_tree`).

    Returns:
        The text, e.g. ``"a*(b//c)"``, ``"-(x//2)"``, ``"(a^b)+1"``.
    """
    if isinstance(node, Constant):
        return str(node.value)
    if isinstance(node, Name):
        return node.id
    if isinstance(node, BinOp):
        prec = _PRECEDENCE[node.op]
        left, right = node.left, node.right
        if node.op == "**":
            # Right-associative and tighter than unary: ``(-a)**b``, ``(a**b)**c``, ``a**-b``.
            ltext = _wrap(unparse(left), _precedence(left) <= prec)
            rtext = _wrap(unparse(right), _precedence(right) < _UNARY_LEVEL)
        else:
            ltext = _wrap(unparse(left), _precedence(left) < prec)
            rtext = _wrap(unparse(right), _precedence(right) <= prec)
        return f"{ltext}{node.op}{rtext}"
    if isinstance(node, UnaryOp):
        operand = node.operand
        return f"{node.op}{_wrap(unparse(operand), _precedence(operand) < _UNARY_LEVEL)}"
    if isinstance(node, Call):
        return f"{node.func}({','.join(unparse(a) for a in node.args)})"
    raise TypeError(f"Not an expression tree node: {node!r}")


def tree_names(node: Node) -> set[str]:
    """Returns the symbol names of a raw tree (function names excluded)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Name):
            names.add(n.id)
        elif isinstance(n, BinOp):
            stack.append(n.left)
            stack.append(n.right)
        elif isinstance(n, UnaryOp):
            stack.append(n.operand)
        elif isinstance(n, Call):
            stack.extend(n.args)
    return names


# --------------------------------------------------------------------------------------------
# Lowering to the canonical Dim
# --------------------------------------------------------------------------------------------
#
# ``/`` is read as exact division, node by node: ``a/b`` -> ``a /: b``. That is what our
# onnx printer writes for an exact quotient, so ``parse(to_onnx(e)) is e``. SymPy (onnx-ir)
# however writes ``(a+1)/2`` as ``a/2 + 1/2``, where a single term is not an integer. When an
# arithmetic sub-tree (+ - * / unary ``**``) cannot be read node by node because a quotient
# of constants does not divide, the whole sub-tree is re-read as one rational pair
# ``(numerator, denominator)`` and then turned into ``numerator /: denominator``. Arguments
# of ``floor``/``ceiling``/``FloorToInt``/``CeilToInt`` are always read as a rational pair, so
# ``floor(a/2 + 1/2)`` becomes ``(a+1)//2``.

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


# (fewest, most) arguments a known function takes; None = no upper limit.
_Arity = tuple[int, int | None]


def _arity_ok(arity: _Arity, n: int) -> bool:
    return arity[0] <= n and (arity[1] is None or n <= arity[1])


# Functions whose arguments are integers: name -> (arity, lowering).
_INT_FUNCTIONS: dict[str, tuple[_Arity, Callable[..., Dim]]] = {
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
    if not _arity_ok(arity, len(args)):
        raise ExprSyntaxError(f"{func} does not take {len(args)} argument(s)")
    return fn(*lowered)


class _NeedRational(Exception):
    """A quotient of constants in an arithmetic sub-tree does not divide (``1/2``)."""


def _is_arith(node: Node) -> bool:
    if isinstance(node, BinOp):
        return node.op in _ARITH_OPS
    if isinstance(node, UnaryOp):
        return True
    return isinstance(node, Call) and node.func == "IntTrueDiv" and len(node.args) == 2


_ARITH_OPS = frozenset({"+", "-", "*", "/", "**"})


def _lower_operand(node: Node) -> Dim:
    return _lower_structural(node) if _is_arith(node) else _lower(node)


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
    if _is_arith(node):
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


# --------------------------------------------------------------------------------------------
# Evaluation of a raw tree (brute-force reference semantics)
# --------------------------------------------------------------------------------------------


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

_EVAL_INT_FUNCTIONS: dict[str, tuple[_Arity, Callable[..., int]]] = {
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
        if known is None or not _arity_ok(known[0], len(args)):
            raise ExprError(f"Cannot evaluate function {func} with {len(args)} argument(s)")
        return known[1](*[_eval(a, bindings) for a in args])
    raise TypeError(f"Not an expression tree node: {node!r}")


def _eval_rational(node: Node, bindings: Mapping[str, int]) -> Fraction:
    """Exact rational evaluation of the argument of a rounding function."""
    if not _is_arith(node):
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


# --------------------------------------------------------------------------------------------
# Public entry points with memo caches
# --------------------------------------------------------------------------------------------

_EXPR_CACHE: dict[str, Dim] = {}
_DIM_CACHE: dict[str, Dim] = {}


def clear_parse_cache() -> None:
    """Empties the memo caches of :func:`parse_expr` and :func:`parse_dim`."""
    _EXPR_CACHE.clear()
    _DIM_CACHE.clear()


def _remember(cache: dict[str, Dim], text: str, value: Dim) -> Dim:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[text] = value
    return value


def parse_expr(text: str) -> Dim:
    """Parses an expression into its canonical ``Dim`` (memoized).

    Args:
        text: an expression in any supported dialect (seed, onnx-ir/SymPy, torch).

    Returns:
        An ``int`` or a canonical ``DimExpr`` (an unknown ``DimExpr`` with reason
        ``"overflow"`` when an intermediate result leaves int64).

    Raises:
        ExprSyntaxError: ``text`` is not an expression.
        OverflowError: an integer literal is outside int64.
        ZeroDivisionError, InexactDivisionError, BroadcastError: the expression is undefined
            for every value of its symbols (``a//0``, ``7/:2``, ``broadcast(2,3)``).
    """
    cached = _EXPR_CACHE.get(text)
    if cached is not None:
        return cached
    if isinstance(text, str) and _NAME_RE.fullmatch(text):  # the most common dim_param
        return _remember(_EXPR_CACHE, text, sym(text))
    return _remember(_EXPR_CACHE, text, _lower(parse_tree(text)))


def parse_dim(text: str) -> Dim:
    """Reads a ``dim_param``: an expression when it parses, else one opaque symbol.

    Never raises on a non-empty string: ``input:0_dim_0``, ``batch size``, ``?``, ``2d``,
    ``a//0`` all become ``sym(text)``, so that equal strings still denote the same dimension.
    The empty string names no dimension (an unnamed dim is not a symbol, and two unnamed
    dims are not equal): the caller decides what it stands for, so it is an error here.

    Args:
        text: the ``dim_param`` string.

    Returns:
        An ``int`` or a ``DimExpr``.

    Raises:
        TypeError: ``text`` is not a ``str``.
        ExprError: ``text`` is empty.
    """
    cached = _DIM_CACHE.get(text) if type(text) is str else None
    if cached is not None:
        return cached
    if not isinstance(text, str):
        raise TypeError(f"a dim_param is a str, got {type(text).__name__}")
    if not text:
        raise ExprError("an empty dim_param names no dimension (an unnamed dim)")
    try:
        value = parse_expr(text)
    except (ExprError, ArithmeticError) as e:
        logger.debug("dim_param %r is not an expression (%s): opaque symbol", text, e)
        value = sym(text)
    return _remember(_DIM_CACHE, text, value)
