"""Indexing, data-dependent and generator ops.

* Indexing: ``GatherElements``, ``GatherND``, ``ScatterND``, ``ScatterElements``,
  ``Scatter``; small known "values as shape" are propagated through them (PyTorch
  exports write single entries of shape tensors with ``ScatterND``).
* Data-dependent sizes: ``TopK``, ``NonZero``, ``Compress``, ``Unique``,
  ``NonMaxSuppression``, ``StringNormalizer``. A size that depends on tensor *contents* becomes a fresh
  symbol named after the output (``NonZero_<out>_nnz``) with an upper bound recorded
  through :meth:`ShapesContext.add_less_equal_constraint` (``nnz <= N*M``). It is
  computed exactly only from small constants. ``TopK`` with the same runtime ``K``
  share one symbol (the value of ``K``).
* ``Einsum`` (equation parsing with ellipsis and implicit output; dims sharing a
  letter combine with the broadcast rule), ``OneHot``, ``Det``.
* Generators: ``EyeLike``, ``Multinomial``, ``RandomNormal(Like)``,
  ``RandomUniform(Like)``, ``Bernoulli``.

``Gather`` lives in :mod:`onnx_symdims.ops.shape_ops`; ``Shrink`` is elementwise.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
import math
import weakref
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    constant_array,
    default_domain_producer,
    dtype_attr,
    is_static,
    object_array,
    output_name,
    product,
    replace_axis,
    single_element,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    MAX_VALUE_ELEMENTS,
    NodeContext,
    ShapesContext,
    constant_tensor,
    note_untracked_read,
    tensor_dims,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64

#: Element types whose known contents ``Unique`` counts (compared as float64, exactly).
_FLOAT_DTYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
#: Locales whose lower case of ASCII text is plain ASCII lower case.
_PLAIN_LOCALES = frozenset({"", "C", "C.UTF-8", "C.utf8", "POSIX"})
#: Ops that copy the one element of a ``K`` input unchanged (followed by ``_k_source``).
_K_PRESERVING_OPS = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
#: How far back such a chain is followed.
MAX_K_CHAIN = 16
#: Per model context: the source value of a runtime ``K`` -> its symbol (``_runtime_k``).
_K_SYMBOLS: weakref.WeakKeyDictionary[ShapesContext, dict[ir.Value, Dim]] = (
    weakref.WeakKeyDictionary()
)

#: ONNX says NonZero of a scalar has shape ``[0, nnz]``; onnxruntime returns
#: ``[1, nnz]``. We follow the spec (see ``test_nonzero_scalar_departs_from_onnxruntime``).
NONZERO_SCALAR_RANK = 0


# ----------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------
def _output_symbol(ctx: NodeContext, hint: str, output: int = 0) -> expr.DimExpr:
    """A fresh symbol named ``{op_type}_{output name}_{hint}`` (e.g. ``NonZero_y_nnz``)."""
    name = output_name(ctx, output, str(output))
    return ctx.ctx.new_symbol(f"{ctx.node.op_type}_{name}_{hint}")


def _count(ctx: NodeContext, hint: str, bound: Dim | None, output: int = 0) -> Dim:
    """A data-dependent size ``0 <= s <= bound``.

    ``0`` when the bound is ``0``; otherwise a fresh symbol whose upper bound (when
    known) is recorded in the context.
    """
    if bound is not None and isinstance(bound, expr.DimExpr) and bound.is_unknown:
        bound = None
    if bound == 0:
        return 0
    symbol = _output_symbol(ctx, hint, output)
    if bound is not None:
        ctx.ctx.add_less_equal_constraint(symbol, bound)
    return symbol


def _single_element(ctx: NodeContext, i: int, what: str) -> Dim | None:
    """The one element of input ``i`` (scalar or 1-element tensor), ``None`` if unknown.

    Integer values come from value propagation (elements may be symbolic); float
    constants are truncated to integers as onnxruntime casts them.
    """
    shape = ctx.input_shape(i)
    if shape is not None and len(shape) > 1:
        ctx.fail(f"{what} must be a scalar or a 1-D tensor, got rank {len(shape)}")
    if shape and isinstance(shape[0], int) and shape[0] != 1:
        ctx.fail(f"{what} must have exactly one element, got {shape[0]}")
    elements = ctx.input_value(i)
    if elements is None:
        array = constant_array(ctx.input(i))
        if array is None or array.dtype.kind not in "fiub":
            return None
        flat = array.reshape(-1)
        if flat.size != 1:
            ctx.fail(f"{what} must have exactly one element, got {flat.size}")
        if not np.isfinite(flat[0]) or abs(flat[0]) >= 2**63:
            return None  # the int64 cast is undefined there
        return int(np.trunc(flat[0]))
    if len(elements) != 1:
        ctx.fail(f"{what} must have exactly one element, got {len(elements)}")
    return single_element(elements)


def _element_array(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input ``i``'s known elements as an object array of its (all-int) shape."""
    shape = ctx.input_shape(i)
    elements = ctx.input_value(i)
    if elements is None or not is_static(shape) or math.prod(shape) != len(elements):
        return None
    return object_array(elements, shape)


