"""onnxruntime's NCHWc layout ops (domain ``com.microsoft.nchwc``, ``ORT_ENABLE_ALL``).

On x86-64 CPUs onnxruntime's layout optimizer rewrites convolutions and pools to work on
blocked channels: ``ReorderInput`` pads the channels of an NCHW (or NHWC) tensor up to a
multiple of the block size, the nchwc ``Conv``/pools work on the padded tensor, and
``ReorderOutput`` drops the padding again (its ``channels`` attribute is the real count).
Shapes follow onnxruntime's kernels (``contrib_ops/cpu/nchwc_ops.cc``):

* ``ReorderInput``: ``(N, round_up(C, block), spatial...)``, NCHWc out for NCHW or NHWC in.
  The block size is the CPU's (MLAS: 8 with AVX2, 16 with AVX-512; never more than 16,
  always a power of two), unknown to a model. When every block size gives the same
  count (``C % 16 == 0``: every real run) the dim is exact, otherwise a fresh symbol
  with ``C <= c <= round_up(C, 16)``.
* ``ReorderOutput``: ``(N, channels, spatial...)`` or ``(N, spatial..., channels)``.
* ``Conv``: ``(N, W[0], out...)``; W is already blocked, so ``W[0]`` is the padded
  count and the window is the ``Conv`` window.
* ``MaxPool``/``AveragePool``/``GlobalMaxPool``/``GlobalAveragePool``: the ``ai.onnx``
  pools (same attributes, same ``PoolAttributes`` in onnxruntime).
* ``Upsample``: integer ``scales`` on the spatial axes; N and C are kept.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import fresh_at_most
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.conv_pool import (
    conv_spatial_dim,
    infer_global_pool,
    infer_pool,
    kernel_dims,
    read_window,
)
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

NCHWC = "com.microsoft.nchwc"

#: The NCHWc block sizes MLAS may pick (``MlasNchwcGetBlockSize``); the largest bounds all.
BLOCK_SIZES = (8, 16)

Dim = expr.Dim
MaybeDim = Dim | None


def _round_up(channels: int, block: int) -> int:
    return (channels + block - 1) // block * block


def _blocked_channels(ctx: NodeContext, channels: MaybeDim) -> MaybeDim:
    """``round_up(channels, block)`` for the unknown CPU block size."""
    if channels is None:
        return None
    largest = max(BLOCK_SIZES)
    if isinstance(channels, int):
        if channels % 4:
            ctx.fail(f"ReorderInput needs a multiple of 4 channels, got {channels}")
        candidates = {_round_up(channels, b) for b in BLOCK_SIZES}
        if len(candidates) == 1:
            return candidates.pop()
        blocked = fresh_at_most(ctx, "blocked_channels", _round_up(channels, largest))
    else:
        blocked = fresh_at_most(ctx, "blocked_channels", expr.add(channels, largest - 1))
    ctx.ctx.add_less_equal_constraint(channels, blocked)
    return blocked


@register(NCHWC, "ReorderInput", since=1)
def infer_reorder_input(ctx: NodeContext, node: ir.Node) -> None:
    """NCHW/NHWC to NCHWc: ``(N, round_up(C, block), spatial...)``."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    channels_last = bool(ctx.attr_int("channels_last", 0))
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    if len(x) != 4:
        ctx.fail(f"ReorderInput needs a 4-D input, got rank {len(x)}")
    channels = x[-1] if channels_last else x[1]
    spatial = x[1:-1] if channels_last else x[2:]
    ctx.set_output(0, (x[0], _blocked_channels(ctx, channels), *spatial), ctx.input_dtype(0))


@register(NCHWC, "ReorderOutput", since=1)
def infer_reorder_output(ctx: NodeContext, node: ir.Node) -> None:
    """NCHWc to NCHW/NHWC with the real channel count (attribute ``channels``)."""
    ctx.require_input(0)
    channels = ctx.attr_int("channels", 0)
    if channels <= 0:
        ctx.fail(f"attribute 'channels' must be > 0, got {channels}")
    x = ctx.input_shape(0)
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    if len(x) != 4:
        ctx.fail(f"ReorderOutput needs a 4-D input, got rank {len(x)}")
    blocked = x[1]
    if isinstance(blocked, int) and not channels <= blocked < channels + max(BLOCK_SIZES):
        ctx.fail(f"{blocked} blocked channels cannot hold {channels} channels")
    if ctx.attr_int("channels_last", 0):
        out = (x[0], *x[2:], channels)
    else:
        out = (x[0], channels, *x[2:])
    ctx.set_output(0, out, ctx.input_dtype(0))


@register(NCHWC, "Conv", since=1)
def infer_nchwc_conv(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, W[0], out...)`` with the ``Conv`` window (``Sum`` has the output's shape)."""
    ctx.require_input(0)
    ctx.require_input(1)
    dtype = ctx.input_dtype(0)
    x = ctx.input_shape(0)
    w = ctx.input_shape(1)
    ranks = {len(s) for s in (x, w) if s is not None}
    if not ranks:
        ctx.set_output(0, None, dtype)
        return
    if ranks != {4}:
        ctx.fail(f"nchwc Conv needs 4-D input and weight, got ranks {sorted(ranks)}")
    kernel = kernel_dims(ctx, w, 2)
    window = read_window(ctx, 2, pads_with_auto_pad="fail")
    group = ctx.attr_int("group", 1)
    if group < 1:
        ctx.fail(f"group must be >= 1, got {group}")
    if x is not None and w is not None:
        # The kernel validates C == W[1] * group: in every run the (blocked) input
        # channels are the weight's, which pins a ReorderInput's fresh channel count.
        expected = expr.mul(w[1], group)
        if isinstance(x[1], int) and isinstance(expected, int) and x[1] != expected:
            ctx.fail(f"input channels {x[1]} != weight channels {w[1]} * group {group}")
        ctx.ctx.add_symbolic_constraint_with_leaf_derivation(x[1], expected)
    out: list[MaybeDim] = [None if x is None else x[0], None if w is None else w[0]]
    for i in range(2):
        d, k = (None if x is None else x[2 + i]), kernel[i]
        if d is None or k is None:
            out.append(None)
            continue
        out.append(conv_spatial_dim(ctx, i, d, k, window))
    ctx.set_output(0, out, dtype)


@register(NCHWC, ("MaxPool", "AveragePool"), since=1)
def infer_nchwc_pool(ctx: NodeContext, node: ir.Node) -> None:
    """The ``ai.onnx`` pool on the blocked tensor (channels kept)."""
    infer_pool(ctx, node)


@register(NCHWC, ("GlobalMaxPool", "GlobalAveragePool"), since=1)
def infer_nchwc_global_pool(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, C, 1, 1)``."""
    infer_global_pool(ctx, node)


@register(NCHWC, "Upsample", since=1)
def infer_nchwc_upsample(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, C, H * scales[2], W * scales[3])`` (integer scales, one per axis)."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    scales = ctx.attr_ints("scales")
    if scales is None:
        ctx.fail("attribute 'scales' is required")
    if any(s <= 0 for s in scales):
        ctx.fail(f"scales must be positive, got {list(scales)}")
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    if len(x) != 4 or len(scales) != 4:
        ctx.fail(f"nchwc Upsample needs a 4-D input and 4 scales, got {list(scales)}")
    out = (x[0], x[1], expr.mul(x[2], scales[2]), expr.mul(x[3], scales[3]))
    ctx.set_output(0, out, ctx.input_dtype(0))
