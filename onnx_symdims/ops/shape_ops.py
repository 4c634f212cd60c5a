"""Shape computations and the ops that carry "values as shape".

``Shape``, ``Size``, ``Reshape``, ``Concat``, ``Gather``, ``Unsqueeze``, ``Squeeze``,
``Cast``, ``CastLike``, ``Identity``, ``Constant``, ``ConstantOfShape``, ``Range`` and
``Expand``. Each sets its output shape and, when the output is a small integer tensor,
its symbolic elements, so ``Shape -> Gather -> Concat -> Reshape`` chains resolve to
expressions in the model's own dim names.
"""

from __future__ import annotations

__all__ = ["least_fresh"]

import logging
import math
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    constant_array,
    default_domain_producer,
    is_static,
    object_array,
    product,
    same_dim,
    static_length,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    NodeContext,
    boolean_of,
    broadcast_elements,
    int_elements,
    is_fully_unknown,
    read_int64_proto,
    tensor_dims,
    unknown_element,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
INT64 = ir.DataType.INT64


def _axes_input_or_attr(
    ctx: NodeContext, since_input: int
) -> tuple[bool, Sequence[int] | None]:
    """``(given, axes)`` from input 1 (opset >= ``since_input``) or the ``axes`` attribute.

    ``given`` is False when no axes are specified at all; ``axes`` is ``None`` when they
    are given at runtime and unknown here.
    """
    if ctx.opset >= since_input:
        value = ctx.input(1)
        if value is None:
            return False, None
        axes = ctx.ctx.value_of(value)
        # Like ctx.input_ints(1): known only when every element is an int.
        if axes is None or not all(isinstance(a, int) for a in axes):
            return True, None
        return True, axes  # type: ignore[return-value]
    axes_attr = ctx.attr_ints("axes")
    return axes_attr is not None, None if axes_attr is None else list(axes_attr)


# ----------------------------------------------------------------------------------------
# Shape, Size
# ----------------------------------------------------------------------------------------
@register("", "Shape")
def infer_shape(ctx: NodeContext, node: ir.Node) -> None:
    """1-D int64 output holding the input's dims ``[start:end]`` (opset 15 slicing)."""
    dims = ctx.ctx.shape_of(ctx.require_input(0))
    if dims is None:
        ctx.set_output(0, [None], INT64)
        return
    # Without attributes (the common case) start=0 and end=rank keep every dim.
    if ctx.opset >= 15 and node.attributes:
        rank = len(dims)
        start = ctx.attr_int("start", 0)
        end = ctx.attr_int("end", rank)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        dims = dims[start:end] if end > start else ()
    ctx.set_output(0, (len(dims),), INT64)
    ctx.set_output_value(0, dims)


@register("", "Size")
def infer_size(ctx: NodeContext, node: ir.Node) -> None:
    """Scalar int64 holding the number of elements."""
    ctx.require_input(0)
    ctx.set_output(0, [], INT64)
    dims = ctx.input_shape(0)
    if dims is not None:
        ctx.set_output_value(0, [product(dims)])


# ----------------------------------------------------------------------------------------
# Reshape
# ----------------------------------------------------------------------------------------
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
    """True when ``copied = t * q`` with ``q`` free of divisions (so ``t == 0`` forces 0).

    E.g. ``copied = 8*(L//5-1)`` (a group-norm reshape's merged axis) and
    ``t = L//5-1``. ``q`` must evaluate in every run, hence no division in it.
    """
    if isinstance(copied, int):
        return copied == 0
    try:
        q = expr.exact_div(copied, t)
    except (ArithmeticError, expr.ExprError):
        return False
    return not _has_division(q) and expr.mul(q, t) is copied


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
    out[infer_at] = expr.mul(inferred, expr.dmin(1, *copies, scope=ctx.scope))
    return True


def _has_division(d: Dim) -> bool:
    """True when ``d`` holds a division or modulo term (it may not evaluate everywhere)."""
    return not isinstance(d, int) and d.has_division()


