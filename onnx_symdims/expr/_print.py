"""The two spellings of a canonical expression.

* :func:`to_onnx` — written into ``dim_param``: Python/SymPy arithmetic that
  ``onnx_ir.SymbolicDim`` re-parses (``batch+1``, ``2*seq``, ``(H-1)//2``,
  ``max(a,b)``, ``min(a,b)``, ``a%3``, exact division as ``a/2``). The one
  exception is ``broadcast(a,b)``, which no peer grammar can express; it is always
  binary: three or more arguments print as the left fold ``broadcast(broadcast(a,b),c)``.
* :func:`to_seed` — the seed ("xexpressions") dialect: ``a^b`` max, ``a&b``
  min, ``a/:b`` exact division, in the origin's term order.

Both put parentheses exactly where the precedence needs them (and around a division
that is the numerator of another: ``(x//2)%4``), and both *factor* a sum: the canonical
form stays the expanded polynomial, only the text is factored —
``2*batch*seq+2*batch`` prints ``2*batch*(seq+1)``. Every spelling re-parses to the
very same object: ``parse(print(e)) is e``.

Term order. The onnx printer prints a sum in canonical term order with the constant
last (``x+6``, ``(H-1)//2``). The seed printer does the same at the top level
(``sequence/:5+2``) but, like the origin, puts a positive constant first in a sum that
is the argument of a function term (``(7+n)//8``, ``x^1+y``) and orders the arguments
of ``^``/``&`` by their symbols, not by their constants. In both, a sum never starts
with a minus when one of its parts is positive: ``e-b``, ``1-x``.

Example::

    >>> from onnx_symdims.expr import sym, dmax, to_onnx, to_seed
    >>> a, b = sym("a"), sym("b")
    >>> to_onnx(dmax(a, b) + 1), to_seed(dmax(a, b) + 1)
    ('max(a,b)+1', '(a^b)+1')
    >>> to_onnx(a * (b // 2))
    'a*(b//2)'
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import (
    BCAST,
    EXACT,
    FLOOR,
    INT64_MAX,
    INT64_MIN,
    MAX,
    MIN,
    MOD,
    SYM,
    Atom,
    ExprError,
    _mono_key,
)
from onnx_symdims.expr._dimexpr import Dim, DimExpr, _atom_expr
from onnx_symdims.expr._divisions import (
    _as_multiple,
    _content_and_common_monomial,
    _divide_out,
)
from onnx_symdims.expr._ring import _finish, add, mul, neg

__all__ = ["to_onnx", "to_seed"]

# Precedence levels (low -> high).
_XOR, _AND, _SUM, _PROD, _UNARY, _ATOM = range(6)
_DIVISION_KINDS = (FLOOR, MOD, EXACT)
# Polynomial factoring (beyond the common monomial) is tried on sums of at most this many
# parts: it costs a few multiplications per atom, and printing is cached per expression.
_MAX_FACTORED_PARTS = 16
# A broadcast of more arguments than this prints as a balanced tree of binary calls
# instead of one left fold (whose nesting would grow with the argument count).
_MAX_LEFT_FOLD = 16


def _symbol_order(d: Dim) -> tuple:
    """Sort key of a ``^``/``&`` argument in the seed printer: symbols, then constant."""
    if isinstance(d, int):
        return (0, (), d)
    return (1, tuple(_mono_key(m) for m, _ in d.terms), d.const)


def _factor_order(f: Atom | DimExpr) -> tuple:
    """Order of the factors of a factored product: by their (leading) monomial key."""
    if isinstance(f, Atom):
        return (f.key, 0)
    return (_mono_key(f.terms[0][0]), 1)


def _factor(e: DimExpr) -> tuple[int, list[Atom | DimExpr]] | None:
    """``e`` as ``coefficient * factors`` (atoms and sums), or None when it does not factor.

    The factors multiply back, in print order, to ``e`` itself — checked, so that the
    printed product re-parses to the same object whatever the sum-level rewrites do.
    """
    parts = len(e.terms) + (1 if e.const else 0)
    if parts < 2:
        return None
    factors: list[Atom | DimExpr] = []
    coefficient = 1
    cofactor: Dim = e
    if not e.const:
        g, mono = _content_and_common_monomial(e)
        if g > 1 or mono:
            if all(c < 0 for _, c in e.terms):
                g = -g
            cofactor = _divide_out(e, abs(g), mono)
            if g < 0:
                cofactor = neg(cofactor)
            if not isinstance(cofactor, DimExpr) or cofactor.unknown_reason is not None:
                return None
            coefficient = g
            factors.extend(mono)
    split = _split_polynomial(cofactor) if isinstance(cofactor, DimExpr) else None
    if split is not None:
        factors.extend(split)
    elif cofactor is not e:
        factors.append(cofactor)  # type: ignore[arg-type]
    else:
        return None
    factors.sort(key=_factor_order)
    product: Dim = coefficient
    for f in factors:
        product = mul(product, _atom_expr(f) if isinstance(f, Atom) else f)
    return (coefficient, factors) if product is e else None


def _split_polynomial(q: DimExpr) -> tuple[DimExpr, DimExpr] | None:
    """``q == (v + k) * A`` for an atom ``v`` and a monomial (or int) ``k``, if found.

    ``q = v*A + B`` (``A`` the terms with ``v``, one ``v`` divided out); when ``B == k*A``
    the sum factors: ``x*s + x + y*s + y == (s+1)*(x+y)``.
    """
    parts = len(q.terms) + (1 if q.const else 0)
    if parts < 4 or parts > _MAX_FACTORED_PARTS:
        return None
    seen: set[Atom] = set()
    for mono, _ in q.terms:
        for v in mono:
            if v in seen:
                continue
            seen.add(v)
            with_v: dict[tuple, int] = {}
            without: dict[tuple, int] = {}
            for m, c in q.terms:
                if v in m:
                    rest = list(m)
                    rest.remove(v)
                    with_v[tuple(rest)] = c
                else:
                    without[m] = c
            if () in with_v or not without:
                continue
            # Canonical (_finish), so that each factor's text re-parses to itself.
            a = _finish(with_v, 0)
            b = _finish(without, q.const)
            if not (isinstance(a, DimExpr) and isinstance(b, DimExpr)) or len(a.terms) < 2:
                continue
            if a.unknown_reason is not None or b.unknown_reason is not None:
                continue
            k = _as_multiple(b, a)
            if k is None:
                continue
            left = add(_atom_expr(v), k)
            if isinstance(left, DimExpr) and mul(left, a) is q:
                return left, a
    return None


class _Printer:
    def __init__(self, seed: bool) -> None:
        self.seed = seed

    # -- atoms ---------------------------------------------------------------------
    def atom_level(self, atom: Atom) -> int:
        kind = atom.kind
        if kind in _DIVISION_KINDS:
            return _PROD
        if self.seed and kind == MAX:
            return _XOR
        if self.seed and kind == MIN:
            return _AND
        return _ATOM

    def arg(self, d: Dim, min_level: int) -> str:
        """An argument of a function term (a "nested" position)."""
        return self.dim(d, min_level, top=False)

    def atom(self, atom: Atom, folded_const: int = 0) -> str:
        kind = atom.kind
        if kind == SYM:
            return atom.name
        args = atom.args
        if kind in _DIVISION_KINDS:
            num, den = args
            if folded_const:
                num = add(num, folded_const * den)
            op = {FLOOR: "//", MOD: "%"}.get(kind, "/:" if self.seed else "/")
            num_text = self.arg(num, _PROD)
            if isinstance(num, DimExpr) and _is_division(num):
                # Left-associative, so x//2%4 would read the same, but (x//2)%4 is clearer.
                num_text = f"({num_text})"
            return f"{num_text}{op}{self.arg(den, _UNARY)}"
        if self.seed and kind in (MAX, MIN):
            level = _XOR if kind == MAX else _AND
            op = "^" if kind == MAX else "&"
            ordered = sorted(args, key=_symbol_order)
            return op.join(
                self.arg(a, level + 1 if i else level) for i, a in enumerate(ordered)
            )
        if kind == BCAST:
            return _binary_broadcast([self.arg(a, _XOR) for a in args])
        name = {MAX: "max", MIN: "min"}.get(kind, atom.name)
        return f"{name}({','.join(self.arg(a, _XOR) for a in args)})"

    # -- terms -----------------------------------------------------------------------
    def product(
        self, mono: tuple[Atom, ...], coeff: int, folded_const: int
    ) -> tuple[str, int]:
        """Prints ``|coeff| * mono``; returns the text and its precedence level."""
        factors: list[str] = []
        magnitude = abs(coeff)
        if coeff == INT64_MIN:
            # 2**63 is no int64 literal: the sign stays inside, the term prints positive.
            factors.append(f"({coeff})")
        elif magnitude != 1:
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

    def dim(self, d: Dim, min_level: int = _XOR, top: bool = True) -> str:
        if isinstance(d, int):
            text = str(d)
            return f"({text})" if d < 0 and min_level > _SUM else text
        text, level = self.expr(d, top)
        return f"({text})" if level < min_level else text

    def expr(self, e: DimExpr, top: bool = True) -> tuple[str, int]:
        if e.unknown_reason is not None:
            raise ExprError(f"cannot print an unknown ({e.unknown_reason})")
        # One cache per interned expression and position (only the seed dialect orders a
        # nested sum differently): printing is on the hot path of writing models.
        attr = "_onnx" if not self.seed else ("_seed_top" if top else "_seed")
        cached = getattr(e, attr)
        if cached is not None:
            return cached
        result = self._factored(e, top)
        if result is None:
            result = self._sum(e, top)
        setattr(e, attr, result)
        return result

    def _factored(self, e: DimExpr, top: bool) -> tuple[str, int] | None:
        found = _factor(e)
        if found is None:
            return None
        coefficient, factors = found
        if abs(coefficient) > INT64_MAX:
            return None  # 2**63 is no int64 literal
        pieces: list[str] = []
        if abs(coefficient) != 1:
            pieces.append(str(abs(coefficient)))
        for f in factors:
            if isinstance(f, Atom):
                text = self.atom(f)
                if self.atom_level(f) <= _PROD:
                    text = f"({text})"
            else:
                text = self.dim(f, _PROD + 1, top)
            pieces.append(text)
        text = "*".join(pieces)
        if coefficient < 0:
            # -x*(y+1) reads as (-x)*(y+1): the unary minus binds tighter than *.
            return f"-{text}", _SUM
        return text, _PROD

    def _fold_target(self, e: DimExpr) -> int:
        """Index of a ``(N+r)//d`` term (coefficient 1, r != 0) absorbing the constant."""
        if not e.const:
            return -1
        for i, (mono, coeff) in enumerate(e.terms):
            if coeff != 1 or len(mono) != 1 or mono[0].kind != FLOOR:
                continue
            num, den = mono[0].args
            if isinstance(den, int) and isinstance(num, DimExpr) and num.const:
                folded = num.const + e.const * den
                if INT64_MIN <= folded <= INT64_MAX:
                    return i
        return -1

    def _sum(self, e: DimExpr, top: bool) -> tuple[str, int]:
        fold = self._fold_target(e)
        # Parts in print order as (value, term index or -1 for the constant): canonical
        # term order, constant last, except a positive constant first in a nested
        # seed-dialect sum (the origin's sorted order).
        const = e.const if fold < 0 else 0
        const_first = self.seed and not top and const > 0
        order: list[tuple[int, int]] = [(const, -1)] if const_first else []
        order.extend((coeff, i) for i, (_, coeff) in enumerate(e.terms))
        if const and not const_first:
            order.append((const, -1))
        if len(order) > 1 and order[0][0] < 0 and order[0][0] != INT64_MIN:
            # Never a leading minus when a part is positive: e-b, 1-x.
            first_positive = next((k for k, (v, _) in enumerate(order) if v > 0), None)
            if first_positive is not None:
                order.insert(0, order.pop(first_positive))
        pieces: list[str] = []
        level = _ATOM
        single = len(order) == 1
        for value, index in order:
            # -2**63 prints as a parenthesised literal with a plus: 2**63 is no int64.
            negative = value < 0 and value != INT64_MIN
            if index < 0:
                text = str(abs(value)) if negative or value >= 0 else f"({value})"
                term_level = _ATOM
                mono: tuple[Atom, ...] = ()
            else:
                mono = e.terms[index][0]
                text, term_level = self.product(mono, value, e.const if index == fold else 0)
            if single:
                if not negative:
                    return text, term_level
                # Unary minus binds tighter than * and //: -(x//2), -(a^b).
                if term_level < _UNARY and not (
                    term_level == _PROD and not (_has_division(mono) and value == -1)
                ):
                    text = f"({text})"
                return f"-{text}", _SUM
            if term_level < _SUM or (negative and term_level <= _SUM):
                text = f"({text})"
            if not pieces:
                # A leading minus is unary and binds tighter than //: -(x//2)+3.
                if negative and value == -1 and _has_division(mono):
                    text = f"({text})"
                pieces.append(f"-{text}" if negative else text)
            else:
                pieces.append(f"-{text}" if negative else f"+{text}")
            level = _SUM
        return "".join(pieces), level