def _index_array(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input ``i``'s elements as an int64 array of its shape, when all are known ints."""
    shape = ctx.input_shape(i)
    elements = ctx.input_ints(i)
    if elements is None or not is_static(shape) or math.prod(shape) != len(elements):
        return None
    return np.array(elements, dtype=np.int64).reshape(tuple(shape))


def _set_value_array(ctx: NodeContext, i: int, array: np.ndarray | None) -> None:
    if array is not None:
        ctx.set_output_value(i, tuple(array.reshape(-1).tolist()))


def _in_bounds(index: int, size: int) -> int | None:
    """``index`` normalized into ``[0, size)``, or ``None`` when out of range."""
    if -size <= index < size:
        return index + size if index < 0 else index
    return None


# ----------------------------------------------------------------------------------------
# Gather / Scatter family
# ----------------------------------------------------------------------------------------
def _same_rank(ctx: NodeContext, shapes: Sequence[Shape | None], names: str) -> int | None:
    ranks = {len(s) for s in shapes if s is not None}
    if len(ranks) > 1:
        ctx.fail(f"{names} must have the same rank, got ranks {sorted(ranks)}")
    return ranks.pop() if ranks else None


@register("", "GatherElements", since=11)
def infer_gather_elements(ctx: NodeContext, node: ir.Node) -> None:
    """Output has the shape of ``indices`` and the element type of ``data``."""
    ctx.require_input(0)
    ctx.require_input(1)
    data, indices = ctx.input_shape(0), ctx.input_shape(1)
    rank = _same_rank(ctx, (data, indices), "data and indices")
    if rank is not None:
        if rank == 0:
            ctx.fail("GatherElements needs inputs of rank >= 1")
        axis = ctx.normalize_axis(ctx.attr_int("axis", 0), rank)
    out = indices if indices is not None else (None if rank is None else (None,) * rank)
    ctx.set_output(0, out, ctx.input_dtype(0))
    if rank is not None:
        _set_value_array(ctx, 0, _gather_elements_value(ctx, axis))


def _gather_elements_value(ctx: NodeContext, axis: int) -> np.ndarray | None:
    data, indices = _element_array(ctx, 0), _index_array(ctx, 1)
    if data is None or indices is None or indices.size > MAX_VALUE_ELEMENTS:
        return None
    out = np.empty(indices.shape, dtype=object)
    for position in np.ndindex(*indices.shape):
        source = list(position)
        k = _in_bounds(int(indices[position]), data.shape[axis])
        if k is None or any(p >= d for p, d in zip(position, data.shape)):
            return None  # out of range: the op fails at runtime
        source[axis] = k
        out[position] = data[tuple(source)]
    return out


@register("", "GatherND", since=11)
def infer_gather_nd(ctx: NodeContext, node: ir.Node) -> None:
    """``indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]``.

    The batch dims come from ``indices``: onnxruntime accepts an ``indices`` batch
    that is a multiple of the ``data`` batch, and the output follows ``indices``.
    """
    ctx.require_input(0)
    ctx.require_input(1)
    data, indices = ctx.input_shape(0), ctx.input_shape(1)
    batch_dims = ctx.attr_int("batch_dims", 0)
    dtype = ctx.input_dtype(0)
    if batch_dims < 0:
        ctx.fail(f"batch_dims must be >= 0, got {batch_dims}")
    for shape, name in ((data, "data"), (indices, "indices")):
        if shape is not None and len(shape) <= batch_dims:
            ctx.fail(f"{name} rank {len(shape)} must be > batch_dims {batch_dims}")
    if data is None or indices is None:
        ctx.set_output(0, None, dtype)
        return
    last = indices[-1]
    if not isinstance(last, int):
        ctx.set_output(0, None, dtype)  # the output rank depends on a runtime size
        return
    if last > len(data) - batch_dims:
        ctx.fail(f"indices.shape[-1] = {last} exceeds data rank - batch_dims")
    ctx.set_output(0, indices[:-1] + data[batch_dims + last :], dtype)
    _set_value_array(ctx, 0, _gather_nd_value(ctx, batch_dims, last))


def _gather_nd_value(ctx: NodeContext, batch_dims: int, last: int) -> np.ndarray | None:
    data, indices = _element_array(ctx, 0), _index_array(ctx, 1)
    if (
        data is None
        or indices is None
        or data.shape[:batch_dims] != indices.shape[:batch_dims]
    ):
        return None
    tail = data.shape[batch_dims + last :]
    out = np.empty(indices.shape[:-1] + tail, dtype=object)
    if out.size > MAX_VALUE_ELEMENTS:
        return None
    for position in np.ndindex(*indices.shape[:-1]):
        source = list(position[:batch_dims])
        for k, index in enumerate(indices[position]):
            normalized = _in_bounds(int(index), data.shape[batch_dims + k])
            if normalized is None:
                return None
            source.append(normalized)
        out[position] = data[tuple(source)]
    return out


_REDUCTIONS: dict[str, Callable[[NodeContext], Callable[[Dim, Dim], Dim]]] = {
    "none": lambda ctx: lambda old, new: new,
    "add": lambda ctx: expr.add,
    "mul": lambda ctx: expr.mul,
    "max": lambda ctx: lambda a, b: expr.dmax(a, b, scope=ctx.scope),
    "min": lambda ctx: lambda a, b: expr.dmin(a, b, scope=ctx.scope),
}


def _reduction(ctx: NodeContext) -> str:
    reduction = ctx.attr_str("reduction", "none")
    allowed = ("none", "add", "mul") if ctx.opset < 18 else tuple(_REDUCTIONS)
    if reduction not in allowed:
        ctx.fail(f"reduction must be one of {allowed}, got {reduction!r}")
    return reduction


def _scatter_output(ctx: NodeContext, rank: int | None) -> None:
    data = ctx.input_shape(0)
    if data is None and rank is not None:
        data = (None,) * rank  # type: ignore[assignment]
    ctx.set_output(0, data, ctx.input_dtype(0))


def _scatter_value(
    ctx: NodeContext, reduction: str, targets: Callable[[np.ndarray, np.ndarray], list]
) -> np.ndarray | None:
    """Applies ``(target index, update)`` pairs to a copy of the known ``data`` value.

    With ``reduction="none"`` two updates of the same element happen in an unspecified
    order, so the value is left unknown.
    """
    data, indices, updates = (
        _element_array(ctx, 0),
        _index_array(ctx, 1),
        _element_array(ctx, 2),
    )
    if data is None or indices is None or updates is None:
        return None
    pairs = targets(indices, updates)
    if pairs is None:
        return None
    if reduction == "none" and len({t for t, _ in pairs}) < len(pairs):
        return None
    combine = np.frompyfunc(_REDUCTIONS[reduction](ctx), 2, 1)
    out = data.copy()
    for target, update in pairs:
        out[target] = combine(out[target], update)
    return out


@register("", "ScatterND", since=11)
def infer_scatter_nd(ctx: NodeContext, node: ir.Node) -> None:
    """Output has the shape and element type of ``data``."""
    for i in range(3):
        ctx.require_input(i)
    reduction = _reduction(ctx)
    data, indices, updates = (ctx.input_shape(i) for i in range(3))
    if indices is not None and len(indices) == 0:
        ctx.fail("indices must have rank >= 1")
    if data is not None and indices is not None and updates is not None:
        last = indices[-1]
        if isinstance(last, int):
            if last > len(data):
                ctx.fail(f"indices.shape[-1] = {last} exceeds data rank {len(data)}")
            if len(updates) != len(indices) - 1 + len(data) - last:
                ctx.fail(
                    "updates rank must be rank(indices) - 1 + rank(data) - indices.shape[-1]"
                )
    _scatter_output(ctx, None)
    data_array = _element_array(ctx, 0)
    if data_array is None:
        return

    def targets(index_array: np.ndarray, update_array: np.ndarray) -> list | None:
        depth = index_array.shape[-1]
        if update_array.shape != index_array.shape[:-1] + data_array.shape[depth:]:
            return None
        pairs = []
        for position in np.ndindex(*index_array.shape[:-1]):
            target = []
            for k, index in enumerate(index_array[position]):
                normalized = _in_bounds(int(index), data_array.shape[k])
                if normalized is None:
                    return None
                target.append(normalized)
            pairs.append((tuple(target), update_array[position]))
        return pairs

    _set_value_array(ctx, 0, _scatter_value(ctx, reduction, targets))


@register("", ["ScatterElements", "Scatter"], since=9)
def infer_scatter_elements(ctx: NodeContext, node: ir.Node) -> None:
    """Output has the shape and element type of ``data`` (``Scatter`` is the old name)."""
    for i in range(3):
        ctx.require_input(i)
    reduction = _reduction(ctx) if node.op_type == "ScatterElements" else "none"
    shapes = [ctx.input_shape(i) for i in range(3)]
    rank = _same_rank(ctx, shapes, "data, indices and updates")
    indices, updates = shapes[1], shapes[2]
    if indices is not None and updates is not None:
        for k, (a, b) in enumerate(zip(indices, updates)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                ctx.fail(f"indices and updates differ at axis {k}: {a} vs {b}")
    if rank is None:
        _scatter_output(ctx, None)
        return
    if rank == 0:
        ctx.fail("data must have rank >= 1")
    axis = ctx.normalize_axis(ctx.attr_int("axis", 0), rank)
    _scatter_output(ctx, rank)
    data_array = _element_array(ctx, 0)
    if data_array is None:
        return

    def targets(index_array: np.ndarray, update_array: np.ndarray) -> list | None:
        if update_array.shape != index_array.shape:
            return None
        pairs = []
        for position in np.ndindex(*index_array.shape):
            k = _in_bounds(int(index_array[position]), data_array.shape[axis])
            if k is None or any(p >= d for p, d in zip(position, data_array.shape)):
                return None
            target = list(position)
            target[axis] = k
            pairs.append((tuple(target), update_array[position]))
        return pairs

    _set_value_array(ctx, 0, _scatter_value(ctx, reduction, targets))


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
        return _count(ctx, "k", dim)
    note_untracked_read()  # the symbol depends on the K value itself, not on its facts
    symbols = _K_SYMBOLS.setdefault(facts, {})
    source = _k_source(k_value)
    k = symbols.get(source)
    if k is None:
        k = symbols[source] = _count(ctx, "k", dim)
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
    _topk_outputs(ctx, _single_element(ctx, 1, "K"))


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
        ctx.set_output(0, (None, _count(ctx, "nnz", None)), INT64)
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
    ctx.set_output(0, (rank, _count(ctx, "nnz", product(x))), INT64)


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
        return _count(ctx, "count", bound)
    if dim is None:
        return _count(ctx, "count", length)
    if length is None:
        return _count(ctx, "count", dim)
    return _count(ctx, "count", expr.dmin(dim, length, scope=ctx.scope))


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
        _set_value_array(ctx, 0, _compress_value(ctx, None, count))
        return
    if x is None:
        ctx.set_output(0, None, dtype)
        return
    axis = ctx.normalize_axis(axis, len(x))
    count = _compressed_size(ctx, x[axis], length)
    ctx.set_output(0, replace_axis(x, axis, count), dtype)
    _set_value_array(ctx, 0, _compress_value(ctx, axis, count))


def _compress_value(ctx: NodeContext, axis: int | None, count: Dim) -> np.ndarray | None:
    data, flags = _element_array(ctx, 0), ctx.input_ints(1)
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
        return _count(ctx, "count", None)
    n = product(x) if axis is None else x[axis]
    if n in (0, 1):
        return n  # no element (slice), or a single one, which is unique
    return _count(ctx, "count", n)


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


def _string_elements(value: ir.Value | None) -> list[bytes] | None:
    """The elements of a small constant string tensor, as the bytes they hold."""
    if value is None:
        return None
    tensor = constant_tensor(value)
    if tensor is None:
        producer = default_domain_producer(value, "Constant")
        attr = None if producer is None else producer.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            tensor = attr.value
        elif producer is not None and "value_strings" in producer.attributes:
            return list(producer.attributes["value_strings"].value)
    if tensor is None or tensor.dtype != ir.DataType.STRING:
        return None
    if math.prod(tensor_dims(tensor)) > MAX_VALUE_ELEMENTS:
        return None
    read = getattr(tensor, "string_data", None)
    try:
        return None if read is None else list(read())
    except Exception as e:  # unreadable (external data...): unknown
        logger.debug("cannot read string constant %r: %s", value.name, e)
        return None


def _stopwords(ctx: NodeContext) -> list[str]:
    """The ``stopwords`` attribute (a list of strings; absent: none)."""
    attr = ctx.node.attributes.get("stopwords")
    if attr is None:
        return []
    if attr.type != ir.AttributeType.STRINGS:
        ctx.fail(f"attribute 'stopwords' must be STRINGS, got {attr.type.name}")
    return list(attr.value)


def _kept_strings(ctx: NodeContext, elements: Sequence[bytes]) -> int | None:
    """How many ``elements`` are no stop word (``None`` when that depends on the locale).

    A case-insensitive match is decided only for ASCII text in a locale without special
    case rules for it (the Turkish dotless i is one).
    """
    stopwords = [w.encode() for w in _stopwords(ctx)]
    if ctx.attr_int("is_case_sensitive", 0):
        stops = set(stopwords)
        return sum(1 for e in elements if e not in stops)
    locale = ctx.attr_str("locale", "en_US.UTF-8") or ""
    if not (locale in _PLAIN_LOCALES or locale.startswith("en_")):
        return None
    if not all(w.isascii() for w in (*elements, *stopwords)):
        return None
    stops = {w.lower() for w in stopwords}
    return sum(1 for e in elements if e.lower() not in stops)


@register("", "StringNormalizer", since=10)
def infer_string_normalizer(ctx: NodeContext, node: ir.Node) -> None:
    """``[C]`` or ``[1, C]`` strings without the stop words (at least one element left).

    onnxruntime rejects ``C == 0`` and returns one empty string when every element is a
    stop word. The count is exact without stop words or for a known input, else a fresh
    symbol ``1 <= count <= C``.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    dtype = ir.DataType.STRING
    if x is None:
        ctx.set_output(0, None, dtype)
        return
    if len(x) not in (1, 2):
        ctx.fail(f"X must be [C] or [1, C], got rank {len(x)}")
    if len(x) == 2 and isinstance(x[0], int) and x[0] != 1:
        ctx.fail(f"X must be [C] or [1, C], got {x[0]} rows")
    c = x[-1]
    if c == 0:
        ctx.fail("X must hold at least one string")
    count: Dim
    if not _stopwords(ctx):
        count = c
    else:
        elements = _string_elements(ctx.input(0))
        kept = None if elements is None else _kept_strings(ctx, elements)
        if kept is not None:
            count = max(kept, 1)
        elif c == 1:
            count = 1
        else:
            count = _count(ctx, "count", c)
            ctx.ctx.add_less_equal_constraint(1, count)
    ctx.set_output(0, (count,) if len(x) == 1 else (1, count), dtype)


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
    per_class = (
        _single_element(ctx, 2, "max_output_boxes_per_class") if ctx.has_input(2) else 0
    )
    if isinstance(per_class, int) and per_class <= 0:
        ctx.set_output(0, (0, 3), INT64)
        return
    bound: Dim | None = None
    if scores is not None:
        num_boxes = boxes[1] if boxes is not None and isinstance(boxes[1], int) else scores[2]
        if per_class is not None and ctx.scope.prove_nonneg(per_class):
            num_boxes = expr.dmin(per_class, num_boxes, scope=ctx.scope)
        bound = expr.mul(expr.mul(scores[0], scores[1]), num_boxes)
    ctx.set_output(0, (_count(ctx, "selected", bound), 3), INT64)


# ----------------------------------------------------------------------------------------
# Einsum
# ----------------------------------------------------------------------------------------
ELLIPSIS = "..."


def _einsum_term(ctx: NodeContext, term: str) -> list[str]:
    """The labels of one term: letters and at most one ``"..."``."""
    if term.count(ELLIPSIS) > 1:
        ctx.fail(f"einsum term {term!r} has more than one ellipsis")
    before, found, after = term.partition(ELLIPSIS)
    for part in (before, after):
        if not all(c.isascii() and c.isalpha() for c in part):
            ctx.fail(f"einsum term {term!r} has a character that is not a letter")
    return [*before, *([ELLIPSIS] if found else []), *after]


def _combine_label(ctx: NodeContext, dims: list[Dim], unknown_shape: bool) -> Dim | None:
    """The size of a label shared by several dims; ``None`` when unknowable.

    numpy and onnxruntime broadcast a 1 against the other size. An operand of unknown
    shape could still change the size unless it is a known int other than 1.
    """
    try:
        size = expr.broadcast(*dims) if dims else None
    except expr.BroadcastError:
        ctx.fail(f"einsum dims {dims} of one label cannot be broadcast")
    if unknown_shape and not (isinstance(size, int) and size != 1):
        return None
    return size


@register("", "Einsum", since=12)
def infer_einsum(ctx: NodeContext, node: ir.Node) -> None:
    """Parses the equation; output dims are the labels' dims, ellipsis dims broadcast."""
    equation = ctx.attr_str("equation")
    if equation is None:
        ctx.fail("attribute 'equation' is required")
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    if "->" in rhs:
        ctx.fail(f"einsum equation {equation!r} has more than one '->'")
    terms = [_einsum_term(ctx, t) for t in lhs.split(",")]
    if len(terms) != ctx.num_inputs:
        ctx.fail(f"einsum equation has {len(terms)} terms for {ctx.num_inputs} inputs")
    label_dims: dict[str, list[Dim]] = {}
    label_unknown: dict[str, bool] = {}
    ellipses: list[Shape | None] = []
    for i, labels in enumerate(terms):
        ctx.require_input(i)
        shape = ctx.input_shape(i)
        letters = [c for c in labels if c != ELLIPSIS]
        if shape is None:
            for c in letters:
                label_unknown[c] = True
            if ELLIPSIS in labels:
                ellipses.append(None)
            continue
        if ELLIPSIS in labels:
            extra = len(shape) - len(letters)
            if extra < 0:
                ctx.fail(f"input {i} has rank {len(shape)} < {len(letters)} labels")
            start = labels.index(ELLIPSIS)
            ellipses.append(shape[start : start + extra])
            shape = shape[:start] + shape[start + extra :]
        elif len(shape) != len(letters):
            ctx.fail(f"input {i} has rank {len(shape)} but {len(letters)} labels")
        for c, d in zip(letters, shape):
            label_dims.setdefault(c, []).append(d)
    if arrow:
        output = _einsum_term(ctx, rhs)
        letters = [c for c in output if c != ELLIPSIS]
        if len(set(letters)) != len(letters):
            ctx.fail(f"einsum output {rhs!r} repeats a label")
        for c in letters:
            if c not in label_dims and c not in label_unknown:
                ctx.fail(f"einsum output label {c!r} is not in any input")
    else:
        counts: dict[str, int] = {}
        for labels in terms:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        singles = sorted(c for c, n in counts.items() if n == 1 and c != ELLIPSIS)
        output = ([ELLIPSIS] if ellipses else []) + singles
    dims: list[Dim | None] = []
    for c in output:
        if c != ELLIPSIS:
            dims.append(
                _combine_label(ctx, label_dims.get(c, []), label_unknown.get(c, False))
            )
            continue
        if any(s is None for s in ellipses):
            ctx.set_output(0, None, ctx.input_dtype(0))  # unknown ellipsis rank
            return
        broadcast = ctx.broadcast_shapes(*ellipses) if ellipses else ()
        dims.extend(broadcast)  # type: ignore[arg-type]
    ctx.set_output(0, dims, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# OneHot, Det
# ----------------------------------------------------------------------------------------
@register("", "OneHot", since=9)
def infer_one_hot(ctx: NodeContext, node: ir.Node) -> None:
    """``indices`` shape with ``depth`` inserted at ``axis``; element type of ``values``."""
    for i in range(3):
        ctx.require_input(i)
    indices = ctx.input_shape(0)
    dtype = ctx.input_dtype(2)
    depth = _single_element(ctx, 1, "depth")
    if isinstance(depth, int) and depth < 0:
        ctx.fail(f"depth must be >= 0, got {depth}")
    if indices is None:
        ctx.set_output(0, None, dtype)
        return
    rank = len(indices) + 1
    axis = ctx.normalize_axis(ctx.attr_int("axis", -1), rank)
    ctx.set_output(0, (*indices[:axis], depth, *indices[axis:]), dtype)


@register("", "Det", since=11)
def infer_det(ctx: NodeContext, node: ir.Node) -> None:
    """``[*, M, M] -> [*]``."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None:
        if len(x) < 2:
            ctx.fail(f"Det needs an input of rank >= 2, got {len(x)}")
        rows, cols = x[-2], x[-1]
        if isinstance(rows, int) and isinstance(cols, int) and rows != cols:
            ctx.fail(f"Det needs square matrices, got {rows}x{cols}")
        x = x[:-2]
    ctx.set_output(0, x, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Generators
# ----------------------------------------------------------------------------------------
@register("", "EyeLike", since=9)
def infer_eye_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same 2-D shape as the input; element type from ``dtype`` or the input."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) != 2:
        ctx.fail(f"EyeLike needs a 2-D input, got rank {len(x)}")
    ctx.set_output(
        0, x if x is not None else (None, None), dtype_attr(ctx, "dtype", ctx.input_dtype(0))
    )


@register("", ["RandomNormalLike", "RandomUniformLike", "Bernoulli"], since=1)
def infer_random_like(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as the input; element type from ``dtype`` or the input."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), dtype_attr(ctx, "dtype", ctx.input_dtype(0)))


@register("", ["RandomNormal", "RandomUniform"], since=1)
def infer_random(ctx: NodeContext, node: ir.Node) -> None:
    """Shape from the ``shape`` attribute; element type ``dtype`` (default FLOAT)."""
    shape = ctx.attr_ints("shape")
    if shape is None:
        ctx.fail("attribute 'shape' is required")
    if any(d < 0 for d in shape):
        ctx.fail(f"attribute 'shape' has a negative dim: {list(shape)}")
    ctx.set_output(0, tuple(shape), dtype_attr(ctx, "dtype", ir.DataType.FLOAT))


@register("", "Multinomial", since=7)
def infer_multinomial(ctx: NodeContext, node: ir.Node) -> None:
    """``[batch, classes] -> [batch, sample_size]``; element type ``dtype`` (INT32)."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is not None and len(x) != 2:
        ctx.fail(f"Multinomial needs a 2-D input, got rank {len(x)}")
    sample_size = ctx.attr_int("sample_size", 1)
    if sample_size < 0:
        ctx.fail(f"sample_size must be >= 0, got {sample_size}")
    batch = None if x is None else x[0]
    ctx.set_output(0, (batch, sample_size), dtype_attr(ctx, "dtype", ir.DataType.INT32))