def _copied_when_zero(
    t: expr.DimExpr, data: Sequence[Dim] | None, i: int, scope: expr.Scope
) -> Dim | None:
    """The output dim for a target element ``t >= 0`` that is 0 exactly when it copies.

    ``t`` if ``t != 0``, else the input dim ``c`` it copies: ``t + c*(1 - min(t, 1))``,
    exact for every ``t >= 0``; it folds to ``t`` as soon as the scope proves ``t >= 1``.
    """
    if data is None or i >= len(data):
        return None
    c = data[i]
    if _vanishes_when_zero(c, t):
        return t  # t == 0 copies a dim that is then 0 too
    return expr.add(t, expr.mul(c, expr.sub(1, expr.dmin(t, 1, scope=scope))))


def _vanishes_when_zero(d: Dim, t: Dim) -> bool:
    """True when ``t == 0`` forces ``d == 0``, for ``t`` a positive sum of plain symbols.

    Such a ``t`` (``a + 2*b``, all symbols ``>= 0``) is 0 exactly when each symbol is 0.
    """
    if not isinstance(t, expr.DimExpr):
        return t == 0 and d == 0
    monomials, constant = t.coefficients()
    if constant or not all(c > 0 and m.is_symbol for m, c in monomials.items()):
        return False
    try:
        return expr.substitute(d, dict.fromkeys(t.symbols(), 0)) == 0
    except (ArithmeticError, expr.ExprError):
        return False  # e.g. a division by an expression of those symbols: no proof


def _same_numel(target: Sequence[Dim], data: Sequence[Dim], memo: list[bool]) -> bool:
    """True when the target's elements multiply to the input's element count.

    Then a target element ``t == 0`` means the input is empty (``Reshape(x, Shape(y))``
    with ``y`` proven to have ``x``'s numel). Computed once per node (``memo``).
    """
    if not memo:
        same = all((isinstance(t, int) and t > 0) or isinstance(t, expr.DimExpr) for t in target)
        memo.append(same and product(target) is product(data))
    return memo[0]


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
        elif t.is_unknown or not scope.prove_nonneg(t):
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
        ctx.set_output(0, reshape_dims(ctx, data, target, allowzero), dtype)
    ctx.set_output_value(0, facts.value_of(data_value))


@register("", "Reshape", since=5)
def infer_reshape(ctx: NodeContext, node: ir.Node) -> None:
    """Target shape from input 1 (``allowzero`` since opset 14)."""
    data_value = ctx.require_input(0)
    target_value = ctx.require_input(1)
    # has_attr first: looking up an absent attribute is slow, and allowzero is rare.
    allowzero = (
        ctx.opset >= 14 and ctx.has_attr("allowzero") and bool(ctx.attr_int("allowzero"))
    )
    _set_reshaped(ctx, data_value, ctx.ctx.value_of(target_value), allowzero)


@register("", "Reshape")
def infer_reshape_attr(ctx: NodeContext, node: ir.Node) -> None:
    """Opsets 1-4: target shape from the ``shape`` attribute."""
    data_value = ctx.require_input(0)
    target = ctx.attr_ints("shape")
    if target is None:
        ctx.fail("missing attribute 'shape'")
    _set_reshaped(ctx, data_value, target, False)


# ----------------------------------------------------------------------------------------
# Concat, Gather
# ----------------------------------------------------------------------------------------
def least_fresh(ctx: NodeContext, candidates: Sequence[Dim]) -> Dim:
    """The first dim built only from model names, else the first one (all are equal)."""
    generated = ctx.ctx.is_generated
    for d in candidates:
        if not any(generated(s) for s in d.symbols()):  # type: ignore[union-attr]
            return d
    return candidates[0]


