"""The two spellings of a canonical expression.

* :func:`to_onnx` — written into ``dim_param``: Python/SymPy arithmetic that
  ``onnx_ir.SymbolicDim`` re-parses (``batch+1``, ``2*seq``, ``(H-1)//2``,
  ``max(a,b)``, ``min(a,b)``, ``a%3``, exact division as ``a/2``). The one
  exception is ``broadcast(a,b)``, which no peer grammar can express.
* :func:`to_seed` — the seed ("xexpressions") dialect: ``a^b`` max, ``a&b``
  min, ``a/:b`` exact division.

Both put parentheses exactly where the precedence needs them, so that
``parse(print(e)) is e``.

Example::

    >>> from onnx_symdims.expr import sym, dmax, to_onnx, to_seed
    >>> a, b = sym("a"), sym("b")
    >>> to_onnx(dmax(a, b) + 1), to_seed(dmax(a, b) + 1)
    ('max(a,b)+1', '(a^b)+1')
    >>> to_onnx(a * (b // 2))
    'a*(b//2)'
"""

from __future__ import annotations

from onnx_symdims.expr import _core
from onnx_symdims.expr._core import Atom, Dim, DimExpr

__all__ = ["to_onnx", "to_seed"]

# Precedence levels (low -> high).
_XOR, _AND, _SUM, _PROD, _UNARY, _ATOM = range(6)
_DIVISION_KINDS = (_core.FLOOR, _core.MOD, _core.EXACT)


class _Printer:
    def __init__(self, seed: bool) -> None:
        self.seed = seed
        self.cache_attr = "_seed" if seed else "_onnx"

    # -- atoms ---------------------------------------------------------------------
    def atom_level(self, atom: Atom) -> int:
        kind = atom.kind
        if kind in _DIVISION_KINDS:
            return _PROD
        if self.seed and kind == _core.MAX:
            return _XOR
        if self.seed and kind == _core.MIN:
            return _AND
        return _ATOM

    def atom(self, atom: Atom, folded_const: int = 0) -> str:
        kind = atom.kind
        if kind == _core.SYM:
            return atom.name
        args = atom.args
        if kind in _DIVISION_KINDS:
            num, den = args
            if folded_const:
                num = _core.add(num, folded_const * den)
            op = {_core.FLOOR: "//", _core.MOD: "%"}.get(kind, "/:" if self.seed else "/")
            return f"{self.dim(num, _PROD)}{op}{self.dim(den, _UNARY)}"
        if self.seed and kind in (_core.MAX, _core.MIN):
            level = _XOR if kind == _core.MAX else _AND
            op = "^" if kind == _core.MAX else "&"
            return op.join(self.dim(a, level + 1 if i else level) for i, a in enumerate(args))
        name = {_core.MAX: "max", _core.MIN: "min", _core.BCAST: "broadcast"}.get(
            kind, atom.name
        )
        return f"{name}({','.join(self.dim(a, _XOR) for a in args)})"

    # -- terms -----------------------------------------------------------------------
    def product(self, mono: tuple[Atom, ...], coeff: int, folded_const: int) -> tuple[str, int]:
        """Prints ``|coeff| * mono``; returns the text and its precedence level."""
        factors: list[str] = []
        magnitude = abs(coeff)
        if magnitude != 1:
            factors.append(str(magnitude))
        if len(mono) == 1 and not factors:
            atom = mono[0]
            return self.atom(atom, folded_const), self.atom_level(atom)
        for atom in mono:
            text = self.atom(atom)
            # Division atoms are parenthesised inside products: a*(b//c), (b//c)*a.
            if self.atom_level(atom) <= _PROD:
                text = f"({text})"
            factors.append(text)
        return "*".join(factors), _PROD

    def dim(self, d: Dim, min_level: int = _XOR) -> str:
        if isinstance(d, int):
            text = str(d)
            return f"({text})" if d < 0 and min_level > _SUM else text
        text, level = self.expr(d)
        return f"({text})" if level < min_level else text

    def expr(self, e: DimExpr) -> tuple[str, int]:
        if e.unknown_reason is not None:
            raise _core.ExprError(f"cannot print an unknown ({e.unknown_reason})")
        cached = getattr(e, self.cache_attr)
        if cached is not None:
            return cached
        result = self._expr(e)
        setattr(e, self.cache_attr, result)
        return result

    def _fold_target(self, e: DimExpr) -> int:
        """Index of a ``(N+r)//d`` term (coefficient 1, r != 0) absorbing the constant."""
        if not e.const:
            return -1
        for i, (mono, coeff) in enumerate(e.terms):
            if coeff != 1 or len(mono) != 1 or mono[0].kind != _core.FLOOR:
                continue
            num, den = mono[0].args
            if isinstance(den, int) and isinstance(num, DimExpr) and num.const:
                folded = num.const + e.const * den
                if _core.INT64_MIN <= folded <= _core.INT64_MAX:
                    return i
        return -1

    def _expr(self, e: DimExpr) -> tuple[str, int]:
        fold = self._fold_target(e)
        pieces: list[str] = []
        level = _ATOM
        n_parts = len(e.terms) + (1 if e.const and fold < 0 else 0)
        for i, (mono, coeff) in enumerate(e.terms):
            text, term_level = self.product(mono, coeff, e.const if i == fold else 0)
            negative = coeff < 0
            if n_parts == 1:
                if not negative:
                    return text, term_level
                # Unary minus binds tighter than * and //: -(x//2), -(a^b).
                if term_level < _UNARY and not (
                    term_level == _PROD and not (_has_division(mono) and coeff == -1)
                ):
                    text = f"({text})"
                return f"-{text}", _SUM
            if term_level < _SUM or (negative and term_level <= _SUM):
                text = f"({text})"
            if not pieces:
                # A leading minus is unary and binds tighter than //: -(x//2)+3.
                if negative and coeff == -1 and _has_division(mono):
                    text = f"({text})"
                pieces.append(f"-{text}" if negative else text)
            else:
                pieces.append(f"-{text}" if negative else f"+{text}")
            level = _SUM
        if e.const and fold < 0:
            pieces.append(f"{e.const:+d}")
            level = _SUM
        return "".join(pieces), level


def _has_division(mono: tuple[Atom, ...]) -> bool:
    return len(mono) == 1 and mono[0].kind in _DIVISION_KINDS


_ONNX = _Printer(seed=False)
_SEED = _Printer(seed=True)


def to_onnx(d: Dim) -> str:
    """The canonical text written into ``dim_param`` (re-parseable by onnx-ir)."""
    return str(d) if isinstance(d, int) else _ONNX.expr(d)[0]


def to_seed(d: Dim) -> str:
    """The seed ("xexpressions") dialect: ``^`` max, ``&`` min, ``/:`` exact division."""
    return str(d) if isinstance(d, int) else _SEED.expr(d)[0]
