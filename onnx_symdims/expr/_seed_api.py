"""Seed-compatible string API over the canonical algebra.

The functions keep the names and calling conventions of the seed library
(``simplify_expression``, ``dim_add``, ``rename_dynamic_dimensions``, ...) but every result
comes from the canonical ``DimExpr`` algebra, so the seed's bugs cannot happen: output is
printed structurally (``a*(b//c)`` keeps its parentheses), ``%`` and ``//`` floor everywhere,
``7/:2`` raises instead of folding, and nothing wraps around int64.

Conventions shared by all functions:

* A dimension is ``int | str``; a result that reduces to a constant is an ``int`` (never the
  string ``"0"``), otherwise a canonical string in the seed dialect (``^`` max, ``&`` min,
  ``/:`` exact division).
* A literal or a result outside int64 raises :class:`OverflowError`.
* Text that is not an expression raises :class:`ExprSyntaxError`, except in
  :func:`simplify_expression` and :func:`rename_dynamic_expression`, which return it unchanged
  (seed behaviour), and :func:`parse_expression_tokens`, which returns ``{text}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from onnx_symdims.expr._atoms import (
    INT64_MAX,
    INT64_MIN,
    ExprError,
    ExprSyntaxError,
    InexactDivisionError,
)
from onnx_symdims.expr._dimexpr import Dim, DimExpr, coefficients
from onnx_symdims.expr._divisions import exact_div, floordiv, mod
from onnx_symdims.expr._extremum import dmax, dmin
from onnx_symdims.expr._parse import (
    Constant,
    Name,
    Node,
    UnaryOp,
    clear_parse_cache,
    evaluate_tree,
    parse_dim,
    parse_expr,
    parse_tree,
    tree_names,
)
from onnx_symdims.expr._parse import unparse as _unparse_tree
from onnx_symdims.expr._print import to_seed
from onnx_symdims.expr._ring import add, mul, sub
from onnx_symdims.expr._scope import Scope
from onnx_symdims.expr._substitute import replace_subexpressions
from onnx_symdims.expr._tree_rename import collapse_broadcasts, rename_tree, tree_constant

logger = logging.getLogger(__name__)

__all__ = [
    "DimType",
    "clear_caches",
    "compare_expressions",
    "dim_add",
    "dim_div",
    "dim_exact_div",
    "dim_max",
    "dim_min",
    "dim_mod",
    "dim_mul",
    "dim_multi_mul",
    "dim_sub",
    "evaluate_expression",
    "parse_expression",
    "parse_expression_tokens",
    "rename_dynamic_dimensions",
    "rename_dynamic_expression",
    "rename_expression",
    "simplify_expression",
    "simplify_two_expressions",
    "unparse",
]

DimType = int | str

# compare_expressions assumes every name is a tensor dim (>= 0). A private instance so that
# facts other modules add to a shared scope never leak into this stateless API.
_NONNEGATIVE = Scope(nonnegative=True)


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------


def _check_int64(value: int, what: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise OverflowError(f"{what} {value} is outside int64")
    return value


def _to_dim(value: DimType | DimExpr) -> Dim:
    """Parses an operand of the string API (raises on bad text, int64 overflow)."""
    if isinstance(value, bool):
        raise TypeError("a dimension is an int or a str, not a bool")
    if isinstance(value, int):
        return _check_int64(value, "Dimension")
    if isinstance(value, DimExpr):
        return value
    if isinstance(value, str):
        return parse_expr(value)
    raise TypeError(f"a dimension is an int or a str, got {type(value).__name__}")


def _is_unknown(d: Dim) -> bool:
    return isinstance(d, DimExpr) and d.unknown_reason is not None


def _to_text(d: Dim, context: str) -> DimType:
    """Prints a result: ``int`` when constant, else the seed dialect.

    Raises:
        OverflowError: the result left int64.
        ExprError: the result is past the algebra's size guard.
    """
    if isinstance(d, int):
        return _check_int64(d, f"Result of {context}:")
    if d.unknown_reason == "overflow":
        raise OverflowError(f"Result of {context} is outside int64")
    if d.unknown_reason is not None:
        raise ExprError(f"Result of {context} is unknown ({d.unknown_reason})")
    return to_seed(d)


def _binary_text(a: DimType, op: str, b: DimType) -> str:
    """The unsimplified ``(a)op(b)``: a correct answer when simplification gives up."""
    return f"({a}){op}({b})"


# Memo of the symbolic dim_* operations: shape inference repeats the same arithmetic on the
# same dims in every block of a model. Keys are the operands as given (str or int), values
# the results; only successful results are stored.
_OP_CACHE: dict[tuple, DimType] = {}
_OP_CACHE_LIMIT = 1 << 16


def clear_caches() -> None:
    """Empties the memo of the ``dim_*`` operations and the parser's memo."""
    _OP_CACHE.clear()
    clear_parse_cache()


