"""Atoms: the multiplicative factors of a dim's monomials, and the algebra's groundwork.

A dimension is ``Dim = int | DimExpr`` (:mod:`._dimexpr`): a polynomial with integer
coefficients over *atoms*, which are symbols and opaque function terms (floor division,
modulo, exact division, max, min, broadcast, unknown calls). The canonical form is built
at construction: like terms are collected, constants folded, monomials and terms sorted by
a structural key, and every rewrite applied holds for **all** integer values of the symbols
(negative ones too). Structurally equal expressions are the same object, so equality and
hashing are O(1) identity checks.

This module holds what every part of the algebra shares: the limits, the errors, the atom
kinds, the interned :class:`Atom`, the memo of the operations, and :data:`late`, the table
through which a lower module reaches an operation of a higher one. The algebra's modules,
bottom up, each importing only from those before it:

* ``_atoms`` (this module), ``_dimexpr`` (the expression, interning, evaluation);
* ``_ring`` (``+ - *``), ``_extremum`` (max, min, broadcast, opaque calls),
  ``_divisions`` (``// % /:``), ``_sums`` (sum-level identities over function terms),
  ``_substitute`` (substitution, sub-expression replacement);
* then the printers (``_print``), the parser (``_parse``), ``_scope`` and ``_seed_api``.

The package ``__init__`` fills :data:`late` once, at import.
"""

from __future__ import annotations

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: A polynomial with more terms than this degrades to an unknown.
MAX_TERMS = 128
#: Function terms nested deeper than this degrade to an unknown.
MAX_DEPTH = 24
#: A monomial with more atoms than this (powers counted) degrades to an unknown: without
#: it a chain of reshapes multiplies one fresh symbol after another into a single product
#: whose size grows with the model (quadratic time and memory over the chain).
MAX_DEGREE = 16
#: Above this many arguments, max/min only fold constant differences (linear); the
#: pairwise scope proofs are quadratic and are skipped (keeping an argument is sound).
MAX_SCOPED_EXTREMUM_ARGS = 32


class ExprError(ValueError):
    """Base class of the algebra's errors."""


class ExprSyntaxError(ExprError):
    """The text is not an expression of the grammar."""


class BroadcastError(ExprError):
    """Two dims can never be broadcast together (e.g. 2 and 3)."""


class InexactDivisionError(ArithmeticError):
    """An exact division ``a /: b`` whose operands are known not to divide."""


# Atom kinds; the character also prefixes the structural sort key of function terms,
# so that symbols sort first (by name) and function terms after them.
SYM = "s"
FLOOR = "f"
MOD = "m"
EXACT = "e"
MAX = "x"
MIN = "n"
BCAST = "b"
CALL = "c"
_FUNCTION_KEY_PREFIX = "~"


class Atom:
    """A multiplicative factor of a monomial: a symbol or a function term.

    Atoms are interned: build them only through the module's constructors.
    """

    __slots__ = ("args", "depth", "key", "kind", "name", "size")

    kind: str
    name: str
    args: tuple  # the function's arguments (Dims); () for a symbol
    key: str
    depth: int
    size: int  # nodes in the atom's tree: 1 + the sizes of its arguments

    # Interned, so equality is identity and the (fast, C-level) identity hash is right.

    def __repr__(self) -> str:
        return f"Atom({self.key})"


_ATOMS: dict[tuple, Atom] = {}


def _dim_key(d) -> str:  # d: a Dim (an int or a DimExpr)
    return str(d) if isinstance(d, int) else d.key


def _make_atom(kind: str, name: str, args: tuple) -> Atom:
    cache_key = (kind, name, args)
    atom = _ATOMS.get(cache_key)
    if atom is not None:
        return atom
    atom = Atom()
    atom.kind = kind
    atom.name = name
    atom.args = args
    if kind == SYM:
        atom.key = name
        atom.depth = 0
        atom.size = 1
    else:
        inner = ",".join(_dim_key(a) for a in args)
        atom.key = f"{_FUNCTION_KEY_PREFIX}{kind}{name}({inner})"
        # A Dim that is not an int is a DimExpr (this module comes before that class).
        atom.depth = 1 + max((a.depth for a in args if not isinstance(a, int)), default=0)
        atom.size = 1 + sum(1 if isinstance(a, int) else a.size for a in args)
    _ATOMS[cache_key] = atom
    return atom


Monomial = tuple  # tuple[Atom, ...], sorted by Atom.key, repeated atoms are powers


_MONO_KEYS: dict[Monomial, str] = {}


def _mono_key(mono: Monomial) -> str:
    key = _MONO_KEYS.get(mono)
    if key is None:
        key = _MONO_KEYS[mono] = "*".join(a.key for a in mono)
    return key


class _Late:
    """Operations of the modules above, set once by the package ``__init__``.

    The algebra is mutually recursive: ``x + y`` may absorb an exact division whose
    canonical form multiplies sums again, a ``DimExpr`` operator is an operation of the
    ring or of the divisions, and ``str(e)`` is the printer's. Its modules still import
    one another in one direction only: a module reaches an operation *above* it through
    this table. An unset entry is an ``AttributeError`` (the table is filled before any
    expression exists).
    """

    __slots__ = (
        "absorb_exact_divisions",
        "add",
        "collapse_floor_identities",
        "exact_div",
        "floordiv",
        "fold_sum_into_extremum",
        "mod",
        "mul",
        "neg",
        "parse_expr",
        "sub",
        "to_onnx",
        "to_seed",
    )


#: The late-bound operations of the algebra (see :class:`_Late`).
late = _Late()


# ---------------------------------------------------------------------------------------
# The memo of the entry points (add, mul, floordiv, mod, exact_div, dmax, dmin, broadcast):
# shape inference repeats the same computations layer after layer, and interned operands
# make the memo key cheap to hash.
# ---------------------------------------------------------------------------------------
_MEMO: dict[tuple, object] = {}  # key -> the Dim result
_MEMO_LIMIT = 1 << 20


def _memoized(op: str, impl, a, b):
    key = (op, a, b)
    result = _MEMO.get(key)
    if result is None:
        result = impl(a, b)
        if isinstance(result, int) or result.unknown_reason is None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = result
    return result


#: Entries of one scope's memo (:attr:`Scope._scoped_memo`) before it starts over.
_SCOPED_MEMO_LIMIT = 50_000


def _memoized_scoped(kind: str, impl, args: tuple, scope: object | None):
    # A scope keeps the results computed under it in its own memo, which it empties when
    # a fact is added: they go with the scope (a scope lives for one model's inference)
    # instead of keeping it alive in the process-wide memo.
    memo = getattr(scope, "_scoped_memo", None)
    if memo is None:
        key = (kind, args, scope, getattr(scope, "version", None))
        result = _MEMO.get(key)
        if result is None:
            result = impl(args, scope)
            if isinstance(result, int) or result.unknown_reason is None:
                if len(_MEMO) >= _MEMO_LIMIT:
                    _MEMO.clear()
                _MEMO[key] = result
        return result
    key = (kind, args)
    result = memo.get(key)
    if result is None:
        version = scope.version  # type: ignore[attr-defined]
        result = impl(args, scope)
        if (
            isinstance(result, int) or result.unknown_reason is None
        ) and version == scope.version:  # type: ignore[attr-defined]
            if len(memo) >= _SCOPED_MEMO_LIMIT:
                memo.clear()
            memo[key] = result
    return result
