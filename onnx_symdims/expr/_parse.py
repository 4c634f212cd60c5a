"""Parser of dimension expressions: text -> raw tree -> canonical ``Dim`` (the public seam).

Everything the rest of the package reads from the parser is importable from here; the work
is done in four rooms, each readable on its own:

* :mod:`._lex`: the tokenizer (text -> tokens);
* :mod:`._parse_tree`: the raw tree, :func:`parse_tree` (tokens -> tree, exactly as
  written, with the seed grammar and precedence), :func:`unparse` (tree -> text with the
  fewest parentheses) and :func:`tree_names`;
* :mod:`._parse_lower`: :func:`tree_to_dim`, the lowering of a raw tree through the core
  constructors into the canonical ``Dim``, reading every spelling found in real models
  (seed, onnx-ir/SymPy, torch);
* :mod:`._parse_eval`: :func:`evaluate_tree`, the reference semantics of a raw tree.

This module adds the entry points and their policy: :func:`parse_expr` = lower(parse),
memoized, raising on text that is not an expression; :func:`parse_dim` never raises on a
non-empty ``dim_param`` and turns any text that is not an expression into one opaque symbol
named by the text.
"""

from __future__ import annotations

import logging

from onnx_symdims.expr._atoms import ExprError
from onnx_symdims.expr._dimexpr import Dim, sym
from onnx_symdims.expr._lex import NAME_RE
from onnx_symdims.expr._parse_eval import evaluate_tree
from onnx_symdims.expr._parse_lower import tree_to_dim
from onnx_symdims.expr._parse_tree import (
    MAX_TREE_DEPTH,
    BinOp,
    Call,
    Constant,
    Name,
    Node,
    UnaryOp,
    parse_tree,
    tree_names,
    unparse,
)

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

# Bound on the memo caches; they are simply cleared when full (dims repeat a lot within one
# model, so a crude bound is enough and keeps memory flat over long runs).
_CACHE_LIMIT = 1 << 16

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
    if isinstance(text, str) and NAME_RE.fullmatch(text):  # the most common dim_param
        return _remember(_EXPR_CACHE, text, sym(text))
    return _remember(_EXPR_CACHE, text, tree_to_dim(parse_tree(text)))


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
