"""``Reshape``: the output dims of a target that may copy (``0``) or infer (``-1``) dims.

A symbolic target element is kept only where it provably cannot mean "copy" or "infer"
differently from its value in any successful run (see :func:`reshape_dims`); what a
successful Reshape implies (the dims next to a ``-1`` are nonzero) is recorded as a fact
from this node on.
"""

from __future__ import annotations

__all__ = ["reshape_dims"]

import logging
import math
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import product, static_length
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim


def _zero_set(d: Dim) -> frozenset[str] | None:
    """For ``d = c*s1*...*sk`` (``c > 0``, plain symbols): ``{s1..sk}``, else ``None``.

    Then ``d == 0`` exactly when one of these symbols is 0.
    """
    if not isinstance(d, expr.DimExpr):
        return None
    names = d.symbol_factors()
    return None if names is None else frozenset(names)


def _zero_implies_copied_dim_zero(t: expr.DimExpr, copied: Dim) -> bool:
    """True when ``t == 0`` forces ``copied == 0`` (so "copy" and ``t`` agree).

    The cheap structural tests only: ``t`` is the copied dim (the usual ``Shape -> ... ->
    Reshape`` round trip, whatever ``t``'s form: dims are hash-consed), or the symbols of
    a product ``t`` are among those of a product ``copied``. See also
    :func:`_is_multiple_of`.
    """
    if copied is t:
        return True
    t_zero = _zero_set(t)
    copied_zero = _zero_set(copied)
    return t_zero is not None and copied_zero is not None and t_zero <= copied_zero


def _is_multiple_of(copied: Dim, t: expr.DimExpr) -> bool:
    """True when ``copied = t * q`` with ``q`` defined everywhere (so ``t == 0`` forces 0).

    E.g. ``copied = 8*(L//5-1)`` (a group-norm reshape's merged axis) and
    ``t = L//5-1``, or ``copied = 16*((H+3)//4)*((W+3)//4)`` (a strided conv's
    output, flattened) and ``t = (H+3)//4`` with ``q = 16*((W+3)//4)``. ``q`` must
    evaluate in every run: no exact division, no division by a symbolic divisor (a
    floor division or modulo by a nonzero constant is defined at every integer).
    """
    if isinstance(copied, int):
        return copied == 0
    try:
        q = expr.exact_div(copied, t)
    except (ArithmeticError, expr.ExprError):
        return False
    return _defined_everywhere(q) and expr.mul(q, t) is copied


def _at_most_zero_with(d: Dim, t: expr.DimExpr) -> bool:
    """True when ``t == 0`` forces ``d <= 0``; for ``d`` a dim (``>= 0``) that means 0.

    ``d`` is ``t``, a multiple of ``t`` (:func:`_is_multiple_of`), or a ``min`` with such
    an argument: a token slice ``min(L, h*w)`` after a class token is split off (CvT
    exported by TorchScript) vanishes with ``h``, however large ``L``.
    """
    if d is t or _is_multiple_of(d, t):
        return True
    return (
        isinstance(d, expr.DimExpr)
        and d.function == "min"
        and any(_at_most_zero_with(a, t) for a in d.args)
    )


def _defined_everywhere(d: Dim) -> bool:
    """True when ``d`` holds no division that may be undefined somewhere.

    Like ``not d.has_division()``, but a floor division or remainder by a nonzero
    integer constant (``(W+3)//4``) is allowed: it is defined at every integer. An exact
    division (it may be inexact) or a symbolic divisor (it may be 0) is not.
    """
    if isinstance(d, int):
        return True
    if d.is_unknown:
        return False
    for term in d.function_terms():
        kind = term.function
        args = term.args
        if kind == "exact_div":
            return False
        if kind in ("floordiv", "mod") and not (isinstance(args[1], int) and args[1] != 0):
            return False
        if not all(_defined_everywhere(a) for a in args):
            return False
    return True