@register("", "Concat")
def infer_concat(ctx: NodeContext, node: ir.Node) -> None:
    """Dims along ``axis`` add up; the other dims are equal (an int is preferred)."""
    present = [value for value in node.inputs if value is not None]
    if not present:
        ctx.fail("needs at least one input")
    axis = ctx.attr_int("axis")
    if axis is None:
        if ctx.opset >= 4:
            ctx.fail("missing attribute 'axis'")
        axis = 1
    facts = ctx.ctx
    shapes = [facts.shape_of(value) for value in present]
    dtype = None
    for value in present:
        dtype = facts.dtype_of(value)
        if dtype is not None:
            break
    known = [s for s in shapes if s is not None]
    if not known:
        ctx.set_output(0, None, dtype)
        return
    first = known[0]
    rank = len(first)
    for s in known:
        if len(s) != rank:
            ctx.fail(f"inputs have different ranks {[len(s) for s in known]}")
    if rank == 0:
        ctx.fail("cannot concatenate scalars")
    axis = ctx.normalize_axis(axis, rank)
    out: list[Dim | None] = []
    for k in range(rank):
        if k == axis:
            if len(known) < len(shapes):
                out.append(None)
                continue
            total = first[k]
            for s in known[1:]:
                total = expr.add(total, s[k])
            out.append(total)
            continue
        chosen = first[k]
        for s in known:
            if s[k] is not chosen:
                break
        else:
            # The same dim in every input (the usual case): nothing to choose or record.
            out.append(chosen)
            continue
        candidates = [s[k] for s in known]
        ints = {d for d in candidates if isinstance(d, int)}
        if len(ints) > 1:
            ctx.fail(f"inputs disagree on axis {k}: {sorted(ints)}")
        chosen = ints.pop() if ints else least_fresh(ctx, candidates)
        for d in candidates:
            if d is not chosen and not isinstance(d, int):
                facts.add_constraint(d, chosen)  # a valid run has them equal
        out.append(chosen)
    ctx.set_output(0, out, dtype)
    if rank == 1:
        pieces: list[Dim] = []
        for value, shape in zip(present, shapes):
            elements = facts.value_of(value)
            if elements is None:
                if (
                    shape is None
                    or not isinstance(shape[0], int)
                    or shape[0] > MAX_VALUE_ELEMENTS
                ):
                    return
                elements = [unknown_element() for _ in range(shape[0])]
            pieces.extend(elements)
        if not is_fully_unknown(pieces):
            ctx.set_output_value(0, pieces)


@register("", "Gather")
def infer_gather(ctx: NodeContext, node: ir.Node) -> None:
    """``data.shape[:axis] + indices.shape + data.shape[axis+1:]``; values via ``take``."""
    data_value = ctx.require_input(0)
    indices_value = ctx.require_input(1)
    facts = ctx.ctx
    data = facts.shape_of(data_value)
    indices = facts.shape_of(indices_value)
    dtype = facts.dtype_of(data_value)
    if data is None or indices is None:
        ctx.set_output(0, None, dtype)
        return
    if not data:
        ctx.fail("cannot gather from a scalar")
    # has_attr first: looking up an absent attribute is slow.
    axis = ctx.normalize_axis(ctx.attr_int("axis") if ctx.has_attr("axis") else 0, len(data))
    out = (*data[:axis], *indices, *data[axis + 1 :])
    ctx.set_output(0, out, dtype)
    elements = facts.value_of(data_value)
    if elements is None or not is_static(data) or not is_static(indices):
        return
    index_values = facts.value_of(indices_value)
    if index_values is None:
        return
    bound = data[axis]
    if not all(isinstance(j, int) for j in index_values):
        # Symbolic indices: the result has the right shape but unknown elements.
        return
    for j in index_values:
        if not -bound <= j < bound:  # type: ignore[operator]
            ctx.fail(f"index {j} is out of range for axis {axis} of size {bound}")
    if len(data) == 1 and len(elements) == bound and len(index_values) == math.prod(indices):
        # 1-D data (Shape -> Gather): plain indexing picks what ``np.take`` would.
        ctx.set_output_value(0, [elements[j] for j in index_values])  # type: ignore[index]
        return
    array = object_array(elements, data)  # type: ignore[arg-type]
    index_array = np.array(index_values, dtype=np.int64).reshape(tuple(indices))  # type: ignore[arg-type]
    taken = np.take(array, index_array, axis=axis)
    ctx.set_output_value(0, list(np.asarray(taken, dtype=object).reshape(-1)))