def _dim_op(a: DimType, b: DimType, op: str, fn) -> DimType:
    key = (op, type(a), a, type(b), b)  # types too: 1.0 == 1 must not hit the int entry
    try:
        cached = _OP_CACHE.get(key)
    except TypeError:  # unhashable operand: let _to_dim report it
        cached = None
    if cached is not None:
        return cached
    result = fn(_to_dim(a), _to_dim(b))
    if _is_unknown(result) and result.unknown_reason != "overflow":
        # Past the size guard: the unsimplified text is still exact.
        text: DimType = _binary_text(a, op, b)
    else:
        text = _to_text(result, f"{a!r} {op} {b!r}")
    if len(_OP_CACHE) >= _OP_CACHE_LIMIT:
        _OP_CACHE.clear()
    _OP_CACHE[key] = text
    return text


# --------------------------------------------------------------------------------------------
# Simplification, comparison, evaluation
# --------------------------------------------------------------------------------------------


def simplify_expression(expr: DimType) -> DimType:
    """Returns the canonical form of an expression.

    Args:
        expr: an expression such as ``"2*batch//batch"`` or ``"CeilToInt(seq, 8)"``.

    Returns:
        An ``int`` when the expression is constant (``"2*batch//batch"`` -> ``2``), else the
        canonical seed-dialect text (``"a+b-a"`` -> ``"b"``). Text that is not an expression
        (e.g. an ONNX name with ``::``) is returned unchanged.

    Raises:
        TypeError: ``expr`` is neither an ``int`` nor a ``str`` (``None``, ``1.5``, bytes).
        OverflowError: a literal or the result is outside int64.
        InexactDivisionError: an exact division of constants does not divide (``7/:2``).
        ZeroDivisionError: a division by the constant 0.
        BroadcastError: ``broadcast`` of two different constants other than 1.
    """
    if isinstance(expr, int) and not isinstance(expr, bool):
        return _check_int64(expr, "Dimension")
    if not isinstance(expr, str):
        raise TypeError(f"an expression is an int or a str, got {type(expr).__name__}")
    try:
        d = parse_expr(expr)
    except ExprSyntaxError:
        return expr
    if _is_unknown(d) and d.unknown_reason != "overflow":
        logger.debug("simplify_expression(%r): too large to simplify, kept as is", expr)
        return expr
    return _to_text(d, f"simplify_expression({expr!r})")


def simplify_two_expressions(expr1: DimType, expr2: DimType) -> dict[str, int]:
    """Coefficients of ``expr1 - expr2`` without the constant term.

    Example: ``simplify_two_expressions("x+1", "y") == {"x": 1, "y": -1}``; an empty dict
    means the two differ by a constant.

    Raises:
        ExprSyntaxError: an operand is not an expression.
        OverflowError: a literal or coefficient is outside int64.
    """
    diff = sub(_to_dim(expr1), _to_dim(expr2))
    if isinstance(diff, DimExpr) and diff.unknown_reason is not None:
        _to_text(diff, f"{expr1!r} - {expr2!r}")
    monomials, _ = coefficients(diff)
    return {to_seed(m): c for m, c in monomials.items()}


def compare_expressions(expr1: DimType, expr2: DimType) -> tuple[str, DimType]:
    """Compares two dims assuming every name is ``>= 0``.

    Returns:
        ``(result, difference)``: ``result`` is ``"Equal"``, ``"Greater"`` (expr1 > expr2),
        ``"Smaller"`` (expr1 < expr2) or ``"Unknown"``; ``difference`` is the simplified
        ``expr2 - expr1``.

    Raises:
        ExprSyntaxError: an operand is not an expression.
        OverflowError: a literal or the difference is outside int64.
    """
    a, b = _to_dim(expr1), _to_dim(expr2)
    difference = _to_text(sub(b, a), f"{expr2!r} - {expr1!r}")
    return _NONNEGATIVE.compare(a, b), difference


