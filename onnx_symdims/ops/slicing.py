"""Shape hooks for slicing ops.

Slice, Split, Flatten and Transpose, for every version from opset 7 on (Tile, Pad and the
other data-movement ops are in :mod:`onnx_symdims.ops.movement`).

Soundness notes:

* A dim may be 0, so ``x[0:1]`` on a symbolic axis ``d`` is ``min(1, d)``, never ``1``.
* A start or end whose sign cannot be proven (``64 - T`` may be negative) changes the
  meaning of the index: it is read as ``v + d*[v < 0]`` with the exact 0/1 indicator
  ``[v < 0] = min(1, max(0, -v))``, so the length is exact for every value (MPT's
  ``alibi[64 - T:]`` on 64 is ``max(0,min(T-64*min(1,max(T-64,0)),64))``: ``T`` up to
  64, ``T - 64`` up to 128, then 64). Such a length larger than
  ``_MAX_PIECEWISE_SIZE`` nodes gets a fresh symbol bounded by the input dim instead.
* Ends at or beyond ``INT32_MAX`` (and starts at or below ``-INT32_MAX``) are the
  exporters' spelling of "to the end"; they are read as infinities, which assumes
  the sliced axis is shorter than ``2**31 - 1``. A backward slice ending exactly at
  ``INT32_MAX``/``INT64_MAX`` is read differently by the spec (clamp to ``d - 1``) and
  by onnxruntime ("before the first element"), so it gets a fresh symbol.
* ONNX clamps a backward start into ``[0, d-1]``, unlike numpy: ``x[-5:-10:-1]`` of a
  length-3 axis has 1 element in ONNX and none in numpy.
* Split with a ``split`` input that is only known at run time gets a fresh symbol per
  output (their sum is recorded as equal to the dim), never an even split.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    divide,
    fresh_at_most,
    is_static,
    product,
    replace_axis,
    static_length,
)
from onnx_symdims.ops._registry import register

if TYPE_CHECKING:
    import onnx_ir as ir

    from onnx_symdims.shapes import NodeContext, ShapesContext

logger = logging.getLogger(__name__)

Dim = expr.Dim

#: Indices at or beyond this magnitude mean "past the end" / "before the start".
_INFINITE_INDEX = 2**31 - 1
_POS_INF = "+inf"
_NEG_INF = "-inf"
#: A length built with a sign indicator and larger than this (expression nodes) becomes
#: a fresh symbol: indices computed from earlier such lengths would grow without bound.
_MAX_PIECEWISE_SIZE = 400
#: onnxruntime reads exactly these ends as "before the first element" when the step is
#: negative, while the ONNX spec clamps them to ``d - 1``: such slices get a fresh symbol.
_RUNTIME_DEPENDENT_ENDS = frozenset({2**31 - 1, 2**63 - 1})


# ---------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------
def _is_known(d: Dim | None) -> bool:
    return d is not None and not (isinstance(d, expr.DimExpr) and d.is_unknown)


def _bounded_symbol(ctx: NodeContext, hint: str, bound: Dim) -> Dim:
    """A fresh dim known to be at most ``bound`` (``0`` when the bound is ``0``)."""
    if bound == 0:
        return 0
    return fresh_at_most(ctx, hint, bound)


# ---------------------------------------------------------------------------------------
# Slice
# ---------------------------------------------------------------------------------------
def _onnx_slice_bounds(n: int, start: int, end: int, step: int) -> tuple[int, int]:
    """The first index and the (exclusive) stop ONNX Slice uses on an axis of length ``n``.

    Not Python's rules: with a negative step ONNX clamps the start into ``[0, n-1]``.
    """
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    # min(max(v, low), high) as comparisons: the builtins parse their arguments, several
    # times the cost of a comparison (every Slice of a static axis clamps two indices).
    if step > 0:
        start = 0 if start < 0 else (n if start > n else start)
        end = 0 if end < 0 else (n if end > n else end)
    else:
        last = n - 1
        start = 0 if start < 0 else start
        start = last if start > last else start
        end = -1 if end < -1 else end
        end = last if end > last else end
    return start, end


def _onnx_slice_range(n: int, start: int, end: int, step: int) -> range:
    """The indices ONNX Slice takes from an axis of length ``n`` (see :func:`_onnx_slice_bounds`)."""
    first, stop = _onnx_slice_bounds(n, start, end, step)
    return range(first, stop, step)


def _static_slice_length(d: int, start: int, end: int, step: int) -> int | None:
    """:func:`slice_length` of an int axis with int indices and a nonzero step.

    The same answers without its symbolic machinery: a static axis sliced by constants
    (a Shape output's tail, a fixed crop) is the usual Slice.
    """
    if d == 0:
        return 0
    if step < 0 and end in _RUNTIME_DEPENDENT_ENDS:
        return None  # _runtime_dependent: a backward slice to INT32_MAX or INT64_MAX
    first, stop = _onnx_slice_bounds(d, start, end, step)
    # len(range(first, stop, step)), without building the range.
    if step > 0:
        return (stop - first + step - 1) // step if stop > first else 0
    return (first - stop - step - 1) // -step if first > stop else 0


def _runtime_dependent(end: Dim, step: Dim, scope: expr.Scope) -> bool:
    """True for a backward slice whose end means different things to spec and runtime."""
    if not (isinstance(end, int) and end in _RUNTIME_DEPENDENT_ENDS):
        return False
    return not (isinstance(step, int) and step > 0) and not scope.prove_ge(step, 1)


def _adjusted_index(v: Dim, d: Dim, scope: expr.Scope) -> Dim | str:
    """``v + d`` for a negative index, ``v`` otherwise; infinities as markers.

    A symbolic index whose sign the scope cannot prove is ``v + d*[v < 0]``, with the
    exact 0/1 indicator ``[v < 0] = min(1, max(0, -v))`` (for every integer ``v``): the
    spec's ``v < 0 ? v + d : v`` as one expression, never a guess of the sign.
    """
    if isinstance(v, int):
        if v >= _INFINITE_INDEX:
            return _POS_INF
        if v <= -_INFINITE_INDEX:
            return _NEG_INF
        return v if v >= 0 else expr.add(v, d)
    if scope.prove_nonneg(v):
        return v
    if scope.prove_gt(0, v):
        return expr.add(v, d)
    negative = expr.dmin(1, expr.dmax(0, expr.neg(v), scope=scope), scope=scope)
    return expr.add(v, expr.mul(d, negative))


def _clamp(v: Dim | str, lo: Dim, hi: Dim, scope: expr.Scope) -> Dim:
    """``min(max(v, lo), hi)`` exactly (also when ``lo > hi``), simplified by the scope."""
    if v == _POS_INF:
        return hi
    if v == _NEG_INF or scope.prove_le(v, lo):
        return expr.dmin(lo, hi, scope=scope)
    if scope.prove_ge(v, hi):
        return hi
    return expr.dmin(expr.dmax(v, lo, scope=scope), hi, scope=scope)


def _forward_length(
    d: Dim, start: Dim | str, end: Dim | str, step: Dim, scope: expr.Scope
) -> Dim:
    """Length of a positive-step slice: ``max(0, ceil((min(end, d) - max(start, 0)) / step))``.

    This equals ``max(0, ceil((clamp(end, 0, d) - clamp(start, 0, d)) / step))`` for every
    start and end (checked case by case) and keeps the expressions small: the difference
    of a ``min`` and a ``max`` is the ``min`` of the pairwise differences, so
    ``x[-(n+1):]`` on ``d`` gives ``min(n+1, d)``.
    """
    if start == _POS_INF or end == _NEG_INF:
        return 0
    if start == _NEG_INF:
        firsts: list[Dim] = [0]
    elif scope.prove_nonneg(start):
        firsts = [start]  # type: ignore[list-item]
    else:
        firsts = [start, 0]  # type: ignore[list-item]
    stops: list[Dim] = [d] if end == _POS_INF else [end, d]  # type: ignore[list-item]
    # The canonical ``b - 0`` is ``b`` and ``ceil(x / 1)`` is ``x``: the usual slice (from
    # 0, step 1) skips those calls.
    spans = [b if _is_zero(a) else expr.sub(b, a) for b in stops for a in firsts]
    span = expr.dmin(*spans, scope=scope)
    if not (isinstance(step, int) and step == 1):
        span = expr.ceildiv(span, step)
    return expr.dmax(0, span, scope=scope)


def _is_zero(d: Dim) -> bool:
    return isinstance(d, int) and d == 0


def _backward_length(
    d: Dim, start: Dim | str, end: Dim | str, step: Dim, scope: expr.Scope
) -> Dim:
    """Length of a negative-step slice (``step`` is the absolute step).

    ONNX clamps the start into ``[0, d-1]`` and the end into ``[-1, d-1]``; for ``d == 0``
    both clamps give ``-1``, hence length 0.
    """
    last = expr.sub(d, 1)
    first_index = _clamp(start, 0, last, scope)
    stop_index = _clamp(end, -1, last, scope)
    length = expr.ceildiv(expr.sub(first_index, stop_index), step)
    ordered = (
        start not in (_POS_INF, _NEG_INF)
        and end not in (_POS_INF, _NEG_INF)
        and scope.prove_ge(start, end)  # the clamps are monotone: first >= stop
    )
    return length if ordered else expr.dmax(0, length, scope=scope)


def slice_length(d: Dim, start: Dim, end: Dim, step: Dim, scope: expr.Scope) -> Dim | None:
    """The length of ``Slice`` on an axis of length ``d``, or ``None`` when unprovable.

    Args:
        d: The input dim.
        start: The start index (negative counts from the end).
        end: The end index (exclusive; negative counts from the end).
        step: The step, nonzero.
        scope: Assumptions used to resolve signs and ``min``/``max``.

    Returns:
        The output dim, sound for every binding of the symbols; ``None`` when the sign
        of a symbolic step cannot be proven, or when an index of unknown sign (read
        with an exact sign indicator) makes the length too large to be useful.

    Raises:
        ValueError: the step is 0.
    """
    for index in (start, end, step):
        if index is None or (isinstance(index, expr.DimExpr) and index.is_unknown):
            return None  # not _is_known(index)
    if step == 0:
        raise ValueError("Slice step cannot be 0")
    if d == 0:
        return 0
    if _runtime_dependent(end, step, scope):
        return None
    if (
        isinstance(d, int)
        and isinstance(start, int)
        and isinstance(end, int)
        and isinstance(step, int)
    ):
        return _static_slice_length(d, start, end, step)
    if isinstance(step, int):
        forward = step > 0
    elif scope.prove_ge(step, 1):
        forward = True
    elif scope.prove_le(step, -1):
        forward = False
    else:
        return None
    adjusted_start = _adjusted_index(start, d, scope)
    adjusted_end = _adjusted_index(end, d, scope)
    if forward:
        length = _forward_length(d, adjusted_start, adjusted_end, step, scope)
    else:
        length = _backward_length(d, adjusted_start, adjusted_end, expr.neg(step), scope)
    if (
        isinstance(length, expr.DimExpr)
        and length.size > _MAX_PIECEWISE_SIZE
        and (_unsigned(start, scope) or _unsigned(end, scope))
    ):
        return None
    return length


def _slice_length_under_facts(
    facts: ShapesContext, d: Dim, start: Dim, end: Dim, step: Dim, scope: expr.Scope
) -> Dim | None:
    """:func:`slice_length`, kept with the facts (``ShapesContext.dims_under_facts``).

    A pure function of its arguments and the facts, asked again by every layer (and
    every inference) that slices the same dims the same way.
    """
    (length,) = facts.dims_under_facts(
        ("Slice", d, start, end, step), lambda: [slice_length(d, start, end, step, scope)]
    )
    return length


def _unsigned(v: Dim, scope: expr.Scope) -> bool:
    """True for a symbolic index read with a sign indicator (its sign is not proven)."""
    return (
        isinstance(v, expr.DimExpr) and not scope.prove_nonneg(v) and not scope.prove_gt(0, v)
    )


def _slice_vector(
    ctx: NodeContext, i: int, n: int | None, value: Sequence[Dim] | None
) -> tuple[Dim | None, ...] | None:
    """Input ``i`` (elements ``value``) as ``n`` indices (``None`` for unknown ones), or ``None``."""
    if value is None:
        return None if n is None else (None,) * n
    if n is not None and len(value) != n:
        ctx.fail(f"input {i} has {len(value)} elements, expected {n}")
    for v in value:
        if isinstance(v, expr.DimExpr) and v.is_unknown:
            return tuple(v if _is_known(v) else None for v in value)
    return tuple(value)  # every element known (the usual case): as it is


def _all_known(*vectors: Sequence[Dim]) -> bool:
    """True when no element of the vectors is an unknown ``DimExpr``."""
    for vector in vectors:
        for v in vector:
            if isinstance(v, expr.DimExpr) and v.is_unknown:
                return False
    return True


def _apply_slice(
    ctx: NodeContext,
    starts: Sequence[Dim | None],
    ends: Sequence[Dim | None],
    axes: Sequence[int] | None,
    steps: Sequence[Dim | None],
) -> None:
    """Writes the Slice output; ``axes=None`` means the sliced axes are unknown."""
    inputs = ctx.node._inputs  # ctx.input(0), inline (the slot behind node.inputs)
    data_value = inputs[0] if inputs else None
    facts = ctx.ctx
    shape = None if data_value is None else facts.shape_of(data_value)
    dtype = None if data_value is None else facts.dtype_of(data_value)
    if shape is None:
        ctx.set_output(0, None, dtype)
        return
    rank = len(shape)
    if axes is None:
        # Any axis may be sliced: each dim is unknown but at most the input dim.
        dims = [_bounded_symbol(ctx, f"d{k}", d) for k, d in enumerate(shape)]
        ctx.set_output(0, dims, dtype)
        return
    # One axis (the usual case) cannot repeat: normalize it alone.
    axes = (
        (ctx.normalize_axis(axes[0], rank),)
        if len(axes) == 1
        else ctx.normalize_axes(axes, rank)
    )
    scope = facts.scope  # ctx.scope without the property call
    dims: list[Dim] = list(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            ctx.fail(f"step is 0 on axis {axis}")
        d = shape[axis]
        length = None
        if (
            d.__class__ is int
            and start.__class__ is int
            and end.__class__ is int
            and step.__class__ is int
        ):
            # A static axis and constant indices: no fact to consult, nothing worth
            # keeping with the facts.
            length = _static_slice_length(d, start, end, step)
        elif start is not None and end is not None and step is not None:
            length = _slice_length_under_facts(facts, d, start, end, step, scope)
        dims[axis] = _bounded_symbol(ctx, f"d{axis}", d) if length is None else length
    ctx.set_output(0, dims, dtype)
    _slice_value(ctx, shape, starts, ends, axes, steps)


def _static_value_shape(shape: Sequence[Dim], elements: Sequence[Dim]) -> list[int] | None:
    """The int dims of a known value of ``shape`` (a 1-D one has its length), or ``None``."""
    if len(shape) == 1:
        return [len(elements)]
    if not all(isinstance(d, int) for d in shape):
        return None
    dims: list[int] = list(shape)  # type: ignore[arg-type]
    count = 1
    for d in dims:
        count *= d
    return dims if count == len(elements) else None


def _strides(dims: Sequence[int]) -> list[int]:
    """Row-major strides (in elements) of an array of ``dims``."""
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    return strides


def _gather_flat(
    elements: Sequence[Dim], dims: Sequence[int], ranges: Sequence[Sequence[int]]
) -> list[Dim]:
    """The elements at the row-major index product of ``ranges`` over a ``dims`` array."""
    if len(dims) == 1:  # a vector (a Shape output sliced): its own indices
        return [elements[i] for i in ranges[0]]
    strides = _strides(dims)
    return [
        elements[sum(i * s for i, s in zip(index, strides))]
        for index in itertools.product(*ranges)
    ]


def _slice_value(
    ctx: NodeContext,
    shape: Sequence[Dim],
    starts: Sequence[Dim | None],
    ends: Sequence[Dim | None],
    axes: Sequence[int],
    steps: Sequence[Dim | None],
) -> None:
    """Value-as-shape: slicing a known value (of static dims) with constant indices.

    A multi-dimensional one too: TorchScript's ``F.pad`` builds its pads as a ``[k, 2]``
    table sliced backwards along axis 0 and transposed.
    """
    elements = ctx.input_value(0)
    if elements is None:
        return
    if len(shape) == 1 and len(axes) == 1:
        # A vector sliced once (a Shape output's head or tail, the usual case): Python's
        # slice of the elements at ONNX's bounds, which are within the vector, or -1 (a
        # backward slice through index 0), that is, no stop.
        start, end, step = starts[0], ends[0], steps[0]
        if not (isinstance(start, int) and isinstance(end, int) and isinstance(step, int)):
            return
        if step < 0 and end in _RUNTIME_DEPENDENT_ENDS:
            return  # _runtime_dependent (the step is nonzero: checked by _apply_slice)
        first, stop = _onnx_slice_bounds(len(elements), start, end, step)
        ctx.set_output_value(0, elements[first : stop if stop >= 0 else None : step])
        return
    dims = _static_value_shape(shape, elements)
    if dims is None:
        return
    ranges: list[Sequence[int]] = [range(d) for d in dims]
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if not (isinstance(start, int) and isinstance(end, int) and isinstance(step, int)):
            return
        if _runtime_dependent(end, step, ctx.scope):
            return
        ranges[axis] = _onnx_slice_range(dims[axis], start, end, step)
    ctx.set_output_value(0, _gather_flat(elements, dims, ranges))


@register("", "Slice", since=1)
def infer_slice_v1(ctx: NodeContext, node: ir.Node) -> None:
    """Slice with ``starts``/``ends``/``axes`` attributes (opset < 10): clamped lengths."""
    starts = ctx.attr_ints("starts")
    ends = ctx.attr_ints("ends")
    if starts is None or ends is None:
        ctx.fail("attributes 'starts' and 'ends' are required")
    if len(starts) != len(ends):
        ctx.fail(f"{len(starts)} starts but {len(ends)} ends")
    axes = ctx.attr_ints("axes", range(len(starts)))
    if len(axes) != len(starts):
        ctx.fail(f"{len(axes)} axes but {len(starts)} starts")
    _apply_slice(ctx, starts, ends, axes, (1,) * len(starts))


def _vector_length(
    ctx: NodeContext,
    inputs: Sequence[ir.Value | None],
    vectors: Sequence[Sequence[Dim] | None],
) -> int | None:
    """The length of Slice's index inputs: from their elements, else a static shape."""
    lengths = set()
    for i, elements in zip((1, 2, 3, 4), vectors):
        if elements is not None:
            lengths.add(len(elements))
        elif (
            i < len(inputs)
            and inputs[i] is not None
            and (length := static_length(ctx, i)) is not None
        ):
            lengths.add(length)
    if len(lengths) > 1:
        ctx.fail(f"starts, ends, axes and steps have different lengths {sorted(lengths)}")
    return lengths.pop() if lengths else None


@register("", "Slice", since=10)
def infer_slice(ctx: NodeContext, node: ir.Node) -> None:
    """Slice with ``starts``/``ends``/``axes``/``steps`` inputs: clamped symbolic lengths."""
    inputs = node._inputs  # the slot behind node.inputs (see passes/_inference.py)
    if len(inputs) < 3 or inputs[1] is None or inputs[2] is None:
        ctx.require_input(1)
        ctx.require_input(2)  # one of them fails the node
    value_of = ctx.ctx.value_of
    axes_input = inputs[3] if len(inputs) > 3 else None
    steps_input = inputs[4] if len(inputs) > 4 else None
    # The elements of starts, ends, axes and steps (None: absent or unknown), each read
    # once and in input order.
    starts_value = value_of(inputs[1])
    ends_value = value_of(inputs[2])
    axes_value = None if axes_input is None else value_of(axes_input)
    steps_value = None if steps_input is None else value_of(steps_input)
    vectors = (starts_value, ends_value, axes_value, steps_value)
    if (
        starts_value is not None
        and ends_value is not None
        and (axes_value is not None or axes_input is None)
        and (steps_value is not None or steps_input is None)
        and len(ends_value) == len(starts_value)
        and (axes_value is None or len(axes_value) == len(starts_value))
        and (steps_value is None or len(steps_value) == len(starts_value))
    ):
        n: int | None = len(starts_value)  # every given vector known, of one length
        if _all_known(starts_value, ends_value, steps_value or ()):
            # Their elements too (the usual case): what _slice_vector gives, as they are.
            starts, ends = tuple(starts_value), tuple(ends_value)  # type: ignore[arg-type]
            steps = None if steps_value is None else tuple(steps_value)
        else:
            starts = _slice_vector(ctx, 1, n, starts_value)
            ends = _slice_vector(ctx, 2, n, ends_value)
            steps = None if steps_input is None else _slice_vector(ctx, 4, n, steps_value)
    else:
        n = _vector_length(ctx, inputs, vectors)
        starts = _slice_vector(ctx, 1, n, starts_value)
        ends = _slice_vector(ctx, 2, n, ends_value)
        steps = None if steps_input is None else _slice_vector(ctx, 4, n, steps_value)
    if axes_input is not None:
        # Like ctx.input_ints(3): only when every element is an int.
        axes = axes_value if is_static(axes_value) else None
    else:
        axes = None if n is None else tuple(range(n))
    if steps_input is None:
        steps = (1,) * (n or 0)
    if axes is None or starts is None or ends is None or steps is None:
        _apply_slice(ctx, (), (), None, ())
        return
    _apply_slice(ctx, starts, ends, axes, steps)


# ---------------------------------------------------------------------------------------
# Split
# ---------------------------------------------------------------------------------------
def _set_split_outputs(ctx: NodeContext, axis: int, sizes: Sequence[Dim | None]) -> None:
    """Writes one output per size (``None``: a fresh symbol) and the sum constraint."""
    shape = ctx.input_shape(0)
    assert shape is not None
    d = shape[axis]
    sizes = [
        _bounded_symbol(ctx, f"split{i}", d) if size is None else size
        for i, size in enumerate(sizes)
    ]
    total = functools.reduce(expr.add, sizes, 0)
    if isinstance(total, int) and isinstance(d, int):
        if total != d:
            ctx.fail(f"split sizes {list(sizes)} do not add up to the dim {d}")
    elif not ctx.scope.prove_eq(total, d):
        # Holds in every execution that does not fail.
        ctx.ctx.add_constraint(total, d)
    dtype = ctx.input_dtype(0)
    for i, size in enumerate(sizes):
        ctx.set_output(i, replace_axis(shape, axis, size), dtype)
    _split_values(ctx, sizes)


def _split_values(ctx: NodeContext, sizes: Sequence[Dim]) -> None:
    """Value-as-shape: splitting a known 1-D value into constant sizes."""
    elements = ctx.input_value(0)
    if elements is None or ctx.input_rank(0) != 1:
        return
    if not all(isinstance(s, int) for s in sizes) or sum(sizes) != len(elements):  # type: ignore[arg-type]
        return
    offset = 0
    for i, size in enumerate(sizes):
        ctx.set_output_value(i, elements[offset : offset + size])  # type: ignore[operator]
        offset += size  # type: ignore[operator]


def _infer_split(
    ctx: NodeContext, sizes: Sequence[Dim | None] | None, chunks: int | None
) -> None:
    """Split along ``axis`` into explicit ``sizes``, ``chunks`` ceil-sized chunks, or evenly.

    Args:
        ctx: The node context.
        sizes: Explicit sizes (``None`` elements are run-time values), or ``None``.
        chunks: ``num_outputs`` (opset >= 18) when no sizes are given.
    """
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    outputs = ctx.num_outputs
    if sizes is not None and len(sizes) != outputs:
        ctx.fail(f"{len(sizes)} split sizes for {outputs} outputs")
    if chunks is not None and chunks != outputs:
        ctx.fail(f"num_outputs={chunks} but the node has {outputs} outputs")
    if sizes is not None:
        for size in sizes:
            if isinstance(size, int) and size < 0:
                ctx.fail(f"negative split size {size}")
    if shape is None:
        for i in range(outputs):
            ctx.set_output(i, None, dtype)
        return
    axis = ctx.normalize_axis(ctx.attr_int("axis", 0), len(shape))
    d = shape[axis]
    if sizes is None and chunks is not None:
        chunk = expr.ceildiv(d, chunks)
        last = expr.sub(d, expr.mul(chunks - 1, chunk))
        if isinstance(last, int) and last < 0:
            ctx.fail(f"cannot split dim {d} into {chunks} chunks")
        sizes = [chunk] * (chunks - 1) + [last]
    elif sizes is None:
        sizes = [divide(ctx, d, outputs, "dim")] * outputs
    _set_split_outputs(ctx, axis, sizes)


@register("", "Split", since=2)
def infer_split_v2(ctx: NodeContext, node: ir.Node) -> None:
    """Split with the optional ``split`` attribute (opsets 2-12); even split otherwise."""
    split = ctx.attr_ints("split")
    _infer_split(ctx, split or None, None)


def _split_input(ctx: NodeContext) -> tuple[Dim | None, ...] | None:
    """The ``split`` input's sizes; ``None`` when absent or empty (runtimes split evenly)."""
    if not ctx.has_input(1) or static_length(ctx, 1) == 0:
        return None
    return _slice_vector(ctx, 1, ctx.num_outputs, ctx.input_value(1))


@register("", "Split", since=13)
def infer_split_v13(ctx: NodeContext, node: ir.Node) -> None:
    """Split with the optional ``split`` input; run-time sizes give fresh symbols."""
    _infer_split(ctx, _split_input(ctx), None)


@register("", "Split", since=18)
def infer_split_v18(ctx: NodeContext, node: ir.Node) -> None:
    """Split with a ``split`` input or ``num_outputs`` (ceil-sized chunks, short last)."""
    chunks = ctx.attr_int("num_outputs")
    sizes = _split_input(ctx)
    if chunks is not None and sizes is not None:
        ctx.fail("both the 'split' input and 'num_outputs' are given")
    if chunks is not None and chunks < 1:
        ctx.fail(f"num_outputs must be positive, got {chunks}")
    _infer_split(ctx, sizes, chunks)


# ---------------------------------------------------------------------------------------
# Flatten, Transpose
# ---------------------------------------------------------------------------------------
@register("", "Flatten", since=1)
def infer_flatten(ctx: NodeContext, node: ir.Node) -> None:
    """Flatten: ``[prod(dims[:axis]), prod(dims[axis:])]``."""
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    axis = ctx.attr_int("axis", 1)
    if shape is None:
        ctx.set_output(0, [1 if axis == 0 else None, None], dtype)
        return
    rank = len(shape)
    lowest = -rank if ctx.opset >= 11 else 0
    if not lowest <= axis <= rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    if axis < 0:
        axis += rank
    ctx.set_output(0, [product(shape[:axis]), product(shape[axis:])], dtype)


#: The ``perm`` tuples (of two axes or more) found to be permutations -> the function
#: picking a shape's dims in that order: a model repeats a few (one per layer's head
#: split and merge), and a lookup is cheaper than sorting and comparing, the getter than
#: a comprehension.
_PERMUTATIONS: dict[tuple[int, ...], Callable[[Sequence[Dim]], tuple[Dim, ...]]] = {}
_MAX_PERMUTATIONS = 1_000


@register("", "Transpose", since=1)
def infer_transpose(ctx: NodeContext, node: ir.Node) -> None:
    """Transpose: dims permuted by ``perm`` (default: reversed); a bad perm fails."""
    inputs = node._inputs  # ctx.input(0), inline (the slot behind node.inputs)
    data_value = inputs[0] if inputs else None
    facts = ctx.ctx
    shape = None if data_value is None else facts.shape_of(data_value)
    dtype = None if data_value is None else facts.dtype_of(data_value)
    perm = ctx.attr_ints("perm")
    take = None
    if perm is not None:
        take = _PERMUTATIONS.get(perm)  # type: ignore[call-overload]
        if take is None:
            if sorted(perm) != list(range(len(perm))):
                ctx.fail(f"perm {list(perm)} is not a permutation")
            if len(perm) > 1:  # (itemgetter of one index gives the dim, not a tuple)
                take = operator.itemgetter(*perm)
                if len(_PERMUTATIONS) < _MAX_PERMUTATIONS:
                    _PERMUTATIONS[perm] = take  # type: ignore[index]
    if shape is None:
        ctx.set_output(0, None if perm is None else [None] * len(perm), dtype)
        return
    if perm is None:
        perm = range(len(shape) - 1, -1, -1)
        out = shape[::-1]
    elif len(perm) != len(shape):
        ctx.fail(
            f"perm {list(perm)} has length {len(perm)} but the input has rank {len(shape)}"
        )
    else:
        out = [shape[p] for p in perm] if take is None else take(shape)
    ctx.set_output(0, out, dtype)
    elements = ctx.input_value(0)
    if elements is None:
        return
    if len(shape) == 1:
        ctx.set_output_value(0, elements)
        return
    dims = _static_value_shape(shape, elements)
    if dims is not None:  # a known table (TorchScript's F.pad pads): its elements permuted
        strides = _strides(dims)
        ctx.set_output_value(
            0,
            [
                elements[sum(j * strides[p] for j, p in zip(index, perm))]
                for index in itertools.product(*(range(dims[p]) for p in perm))
            ],
        )