def _zero_implies_empty_input(t: expr.DimExpr, data: Sequence[Dim]) -> bool:
    """True when ``t == 0`` forces a dim of ``data`` to be 0 (the input is empty).

    Holds when ``t`` is one monomial ``c*s1*...*sk`` (``c > 0``) and every ``s`` is a
    dim of ``data``: ``t == 0`` means some ``s == 0``.
    """
    names = _zero_set(t)
    bare = {d.name for d in data if isinstance(d, expr.DimExpr) and d.is_symbol}
    return bool(names) and names <= bare  # type: ignore[operator]


def _solve_inferred_with_copies(
    ctx: NodeContext, out: list[Dim | None], target: Sequence[Dim], infer_at: int, total: Dim
) -> bool:
    """The ``-1`` dim when some target elements ``t`` copy an input dim exactly when 0.

    With every such ``t >= 1`` the ``-1`` dim is ``A = total /: prod(targets)``. When
    ``total`` vanishes as soon as one ``t`` is 0, the run then has no element and the
    ``-1`` dim is 0: it is ``A * min(1, t1, ..., tk)`` in every case.
    """
    copies = [
        t
        for j, (d, t) in enumerate(zip(out, target))
        if j != infer_at and isinstance(t, expr.DimExpr) and d is not t
    ]
    if not copies or not all(_vanishes_when_zero(total, t) for t in copies):
        return False
    plain = [
        t if isinstance(t, expr.DimExpr) and d is not t else d
        for j, (d, t) in enumerate(zip(out, target))
        if j != infer_at
    ]
    if any(d is None for d in plain):
        return False
    try:
        inferred = expr.exact_div(total, product(plain))  # type: ignore[arg-type]
    except (expr.InexactDivisionError, ZeroDivisionError):
        return False
    if _has_division(inferred):
        # A*min(1, t) would evaluate A at t == 0, where its division may be inexact:
        # divide by max(t, 1) instead (total is 0 there, and 0 divides exactly).
        guarded = [expr.dmax(t, 1, scope=ctx.scope) if t in copies else t for t in plain]
        try:
            out[infer_at] = expr.exact_div(total, product(guarded))  # type: ignore[arg-type]
        except (expr.InexactDivisionError, ZeroDivisionError):
            return False
        return True
    # A factor of A that vanishes with a copy makes that copy's guard redundant
    # (drop_zero_guards: R*min(1, t) is R when t == 0 forces R == 0).
    guarded_inferred = expr.mul(inferred, expr.dmin(1, *copies, scope=ctx.scope))
    out[infer_at] = expr.drop_zero_guards(guarded_inferred, ctx.scope)
    return True


def _has_division(d: Dim) -> bool:
    """True when ``d`` holds a division or modulo term (it may not evaluate everywhere)."""
    return not isinstance(d, int) and d.has_division()


def _copied_when_zero(
    t: expr.DimExpr, data: Sequence[Dim] | None, i: int, scope: expr.Scope
) -> Dim | None:
    """The output dim for a target element ``t >= 0`` that is 0 exactly when it copies.

    ``t`` if ``t != 0``, else the input dim ``c`` it copies: ``t + c*(1 - min(t, 1))``,
    exact for every ``t >= 0``; it folds to ``t`` as soon as the scope proves ``t >= 1``,
    and the guard goes from each monomial of ``c`` that vanishes with ``t``
    (:func:`~onnx_symdims.expr.drop_zero_guards`): with ``c = 16*t*w`` the dim is ``t``.
    """
    if data is None or i >= len(data):
        return None
    c = data[i]
    if _vanishes_when_zero(c, t) or _at_most_zero_with(c, t):
        return t  # t == 0 copies a dim that is then 0 too
    piecewise = expr.add(t, expr.mul(c, expr.sub(1, expr.dmin(t, 1, scope=scope))))
    return expr.drop_zero_guards(piecewise, scope)


