"""Reductions, arg-reductions, softmax-like and normalization ops (domain ``ai.onnx``).

Reductions take their axes from an attribute (every op before opset 13/18) or from an
optional input (``ReduceSum`` from 13, the others from 18, together with
``noop_with_empty_axes``). A runtime ``axes`` input is handled soundly: with
``keepdims=1`` the rank is kept and each dim is either unchanged or 1 (a fresh symbol
unless the dim is 1 or the axis is known; a rank-1 input becomes ``[1]``). With
``keepdims=0`` one runtime axis removes one dim, so output dim ``k`` is input dim ``k``
or ``k + 1`` (exact when they are equal, else a fresh symbol between the two); with
more axes the rank is unknown, because onnxruntime and onnx accept repeated axes
(``[0, 0]`` removes one dim, not two).

``ReduceSum``/``ReduceProd``/``ReduceMax``/``ReduceMin`` over a known integer value (e.g.
the output of ``Shape``) propagate the value: ``ReduceProd(Shape(x))`` is the element
count of ``x``.
"""

from __future__ import annotations

__all__ = ["reduced_shape", "unique_axes"]

import functools
import logging
import math
from collections.abc import Callable, Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    dtype_attr,
    fresh_at_most,
    is_static,
    object_array,
    product,
    same_dim,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]

REDUCE_OPS = (
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
)  # fmt: skip
#: ``ReduceSum`` takes ``axes`` as an input from opset 13, the other reductions from 18.
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in REDUCE_OPS}


# ----------------------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------------------
def unique_axes(ctx: NodeContext, axes: Sequence[int], rank: int) -> list[int]:
    """Normalized axes without repeats (onnxruntime reduces a repeated axis once)."""
    if len(axes) == 1:  # the usual case: nothing can repeat
        return [ctx.normalize_axis(axes[0], rank)]
    normalized = [ctx.normalize_axis(a, rank) for a in axes]
    unique = sorted(set(normalized))
    if len(unique) != len(normalized):
        ctx.warn(f"repeated axis in {list(axes)}; each axis is reduced once")
    return unique


def reduced_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    """``shape`` reduced over normalized, distinct ``axes`` (kept as 1 or removed)."""
    if len(axes) == 1:  # the usual case: one axis becomes 1 or goes
        (axis,) = axes
        if keepdims:
            return (*shape[:axis], 1, *shape[axis + 1 :])
        return (*shape[:axis], *shape[axis + 1 :])
    reduced = set(axes)
    if keepdims:
        return tuple(1 if k in reduced else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in reduced)


def _reduce_elements(
    op: str, scope: expr.Scope, elements: Sequence[Dim], shape: Shape, axes: Sequence[int]
) -> list[Dim] | None:
    """The elements of ``op`` over ``axes`` of a known value of static ``shape``."""
    combine: Callable[[Sequence[Dim]], Dim]
    if op == "ReduceSum":
        combine = lambda items: functools.reduce(expr.add, items, 0)  # noqa: E731
    elif op == "ReduceProd":
        combine = product
    elif op == "ReduceMax":
        combine = lambda items: expr.dmax(*items, scope=scope)  # noqa: E731
    elif op == "ReduceMin":
        combine = lambda items: expr.dmin(*items, scope=scope)  # noqa: E731
    else:
        return None
    if not is_static(shape) or len(elements) != math.prod(shape):  # type: ignore[arg-type]
        return None
    kept = [k for k in range(len(shape)) if k not in set(axes)]
    group = math.prod([shape[k] for k in axes])
    if group == 0 and op in ("ReduceMax", "ReduceMin"):
        return None  # max/min of nothing is a dtype-dependent sentinel
    array = object_array(elements, shape).transpose([*kept, *axes])
    rows = array.reshape(math.prod([shape[k] for k in kept]), group)
    if op in ("ReduceSum", "ReduceProd") and not all(
        _exact_in_double(op, row) for row in rows
    ):
        return None
    return [combine(list(row)) for row in rows]


#: Integers up to this magnitude are exact in a double (onnxruntime's integer reductions).
_DOUBLE_EXACT = 1 << 53


