"""Indexing ops: ``GatherElements``, ``GatherND``, ``ScatterND``, ``ScatterElements``, ``Scatter``.

Small known "values as shape" are propagated through them (PyTorch exports write
single entries of shape tensors with ``ScatterND``).

``Gather`` lives in :mod:`onnx_symdims.ops.shape_ops`; the ops whose output size
depends on tensor contents in :mod:`onnx_symdims.ops.data_dependent`.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    element_array,
    is_static,
    set_value_array,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    MAX_VALUE_ELEMENTS,
    NodeContext,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64


# ----------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------
def _index_array(ctx: NodeContext, i: int) -> np.ndarray | None:
    """Input ``i``'s elements as an int64 array of its shape, when all are known ints."""
    shape = ctx.input_shape(i)
    elements = ctx.input_ints(i)
    if elements is None or not is_static(shape) or math.prod(shape) != len(elements):
        return None
    return np.array(elements, dtype=np.int64).reshape(tuple(shape))


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
        set_value_array(ctx, 0, _gather_elements_value(ctx, axis))


def _gather_elements_value(ctx: NodeContext, axis: int) -> np.ndarray | None:
    data, indices = element_array(ctx, 0), _index_array(ctx, 1)
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
    set_value_array(ctx, 0, _gather_nd_value(ctx, batch_dims, last))


def _gather_nd_value(ctx: NodeContext, batch_dims: int, last: int) -> np.ndarray | None:
    data, indices = element_array(ctx, 0), _index_array(ctx, 1)
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
        element_array(ctx, 0),
        _index_array(ctx, 1),
        element_array(ctx, 2),
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
    data_array = element_array(ctx, 0)
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

    set_value_array(ctx, 0, _scatter_value(ctx, reduction, targets))


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
    data_array = element_array(ctx, 0)
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

    set_value_array(ctx, 0, _scatter_value(ctx, reduction, targets))
