"""onnxruntime contrib ops (``com.microsoft``): math, indexing, norms and text utilities.

These are the contrib ops that are neither attention, generation, fused nor quantized;
the math ops (matrix products, FFTs, ``SwiGLU``, ...) are in
:mod:`onnx_symdims.ops.contrib_math`.

Shapes follow onnxruntime's contrib schemas and CPU kernels (checked against onnxruntime
runs where a CPU kernel exists). Several ops are the ``ai.onnx`` op under another domain
(``GatherND``, ``Pad``, ``Trilu``) and reuse that hook; data-dependent sizes
(``DynamicTimeWarping``, ``Tokenizer``, ``Unique``) are fresh symbols with the bounds the
op guarantees. The mixture-of-experts ops return the input's shape; their routers follow
the router logits.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    divide,
    fresh_at_most,
    merge_dims,
    product,
    replace_axis,
    single_element,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.attention import require_rank
from onnx_symdims.ops.conv_pool import infer_conv_transpose, infer_pool
from onnx_symdims.ops.indexing import infer_gather_nd
from onnx_symdims.ops.movement import infer_pad_v11, infer_trilu
from onnx_symdims.ops.shape_ops import infer_range
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None

INT32 = ir.DataType.INT32
INT64 = ir.DataType.INT64


def _same_as_input(ctx: NodeContext, dtype: ir.DataType | None = None) -> None:
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), dtype or ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# The ai.onnx op under the com.microsoft domain
# ----------------------------------------------------------------------------------------
@register(MS, "GatherND", since=1)
def infer_gather_nd_ms(ctx: NodeContext, node: ir.Node) -> None:
    """The ``ai.onnx`` GatherND without ``batch_dims``."""
    infer_gather_nd(ctx, node)


@register(MS, "Pad", since=1)
def infer_pad_ms(ctx: NodeContext, node: ir.Node) -> None:
    """The ``ai.onnx`` Pad-11; ``pads`` may also be ``[1, 2 * rank]`` (read flattened)."""
    infer_pad_v11(ctx, node)


@register(MS, "Trilu", since=1)
def infer_trilu_ms(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape as the input (rank >= 2)."""
    infer_trilu(ctx, node)


@register(MS, "Range", since=1)
def infer_range_ms(ctx: NodeContext, node: ir.Node) -> None:
    """The ``ai.onnx`` Range, with ``delta`` optional (default 1)."""
    if ctx.has_input(2):
        infer_range(ctx, node)
        return
    ctx.require_input(0)
    ctx.require_input(1)
    start, limit = single_element(ctx.input_value(0)), single_element(ctx.input_value(1))
    length = None
    if start is not None and limit is not None:
        length = expr.dmax(expr.sub(limit, start), 0, scope=ctx.scope)
    ctx.set_output(0, (length,), ctx.input_dtype(0))
    if isinstance(length, int) and start is not None:
        ctx.set_output_value(0, [expr.add(start, k) for k in range(length)])


@register(MS, "MaxpoolWithMask", since=1)
def infer_maxpool_with_mask(ctx: NodeContext, node: ir.Node) -> None:
    """MaxPool's output shape (the mask ``M`` only zeroes inputs)."""
    infer_pool(ctx, node)


