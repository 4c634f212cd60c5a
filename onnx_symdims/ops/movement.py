"""Shape hooks for data-movement ops that keep or tile their input's layout.

Tile, Pad, Trilu, CumSum, ReverseSequence, DepthToSpace, SpaceToDepth, Col2Im and
CenterCropPad. Slicing ops (Slice, Split, Flatten, Transpose) are in
:mod:`onnx_symdims.ops.slicing`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    divide,
    product,
    single_element,
    static_length,
)
from onnx_symdims.ops._registry import register

if TYPE_CHECKING:
    import onnx_ir as ir

    from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim


def _is_known(d: Dim | None) -> bool:
    return d is not None and not (isinstance(d, expr.DimExpr) and d.is_unknown)


# ---------------------------------------------------------------------------------------
# Tile, Pad
# ---------------------------------------------------------------------------------------
@register("", "Tile", since=6)
def infer_tile(ctx: NodeContext, node: ir.Node) -> None:
    """Tile: ``dims[i] * repeats[i]`` (repeats may be symbolic)."""
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    ctx.require_input(1)
    repeats = ctx.input_value(1)
    rank = len(shape) if shape is not None else static_length(ctx, 1)
    if rank is None:
        ctx.set_output(0, None, dtype)
        return
    if repeats is not None and len(repeats) != rank:
        ctx.fail(f"{len(repeats)} repeats for an input of rank {rank}")
    dims: list[Dim | None] = []
    for k in range(rank):
        d = shape[k] if shape is not None else None
        r = repeats[k] if repeats is not None else None
        if isinstance(r, int) and r < 0:
            ctx.fail(f"negative repeat {r}")
        if d == 0 or r == 0:
            dims.append(0)
        elif d is None or not _is_known(r):
            dims.append(None)
        else:
            dims.append(expr.mul(d, r))
    ctx.set_output(0, dims, dtype)
    elements = ctx.input_value(0)
    if (
        elements is not None
        and rank == 1
        and repeats is not None
        and isinstance(repeats[0], int)
    ):
        ctx.set_output_value(0, tuple(elements) * repeats[0])


def _infer_pad(
    ctx: NodeContext,
    pads: Sequence[Dim] | None,
    axes: Sequence[int] | None,
    fill: int | None,
) -> None:
    """Pad: ``dims[a] + pads[begin a] + pads[end a]`` on ``axes`` (``None``: all axes).

    Args:
        ctx: The node context.
        pads: Begin pads then end pads (elements may be symbolic or unknown), or
            ``None`` when only known at run time.
        axes: The padded axes (already read), or ``None`` for every axis.
        fill: The constant fill value when known (for value-as-shape), else ``None``.
    """
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if shape is None:
        rank = None if pads is None or axes is not None else len(pads) // 2
        ctx.set_output(0, None if rank is None else [None] * rank, dtype)
        return
    rank = len(shape)
    axes = list(range(rank)) if axes is None else ctx.normalize_axes(axes, rank)
    if pads is not None and len(pads) != 2 * len(axes):
        ctx.fail(f"{len(pads)} pads for {len(axes)} axes")
    dims: list[Dim | None] = list(shape)
    for k, axis in enumerate(axes):
        begin = pads[k] if pads is not None else None
        end = pads[k + len(axes)] if pads is not None else None
        if not (_is_known(begin) and _is_known(end)):
            dims[axis] = None
            continue
        dims[axis] = expr.add(expr.add(shape[axis], begin), end)
        if isinstance(dims[axis], int) and dims[axis] < 0:
            ctx.fail(f"pads {begin}, {end} make axis {axis} of size {shape[axis]} negative")
    ctx.set_output(0, dims, dtype)
    elements = ctx.input_value(0)
    if (
        elements is not None
        and rank == 1
        and fill is not None
        and ctx.attr_str("mode", "constant") == "constant"
        and pads is not None
        and all(isinstance(p, int) and p >= 0 for p in pads)
    ):
        begin, end = pads  # type: ignore[misc]
        ctx.set_output_value(0, (fill,) * begin + tuple(elements) + (fill,) * end)


@register("", "Pad", since=2)
def infer_pad_v2(ctx: NodeContext, node: ir.Node) -> None:
    """Pad with the ``pads`` attribute (opsets 2-10), negative pads crop."""
    pads = ctx.attr_ints("pads")
    if pads is None:
        ctx.fail("attribute 'pads' is required")
    value = ctx.attr_float("value", 0.0)
    fill = int(value) if value is not None and float(value).is_integer() else None
    _infer_pad(ctx, pads, None, fill)


def _pad_fill(ctx: NodeContext) -> int | None:
    if not ctx.has_input(2):
        return 0
    return single_element(ctx.input_ints(2))


@register("", "Pad", since=11)
def infer_pad_v11(ctx: NodeContext, node: ir.Node) -> None:
    """Pad with a ``pads`` input (symbolic pads from shape computations allowed)."""
    ctx.require_input(1)
    _infer_pad(ctx, ctx.input_value(1), None, _pad_fill(ctx))


@register("", "Pad", since=18)
def infer_pad_v18(ctx: NodeContext, node: ir.Node) -> None:
    """Pad with ``pads`` and the optional ``axes`` input."""
    ctx.require_input(1)
    pads = ctx.input_value(1)
    if not ctx.has_input(3):
        _infer_pad(ctx, pads, None, _pad_fill(ctx))
        return
    axes = ctx.input_ints(3)
    if axes is not None:
        _infer_pad(ctx, pads, axes, _pad_fill(ctx))
        return
    # Unknown padded axes: any dim may change, the rank stays.
    _infer_pad(ctx, None, None, None)


# ---------------------------------------------------------------------------------------
# Same-shape ops with checks
# ---------------------------------------------------------------------------------------
@register("", "Trilu", since=14)
def infer_trilu(ctx: NodeContext, node: ir.Node) -> None:
    """Trilu: same shape as the input (rank >= 2)."""
    shape = ctx.input_shape(0)
    if shape is not None and len(shape) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(shape)}")
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register("", "CumSum", since=11)
def infer_cumsum(ctx: NodeContext, node: ir.Node) -> None:
    """CumSum: same shape as the input; a constant ``axis`` is range-checked."""
    shape = ctx.input_shape(0)
    ctx.require_input(1)
    axis = single_element(ctx.input_ints(1))
    if shape is not None and axis is not None:
        ctx.normalize_axis(axis, len(shape))
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register("", "ReverseSequence", since=10)
def infer_reverse_sequence(ctx: NodeContext, node: ir.Node) -> None:
    """ReverseSequence: same shape as the input (rank >= 2, axes 0 and 1)."""
    shape = ctx.input_shape(0)
    batch_axis = ctx.attr_int("batch_axis", 1)
    time_axis = ctx.attr_int("time_axis", 0)
    if {batch_axis, time_axis} != {0, 1}:
        ctx.fail(f"batch_axis={batch_axis} and time_axis={time_axis} must be 0 and 1")
    if shape is not None and len(shape) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(shape)}")
    lens = ctx.input_shape(1)
    if shape is not None and lens is not None:
        if len(lens) != 1:
            ctx.fail(f"sequence_lens must be 1-D, got rank {len(lens)}")
        if (
            isinstance(lens[0], int)
            and isinstance(shape[batch_axis], int)
            and lens[0] != shape[batch_axis]
        ):
            ctx.fail(
                f"sequence_lens has {lens[0]} elements for batch size {shape[batch_axis]}"
            )
    ctx.set_output(0, shape, ctx.input_dtype(0))


# ---------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth
# ---------------------------------------------------------------------------------------
def _blocked_input(ctx: NodeContext) -> tuple[tuple[Dim, ...] | None, int]:
    blocksize = ctx.attr_int("blocksize")
    if blocksize is None or blocksize < 1:
        ctx.fail(f"blocksize must be a positive int, got {blocksize}")
    shape = ctx.input_shape(0)
    if shape is not None and len(shape) != 4:
        ctx.fail(f"input must have rank 4, got {len(shape)}")
    return shape, blocksize


@register("", "DepthToSpace", since=1)
def infer_depth_to_space(ctx: NodeContext, node: ir.Node) -> None:
    """DepthToSpace: ``[N, C / b^2, H * b, W * b]`` (C must divide exactly)."""
    shape, b = _blocked_input(ctx)
    dtype = ctx.input_dtype(0)
    if shape is None:
        ctx.set_output(0, [None] * 4, dtype)
        return
    n, c, h, w = shape
    channels = divide(ctx, c, b * b, "channel dim")
    ctx.set_output(0, [n, channels, expr.mul(h, b), expr.mul(w, b)], dtype)


@register("", "SpaceToDepth", since=1)
def infer_space_to_depth(ctx: NodeContext, node: ir.Node) -> None:
    """SpaceToDepth: ``[N, C * b^2, H / b, W / b]`` (H and W must divide exactly)."""
    shape, b = _blocked_input(ctx)
    dtype = ctx.input_dtype(0)
    if shape is None:
        ctx.set_output(0, [None] * 4, dtype)
        return
    n, c, h, w = shape
    height = divide(ctx, h, b, "height")
    width = divide(ctx, w, b, "width")
    ctx.set_output(0, [n, expr.mul(c, b * b), height, width], dtype)


# ---------------------------------------------------------------------------------------
# Col2Im, CenterCropPad
# ---------------------------------------------------------------------------------------
@register("", "Col2Im", since=18)
def infer_col2im(ctx: NodeContext, node: ir.Node) -> None:
    """Col2Im: ``[N, C * prod(block) , L] -> [N, C, *image_shape]``."""
    ctx.require_input(1)
    ctx.require_input(2)
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if shape is not None and len(shape) != 3:
        ctx.fail(f"input must have rank 3, got {len(shape)}")
    image = ctx.input_value(1)
    spatial = len(image) if image is not None else static_length(ctx, 1)
    block = ctx.input_value(2)
    if block is not None and spatial is not None and len(block) != spatial:
        ctx.fail(f"block_shape has {len(block)} elements, image_shape {spatial}")
    if spatial is None:
        ctx.set_output(0, None, dtype)
        return
    image_dims: list[Dim | None] = [None] * spatial
    if image is not None:
        image_dims = [v if _is_known(v) else None for v in image]
    batch: Dim | None = None
    channels: Dim | None = None
    if shape is not None:
        batch = shape[0]
        if block is not None and all(isinstance(v, int) for v in block):
            block_size = product(block)
            if block_size < 1:  # type: ignore[operator]
                ctx.fail(f"block_shape {list(block)} must be positive")
            channels = divide(ctx, shape[1], block_size, "channel dim")  # type: ignore[arg-type]
    ctx.set_output(0, [batch, channels, *image_dims], dtype)


@register("", "CenterCropPad", since=18)
def infer_center_crop_pad(ctx: NodeContext, node: ir.Node) -> None:
    """CenterCropPad: the dims on ``axes`` become the ``shape`` input's elements."""
    ctx.require_input(1)
    shape = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    target = ctx.input_value(1)
    if shape is None:
        ctx.set_output(0, None, dtype)
        return
    rank = len(shape)
    axes = ctx.normalize_axes(ctx.attr_ints("axes", range(rank)), rank)
    if target is not None and len(target) != len(axes):
        ctx.fail(f"shape has {len(target)} elements for {len(axes)} axes")
    dims: list[Dim | None] = list(shape)
    for k, axis in enumerate(axes):
        dims[axis] = target[k] if target is not None and _is_known(target[k]) else None
    ctx.set_output(0, dims, dtype)