def _vanishes_when_zero(d: Dim, t: Dim) -> bool:
    """True when ``t == 0`` forces ``d == 0``, for ``t`` a positive sum of zero-only-at-0 terms.

    Such a ``t`` (``a + 2*b``, or ``s + min(8, p)`` for a sliding window: every symbol
    ``>= 0``, every term a symbol or ``min(k, symbol)`` with ``k > 0``, each of which is 0
    exactly when its symbol is) is 0 exactly when each of its symbols is 0.
    """
    if not isinstance(t, expr.DimExpr):
        return t == 0 and d == 0
    monomials, constant = t.coefficients()
    if constant or not all(c > 0 and _zero_only_at_zero(m) for m, c in monomials.items()):
        return False
    try:
        return expr.substitute(d, dict.fromkeys(t.symbols(), 0)) == 0
    except (ArithmeticError, expr.ExprError):
        return False  # e.g. a division by an expression of those symbols: no proof


def _zero_only_at_zero(m: expr.DimExpr) -> bool:
    """True for a symbol ``s`` or ``min(k, s)`` with an int ``k > 0`` (0 exactly when ``s`` is)."""
    if m.is_symbol:
        return True
    if m.function != "min" or len(m.args) != 2:
        return False
    a, b = m.args
    if isinstance(b, int):
        a, b = b, a
    return isinstance(a, int) and a > 0 and isinstance(b, expr.DimExpr) and b.is_symbol


def _same_numel(target: Sequence[Dim], data: Sequence[Dim], memo: list[bool]) -> bool:
    """True when the target's elements multiply to the input's element count.

    Then a target element ``t == 0`` means the input is empty (``Reshape(x, Shape(y))``
    with ``y`` proven to have ``x``'s numel). Computed once per node (``memo``).
    """
    if not memo:
        same = all(
            (isinstance(t, int) and t > 0) or isinstance(t, expr.DimExpr) for t in target
        )
        memo.append(same and product(target) == product(data))
    return memo[0]


def _minus_one_fails(
    ctx: NodeContext,
    t: expr.DimExpr,
    target: Sequence[Dim],
    data: Sequence[Dim] | None,
    allowzero: bool,
    i: int,
) -> bool:
    """True when ``t >= -1`` and ``t == -1`` puts a 0 beside it: ``t >= 0`` in every run.

    XLNet's relative shift reshapes to ``[batch, heads, seq, 2*seq - 1]``: the last element
    is -1 (infer) at ``seq = 0``, where the target's ``seq`` is 0 too. For ``t + 1 =
    c*s1*...*sk`` (``c > 0``), ``t == -1`` exactly when some ``s`` is 0; when each such
    ``s = 0`` makes another output dim 0 (a 0 copying an input dim that is then 0, with
    ``allowzero=0``), or another element -1, the Reshape fails there, as onnxruntime and
    the reference refuse a -1 beside a 0 (and two -1). So every ``s`` is nonzero
    from this node on (noted as facts), and ``t`` is a plain dim.
    """
    names = _zero_set(expr.add(t, 1))
    if not names:
        return False
    for name in names:
        zero = {name: 0}
        if not any(
            _zero_output(u, j, data, allowzero, zero) for j, u in enumerate(target) if j != i
        ):
            return False
    for name in sorted(names):
        ctx.ctx.note_nonzero(expr.sym(name))
    return True


def _zero_output(
    u: Dim, j: int, data: Sequence[Dim] | None, allowzero: bool, zero: dict[str, int]
) -> bool:
    """Whether target element ``u`` at ``j`` fails a -1 beside it once ``zero`` holds."""
    if not isinstance(u, int):
        if u.is_unknown:
            return False
        u = expr.substitute(u, zero)
        if not isinstance(u, int):
            return False
    if u == -1:
        return True  # a second -1
    if u != 0 or allowzero:
        # allowzero=1: the spec calls a 0 beside a -1 invalid, but onnxruntime runs it
        # (see _note_nonzero_others): no fact rests on it.
        return False
    copied = data[j] if data is not None and j < len(data) else None
    return copied is not None and expr.substitute(copied, zero) == 0