def evaluate_expression(expr: DimType, context: Mapping[str, int]) -> int:
    """Evaluates an expression exactly as written (no simplification).

    ``//`` and ``%`` floor like Python (``"-7%3"`` -> 2), ``/:`` (and ``/``) require an exact
    quotient, ``^``/``&`` are max/min; ``Max``/``max``/``Min``/``min``/``CeilToInt``/
    ``broadcast`` and the other functions :func:`parse_expr` knows are evaluated too
    (``floor(a/2)`` evaluates its argument as an exact rational).

    Raises:
        ExprSyntaxError: ``expr`` is not an expression.
        KeyError: a name has no value in ``context``.
        TypeError: a value in ``context`` is not an integer (``3.5``, ``True``).
        ZeroDivisionError: a division or modulo by zero.
        InexactDivisionError: an exact division does not divide.
        BroadcastError: incompatible broadcast arguments.
        ExprError: a function that cannot be evaluated.
        OverflowError: a literal or the result is outside int64.
    """
    if isinstance(expr, int) and not isinstance(expr, bool):
        return _check_int64(expr, "Dimension")
    value = evaluate_tree(parse_tree(expr), context)
    return _check_int64(value, f"Value of {expr!r}:")


def parse_expression(expr: str) -> Node:
    """Parses ``expr`` into a raw tree, without simplification (see ``_parse``)."""
    return parse_tree(expr)


def unparse(tree: Node) -> str:
    """Prints a raw tree in the seed dialect with minimal parentheses, no spaces."""
    return _unparse_tree(tree)


# --------------------------------------------------------------------------------------------
# Renaming
# --------------------------------------------------------------------------------------------


def parse_expression_tokens(expr: str) -> set[str]:
    """The names used in ``expr`` (function names excluded); ``{expr}`` if it does not parse."""
    try:
        return tree_names(parse_tree(expr))
    except (ExprSyntaxError, OverflowError):
        return {expr}


def _target(value: DimType | DimExpr) -> Dim:
    if isinstance(value, str):
        return parse_dim(value)
    return _to_dim(value)


def _target_tree(value: DimType | DimExpr) -> Node:
    """The raw tree a rename target stands for (text that is no expression: one name)."""
    if isinstance(value, str):
        try:
            return parse_tree(value)
        except (ExprSyntaxError, OverflowError):
            return Name(value)
    if isinstance(value, DimExpr):
        return parse_tree(_to_text(value, "a rename target"))  # type: ignore[arg-type]
    v = _to_dim(value)
    assert isinstance(v, int)
    return Constant(v) if v >= 0 else UnaryOp("-", Constant(-v))


def _tree_result(tree: Node) -> DimType:
    value = tree_constant(tree)
    return value if value is not None else _unparse_tree(tree)


def rename_expression(expr: DimType, mapping: Mapping[str, DimType]) -> DimType:
    """Renames the leaf names of ``expr`` simultaneously, keeping everything else as written.

    Structure-preserving: the parse tree keeps its order and structure, nothing is
    re-simplified; only calls are spelled in the seed dialect (``Max(a, b)`` -> ``a^b``,
    ``Min`` -> ``&``). Renames are simultaneous, never chained:
    ``rename_expression("a-b", {"a": "b", "b": "a"}) == "b-a"`` and
    ``rename_expression("s10^s3", {"s10": "E", "s3": "D"}) == "E^D"``.

    Args:
        expr: the expression.
        mapping: old name -> new name; a target that is an expression replaces the leaf as
            one sub-tree (``{"n": "a+1"}`` turns ``2*n`` into ``2*(a+1)``).

    Returns:
        The renamed text (no spaces), or an ``int`` when it is an integer literal.

    Raises:
        ExprSyntaxError: ``expr`` is not an expression.
        OverflowError: a literal is outside int64.
    """
    if isinstance(expr, int) and not isinstance(expr, bool):
        return _check_int64(expr, "Dimension")
    if isinstance(expr, DimExpr):
        expr = _to_text(expr, "rename_expression")  # type: ignore[assignment]
        if isinstance(expr, int):
            return expr
    tree = parse_tree(expr)  # raises ExprSyntaxError / OverflowError, also on a non-str
    targets = {k: _target_tree(v) for k, v in mapping.items()}
    return _tree_result(rename_tree(tree, targets))