# ----------------------------------------------------------------------------------------
# Unsqueeze, Squeeze
# ----------------------------------------------------------------------------------------
@register("", "Unsqueeze")
def infer_unsqueeze(ctx: NodeContext, node: ir.Node) -> None:
    """Inserts 1s at ``axes`` (attribute before opset 13, input since)."""
    data_value = ctx.require_input(0)
    facts = ctx.ctx
    data = facts.shape_of(data_value)
    dtype = facts.dtype_of(data_value)
    given, axes = _axes_input_or_attr(ctx, 13)
    if not given:
        ctx.fail("missing axes")
    if data is None:
        ctx.set_output(0, None, dtype)
        return
    if axes is None:
        count = static_length(ctx, 1)
        # Where the 1s go is unknown: every dim is fresh, only the rank is known.
        ctx.set_output(0, None if count is None else [None] * (len(data) + count), dtype)
        return
    rank = len(data) + len(axes)
    if len(axes) == 1:  # the usual case: one 1 inserted at one place
        k = ctx.normalize_axis(axes[0], rank)
        ctx.set_output(0, (*data[:k], 1, *data[k:]), dtype)
    else:
        positions = set(ctx.normalize_axes(axes, rank))
        source = iter(data)
        ctx.set_output(0, [1 if k in positions else next(source) for k in range(rank)], dtype)
    ctx.set_output_value(0, facts.value_of(data_value))


def _squeezed_by_runtime_axes(
    ctx: NodeContext, data: Sequence[Dim], count: int | None
) -> list[Dim | None] | None:
    """The output of ``Squeeze`` by ``count`` axes whose values are unknown.

    Every squeezed dim is 1, so the axes point at dims that can be 1. onnxruntime (and
    onnx) accept a repeated axis and squeeze it once, so ``count >= 2`` axes give a
    known rank only when a single dim can be 1: then that dim goes. One axis removes
    one of the dims that can be 1; each output dim is then one of at most two input
    dims (exact when they are the same, else a fresh symbol bounded by both).
    """
    if count is None:
        return None
    if count == 0:
        return [None] * len(data)
    candidates = [
        k
        for k, d in enumerate(data)
        if d == 1 or not (isinstance(d, int) or ctx.scope.prove_gt(d, 1))
    ]
    if len(candidates) == 1:
        (gone,) = candidates
        return [d for k, d in enumerate(data) if k != gone]
    if count != 1:
        return None
    out: list[Dim | None] = []
    for k in range(len(data) - 1):
        # The removed axis j is after k (dim k stays in place) or at/before k (k + 1).
        choices = []
        if any(j > k for j in candidates):
            choices.append(data[k])
        if any(j <= k for j in candidates):
            choices.append(data[k + 1])
        if len(choices) == 1 or (len(choices) == 2 and same_dim(*choices)):
            out.append(choices[0])
            continue
        if not choices:
            out.append(None)  # no dim can be 1: the node always fails
            continue
        a, b = choices
        fresh = ctx.new_symbol(f"o0_d{k}")
        ctx.ctx.add_less_equal_constraint(fresh, expr.dmax(a, b, scope=ctx.scope))
        low = expr.dmin(a, b, scope=ctx.scope)
        if low != 0:
            ctx.ctx.add_less_equal_constraint(low, fresh)
        out.append(fresh)
    return out


