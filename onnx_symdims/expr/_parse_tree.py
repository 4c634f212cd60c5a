"""The raw tree of a dimension expression: text -> tree -> text, exactly as written.

* :func:`parse_tree` parses the tokens of :mod:`._lex` into a *raw tree* (:class:`Constant`,
  :class:`Name`, :class:`BinOp`, :class:`UnaryOp`, :class:`Call`), no simplification. Grammar
  and precedence follow the seed (low -> high)::

      ^  (max)  <  &  (min)  <  + -  <  * // /: % /  <  unary + -  <  **  <  atom

  Binary operators are left-associative except ``**`` (right-associative, binding tighter
  than a unary minus on its left, as in Python). ``-7//2`` is ``(-7)//2``; ``a^b+c`` is
  ``max(a, b+c)``.
* :func:`unparse` prints a raw tree back in the seed dialect with the fewest parentheses that
  keep the *same tree* (``parse_tree(unparse(t)) == t``); :func:`tree_names` lists its symbols.
* :func:`is_arith` tells the arithmetic sub-trees (``+ - * / **``, unary, ``IntTrueDiv``)
  that the lowering (:mod:`._parse_lower`) and the evaluation (:mod:`._parse_eval`) may read
  as true quotients; ``MAX_POW`` and :func:`arity_ok` are their other shared limits.
"""

from __future__ import annotations

import dataclasses

from onnx_symdims.expr._atoms import INT64_MAX, ExprSyntaxError
from onnx_symdims.expr._lex import TOK_END, TOK_INT, TOK_NAME, TOK_OP, position, tokenize

__all__ = [
    "MAX_POW",
    "MAX_TREE_DEPTH",
    "Arity",
    "BinOp",
    "Call",
    "Constant",
    "Name",
    "Node",
    "UnaryOp",
    "arity_ok",
    "is_arith",
    "parse_tree",
    "tree_names",
    "unparse",
]

# Deeper trees (or deeper nesting of parentheses) are rejected so that parsing, lowering,
# printing and evaluation stay far below Python's recursion limit; real dimension
# expressions are a few levels deep.
MAX_TREE_DEPTH = 100

# Largest |exponent| expanded by ``**``; larger or symbolic exponents stay an opaque ``pow``.
MAX_POW = 32


# --------------------------------------------------------------------------------------------
# Raw tree
# --------------------------------------------------------------------------------------------


class Node:
    """Base class of raw-tree nodes: immutable, structural equality, dataclass-style repr.

    Written out rather than as ``@dataclass(frozen=True, slots=True)``: generating the
    five classes cost about 4 ms of every process's first parse (the cold start).
    """

    __slots__ = ()
    #: The field names, in order (positional arguments, repr).
    _fields: tuple[str, ...] = ()

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self._fields
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} arguments")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated {key!r}")
            values[key] = value
        if len(values) != len(names):
            raise TypeError(f"{type(self).__name__} needs {', '.join(names)}")
        for name in names:
            object.__setattr__(self, name, values[name])

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields)

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"


class Constant(Node):
    """Integer literal. The parser only produces non-negative values (``-3`` is a UnaryOp)."""

    _fields = ("value",)
    __slots__ = _fields
    value: int


class Name(Node):
    """A symbol reference such as ``batch`` or ``decoder_input_ids.45_dim_1``."""

    _fields = ("id",)
    __slots__ = _fields
    id: str


class BinOp(Node):
    """Binary operation; ``op`` is one of ``^ & + - * // /: % / **``."""

    _fields = ("op", "left", "right")
    __slots__ = _fields
    op: str
    left: Node
    right: Node


class UnaryOp(Node):
    """Unary ``-`` or ``+``."""

    _fields = ("op", "operand")
    __slots__ = _fields
    op: str
    operand: Node


class Call(Node):
    """Function call ``func(args...)``."""

    _fields = ("func", "args")
    __slots__ = _fields
    func: str
    args: tuple[Node, ...]


# Shared by the lowering and the evaluation: which sub-trees may be true quotients, and the
# arity of the known functions.

_ARITH_OPS = frozenset({"+", "-", "*", "/", "**"})


def is_arith(node: Node) -> bool:
    """Whether ``node`` is an arithmetic sub-tree (``+ - * / **``, unary, ``IntTrueDiv``)."""
    if isinstance(node, BinOp):
        return node.op in _ARITH_OPS
    if isinstance(node, UnaryOp):
        return True
    return isinstance(node, Call) and node.func == "IntTrueDiv" and len(node.args) == 2


# (fewest, most) arguments a known function takes; None = no upper limit.
Arity = tuple[int, int | None]


def arity_ok(arity: Arity, n: int) -> bool:
    """Whether a function of ``arity`` may be called with ``n`` arguments."""
    return arity[0] <= n and (arity[1] is None or n <= arity[1])


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
        self.tokens = tokenize(text)
        self.pos = 0
        self.nesting = 0

    def _error(self, message: str) -> ExprSyntaxError:
        kind, value = self.tokens[self.pos]
        found = "end of input" if kind == TOK_END else repr(value)
        where = position(self.text, self.pos)
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
        return value if kind == TOK_OP else None

    def parse(self) -> Node:
        node, _ = self._expr(0)
        if self.tokens[self.pos][0] != TOK_END:
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
            and kind == TOK_INT
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
        if kind == TOK_INT:
            self.pos += 1
            if value > INT64_MAX:  # type: ignore[operator]
                raise OverflowError(
                    f"Integer literal {value} is outside int64 in expression {self.text!r}"
                )
            return Constant(value), 1  # type: ignore[arg-type]
        if kind == TOK_NAME:
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