def _exact_in_double(op: str, row: Sequence[Dim]) -> bool:
    """Whether onnxruntime's integer ``op`` over ``row`` is exact: it reduces in ``double``.

    Measured: ``ReduceSum`` of int64 ``[2**53 + 1, 0]`` is ``2**53``, ``ReduceProd`` of
    ``[2**53 + 1, 1]`` too. Exact when every partial result of the int elements is at
    most ``2**53`` in magnitude (symbolic elements are sizes, far below).
    """
    magnitudes = [abs(d) for d in row if isinstance(d, int)]
    if op == "ReduceSum":
        return sum(magnitudes) <= _DOUBLE_EXACT
    return math.prod(max(m, 1) for m in magnitudes) <= _DOUBLE_EXACT


def _reduce_with_axes(
    ctx: NodeContext, node: ir.Node, axes: Sequence[int] | None, keepdims: bool
) -> None:
    """Output of a reduction over known ``axes`` (``None``: every axis)."""
    data_value = ctx.require_input(0)
    facts = ctx.ctx
    shape = facts.shape_of(data_value)
    dtype = facts.dtype_of(data_value)
    if shape is None:
        # Rank unknown: only a full reduction without keepdims has a known rank (scalar).
        ctx.set_output(0, () if axes is None and not keepdims else None, dtype)
        return
    rank = len(shape)
    axes = list(range(rank)) if axes is None else unique_axes(ctx, axes, rank)
    ctx.set_output(0, reduced_shape(shape, axes, keepdims), dtype)
    elements = facts.value_of(data_value)
    if elements is not None:
        ctx.set_output_value(
            0, _reduce_elements(node.op_type, ctx.scope, elements, shape, axes)
        )


def _reduce_with_runtime_axes(
    ctx: NodeContext, axes: Sequence[Dim] | None, keepdims: bool, noop: bool
) -> None:
    """Output of a reduction whose axes are only partly known (or not at all)."""
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if shape is None:
        ctx.set_output(0, None, dtype)
        return
    rank = len(shape)
    count = ctx.input_shape(1)
    length = count[0] if count is not None and len(count) == 1 else None
    nonempty = length is not None and ctx.scope.prove_gt(length, 0)
    # A rank-1 input loses (or keeps as 1) its only axis unless the axes may be empty
    # with noop set; an empty list with noop_with_empty_axes=0 reduces it too.
    only_axis = rank == 1 and (nonempty or not noop)
    if not keepdims:
        if rank == 0 or only_axis:
            ctx.set_output(0, (), dtype)
        elif length == 1:
            ctx.set_output(0, _one_axis_removed(ctx, shape), dtype)
        else:
            # The number of distinct reduced axes is unknown (repeats and, with
            # noop_with_empty_axes=0, an empty axes list reducing everything).
            ctx.set_output(0, None, dtype)
        return
    if only_axis:
        ctx.set_output(0, (1,), dtype)
        return
    known = set()
    for a in axes or ():
        if isinstance(a, int) and -rank <= a < rank:
            known.add(a % rank)
    # keepdims=1: every dim is either kept or becomes 1, so it is at most max(d, 1).
    dims: list[Dim] = []
    for k, d in enumerate(shape):
        if k in known or d == 1:
            dims.append(1)
            continue
        dims.append(fresh_at_most(ctx, f"reduced_d{k}", expr.dmax(d, 1, scope=ctx.scope)))
    ctx.set_output(0, dims, dtype)


def _one_axis_removed(ctx: NodeContext, shape: Shape) -> Shape:
    """The dims left when one unknown axis of ``shape`` is removed.

    Output dim ``k`` is input dim ``k`` (the axis is after it) or ``k + 1``: exact when
    both are the same dim, else a fresh symbol recorded between the two.
    """
    dims: list[Dim] = []
    for k in range(len(shape) - 1):
        a, b = shape[k], shape[k + 1]
        if same_dim(a, b):
            dims.append(a)
            continue
        fresh = fresh_at_most(ctx, f"reduced_d{k}", expr.dmax(a, b, scope=ctx.scope))
        low = expr.dmin(a, b, scope=ctx.scope)
        if low != 0:
            ctx.ctx.add_less_equal_constraint(low, fresh)
        dims.append(fresh)
    return tuple(dims)


