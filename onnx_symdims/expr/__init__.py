"""The dimension algebra: canonical symbolic integer expressions.

Imports nothing from onnx. A dim is ``int | DimExpr``; the canonical form is described in
:mod:`._atoms` and built by :mod:`._dimexpr` (the expression), :mod:`._ring` (``+ - *``),
:mod:`._extremum` (max, min, broadcast), :mod:`._divisions` (``// % /:``), :mod:`._sums`
(sum-level identities) and :mod:`._substitute`; :mod:`._scope` holds assumptions and
:mod:`._guards` the scope-aware removal of redundant ``min(1, X)`` guards,
:mod:`._print` and :mod:`._parse` the spellings (the parser's rooms: :mod:`._lex`,
:mod:`._parse_tree`, :mod:`._parse_lower`, :mod:`._parse_eval`), and :mod:`._seed_api` the
string API compatible with the seed library. Code outside this package imports from here only.
"""

from __future__ import annotations

from onnx_symdims.expr import _atoms, _divisions, _parse, _print, _ring, _sums
from onnx_symdims.expr._atoms import (
    BroadcastError,
    ExprError,
    ExprSyntaxError,
    InexactDivisionError,
)
from onnx_symdims.expr._compile import evaluator
from onnx_symdims.expr._dimexpr import (
    Dim,
    DimExpr,
    as_int,
    coefficients,
    evaluate,
    is_symbolic,
    sym,
    unknown,
    unknowns_made,
)
from onnx_symdims.expr._divisions import ceildiv, exact_div, floordiv, mod, truncdiv
from onnx_symdims.expr._extremum import broadcast, call, dmax, dmin
from onnx_symdims.expr._guards import drop_zero_guards
from onnx_symdims.expr._monotone import symbol_bound_from_lower
from onnx_symdims.expr._parse import (
    BinOp,
    Call,
    Constant,
    Name,
    Node,
    UnaryOp,
    clear_parse_cache,
    evaluate_tree,
    parse_dim,
    parse_expr,
    parse_tree,
    tree_to_dim,
    unparse,
)
from onnx_symdims.expr._print import to_onnx, to_seed
from onnx_symdims.expr._ring import add, mul, neg, sub
from onnx_symdims.expr._scope import DIM_SCOPE, Scope
from onnx_symdims.expr._seed_api import (
    DimType,
    clear_caches,
    compare_expressions,
    dim_add,
    dim_div,
    dim_exact_div,
    dim_max,
    dim_min,
    dim_mod,
    dim_mul,
    dim_multi_mul,
    dim_sub,
    evaluate_expression,
    parse_expression,
    parse_expression_tokens,
    rename_dynamic_dimensions,
    rename_dynamic_expression,
    rename_expression,
    simplify_expression,
    simplify_two_expressions,
)
from onnx_symdims.expr._substitute import (
    SubexpressionReplacer,
    replace_subexpressions,
    substitute,
)

__all__ = [
    "DIM_SCOPE",
    "BroadcastError",
    "Dim",
    "DimExpr",
    "ExprError",
    "ExprSyntaxError",
    "InexactDivisionError",
    "Scope",
    "SubexpressionReplacer",
    "add",
    "as_int",
    "broadcast",
    "call",
    "ceildiv",
    "coefficients",
    "dmax",
    "dmin",
    "drop_zero_guards",
    "evaluate",
    "evaluator",
    "exact_div",
    "floordiv",
    "is_symbolic",
    "mod",
    "mul",
    "neg",
    "replace_subexpressions",
    "sub",
    "substitute",
    "symbol_bound_from_lower",
    "sym",
    "to_onnx",
    "to_seed",
    "truncdiv",
    "unknown",
    "unknowns_made",
]

__all__ += [
    "BinOp",
    "Call",
    "Constant",
    "DimType",
    "Name",
    "Node",
    "UnaryOp",
    "clear_caches",
    "clear_parse_cache",
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
    "evaluate_tree",
    "parse_dim",
    "parse_expr",
    "parse_expression",
    "parse_expression_tokens",
    "parse_tree",
    "rename_dynamic_dimensions",
    "rename_dynamic_expression",
    "rename_expression",
    "simplify_expression",
    "simplify_two_expressions",
    "tree_to_dim",
    "unparse",
]


def _wire_late_operations() -> None:
    """Fills :data:`._atoms.late`: the operations a lower module reaches upward.

    Here, once, before any expression is built: the core modules never import their
    printers, parser or the modules above them.
    """
    late = _atoms.late
    late.add, late.sub, late.mul, late.neg = _ring.add, _ring.sub, _ring.mul, _ring.neg
    late.floordiv, late.mod = _divisions.floordiv, _divisions.mod
    late.exact_div = _divisions.exact_div
    late.absorb_exact_divisions = _sums._absorb_exact_divisions
    late.collapse_floor_identities = _sums._collapse_floor_identities
    late.fold_sum_into_extremum = _sums._fold_sum_into_extremum
    late.to_onnx, late.to_seed = _print.to_onnx, _print.to_seed
    late.parse_expr = _parse.parse_expr


_wire_late_operations()