def _note_nonzero_others(ctx: NodeContext, out: Sequence[Dim | None], infer_at: int) -> None:
    """A ``-1`` is inferred only when the other output dims multiply to nonzero.

    With ``allowzero=0`` onnxruntime and the reference implementation both reject
    ``Reshape`` to ``[0, -1]``, so in every run that gets past this node each other dim
    is nonzero (a product is nonzero exactly when each factor is): a fact from here on.
    A dim ``c*s1*...*sk`` of plain symbols also gives each ``s >= 1``. Not noted under
    ``allowzero=1``: the spec calls a 0 beside a -1 invalid there, but onnxruntime runs
    it (an exported ``view`` of an empty batch does), so no fact may rest on it.
    """
    note = ctx.ctx.note_nonzero
    for j, d in enumerate(out):
        if j == infer_at or not isinstance(d, expr.DimExpr) or d.is_unknown:
            continue
        note(d)
        names = None if d.is_symbol else d.symbol_factors()
        for name in names or ():
            note(expr.sym(name))


def reshape_dims(
    ctx: NodeContext, data: Sequence[Dim] | None, target: Sequence[Dim], allowzero: bool
) -> list[Dim | None]:
    """Output dims of ``Reshape(data, target)``; ``None`` where the dim is unknown.

    ``0`` copies the input dim (unless ``allowzero``), ``-1`` is the input's element
    count divided exactly by the others. A symbolic target element ``t`` is kept only
    when it cannot mean "copy" or "infer" differently: it is provably ``>= 0``, and
    either ``allowzero``, or it is provably ``> 0``, or it lies past the input's rank
    (a 0 there is an error), or ``t == 0`` forces the dim it would copy to be 0 (``t``
    is that dim, or ``2*b`` copying ``b``), or ``t == 0`` forces an empty input while
    every other output dim is ``> 0``.
    """
    scope = ctx.scope
    out: list[Dim | None] = []
    infer_at: int | None = None
    needs_zero_check: list[int] = []
    numel: list[bool] = []  # whether target and data have the same product, once computed
    for i, t in enumerate(target):
        if isinstance(t, int):
            if t == -1:
                if infer_at is not None:
                    ctx.fail("more than one -1 in the target shape")
                infer_at = i
                out.append(None)
            elif t < -1:
                ctx.fail(f"invalid target dim {t} at axis {i}")
            elif t == 0 and not allowzero:
                if data is None:
                    out.append(None)
                elif i >= len(data):
                    ctx.fail(
                        f"target dim 0 at axis {i} copies a dim of a rank-{len(data)} input"
                    )
                else:
                    out.append(data[i])
            else:
                out.append(t)
        elif t.is_unknown or (
            not scope.prove_nonneg(t)
            and not _minus_one_fails(ctx, t, target, data, allowzero, i)
        ):
            out.append(None)  # may be -1 (infer) at runtime
        elif (
            # The cheap structural tests first: any one of these keeps t.
            allowzero
            or (
                data is not None
                # A 0 past the input's rank is an error, so t != 0 in every valid run.
                and (i >= len(data) or _zero_implies_copied_dim_zero(t, data[i]))
            )
            or scope.prove_gt(t, 0)
            or (data is not None and i < len(data) and _is_multiple_of(data[i], t))
        ):
            out.append(t)
        elif data is not None and (
            _zero_implies_empty_input(t, data) or _same_numel(target, data, numel)
        ):
            out.append(t)
            needs_zero_check.append(i)
        else:
            out.append(_copied_when_zero(t, data, i, scope))
    for i in needs_zero_check:
        others_positive = infer_at is None and all(
            d is not None and ((isinstance(d, int) and d > 0) or scope.prove_gt(d, 0))
            for j, d in enumerate(out)
            if j != i
        )
        if not others_positive:
            out[i] = _copied_when_zero(target[i], data, i, scope)  # type: ignore[arg-type]
    if infer_at is not None and not allowzero:
        _note_nonzero_others(ctx, out, infer_at)
    if infer_at is not None and data is not None:
        others = [d for j, d in enumerate(out) if j != infer_at]
        total = product(data)
        # Only a symbolic target element can copy a dim (all-int targets skip this).
        symbolic = not all(isinstance(t, int) for t in target)
        if symbolic and _solve_inferred_with_copies(ctx, out, target, infer_at, total):
            return out
        if all(d is not None for d in others):
            known = product(others)  # type: ignore[arg-type]
            if isinstance(total, int) and isinstance(known, int):
                if known == 0 or total % known != 0:
                    ctx.fail(f"cannot reshape {total} elements into a multiple of {known}")
                out[infer_at] = total // known
            elif known != 0:
                # Exact whenever the run succeeds (onnxruntime rejects -1 with a 0 dim).
                try:
                    out[infer_at] = expr.exact_div(total, known)
                except (expr.InexactDivisionError, ZeroDivisionError):
                    out[infer_at] = None
    elif infer_at is None and data is not None and all(isinstance(d, int) for d in out):
        total = product(data)
        if isinstance(total, int) and total != math.prod(out):  # type: ignore[arg-type]
            ctx.fail(f"cannot reshape {total} elements into {list(out)}")
    return out