@register("", "Squeeze")
def infer_squeeze(ctx: NodeContext, node: ir.Node) -> None:
    """Removes ``axes`` (which must be 1); without axes, every dim known to be 1."""
    ctx.require_input(0)
    data = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    given, axes = _axes_input_or_attr(ctx, 13)
    if data is None:
        ctx.set_output(0, None, dtype)
        return
    if not given:
        if not all(isinstance(d, int) or ctx.scope.prove_gt(d, 1) for d in data):
            # A symbolic dim might be 1 at runtime: which dims go is unknown.
            ctx.set_output(0, None, dtype)
            return
        out = [d for d in data if d != 1]
    elif axes is None:
        out = _squeezed_by_runtime_axes(ctx, data, static_length(ctx, 1))
    else:
        drop = set(ctx.normalize_axes(axes, len(data)))
        for k in drop:
            if isinstance(data[k], int) and data[k] != 1:
                ctx.fail(f"cannot squeeze axis {k} of size {data[k]}")
        out = [d for k, d in enumerate(data) if k not in drop]
    ctx.set_output(0, out, dtype)
    ctx.set_output_value(0, ctx.input_value(0))


# ----------------------------------------------------------------------------------------
# Cast, CastLike, Identity
# ----------------------------------------------------------------------------------------
_INT_RANGES = {
    ir.DataType.INT8: (-(2**7), 2**7 - 1),
    ir.DataType.INT16: (-(2**15), 2**15 - 1),
    ir.DataType.INT32: (-(2**31), 2**31 - 1),
    ir.DataType.INT64: (-(2**63), 2**63 - 1),
    ir.DataType.UINT8: (0, 2**8 - 1),
    ir.DataType.UINT16: (0, 2**16 - 1),
    ir.DataType.UINT32: (0, 2**32 - 1),
    ir.DataType.UINT64: (0, 2**64 - 1),
}
# Symbolic elements are dim-sized; these types hold any realistic dim.
_WIDE_INTS = frozenset({ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT64})


def _cast_element(scope: expr.Scope, e: Dim, to: ir.DataType) -> Dim:
    if to == ir.DataType.BOOL:
        return boolean_of(scope, e)
    if isinstance(e, int):
        low, high = _INT_RANGES[to]
        return e if low <= e <= high else unknown_element()
    return e if to in _WIDE_INTS else unknown_element()


def _set_cast(ctx: NodeContext, to: ir.DataType) -> None:
    ctx.set_output(0, ctx.input_shape(0), to)
    elements = ctx.input_value(0)
    if (
        elements is None
        or to not in INTEGER_DTYPES
        or ctx.input_dtype(0) not in INTEGER_DTYPES
    ):
        return
    cast = [_cast_element(ctx.scope, e, to) for e in elements]
    if not is_fully_unknown(cast):
        ctx.set_output_value(0, cast)


