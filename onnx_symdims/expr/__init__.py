"""The dimension algebra: canonical symbolic integer expressions.

Imports nothing from onnx. A dim is ``int | DimExpr``; see :mod:`._core` for the
canonical form, :mod:`._scope` for assumptions, :mod:`._print` and
:mod:`._parse` for the spellings, and :mod:`._seed_api` for the string API
compatible with the seed library.
"""

from __future__ import annotations

from onnx_symdims.expr._core import (
    BroadcastError,
    Dim,
    DimExpr,
    ExprError,
    ExprSyntaxError,
    InexactDivisionError,
    add,
    as_int,
    broadcast,
    call,
    ceildiv,
    coefficients,
    dmax,
    dmin,
    evaluate,
    exact_div,
    floordiv,
    is_symbolic,
    mod,
    mul,
    neg,
    replace_subexpressions,
    sub,
    substitute,
    sym,
    unknown,
)
from onnx_symdims.expr._print import to_onnx, to_seed
from onnx_symdims.expr._scope import DIM_SCOPE, Scope

__all__ = [
    "DIM_SCOPE",
    "BroadcastError",
    "Dim",
    "DimExpr",
    "ExprError",
    "ExprSyntaxError",
    "InexactDivisionError",
    "Scope",
    "add",
    "as_int",
    "broadcast",
    "call",
    "ceildiv",
    "coefficients",
    "dmax",
    "dmin",
    "evaluate",
    "exact_div",
    "floordiv",
    "is_symbolic",
    "mod",
    "mul",
    "neg",
    "replace_subexpressions",
    "sub",
    "substitute",
    "sym",
    "to_onnx",
    "to_seed",
    "unknown",
]

try:  # the parser and the seed API are separate modules
    from onnx_symdims.expr._parse import parse_dim, parse_expr, parse_tree, unparse

    __all__ += ["parse_dim", "parse_expr", "parse_tree", "unparse"]
except ImportError:  # pragma: no cover - transitional while the parser lands
    pass
