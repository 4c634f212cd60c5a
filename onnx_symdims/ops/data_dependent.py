"""Ops whose output size depends on tensor contents.

``TopK``, ``NonZero``, ``Compress``, ``Unique``, ``NonMaxSuppression``.

Such a size becomes a fresh symbol named after the output (``NonZero_<out>_nnz``) with
an upper bound recorded through :meth:`ShapesContext.add_less_equal_constraint`
(``nnz <= N*M``). It is computed exactly only from small constants. ``TopK`` with the
same runtime ``K`` share one symbol (the value of ``K``).
"""

from __future__ import annotations

__all__: list[str] = []

import logging
import math
import weakref

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    constant_array,
    count_symbol,
    default_domain_producer,
    element_array,
    is_static,
    product,
    replace_axis,
    scalar_input,
    set_value_array,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    NodeContext,
    ShapesContext,
    note_untracked_read,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64

#: Element types whose known contents ``Unique`` counts (compared as float64, exactly).
_FLOAT_DTYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
#: Ops that copy the one element of a ``K`` input unchanged (followed by ``_k_source``).
_K_PRESERVING_OPS = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
#: How far back such a chain is followed.
MAX_K_CHAIN = 16
#: Per model context: the source value of a runtime ``K`` -> its symbol (``_runtime_k``).
_K_SYMBOLS: weakref.WeakKeyDictionary[ShapesContext, dict[ir.Value, Dim]] = (
    weakref.WeakKeyDictionary()
)
#: ``[1, nnz]``. We follow the spec (see ``test_nonzero_scalar_departs_from_onnxruntime``).
NONZERO_SCALAR_RANK = 0


# ----------------------------------------------------------------------------------------
# TopK
# ----------------------------------------------------------------------------------------
def _topk_outputs(ctx: NodeContext, k: Dim | None) -> None:
    """Sets ``Values`` and ``Indices``: the input shape with ``k`` on the axis.

    ``k <= dim`` is required at runtime, so a known ``k`` is exact; an unknown ``k``
    becomes a symbol bounded by the axis dim, shared by the ``TopK`` reading the same
    ``K`` value (see :func:`_runtime_k`).
    """
    x = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if x is None:
        ctx.set_output(0, None, dtype)
        ctx.set_output(1, None, INT64)
        return
    if len(x) == 0:
        ctx.fail("TopK needs an input of rank >= 1")
    axis = ctx.normalize_axis(ctx.attr_int("axis", -1), len(x))
    dim = x[axis]
    if isinstance(k, int):
        if k < 0:
            ctx.fail(f"k must be >= 0, got {k}")
        if isinstance(dim, int) and k > dim:
            ctx.fail(f"k = {k} exceeds the axis dim {dim}")
    elif k is None:
        k = _runtime_k(ctx, dim)
    out = replace_axis(x, axis, k)
    ctx.set_output(0, out, dtype)
    ctx.set_output(1, out, INT64)


def _k_source(value: ir.Value) -> ir.Value:
    """The value ``value`` copies its one element from, through reshaping ops."""
    for _ in range(MAX_K_CHAIN):
        producer = default_domain_producer(value)
        if producer is None or producer.op_type not in _K_PRESERVING_OPS:
            break
        source = producer.inputs[0] if producer.inputs else None
        if source is None:
            break
        value = source
    return value


def _runtime_k(ctx: NodeContext, dim: Dim) -> Dim:
    """The output dim of a ``K`` whose value is unknown: one symbol per runtime value.

    ``TopK`` fails unless ``K <= dim``, so the dim is ``K`` itself. Two ``TopK`` reading
    the same ``K`` (the same value, or copies of it through ``Reshape``, ``Unsqueeze``,
    ...) share the symbol, each bounding it by its own axis dim. Only in the main graph:
    a value in a function body or a loop body takes a new value per call or iteration.
    """
    facts = ctx.ctx
    k_value = ctx.input(1)
    if k_value is None or facts.conditional_depth or facts.active_functions:
        return count_symbol(ctx, "k", dim)
    note_untracked_read()  # the symbol depends on the K value itself, not on its facts
    symbols = _K_SYMBOLS.setdefault(facts, {})
    source = _k_source(k_value)
    k = symbols.get(source)
    if k is None:
        k = symbols[source] = count_symbol(ctx, "k", dim)
    elif dim == 0:
        return 0
    elif isinstance(k, expr.DimExpr):
        facts.add_less_equal_constraint(k, dim)
    return k