@register("", "Cast")
def infer_cast(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape, element type ``to`` (an int, or a type name before opset 6)."""
    ctx.require_input(0)
    attr = node.attributes.get("to")
    if attr is None:
        ctx.fail("missing attribute 'to'")
    try:
        if attr.type == ir.AttributeType.STRING:
            to = ir.DataType[attr.value.upper()]
        else:
            to = ir.DataType(ctx.attr_int("to"))
    except (KeyError, ValueError):
        ctx.fail(f"invalid target type {attr.value!r}")
    _set_cast(ctx, to)


@register("", "CastLike", since=15)
def infer_cast_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as input 0, element type of input 1."""
    ctx.require_input(0)
    ctx.require_input(1)
    to = ctx.input_dtype(1)
    if to is None:
        ctx.set_output(0, ctx.input_shape(0))
        return
    _set_cast(ctx, to)


@register("", "Identity")
def infer_identity(ctx: NodeContext, node: ir.Node) -> None:
    """Output = input: shape, type and value (sequences/optionals keep their type)."""
    value = ctx.require_input(0)
    if value.type is not None and not isinstance(value.type, ir.TensorType):
        ctx.set_output_type(0, value.type)
        ctx.set_output(0, None)
        return
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
    ctx.set_output_value(0, ctx.input_value(0))


# ----------------------------------------------------------------------------------------
# Constant, ConstantOfShape, Range, Expand
# ----------------------------------------------------------------------------------------
_INT64_CODE = int(INT64)
_TENSOR_ATTRIBUTE = ir.AttributeType.TENSOR


@register("", "Constant")
def infer_constant(ctx: NodeContext, node: ir.Node) -> None:
    """Shape, type and (small integer) value from whichever ``value*`` attribute is set."""
    attributes = node.attributes.data
    if len(attributes) != 1:
        ctx.fail(f"expects exactly one attribute, got {sorted(attributes)}")
    ((name, attr),) = attributes.items()
    if name == "value":
        # The usual tensor attribute is read directly (attr_tensor re-finds and re-checks it).
        if attr.type is _TENSOR_ATTRIBUTE and not attr.is_ref():
            tensor = attr.value
        else:
            tensor = ctx.attr_tensor("value")
        read = read_int64_proto(tensor)
        if read is not None:
            dims, elements = read
            ctx.set_output(0, dims, INT64)
            ctx.set_output_value(0, elements)
            return
        ctx.set_output(0, tensor_dims(tensor), tensor.dtype)
        ctx.set_output_value(0, int_elements(tensor))
    elif name == "value_int":
        ctx.set_output(0, [], INT64)
        ctx.set_output_value(0, [ctx.attr_int(name)])
    elif name == "value_ints":
        ints = ctx.attr_ints(name)
        ctx.set_output(0, [len(ints)], INT64)
        ctx.set_output_value(0, ints)
    elif name == "value_float":
        ctx.attr_float(name)
        ctx.set_output(0, [], ir.DataType.FLOAT)
    elif name == "value_floats":
        ctx.set_output(0, [len(ctx.attr_floats(name))], ir.DataType.FLOAT)
    elif name == "value_string":
        ctx.set_output(0, [], ir.DataType.STRING)
    elif name == "value_strings":
        ctx.set_output(0, [len(attr.value)], ir.DataType.STRING)
    else:  # sparse_value and anything newer: ONNX knows best
        ctx.fallback()


@register("", "ConstantOfShape", since=9)
def infer_constant_of_shape(ctx: NodeContext, node: ir.Node) -> None:
    """Output shape = input 0's elements; type and fill value from ``value``."""
    ctx.require_input(0)
    tensor = ctx.attr_tensor("value")
    dtype = tensor.dtype if tensor is not None else ir.DataType.FLOAT
    target = ctx.input_value(0)
    if target is None:
        length = static_length(ctx, 0)
        ctx.set_output(0, None if length is None else [None] * length, dtype)
        return
    dims: list[Dim | None] = []
    for k, t in enumerate(target):
        if isinstance(t, int):
            if t < 0:
                ctx.fail(f"negative dim {t} at axis {k}")
            dims.append(t)
        else:
            # A negative element fails the node (the spec and onnxruntime agree), so in
            # every run that gets past it the element is the dim: no proof of t >= 0 needed.
            dims.append(None if t.is_unknown else t)
    ctx.set_output(0, dims, dtype)
    fill = int_elements(tensor) if tensor is not None else (0,)
    if fill is not None and len(fill) == 1 and is_static(dims):
        count = math.prod(dims)  # type: ignore[arg-type]
        if count <= MAX_VALUE_ELEMENTS and dtype in INTEGER_DTYPES:
            ctx.set_output_value(0, fill * count)


def _scalar(ctx: NodeContext, i: int) -> Dim | float | None:
    """Input ``i`` as one integer element or, for a float constant, one float."""
    elements = ctx.input_value(i)
    if elements is not None:
        return elements[0] if len(elements) == 1 else None
    value = ctx.input(i)
    array = constant_array(value)  # an initializer or a Constant node
    if array is not None and array.size == 1 and array.dtype.kind == "f":
        return float(array.reshape(-1)[0])
    return _cast_integer(ctx, value)


#: The integers each float type holds exactly: ``|n| <= 2**bits``.
_EXACT_INTEGER_BITS = {
    ir.DataType.FLOAT: 24,
    ir.DataType.DOUBLE: 53,
    ir.DataType.FLOAT16: 11,
    ir.DataType.BFLOAT16: 8,
}


def _cast_integer(ctx: NodeContext, value: ir.Value | None) -> float | None:
    """A float scalar cast from a known integer it holds exactly (``Cast(size)``)."""
    producer = default_domain_producer(value, "Cast")
    if producer is None or not producer.inputs or producer.inputs[0] is None:
        return None
    attr = producer.attributes.get("to")
    if attr is None or attr.type != ir.AttributeType.INT:
        return None
    bits = _EXACT_INTEGER_BITS.get(ir.DataType(attr.value))
    elements = ctx.ctx.value_of(producer.inputs[0])
    if bits is None or elements is None or len(elements) != 1:
        return None
    n = elements[0]
    if not isinstance(n, int) or abs(n) > 2**bits:
        return None
    return float(n)


@register("", "Range", since=11)
def infer_range(ctx: NodeContext, node: ir.Node) -> None:
    """1-D output of ``max(ceil((limit - start) / delta), 0)`` elements."""
    for i in range(3):
        ctx.require_input(i)
    dtype = ctx.input_dtype(0)
    start, limit, delta = (_scalar(ctx, i) for i in range(3))
    length: Dim | None = None
    if isinstance(delta, (int, float)) and delta == 0:
        ctx.fail("delta is zero")
    if all(isinstance(x, (int, float)) for x in (start, limit, delta)):
        length = max(math.ceil((limit - start) / delta), 0)  # type: ignore[operator]
    elif isinstance(delta, int) and _is_dim(start) and _is_dim(limit):
        span = expr.sub(limit, start) if delta > 0 else expr.sub(start, limit)  # type: ignore[arg-type]
        length = expr.dmax(expr.ceildiv(span, abs(delta)), 0, scope=ctx.scope)
    ctx.set_output(0, [length], dtype)
    if (
        isinstance(length, int)
        and length <= MAX_VALUE_ELEMENTS
        and isinstance(delta, int)
        and _is_dim(start)
        and dtype in INTEGER_DTYPES
    ):
        ctx.set_output_value(0, [expr.add(start, k * delta) for k in range(length)])  # type: ignore[arg-type]


def _is_dim(x: object) -> bool:
    return isinstance(x, int) or (isinstance(x, expr.DimExpr) and not x.is_unknown)


@register("", "Expand", since=8)
def infer_expand(ctx: NodeContext, node: ir.Node) -> None:
    """Numpy broadcasting of the input shape with the target shape (input 1)."""
    ctx.require_input(0)
    ctx.require_input(1)
    data = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    target = ctx.input_value(1)
    if target is None:
        length = static_length(ctx, 1)
        target = None if length is None else [unknown_element()] * length
    if data is None or target is None:
        ctx.set_output(0, None, dtype)
        return
    dims: list[Dim] = []
    for k, t in enumerate(target):
        if isinstance(t, int):
            if t < 0:
                ctx.fail(f"negative target dim {t} at axis {k}")
            dims.append(t)
        elif t.is_unknown or not ctx.scope.prove_nonneg(t):
            dims.append(ctx.new_symbol(f"shape{k}"))  # some dim >= 0
        else:
            dims.append(t)
    out = ctx.broadcast_shapes(data, tuple(dims))
    ctx.set_output(0, out, dtype)
    elements = ctx.input_value(0)
    if elements is not None and is_static(data) and is_static(out):
        result = broadcast_elements(lambda e, _: e, [(data, elements), (out, None)])
        if result is not None:
            ctx.set_output_value(0, result[1])