def _binary_broadcast(texts: list[str]) -> str:
    """``broadcast`` of the argument texts, spelled with binary calls only.

    Readers outside this package (scorers, onnx-ir based tools) take ``broadcast(a,b)``
    and nothing else, so ``broadcast(a,b,c)`` prints as the left fold
    ``broadcast(broadcast(a,b),c)``, in canonical argument order. The parser flattens
    nested broadcasts (broadcast is associative and commutative), so the text reads back
    to the very same atom. Past :data:`_MAX_LEFT_FOLD` arguments the two halves are
    folded separately and joined (still binary), so that the nesting grows with the
    logarithm of the argument count and stays within the parser's depth limit.
    """
    if len(texts) > _MAX_LEFT_FOLD:
        half = len(texts) // 2
        left, right = _binary_broadcast(texts[:half]), _binary_broadcast(texts[half:])
        return f"broadcast({left},{right})"
    text = texts[0]
    for t in texts[1:]:
        text = f"broadcast({text},{t})"
    return text


def _has_division(mono: tuple[Atom, ...]) -> bool:
    return len(mono) == 1 and mono[0].kind in _DIVISION_KINDS


def _is_division(e: DimExpr) -> bool:
    """True when ``e`` is exactly one floor/mod/exact division atom."""
    atom = e.atom
    return atom is not None and atom.kind in _DIVISION_KINDS


_ONNX = _Printer(seed=False)
_SEED = _Printer(seed=True)


def to_onnx(d: Dim) -> str:
    """The canonical text written into ``dim_param`` (re-parseable by onnx-ir)."""
    return str(d) if isinstance(d, int) else _ONNX.expr(d)[0]


def to_seed(d: Dim) -> str:
    """The seed ("xexpressions") dialect: ``^`` max, ``&`` min, ``/:`` exact division."""
    return str(d) if isinstance(d, int) else _SEED.expr(d)[0]