@register("", REDUCE_OPS, since=1)
def infer_reduce_axes_attribute(ctx: NodeContext, node: ir.Node) -> None:
    """Reduction with an ``axes`` attribute (absent or empty: every axis)."""
    ctx.require_input(0)
    axes = ctx.attr_ints("axes")
    _reduce_with_axes(ctx, node, list(axes) if axes else None, _keepdims(ctx))


def _keepdims(ctx: NodeContext) -> bool:
    """The ``keepdims`` attribute (default 1), without the slow lookup of an absent one."""
    return bool(ctx.attr_int("keepdims")) if ctx.has_attr("keepdims") else True


def infer_reduce_axes_input(ctx: NodeContext, node: ir.Node) -> None:
    """Reduction with an optional ``axes`` input and ``noop_with_empty_axes``."""
    ctx.require_input(0)
    if ctx.has_attr("axes"):
        ctx.fail(
            f"axes is an input, not an attribute, from opset {AXES_INPUT_SINCE[node.op_type]}"
        )
    keepdims = _keepdims(ctx)
    noop = ctx.has_attr("noop_with_empty_axes") and bool(ctx.attr_int("noop_with_empty_axes"))
    if ctx.has_input(1):
        axes_shape = ctx.input_shape(1)
        if axes_shape is not None and len(axes_shape) != 1:
            ctx.fail(f"axes must be a 1-D tensor, got rank {len(axes_shape)}")
        elements = ctx.input_value(1)
        if elements is None or not all(isinstance(a, int) for a in elements):
            if axes_shape is None or axes_shape[0] != 0:
                _reduce_with_runtime_axes(ctx, elements, keepdims, noop)
                return
            elements = ()
        axes: list[int] = list(elements)  # type: ignore[arg-type]
    else:
        axes = []
    if not axes and noop:
        ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
        ctx.set_output_value(0, ctx.input_value(0))
        return
    _reduce_with_axes(ctx, node, axes or None, keepdims)


for _op, _since in AXES_INPUT_SINCE.items():
    register("", _op, since=_since)(infer_reduce_axes_input)


@register("", ("ArgMax", "ArgMin"), since=1)
def infer_arg_reduce(ctx: NodeContext, node: ir.Node) -> None:
    """Indices along ``axis`` (kept as 1 or removed by ``keepdims``), INT64."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    keepdims = bool(ctx.attr_int("keepdims", 1))
    if shape is None:
        ctx.set_output(0, None, ir.DataType.INT64)
        return
    axis = ctx.normalize_axis(ctx.attr_int("axis", 0), len(shape))
    ctx.set_output(0, reduced_shape(shape, [axis], keepdims), ir.DataType.INT64)


# ----------------------------------------------------------------------------------------
# Shape-preserving ops
# ----------------------------------------------------------------------------------------
def _check_axis(ctx: NodeContext, shape: Shape | None, default: int) -> None:
    """Fails the node when ``axis`` is out of range for a known, non-scalar rank."""
    if shape is None:
        return
    if not shape:
        ctx.fail(f"{ctx.node.op_type} needs an input of rank >= 1")
    # has_attr first: looking up an absent attribute is slow.
    axis = ctx.attr_int("axis") if ctx.has_attr("axis") else default
    ctx.normalize_axis(axis, len(shape))


@register("", ("Softmax", "LogSoftmax", "Hardmax"), since=1)
def infer_softmax_legacy(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as the input (``axis`` defaults to 1, coerced-to-2D semantics)."""
    _same_shape_with_axis(ctx, 1)


def _same_shape_with_axis(ctx: NodeContext, default_axis: int) -> None:
    """Output 0 like input 0, once the ``axis`` attribute is checked against its rank."""
    value = ctx.require_input(0)
    shape = ctx.ctx.shape_of(value)
    _check_axis(ctx, shape, default_axis)
    ctx.set_output(0, shape, ctx.ctx.dtype_of(value))


@register("", ("Softmax", "LogSoftmax", "Hardmax"), since=13)
def infer_softmax(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as the input (``axis`` defaults to -1)."""
    _same_shape_with_axis(ctx, -1)


@register("", ("InstanceNormalization", "LpNormalization", "MeanVarianceNormalization", "LRN"))
def infer_same_shape_norm(ctx: NodeContext, node: ir.Node) -> None:
    """Normalizations whose output has the input's shape and type."""
    ctx.require_input(0)
    if node.op_type == "LpNormalization":
        _check_axis(ctx, ctx.input_shape(0), -1)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))