def _compound_keys(replacements: Mapping[str, DimType]) -> tuple[dict, dict]:
    """Splits the keys into leaf names and compound expressions (both parsed)."""
    leaves: dict[str, DimType] = {}
    compound: dict[DimExpr, Dim] = {}
    for key, value in replacements.items():
        k = parse_dim(key) if isinstance(key, str) and key else key
        if not isinstance(k, DimExpr) or k.unknown_reason is not None:
            continue
        if k.is_symbol:
            leaves[k.name] = value  # type: ignore[index]
            continue
        try:
            compound[k] = _target(value)
        except (ExprError, ArithmeticError):
            continue
    return leaves, compound


def rename_dynamic_expression(expr: DimType, replacements: Mapping[str, DimType]) -> DimType:
    """Best-effort renaming during shape inference; never raises on its input.

    Leaf renames keep the structure, as :func:`rename_expression` does, and
    ``broadcast(x, x)`` collapses to ``x``. Keys may also be compound expressions: a
    sub-expression equal to such a key *modulo the canonical form* is replaced
    (``seq+past_seq`` matches the key ``past_seq+seq``, also as a sub-sum of
    ``past_seq+seq+1``); when one does match, the result is the canonical form of the
    whole renamed expression. Text that does not parse, keys that are not expressions and
    results that cannot be represented leave ``expr`` unchanged.

    Returns:
        The renamed text, an ``int`` when constant, or ``expr`` itself.
    """
    try:
        leaves, compound = _compound_keys(replacements)
    except (ExprError, ArithmeticError, TypeError):
        return expr
    if compound:
        try:
            d = _to_dim(expr)
            if replace_subexpressions(d, compound) is not d:
                mapping = dict(compound)
                for name, value in leaves.items():
                    mapping[parse_dim(name)] = _target(value)  # type: ignore[index]
                return _to_text(
                    replace_subexpressions(d, mapping), "rename_dynamic_expression"
                )
        except (ExprError, ArithmeticError, TypeError):
            return expr
    try:
        text = (
            _to_text(expr, "rename_dynamic_expression") if isinstance(expr, DimExpr) else expr
        )
        if not isinstance(text, str):
            return expr
        tree = parse_tree(text)
        targets = {k: _target_tree(v) for k, v in leaves.items()}
        return _tree_result(collapse_broadcasts(rename_tree(tree, targets)))
    except (ExprError, ArithmeticError, TypeError):
        return expr


def rename_dynamic_dimensions(
    constraints: Mapping[str, Iterable[str]],
    original: Iterable[str],
    ban_prefix: str | None = "DYN",
) -> dict[str, str]:
    """Maps every internal dim name to its canonical user-visible equivalent.

    ``constraints[k]`` is a set of names known equal to ``k``; equalities are closed
    transitively (union-find), so chains of any length collapse. In each class the target is
    the byte-order smallest name of ``original`` that does not start with ``ban_prefix``
    (torch.export names ``Dim.DYNAMIC`` dims ``DYN0``...; the ban filters them out as targets
    but another preferred name in the class is still chosen). A name of ``original`` is never
    renamed; it maps to itself. The result does not depend on iteration order.

    Args:
        constraints: name -> names known to be equal to it.
        original: preferred (user-visible) names.
        ban_prefix: names with this prefix are never targets; ``None`` or ``""`` bans nothing.

    Returns:
        ``{name: canonical}``, containing the identity on ``original``.
    """
    preferred = set(original)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for key, values in constraints.items():
        root = find(key)
        for v in values:
            other = find(v)
            if other != root:
                parent[other] = root

    classes: dict[str, list[str]] = {}
    for name in parent:
        classes.setdefault(find(name), []).append(name)

    renames = {name: name for name in preferred}
    for members in classes.values():
        candidates = [
            m
            for m in members
            if m in preferred and not (ban_prefix and m.startswith(ban_prefix))
        ]
        if not candidates:
            continue
        # Python orders str by code point, which is the UTF-8 byte order.
        target = min(candidates)
        for m in members:
            if m not in preferred:
                renames[m] = target
    return dict(sorted(renames.items()))