def _set_reshaped(
    ctx: NodeContext, data_value: ir.Value, target: Sequence[Dim] | None, allowzero: bool
) -> None:
    facts = ctx.ctx
    data = facts.shape_of(data_value)
    dtype = facts.dtype_of(data_value)
    if target is None:
        length = static_length(ctx, 1)
        ctx.set_output(0, None if length is None else [None] * length, dtype)
    else:
        # The same Reshape recurs in every layer: its dims are computed once per facts.
        if target.__class__ is not tuple:
            target = tuple(target)  # (value_of gives a tuple: the usual target as it is)
        key = ("Reshape", data, target, allowzero)
        dims = facts.shape_under_facts(key, reshape_dims, ctx, data, target, allowzero)
        ctx.set_output(0, dims, dtype)
    ctx.set_output_value(0, facts.value_of(data_value))


@register("", "Reshape", since=5)
def infer_reshape(ctx: NodeContext, node: ir.Node) -> None:
    """Target shape from input 1 (``allowzero`` since opset 14)."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    try:
        data_value, target_value = inputs  # two inputs (every valid node): no len()
    except ValueError:
        data_value, target_value = ctx.require_two_inputs()
    if data_value is None or target_value is None:
        ctx.require_two_inputs()  # fails the node
    # has_attr first (inline: the dict in onnx-ir's slot): allowzero is rare, and when
    # present (dynamo writes allowzero=0) the attribute read checks it.
    allowzero = (
        ctx.opset >= 14
        and "allowzero" in node._attributes.data
        and bool(ctx.attr_int("allowzero"))
    )
    facts = ctx.ctx
    target = facts.value_of(target_value)
    if target.__class__ is not tuple:  # unknown (or not a tuple): the general path
        _set_reshaped(ctx, data_value, target, allowzero)
        return
    # _set_reshaped of a known target (value_of gives a tuple), inline: every layer
    # reshapes its heads in and out.
    data = facts.shape_of(data_value)
    dtype = facts.dtype_of(data_value)
    key = ("Reshape", data, target, allowzero)
    dims = facts.shape_under_facts(key, reshape_dims, ctx, data, target, allowzero)
    ctx.set_output(0, dims, dtype)
    ctx.set_output_value(0, facts.value_of(data_value))


@register("", "Reshape")
def infer_reshape_attr(ctx: NodeContext, node: ir.Node) -> None:
    """Opsets 1-4: target shape from the ``shape`` attribute."""
    data_value = ctx.require_input(0)
    target = ctx.attr_ints("shape")
    if target is None:
        ctx.fail("missing attribute 'shape'")
    _set_reshaped(ctx, data_value, target, False)