@register("", "TopK", since=1)
def infer_topk_attr(ctx: NodeContext, node: ir.Node) -> None:
    """TopK-1: ``k`` is an attribute."""
    ctx.require_input(0)
    k = ctx.attr_int("k")
    if k is None:
        ctx.fail("attribute 'k' is required")
    _topk_outputs(ctx, k)


@register("", "TopK", since=10)
def infer_topk(ctx: NodeContext, node: ir.Node) -> None:
    """TopK-10+: ``k`` is the one element of input ``K`` (may be symbolic)."""
    ctx.require_input(0)
    ctx.require_input(1)
    _topk_outputs(ctx, scalar_input(ctx, 1, "K"))


# ----------------------------------------------------------------------------------------
# NonZero, Compress, Unique, NonMaxSuppression
# ----------------------------------------------------------------------------------------
def _known_contents(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input ``i``'s contents when fully known and small (any dtype), else ``None``."""
    array = constant_array(ctx.input(i))
    if array is not None:
        return array if array.dtype.kind in "biufc" else None  # strings: unknown
    shape = ctx.input_shape(i)
    elements = ctx.input_ints(i)
    if elements is None or not is_static(shape) or math.prod(shape) != len(elements):
        return None
    return np.array(elements, dtype=object).reshape(tuple(shape))


@register("", "NonZero", since=9)
def infer_nonzero(ctx: NodeContext, node: ir.Node) -> None:
    """``[rank, nnz]`` INT64 with ``nnz <= numel`` (exact for small known inputs)."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is None:
        ctx.set_output(0, (None, count_symbol(ctx, "nnz", None)), INT64)
        return
    rank = len(x) if x else NONZERO_SCALAR_RANK
    contents = _known_contents(ctx, 0)
    if contents is not None and contents.ndim == len(x):
        if contents.ndim == 0:
            nnz = int(bool(contents.item()))
            ctx.set_output(0, (rank, nnz), INT64)
            if rank == 0:
                ctx.set_output_value(0, ())
            return
        coordinates = np.nonzero(contents)
        nnz = len(coordinates[0])
        ctx.set_output(0, (rank, nnz), INT64)
        ctx.set_output_value(0, tuple(int(c) for axis in coordinates for c in axis))
        return
    # A scalar holds one element, so nnz <= 1 bounds it too (the empty product).
    ctx.set_output(0, (rank, count_symbol(ctx, "nnz", product(x))), INT64)


def _condition_length(shape: Shape | None) -> Dim | None:
    if shape is None:
        return None
    if len(shape) == 0:
        return 1  # onnxruntime reads a scalar condition as one flag
    return shape[0] if len(shape) == 1 else None


def _compressed_size(ctx: NodeContext, dim: Dim | None, length: Dim | None) -> Dim:
    """Kept slices along an axis of size ``dim`` (``None``: unknown) under the condition.

    Only the first ``min(dim, len(condition))`` flags count.
    """
    flags = ctx.input_ints(1)
    if flags is not None:
        trues = sum(1 for f in flags if f)
        if isinstance(dim, int):
            return sum(1 for f in flags[:dim] if f)
        if trues == 0:
            return 0
        if dim is not None and trues == len(flags):
            return expr.dmin(dim, len(flags), scope=ctx.scope)
        bound = trues if dim is None else expr.dmin(dim, trues, scope=ctx.scope)
        return count_symbol(ctx, "count", bound)
    if dim is None:
        return count_symbol(ctx, "count", length)
    if length is None:
        return count_symbol(ctx, "count", dim)
    return count_symbol(ctx, "count", expr.dmin(dim, length, scope=ctx.scope))


@register("", "Compress", since=9)
def infer_compress(ctx: NodeContext, node: ir.Node) -> None:
    """A fresh count on ``axis`` (or of the flattened input), <= dim and condition length."""
    ctx.require_input(0)
    ctx.require_input(1)
    x = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    length = _condition_length(ctx.input_shape(1))
    axis = ctx.attr_int("axis")
    if x is not None and len(x) == 0:
        ctx.fail("Compress needs an input of rank >= 1")
    if axis is None:
        count = _compressed_size(ctx, None if x is None else product(x), length)
        ctx.set_output(0, (count,), dtype)
        set_value_array(ctx, 0, _compress_value(ctx, None, count))
        return
    if x is None:
        ctx.set_output(0, None, dtype)
        return
    axis = ctx.normalize_axis(axis, len(x))
    count = _compressed_size(ctx, x[axis], length)
    ctx.set_output(0, replace_axis(x, axis, count), dtype)
    set_value_array(ctx, 0, _compress_value(ctx, axis, count))


def _compress_value(ctx: NodeContext, axis: int | None, count: Dim) -> np.ndarray | None:
    data, flags = element_array(ctx, 0), ctx.input_ints(1)
    if data is None or flags is None or not isinstance(count, int):
        return None
    size = data.size if axis is None else data.shape[axis]
    selected = [k for k, f in enumerate(flags[:size]) if f]
    if axis is None:
        return data.reshape(-1)[selected]
    return np.take(data, selected, axis=axis)


def _comparable_contents(ctx: NodeContext, x: Shape | None) -> np.ndarray | None:
    """Input 0's contents when known, as numbers that compare like they do at run time.

    Floats are read too, unless they hold a NaN (runtimes differ on whether NaNs are
    equal) or zeros of both signs (equal, yet told apart by some hashes).
    """
    if not is_static(x):
        return None
    contents = ctx.input_ints(0)
    if contents is not None:
        if math.prod(x) != len(contents):  # type: ignore[arg-type]
            return None
        return np.array(contents, dtype=np.int64).reshape(tuple(x))  # type: ignore[arg-type]
    if ctx.input_dtype(0) not in _FLOAT_DTYPES:
        return None
    array = constant_array(ctx.input(0))
    if array is None or array.shape != tuple(x):  # type: ignore[arg-type]
        return None
    try:
        numbers = array.astype(np.float64)
    except (TypeError, ValueError):
        return None
    zeros = numbers == 0
    if np.isnan(numbers).any() or len(set(np.signbit(numbers[zeros]).tolist())) > 1:
        return None
    return numbers


def _unique_count(ctx: NodeContext, x: Shape | None, axis: int | None) -> Dim:
    """The number of unique elements (or slices along ``axis``) of input 0."""
    array = _comparable_contents(ctx, x)
    if array is not None:
        if axis is None:
            return len(np.unique(array))
        if array.shape[axis] == 0:
            return 0
        if array.size == 0:
            return 1  # all slices are empty, hence equal
        return int(np.unique(array, axis=axis).shape[axis])
    if x is None:
        return count_symbol(ctx, "count", None)
    n = product(x) if axis is None else x[axis]
    if n in (0, 1):
        return n  # no element (slice), or a single one, which is unique
    return count_symbol(ctx, "count", n)


@register("", "Unique", since=11)
def infer_unique(ctx: NodeContext, node: ir.Node) -> None:
    """``Y``: a fresh count of unique elements (or ``axis`` slices), <= numel (or dim).

    ``indices`` and ``counts`` are ``[count]``; ``inverse_indices`` is ``[numel]``
    (or ``[dim]`` with ``axis``). All three are INT64.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    axis = ctx.attr_int("axis")
    if axis is not None and x is not None:
        axis = ctx.normalize_axis(axis, len(x))
    count = _unique_count(ctx, x, axis)
    if axis is None:
        y: Shape | None = (count,)
        inverse = None if x is None else product(x)
    else:
        y = None if x is None else replace_axis(x, axis, count)
        inverse = None if x is None else x[axis]
    ctx.set_output(0, y, dtype)
    ctx.set_output(1, (count,), INT64)
    ctx.set_output(2, (inverse,), INT64)
    ctx.set_output(3, (count,), INT64)


@register("", "NonMaxSuppression", since=10)
def infer_non_max_suppression(ctx: NodeContext, node: ir.Node) -> None:
    """``[num_selected, 3]`` INT64 with a bounded fresh ``num_selected``.

    ``num_selected <= batches * classes * min(max_output_boxes_per_class, boxes)``;
    it is ``0`` when ``max_output_boxes_per_class`` is absent or ``<= 0``.
    """
    ctx.require_input(0)
    ctx.require_input(1)
    boxes, scores = ctx.input_shape(0), ctx.input_shape(1)
    if boxes is not None and len(boxes) != 3:
        ctx.fail(f"boxes must have rank 3, got {len(boxes)}")
    if scores is not None and len(scores) != 3:
        ctx.fail(f"scores must have rank 3, got {len(scores)}")
    per_class = scalar_input(ctx, 2, "max_output_boxes_per_class") if ctx.has_input(2) else 0
    if isinstance(per_class, int) and per_class <= 0:
        ctx.set_output(0, (0, 3), INT64)
        return
    bound: Dim | None = None
    if scores is not None:
        num_boxes = boxes[1] if boxes is not None and isinstance(boxes[1], int) else scores[2]
        if per_class is not None and ctx.scope.prove_nonneg(per_class):
            num_boxes = expr.dmin(per_class, num_boxes, scope=ctx.scope)
        bound = expr.mul(expr.mul(scores[0], scores[1]), num_boxes)
    ctx.set_output(0, (count_symbol(ctx, "selected", bound), 3), INT64)