# --------------------------------------------------------------------------------------------
# Dimension arithmetic
# --------------------------------------------------------------------------------------------


def _both_ints(a: DimType, b: DimType) -> bool:
    return (
        isinstance(a, int)
        and isinstance(b, int)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    )


def dim_add(a: DimType, b: DimType) -> DimType:
    """``a + b`` (``dim_add("batch", 1) == "batch+1"``)."""
    if _both_ints(a, b):
        return _check_int64(_check_int64(a, "Dimension") + _check_int64(b, "Dimension"), "Sum")
    return _dim_op(a, b, "+", add)


def dim_sub(a: DimType, b: DimType) -> DimType:
    """``a - b``."""
    if _both_ints(a, b):
        return _check_int64(
            _check_int64(a, "Dimension") - _check_int64(b, "Dimension"), "Difference"
        )
    return _dim_op(a, b, "-", sub)


def dim_mul(a: DimType, b: DimType) -> DimType:
    """``a * b``."""
    if _both_ints(a, b):
        return _check_int64(
            _check_int64(a, "Dimension") * _check_int64(b, "Dimension"), "Product"
        )
    return _dim_op(a, b, "*", mul)


def dim_div(a: DimType, b: DimType) -> DimType:
    """Floor division ``a // b`` (``dim_div(-7, 2) == -4``; ``dim_div("2*n", "n") == 2``).

    Raises:
        ZeroDivisionError: ``b`` is 0.
    """
    if _both_ints(a, b):
        return _check_int64(
            _check_int64(a, "Dimension") // _check_int64(b, "Dimension"), "Quotient"
        )
    return _dim_op(a, b, "//", floordiv)


def dim_exact_div(a: DimType, b: DimType) -> DimType:
    """Exact division ``a /: b`` (``dim_exact_div("batch*4", 2) == "2*batch"``).

    Raises:
        ZeroDivisionError: ``b`` is 0.
        InexactDivisionError: both are ints and ``b`` does not divide ``a``.
    """
    if _both_ints(a, b):
        a, b = _check_int64(a, "Dimension"), _check_int64(b, "Dimension")
        if b == 0:
            raise ZeroDivisionError(f"dim_exact_div({a}, 0)")
        q, r = divmod(a, b)
        if r:
            raise InexactDivisionError(f"dim_exact_div({a}, {b}): {b} does not divide {a}")
        return _check_int64(q, "Quotient")
    return _dim_op(a, b, "/:", exact_div)


def dim_mod(a: DimType, b: DimType) -> DimType:
    """Floor modulo ``a % b`` with the sign of ``b`` (``dim_mod(-7, 3) == 2``).

    Raises:
        ZeroDivisionError: ``b`` is 0.
    """
    if _both_ints(a, b):
        return _check_int64(a, "Dimension") % _check_int64(b, "Dimension")
    return _dim_op(a, b, "%", mod)


def dim_max(a: DimType, b: DimType) -> DimType:
    """``max(a, b)`` (no sign assumption: ``dim_max("x", 0)`` stays ``"x^0"``-like)."""
    if _both_ints(a, b):
        return max(_check_int64(a, "Dimension"), _check_int64(b, "Dimension"))
    return _dim_op(a, b, "^", dmax)


def dim_min(a: DimType, b: DimType) -> DimType:
    """``min(a, b)``."""
    if _both_ints(a, b):
        return min(_check_int64(a, "Dimension"), _check_int64(b, "Dimension"))
    return _dim_op(a, b, "&", dmin)


def dim_multi_mul(dims: Iterable[DimType]) -> DimType:
    """Product of all ``dims`` (1 for none); ``int`` when every factor is an int."""
    dims = list(dims)
    if all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        product = 1
        for d in dims:
            product *= _check_int64(d, "Dimension")
        return _check_int64(product, "Product")
    result: Dim = 1
    for d in dims:
        result = mul(result, _to_dim(d))
    if _is_unknown(result) and result.unknown_reason != "overflow":
        return "*".join(f"({d})" for d in dims)
    return _to_text(result, f"dim_multi_mul({dims!r})")