@register("", "GroupNormalization", since=18)
def infer_group_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as X; the channel count must be divisible by ``num_groups``."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    groups = ctx.attr_int("num_groups")
    if groups is None or groups <= 0:
        ctx.fail("num_groups must be a positive integer")
    if shape is not None:
        if len(shape) < 2:
            ctx.fail(f"X must have rank >= 2, got {len(shape)}")
        channels = shape[1]
        if isinstance(channels, int) and channels % groups != 0:
            ctx.fail(f"channel count {channels} is not divisible by num_groups={groups}")
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register("", "RMSNormalization", since=23)
def infer_rms_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape and type as X."""
    ctx.require_input(0)
    _check_axis(ctx, ctx.input_shape(0), -1)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# LayerNormalization
# ----------------------------------------------------------------------------------------
def stats_shape(ctx: NodeContext, shape: Shape | None, axis: int) -> Shape | None:
    """Shape of saved statistics: dims before ``axis`` kept, the normalized ones 1."""
    if shape is None:
        return None
    axis = ctx.normalize_axis(axis, len(shape))
    return (*shape[:axis], *([1] * (len(shape) - axis)))


_FLOAT = ir.DataType.FLOAT


def stash_dtype(ctx: NodeContext) -> ir.DataType:
    """Element type of saved statistics, given by ``stash_type`` (default FLOAT)."""
    return dtype_attr(ctx, "stash_type", _FLOAT)  # type: ignore[return-value]


def _layer_normalization(ctx: NodeContext, y_dtype: ir.DataType | None) -> None:
    # The slots behind node.inputs and node.outputs (see passes/_inference.py): the
    # checks and writes below without a call each in the usual case (X and Scale
    # present, Y the only output).
    node = ctx.node
    inputs = node._inputs
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        ctx.require_input(0)
        ctx.require_input(1)  # one of them fails the node
    shape = ctx.input_shape(0)
    stats = stats_shape(ctx, shape, ctx.attr_int("axis", -1))
    ctx.set_output(0, shape, y_dtype)
    # stash_dtype(ctx): read (and checked) once for both statistics, present or not.
    stash = dtype_attr(ctx, "stash_type", _FLOAT)
    if len(node._outputs) > 1:  # set_output ignores outputs past the node's
        ctx.set_output(1, stats, stash)
        ctx.set_output(2, stats, stash)


@register("", "LayerNormalization", since=1)
def infer_layer_normalization_ort(ctx: NodeContext, node: ir.Node) -> None:
    """Pre-17 LayerNormalization (onnxruntime's): Y typed like Scale, stats reduced."""
    _layer_normalization(ctx, ctx.input_dtype(1) or ctx.input_dtype(0))


@register("", "LayerNormalization", since=17)
def infer_layer_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Y like X; Mean/InvStdDev keep the dims before ``axis``, the rest are 1."""
    _layer_normalization(ctx, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# BatchNormalization
# ----------------------------------------------------------------------------------------
def _channel_stats(ctx: NodeContext, source: int) -> Shape | None:
    """Shape of a per-channel statistic: that of input ``source`` (mean or var).

    Without it, ``(C,)`` from X (C is 1 for a rank-1 X).
    """
    shape = ctx.input_shape(source)
    if shape is not None:
        return shape
    x = ctx.input_shape(0)
    if x is None:
        return None
    if ctx.opset < 9 and ctx.attr_int("spatial", 1) == 0:
        return None  # per-activation statistics: the shape of mean, unknown here
    return (x[1],) if len(x) >= 2 else (1,)


@register("", "BatchNormalization", since=1)
def infer_batch_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Y like X; running and saved statistics like the mean/var inputs (per channel)."""
    for i in range(5):
        ctx.require_input(i)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
    # Outputs: (mean, var) running statistics; before 14 also (saved_mean, saved_var).
    for out, source in ((1, 3), (2, 4), (3, 3), (4, 4)):
        dtype = ctx.input_dtype(source) if out < 3 else ctx.input_dtype(0)
        ctx.set_output(out, _channel_stats(ctx, source), dtype)
