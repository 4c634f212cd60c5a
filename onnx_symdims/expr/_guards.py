"""Zero guards a product makes redundant: ``d*min(1, d) -> d`` when ``d >= 0``.

Inference writes "``t``, or what ``t == 0`` means" as piecewise terms over the 0/1 guard
``min(1, t)`` (a Reshape target element that copies an input dim exactly when it is 0 is
``t + c*(1 - min(1, t))``). Multiplied out, such a dim can carry monomials like
``16*h*w*min(1, h)``, where the guard is pointless: when ``h == 0`` the monomial is 0
whatever the guard is. :func:`drop_zero_guards` removes those guards, and the canonical
form then collects what is left — ``h*(16*w - 16*w*min(1, h) + 1)`` becomes ``h``.

The rule needs ``X >= 0`` for every argument ``X`` of the guard, which holds for dims but
not for every integer, so it is scope-aware and never applied by the constructors.

Proof. Let ``m = min(1, X1, ..., Xk)`` with integers ``Xi >= 0`` (proven by the scope), and
``R`` the rest of the monomial. Then ``m`` is 0 or 1, and ``m == 0`` exactly when some
``Xi == 0``. If ``m == 1``, ``R*m == R``. If ``m == 0``, some ``Xi == 0``, and each ``Xi``
is checked to force ``R == 0`` when it is 0 (below), so ``R*m == 0 == R``. Hence
``R*m == R`` at every point the scope describes (``R`` itself is unchanged, so the new
monomial is defined wherever the old one is).

``Xi == 0`` forces ``R == 0`` when either

* ``Xi`` has no constant and one of its monomials ``M`` has all its atoms among the atoms
  of ``R`` — and ``Xi`` is that one term, or each of its terms ``c*M'`` has ``c > 0`` and
  ``M' >= 0`` proven (a sum of nonnegative terms is 0 only when every term is): then
  ``M == 0``, so one of its atoms is 0, and that atom is a factor of ``R``; or
* ``R`` has a factor ``min(..., Xi, ...)`` whose arguments are all proven ``>= 0``: with
  ``Xi == 0`` that minimum is 0 (this also reduces ``min(1, X)**2`` to ``min(1, X)``).
"""

from __future__ import annotations

from onnx_symdims.expr._atoms import MIN, SYM, Atom, _memoized_scoped
from onnx_symdims.expr._dimexpr import Dim, DimExpr, _atom_expr
from onnx_symdims.expr._ring import add, mul
from onnx_symdims.expr._substitute import _rebuild_atom

__all__ = ["drop_zero_guards"]


def drop_zero_guards(d: Dim, scope) -> Dim:
    """``d`` without the ``min(1, X)`` factors its monomials make redundant.

    A monomial ``R*min(1, X1, ..., Xk)`` becomes ``R`` when the scope proves every
    ``Xi >= 0`` and each ``Xi == 0`` forces ``R == 0`` (a factor of ``R`` vanishes with
    it): ``h*min(1, h) -> h``, ``16*h*w*min(1, h) -> 16*h*w``,
    ``h*(16*w - 16*w*min(1, h) + 1) -> h``. Applied inside function arguments too, and
    the result is canonical again. Equal to ``d`` wherever ``d`` is defined and the
    scope's facts hold (the proof is in the module docstring).

    Args:
        d: the dim.
        scope: a :class:`~onnx_symdims.expr.Scope` (typically one where every symbol,
            or every dim, is ``>= 0``).
    """
    if isinstance(d, int) or d.unknown_reason is not None or not _has_guard(d):
        return d
    # A pure function of d and the scope's facts: memoized with the scope's results.
    return _memoized_scoped("drop_zero_guards", _drop_zero_guards, (d,), scope)


def _drop_zero_guards(args: tuple[DimExpr], scope) -> Dim:
    (d,) = args
    result: Dim = d.const
    changed = False
    for mono, coeff in d.terms:
        factors: list[Dim] = []
        for atom in mono:
            if atom.kind == SYM:
                factors.append(_atom_expr(atom))
                continue
            args = tuple(drop_zero_guards(a, scope) for a in atom.args)
            if all(new is old for new, old in zip(args, atom.args)):
                factors.append(_atom_expr(atom))
            else:
                factors.append(_rebuild_atom(atom, args))
                changed = True
        if all(isinstance(f, DimExpr) and f.atom is not None for f in factors):
            atoms = [f.atom for f in factors]  # type: ignore[union-attr]
            kept = _drop_guards(atoms, scope)  # type: ignore[arg-type]
            if len(kept) != len(atoms):
                changed = True
                factors = [_atom_expr(a) for a in kept]
        term: Dim = coeff
        for f in factors:
            term = mul(term, f)
        result = add(result, term)
    return result if changed else d


def _has_guard(d: DimExpr) -> bool:
    """True when a ``min`` with the argument 1 occurs anywhere in ``d``."""
    for mono, _ in d.terms:
        for atom in mono:
            if atom.kind == MIN and 1 in atom.args:
                return True
            if any(isinstance(a, DimExpr) and _has_guard(a) for a in atom.args):
                return True
    return False


def _drop_guards(atoms: list[Atom], scope) -> list[Atom]:
    """The atoms of one monomial with its redundant ``min(1, ...)`` factors removed."""
    kept = list(atoms)
    i = 0
    while i < len(kept):
        atom = kept[i]
        if atom.kind == MIN and 1 in atom.args:
            rest = kept[:i] + kept[i + 1 :]
            xs = [a for a in atom.args if a != 1]
            # min(1, ...) with an int other than 1 folds into 1 or below, so the only
            # int argument is 1; every other argument must be >= 0 and vanish with R.
            if rest and all(
                isinstance(x, DimExpr)
                and scope.prove_nonneg(x)
                and _zero_forces_zero(x, rest, scope)
                for x in xs
            ):
                # Each drop is justified by the factors still there: with a repeated
                # guard min(1, X)**2, the first goes (the second vanishes with X) and the
                # second stays unless another factor vanishes with X.
                kept = rest
                continue
        i += 1
    return kept


def _zero_forces_zero(x: DimExpr, rest: list[Atom], scope) -> bool:
    """True when ``x == 0`` (with ``x >= 0``) forces the product of ``rest`` to be 0."""
    present = set(rest)
    if not x.const:
        covered = any(all(a in present for a in mono) for mono, _ in x.terms)
        if covered and (
            len(x.terms) == 1
            or all(c > 0 and _monomial_nonneg(mono, scope) for mono, c in x.terms)
        ):
            return True
    for atom in present:
        if (
            atom.kind == MIN
            and x in atom.args
            and all(scope.prove_nonneg(a) for a in atom.args)
        ):
            return True
    return False


def _monomial_nonneg(mono: tuple[Atom, ...], scope) -> bool:
    """True when the monomial ``mono`` (coefficient 1) is proven ``>= 0``."""
    value: Dim = 1
    for atom in mono:
        value = mul(value, _atom_expr(atom))
    return scope.prove_nonneg(value)