@register(MS, "ConvTransposeWithDynamicPads", since=1)
def infer_conv_transpose_dynamic_pads(ctx: NodeContext, node: ir.Node) -> None:
    """ConvTranspose with the pads of the ``Pads`` input (onnxruntime requires it).

    Constant pads are subtracted from the unpadded size; runtime pads (or pads next to
    ``auto_pad``/``output_shape``, whose interplay the kernel decides) give fresh dims.
    """
    infer_conv_transpose(ctx, node)  # the pads attribute is absent: unpadded sizes
    out = ctx.ctx.shape_of(node.outputs[0])
    if out is None or not ctx.has_input(2):
        return
    spatial = len(out) - 2
    pads = ctx.input_ints(2)
    plain = ctx.attr_str("auto_pad", "NOTSET") == "NOTSET" and not ctx.has_attr("output_shape")
    if pads is not None and len(pads) != 2 * spatial:
        ctx.fail(f"{len(pads)} pads for {spatial} spatial axes")
    dims: list[MaybeDim] = list(out[:2])
    for i in range(spatial):
        if pads is None or not plain:
            dims.append(None)
            continue
        d = expr.sub(out[i + 2], pads[i] + pads[i + spatial])
        if isinstance(d, int) and d < 0:
            ctx.fail(f"pads make spatial axis {i} negative")
        dims.append(d)
    ctx.set_output(0, dims, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Same shape as the input
# ----------------------------------------------------------------------------------------
@register(
    MS,
    (
        "Inverse",
        "SampleOp",
        "ScaledSiLU",
        "GroupNorm",
        "QuantizeWithOrder",
        "BranchwiseRMSNorm",
        "GatedRMSNorm",
        "MoE",
        "QMoE",
        "MoEPacked",
    ),
    since=1,
)
def infer_same_shape(ctx: NodeContext, node: ir.Node) -> None:
    """Y has the shape and type of the first input; ``QuantizeWithOrder`` gives INT8.

    The mixture-of-experts ops return each token's mix of expert outputs: the input's
    ``(T, hidden)`` or ``(B, S, hidden)``.
    """
    dtype = ir.DataType.INT8 if node.op_type == "QuantizeWithOrder" else None
    _same_as_input(ctx, dtype)


@register(MS, "DequantizeWithOrder", since=1)
def infer_dequantize_with_order(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape; the element type of ``to`` (default FLOAT)."""
    code = ctx.attr_int("to", int(ir.DataType.FLOAT))
    _same_as_input(ctx, ir.DataType(code))


@register(MS, "MurmurHash3", since=1)
def infer_murmur_hash3(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape; UINT32 with ``positive=1`` (the default), INT32 otherwise."""
    positive = ctx.attr_int("positive", 1)
    _same_as_input(ctx, ir.DataType.UINT32 if positive else INT32)


@register(MS, "BitmaskDropout", since=1)
def infer_bitmask_dropout(ctx: NodeContext, node: ir.Node) -> None:
    """Output like data; the bitmask holds one bit per element: ``ceil(numel / 32)`` UINT32."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    ctx.set_output(0, shape, ctx.input_dtype(0))
    words = None if shape is None else expr.ceildiv(product(shape), 32)
    ctx.set_output(1, (words,), ir.DataType.UINT32)


@register(MS, "GatedAdd", since=1)
def infer_gated_add(ctx: NodeContext, node: ir.Node) -> None:
    """Output like X (``X + Y * gate`` with a per-row gate)."""
    ctx.require_input(1)
    ctx.require_input(2)
    _same_as_input(ctx)


@register(MS, "EngramGate", since=1)
def infer_engram_gate(ctx: NodeContext, node: ir.Node) -> None:
    """Key/query ``(B, S, hc, H)``, value ``(B, S, H)``: both outputs ``(B, S, hc, H)``."""
    for i in range(5):
        ctx.require_input(i)
    key = require_rank(ctx, 0, (4,), "key")
    query = require_rank(ctx, 1, (4,), "query")
    value = require_rank(ctx, 2, (3,), "value")
    k = key or (None,) * 4
    q = query or (None,) * 4
    v = value or (None,) * 3
    out = (
        merge_dims(ctx, "batch size", k[0], q[0], v[0]),
        merge_dims(ctx, "sequence length", k[1], q[1], v[1]),
        merge_dims(ctx, "hc_mult", k[2], q[2]),
        merge_dims(ctx, "hidden size", k[3], q[3], v[2]),
    )
    ctx.set_output(0, out, ctx.input_dtype(2))
    ctx.set_output(1, out, ctx.input_dtype(2))


# ----------------------------------------------------------------------------------------
# Hyper-connections (branch mixing)
# ----------------------------------------------------------------------------------------
@register(MS, "HyperConnectionPreMix", since=1)
def infer_hyper_connection_pre_mix(ctx: NodeContext, node: ir.Node) -> None:
    """Streams ``(..., C, H)`` to ``(..., H)``; flattened ``(..., C * H)`` with ``num_branches``."""
    ctx.require_input(1)
    streams = ctx.input_shape(0)
    branches = ctx.attr_int("num_branches")
    out = None
    if streams is not None:
        if branches is not None and branches > 0:
            if not streams:
                ctx.fail("streams must have rank >= 1")
            out = (*streams[:-1], divide(ctx, streams[-1], branches, "flattened streams"))
        else:
            if len(streams) < 2:
                ctx.fail("grouped streams must have rank >= 2")
            out = (*streams[:-2], streams[-1])
    ctx.set_output(0, out, ctx.input_dtype(0))


@register(MS, "HyperConnectionPostMix", since=1)
def infer_hyper_connection_post_mix(ctx: NodeContext, node: ir.Node) -> None:
    """Output like the streams ``(..., C, H)``."""
    ctx.require_input(1)
    ctx.require_input(2)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Indexing and layout
# ----------------------------------------------------------------------------------------
@register(MS, "ExpandDims", since=1)
def infer_expand_dims(ctx: NodeContext, node: ir.Node) -> None:
    """A 1 inserted at ``axis`` (a scalar input in ``[-rank - 1, rank]``)."""
    ctx.require_input(1)
    x = ctx.input_shape(0)
    axis = single_element(ctx.input_ints(1))
    if x is None or axis is None:
        ctx.set_output(0, None if x is None else (None,) * (len(x) + 1), ctx.input_dtype(0))
        return
    axis = ctx.normalize_axis(axis, len(x) + 1)
    ctx.set_output(0, (*x[:axis], 1, *x[axis:]), ctx.input_dtype(0))
    elements = ctx.input_value(0)
    if elements is not None:
        ctx.set_output_value(0, elements)


@register(MS, "UnfoldTensor", since=1)
def infer_unfold_tensor(ctx: NodeContext, node: ir.Node) -> None:
    """Axis ``dim`` becomes ``(L - size) // step + 1``; a trailing axis of ``size``."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    size = ctx.attr_int("size")
    step = ctx.attr_int("step", 1)
    if size is None or size <= 0 or step is None or step <= 0:
        ctx.fail("size must be given and size, step positive")
    if x is None:
        ctx.set_output(0, None, ctx.input_dtype(0))
        return
    axis = ctx.normalize_axis(ctx.attr_int("dim", -1), len(x))
    length = x[axis]
    if isinstance(length, int) and length < size:
        ctx.fail(f"dim {axis} has {length} < size {size} elements")
    count = expr.add(expr.floordiv(expr.sub(length, size), step), 1)
    if isinstance(length, expr.DimExpr):
        ctx.ctx.add_less_equal_constraint(size, length)  # the kernel fails otherwise
    ctx.set_output(0, (*replace_axis(x, axis, count), size), ctx.input_dtype(0))


@register(MS, "TorchEmbedding", since=1)
def infer_torch_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """``weight (num, dim)`` gathered by ``indices``: ``indices.shape + (dim,)``."""
    ctx.require_input(1)
    weight = require_rank(ctx, 0, (2,), "weight")
    indices = ctx.input_shape(1)
    out = None if indices is None else (*indices, weight[1] if weight else None)
    ctx.set_output(0, out, ctx.input_dtype(0))


@register(MS, "GridSample", since=1)
def infer_grid_sample(ctx: NodeContext, node: ir.Node) -> None:
    """``X (N, C, H, W)`` sampled at ``Grid (N, H_out, W_out, 2)``: ``(N, C, H_out, W_out)``."""
    ctx.require_input(1)
    x = require_rank(ctx, 0, (4,), "X") or (None,) * 4
    grid = require_rank(ctx, 1, (4,), "Grid") or (None,) * 4
    if isinstance(grid[3], int) and grid[3] != 2:
        ctx.fail(f"Grid's last dim must be 2, got {grid[3]}")
    batch = merge_dims(ctx, "batch size", x[0], grid[0])
    ctx.set_output(0, (batch, x[1], grid[1], grid[2]), ctx.input_dtype(0))


@register(MS, "CropAndResize", since=1)
def infer_crop_and_resize(ctx: NodeContext, node: ir.Node) -> None:
    """``(num_rois, C, crop_h, crop_w)`` with ``crop_size`` a 2-element input."""
    for i in range(4):
        ctx.require_input(i)
    x = require_rank(ctx, 0, (4,), "X") or (None,) * 4
    rois = require_rank(ctx, 1, (2,), "rois") or (None, None)
    indices = require_rank(ctx, 2, (1,), "batch_indices") or (None,)
    num = merge_dims(ctx, "number of rois", rois[0], indices[0])
    crop = ctx.input_value(3)
    if crop is not None and len(crop) != 2:
        ctx.fail(f"crop_size must have 2 elements, got {len(crop)}")
    height, width = crop if crop is not None else (None, None)
    ctx.set_output(0, (num, x[1], height, width), ctx.input_dtype(0))


@register(MS, "WordConvEmbedding", since=1)
def infer_word_conv_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """Char ids ``(S, word_len)`` and conv weights ``(E, 1, win, char_E)``: ``(S, E)``."""
    for i in range(4):
        ctx.require_input(i)
    sequence = require_rank(ctx, 0, (2,), "Sequence") or (None, None)
    w = require_rank(ctx, 1, (4,), "W")
    bias = require_rank(ctx, 2, (1,), "B")
    size = merge_dims(
        ctx,
        "embedding size",
        w[0] if w else None,
        bias[0] if bias else None,
        ctx.attr_int("embedding_size"),
    )
    ctx.set_output(0, (sequence[0], size), ctx.input_dtype(3))


# ----------------------------------------------------------------------------------------
# Data-dependent sizes
# ----------------------------------------------------------------------------------------
@register(MS, "Unique", since=1)
def infer_unique_ms(ctx: NodeContext, node: ir.Node) -> None:
    """1-D ``x`` of ``n`` elements: ``y`` and ``counts`` ``(u,)`` with ``u <= n``, ``idx (n,)``."""
    ctx.require_input(0)
    x = require_rank(ctx, 0, (1,), "x")
    n = x[0] if x is not None else None
    count = n if n in (0, 1) else fresh_at_most(ctx, "unique", n)
    ctx.set_output(0, (count,), ctx.input_dtype(0))
    ctx.set_output(1, (n,), INT64)
    ctx.set_output(2, (count,), INT64)


@register(MS, "DynamicTimeWarping", since=1)
def infer_dynamic_time_warping(ctx: NodeContext, node: ir.Node) -> None:
    """A ``(2, L)`` INT32 path through the ``(M, N)`` cost matrix: ``L <= M + N - 1``."""
    ctx.require_input(0)
    shape = require_rank(ctx, 0, (2, 3), "input")
    bound = None
    if shape is not None:
        rows, cols = shape[-2:]
        bound = expr.add(rows, cols)
    ctx.set_output(0, (2, fresh_at_most(ctx, "path", bound)), INT32)


@register(MS, "Tokenizer", since=1)
def infer_tokenizer(ctx: NodeContext, node: ir.Node) -> None:
    """``[C]`` to ``[C, D]``, ``[N, C]`` to ``[N, C, D]``, D the most tokens found (fresh).

    An empty X keeps its rank instead (measured with onnxruntime 1.32: ``[0]`` gives
    ``[0]``, ``[N, 0]`` and ``[0, C]`` give ``[N, 0]``), so the rank is known only where
    X is provably empty or provably not.
    """
    ctx.require_input(0)
    x = require_rank(ctx, 0, (1, 2), "X")
    out: tuple[MaybeDim, ...] | None = None
    if x is not None:
        count = product(x)
        if count == 0:
            out = (*x[:-1], 0)
        elif ctx.scope.prove_gt(count, 0):
            out = (*x, ctx.new_symbol("tokens"))
    ctx.set_output(0, out, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Mixture-of-experts routing
# ----------------------------------------------------------------------------------------
@register(MS, "MoEGroupRouter", since=1)
def infer_moe_group_router(ctx: NodeContext, node: ir.Node) -> None:
    """``(T, E)`` routing tensors; E is ``expert_bias``'s length (or the projection's rows)."""
    ctx.require_input(1)
    logits = require_rank(ctx, 0, (2,), "logits") or (None, None)
    bias = require_rank(ctx, 1, (1,), "expert_bias")
    experts = bias[0] if bias is not None else None
    if ctx.has_input(2):
        projection = require_rank(ctx, 2, (2,), "projection_weight") or (None, None)
        experts = merge_dims(ctx, "num_experts", experts, projection[0])
    else:
        experts = merge_dims(ctx, "num_experts", experts, logits[1])
    shape = (logits[0], experts)
    ctx.set_output(0, shape, ctx.input_dtype(0))
    ctx.set_output(1, shape, ctx.input_dtype(1))
    ctx.set_output(2, shape, ctx.input_dtype(1))


@register(MS, "RouterGateUpProj", since=1)
def infer_router_gate_up_proj(ctx: NodeContext, node: ir.Node) -> None:
    """``X @ W`` split into router logits ``(.., router_size)`` and ``(.., inter)``.

    W is ``(K, router_size + 2 * inter)``: the gate and up halves are multiplied.
    """
    ctx.require_input(1)
    x = ctx.input_shape(0)
    w = require_rank(ctx, 1, (2,), "W") or (None, None)
    router = ctx.attr_int("router_size")
    if router is None or router < 0:
        ctx.fail("attribute router_size is required and non-negative")
    inter = None if w[1] is None else divide(ctx, expr.sub(w[1], router), 2, "gate/up width")
    if x is not None and not x:
        ctx.fail("X must have rank >= 1")
    if x is not None:
        merge_dims(ctx, "K", x[-1], w[0])
    ctx.set_output(0, None if x is None else (*x[:-1], router), ctx.input_dtype(0))
    ctx.set_output(1, None if x is None else (*x[:-1], inter), ctx.input_dtype(0))


@register(MS, "HyperConnectionLowRankMix", since=1)
def infer_hyper_connection_low_rank_mix(ctx: NodeContext, node: ir.Node) -> None:
    """Streams ``(..., C * H)``: pre_output ``(..., H)``, post_gate ``(..., C)``, streams_out."""
    for i in range(5):
        ctx.require_input(i)
    streams = ctx.input_shape(0)
    branches = ctx.attr_int("num_branches")
    if branches is None or branches <= 0:
        ctx.fail("attribute num_branches is required and positive")
    dtype = ctx.input_dtype(0)
    if streams is not None and not streams:
        ctx.fail("streams must have rank >= 1")
    lead = None if streams is None else streams[:-1]
    hidden = None if streams is None else divide(ctx, streams[-1], branches, "streams width")
    ctx.set_output(0, None if lead is None else (*lead, hidden), dtype)
    ctx.set_output(1, None if lead is None else (*lead, branches), dtype)
    ctx.set_output(2, streams, dtype)


# ----------------------------------------------------------------------------------------
# Opaque packed formats
# ----------------------------------------------------------------------------------------
@register(MS, "QuantizeBFP", since=1)
def infer_quantize_bfp(ctx: NodeContext, node: ir.Node) -> None:
    """1-D UINT8 data (size set by the format); ``shape`` and ``strides`` ``(rank,)`` INT64.

    The ``shape`` output is x's shape, kept as a value for DequantizeBFP downstream.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    ctx.set_output(0, (None,), ir.DataType.UINT8)
    rank = None if x is None else len(x)
    ctx.set_output(1, (rank,), INT64)
    ctx.set_output(2, (rank,), INT64)
    if x is not None:
        ctx.set_output_value(1, x)


@register(MS, "DequantizeBFP", since=1)
def infer_dequantize_bfp(ctx: NodeContext, node: ir.Node) -> None:
    """The tensor whose shape is the ``shape`` input's value, of type ``dtype`` (FLOAT)."""
    for i in range(3):
        ctx.require_input(i)
    dims = ctx.input_value(1)
    if dims is None:
        rank = ctx.input_shape(1)
        dims = None if rank is None or not isinstance(rank[0], int) else (None,) * rank[0]
    code = ctx.attr_int("dtype", int(ir.DataType.FLOAT))
    ctx.set_output(0, dims, ir.DataType(code))
