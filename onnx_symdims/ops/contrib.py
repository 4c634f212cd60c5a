"""onnxruntime contrib ops (domain ``com.microsoft``): fused attention, norms, matmuls.

Shapes follow the onnxruntime schemas and kernels (checked against onnxruntime runs):

* ``Attention``: input ``(B, S, H_in)`` and merged weights ``(H_in, H_q + H_k + H_v)``;
  output ``(B, S, H_v)``, present ``(2, B, N, past + S, H_v / N)`` (a past needs
  ``H_k == H_v``).
* ``MultiHeadAttention``: separate 3-D Q/K/V, BNSH (4-D) K/V, packed KV (5-D key) or
  packed QKV (5-D query); present caches ``(B, N, past + kv_seq, head)``.
* ``GroupQueryAttention``: present caches hold ``max(past, total_sequence_length)``
  positions (the input's value; a fresh symbol when it is not known), or exactly the past
  capacity with ``sliding_window_cache``.

``Gelu``, ``FastGelu``, ``BiasGelu``, ``QuickGelu`` and ``BiasAdd`` are elementwise and
live in :mod:`onnx_symdims.ops.elementwise`; the other fused convolutions, Gemm and
dropouts in :mod:`onnx_symdims.ops.contrib_fused`, the quantized ops in
:mod:`onnx_symdims.ops.contrib_quant`, the NCHWc layout ops in
:mod:`onnx_symdims.ops.nchwc`.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import divide, merge_dims, single_element
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.attention import add_dims, heads_attr, mul_dims, require_rank
from onnx_symdims.ops.reduce_norm import stash_dtype, stats_shape
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None


def _dims(shape: Shape | None, rank: int) -> tuple[MaybeDim, ...]:
    """``shape`` or ``rank`` unknown dims."""
    return shape if shape is not None else (None,) * rank


# ----------------------------------------------------------------------------------------
# Attention (BERT/GPT-2 style, merged QKV weights)
# ----------------------------------------------------------------------------------------
@register(MS, "Attention", since=1)
def infer_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, S, H_v)``; present ``(2, B, N, past + S, head)``."""
    ctx.require_input(0)
    ctx.require_input(1)
    num_heads = heads_attr(ctx, "num_heads")
    batch, seq, _ = _dims(require_rank(ctx, 0, (3,), "input"), 3)
    _, width = _dims(require_rank(ctx, 1, (2,), "weights"), 2)
    bias = require_rank(ctx, 2, (1,), "bias") if ctx.has_input(2) else None
    width = merge_dims(ctx, "QKV hidden size", width, bias[0] if bias else None)
    sizes = ctx.attr_ints("qkv_hidden_sizes")
    if sizes is not None:
        if len(sizes) != 3 or min(sizes) <= 0:
            ctx.fail(f"qkv_hidden_sizes must be 3 positive ints, got {list(sizes)}")
        if isinstance(width, int) and width != sum(sizes):
            ctx.fail(f"qkv_hidden_sizes {list(sizes)} do not sum to the weights width {width}")
        k_hidden, v_hidden = sizes[1], sizes[2]
    else:
        k_hidden = v_hidden = divide(ctx, width, 3, "weights width (Q, K, V)")
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (batch, seq, v_hidden), dtype)

    head = divide(ctx, k_hidden, num_heads, "K hidden size")
    # The CPU kernel sizes the present by V's head size (qkv_hidden_sizes [8, 8, 12] over
    # 2 heads: 6, not K's 4); with a past it requires K and V hidden sizes to be equal.
    v_head = (
        head if v_hidden is k_hidden else divide(ctx, v_hidden, num_heads, "V hidden size")
    )
    past = require_rank(ctx, 4, (5,), "past") if ctx.has_input(4) else None
    if past is not None and ctx.attr_int("past_present_share_buffer", 0):
        present: tuple[MaybeDim, ...] = past  # the buffer already has max length
    elif ctx.has_input(4):
        _, p_batch, p_heads, p_seq, p_head = _dims(past, 5)
        present = (
            2,
            merge_dims(ctx, "batch size", batch, p_batch),
            merge_dims(ctx, "num_heads", num_heads, p_heads),
            add_dims(p_seq, seq),
            merge_dims(ctx, "head size", head, p_head),
        )
    else:
        present = (2, batch, num_heads, seq, v_head)
    ctx.set_output(1, present, dtype)


# ----------------------------------------------------------------------------------------
# MultiHeadAttention
# ----------------------------------------------------------------------------------------
@register(MS, "MultiHeadAttention", since=1)
def infer_multi_head_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, S, v_hidden)``; present ``(B, N, past + kv_seq, head)``; qk scores."""
    ctx.require_input(0)
    num_heads = heads_attr(ctx, "num_heads")
    query = require_rank(ctx, 0, (3, 5), "query")
    key = require_rank(ctx, 1, (3, 4, 5), "key") if ctx.has_input(1) else None
    value = require_rank(ctx, 2, (3, 4), "value") if ctx.has_input(2) else None
    # (batch, q_seq, k_seq, k_head, v_head): what every layout tells about the tensors.
    batches: list[MaybeDim] = []
    q_seq = kv_seq = k_head = v_head = None
    k_cache = v_cache = None  # BNSH key/value are the present caches as they are
    if query is not None and len(query) == 5:  # packed QKV (B, S, N, 3, head)
        batches.append(query[0])
        q_seq = kv_seq = query[1]
        heads = merge_dims(ctx, "num_heads", num_heads, query[2])
        k_head = v_head = query[4]
    else:
        heads = num_heads
        q_batch, q_seq, q_hidden = _dims(query, 3)
        batches.append(q_batch)
        k_head = divide(ctx, q_hidden, num_heads, "query hidden size")
        if key is not None and len(key) == 5:  # packed KV (B, L, N, 2, head)
            batches.append(key[0])
            kv_seq = key[1]
            heads = merge_dims(ctx, "num_heads", num_heads, key[2])
            k_head = v_head = merge_dims(ctx, "head size", k_head, key[4])
        elif key is not None and len(key) == 4:  # BNSH key/value, e.g. cross-attention cache
            k_cache = key
            v_cache = value
            batches.append(key[0])
            heads = merge_dims(ctx, "num_heads", num_heads, key[1])
            kv_seq = key[2]
            k_head = merge_dims(ctx, "head size", k_head, key[3])
            v_head = value[3] if value is not None and len(value) == 4 else None
        else:
            k_batch, kv_seq, _ = _dims(key, 3)
            v_batch, v_seq, v_hidden = _dims(
                value if value is not None and len(value) == 3 else None, 3
            )
            batches += [k_batch, v_batch]
            kv_seq = merge_dims(ctx, "kv sequence length", kv_seq, v_seq)
            v_head = divide(ctx, v_hidden, num_heads, "value hidden size")
    batch = merge_dims(ctx, "batch size", *batches)
    ctx.set_output(0, (batch, q_seq, mul_dims(heads, v_head)), ctx.input_dtype(0))

    past_k = _dims(require_rank(ctx, 6, (4,), "past_key") if ctx.has_input(6) else None, 4)
    past_v = _dims(require_rank(ctx, 7, (4,), "past_value") if ctx.has_input(7) else None, 4)
    has_past = ctx.has_input(6)
    if ctx.has_input(8):  # past/present share one max-length buffer
        present_k: Sequence[MaybeDim] | None = past_k
        present_v: Sequence[MaybeDim] | None = past_v
        total = add_dims(single_element(ctx.input_value(8)), kv_seq)
    else:
        total = add_dims(past_k[2], kv_seq) if has_past else kv_seq
        present_k = k_cache or (
            batch,
            heads,
            total,
            merge_dims(ctx, "head size", k_head, past_k[3]),
        )
        present_v = v_cache or (
            batch,
            heads,
            total,
            merge_dims(ctx, "head size", v_head, past_v[3]),
        )
    ctx.set_output(1, present_k, ctx.input_dtype(0))
    ctx.set_output(2, present_v, ctx.input_dtype(0))
    ctx.set_output(3, (batch, heads, q_seq, total))


# ----------------------------------------------------------------------------------------
# GroupQueryAttention
# ----------------------------------------------------------------------------------------
def _quantized_cache(ctx: NodeContext) -> bool:
    """True when the KV cache is quantized (its head dim may be packed)."""
    return (
        ctx.has_attr("kv_cache_bit_width")
        or (ctx.attr_str("k_quant_type", "NONE") or "NONE").upper() != "NONE"
        or (ctx.attr_str("v_quant_type", "NONE") or "NONE").upper() != "NONE"
    )


def _present_length(ctx: NodeContext, past_seq: MaybeDim, total: MaybeDim) -> MaybeDim:
    """``max(past, total_sequence_length)``, or a fresh symbol ``>= past`` when unknown."""
    if total is not None and past_seq is not None:
        return expr.dmax(past_seq, total, scope=ctx.scope)
    if total is not None and not ctx.has_input(3):
        return expr.dmax(0, total, scope=ctx.scope)
    length = ctx.new_symbol("present_seq")
    if past_seq is not None:
        ctx.ctx.add_less_equal_constraint(past_seq, length)
    return length


@register(MS, "GroupQueryAttention", since=1)
def infer_group_query_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, S, N * head)``; present ``(B, kv_N, max(past, total), head)``; qk."""
    ctx.require_input(0)
    num_heads = heads_attr(ctx, "num_heads")
    kv_heads = heads_attr(ctx, "kv_num_heads")
    batch, seq, hidden = _dims(require_rank(ctx, 0, (3,), "query"), 3)
    packed = not ctx.has_input(1)
    if packed != (not ctx.has_input(2)):
        ctx.fail("key and value must be given together (or neither, for packed QKV)")
    if packed:
        head = divide(ctx, hidden, num_heads + 2 * kv_heads, "packed QKV hidden size")
        out_hidden = mul_dims(num_heads, head)
    else:
        head = divide(ctx, hidden, num_heads, "query hidden size")
        out_hidden = hidden
    ctx.set_output(0, (batch, seq, out_hidden), ctx.input_dtype(0))

    total = single_element(ctx.input_value(6))
    past = require_rank(ctx, 3, (4,), "past_key") if ctx.has_input(3) else None
    if past is not None and ctx.attr_int("sliding_window_cache", 0):
        present: Sequence[MaybeDim] = past  # a window-sized buffer keeps its capacity
    else:
        p_batch, p_heads, p_seq, p_head = _dims(past, 4)
        if not ctx.has_input(3):
            p_head = None if _quantized_cache(ctx) else head
        present = (
            merge_dims(ctx, "batch size", batch, p_batch),
            merge_dims(ctx, "kv_num_heads", kv_heads, p_heads),
            _present_length(ctx, p_seq if ctx.has_input(3) else None, total),
            p_head,
        )
    cache_dtype = ctx.input_dtype(3) if ctx.has_input(3) else None
    if cache_dtype is None and not _quantized_cache(ctx):
        cache_dtype = ctx.input_dtype(0)
    ctx.set_output(1, present, cache_dtype)
    ctx.set_output(2, present, cache_dtype)
    ctx.set_output(3, (batch, num_heads, seq, total), ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Normalizations
# ----------------------------------------------------------------------------------------
@register(MS, ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"), since=1)
def infer_skip_layer_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Output and input+skip(+bias) sum like input; mean/inv_std_var ``(..., 1)`` FLOAT."""
    for i in range(3):
        ctx.require_input(i)
    shape = require_rank(ctx, 0, (2, 3), "input")
    dtype = ctx.input_dtype(0)
    stats = stats_shape(ctx, shape, -1)
    ctx.set_output(0, shape, dtype)
    ctx.set_output(1, stats, ir.DataType.FLOAT)
    ctx.set_output(2, stats, ir.DataType.FLOAT)
    ctx.set_output(3, shape, dtype)


@register("", "SimplifiedLayerNormalization", since=1)
@register(MS, "SimplifiedLayerNormalization", since=1)
def infer_simplified_layer_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """RMS norm: Y like X (typed like scale); inv_std_var keeps the dims before ``axis``."""
    ctx.require_input(0)
    ctx.require_input(1)
    shape = ctx.input_shape(0)
    ctx.set_output(0, shape, ctx.input_dtype(1) or ctx.input_dtype(0))
    ctx.set_output(1, stats_shape(ctx, shape, ctx.attr_int("axis", -1)), stash_dtype(ctx))


@register(MS, "EmbedLayerNormalization", since=1)
def infer_embed_layer_normalization(ctx: NodeContext, node: ir.Node) -> None:
    """Output/embedding_sum ``(B, S, hidden)``; mask_index ``(B,)`` INT32.

    ``hidden`` is shared by the embeddings, gamma and beta. The CPU kernel writes
    ``mask_index`` with every ``mask_index_type`` and without a mask (all-ones then);
    ``position_ids`` (input 8) only select rows.
    """
    for i in (0, 2, 3, 5, 6):
        ctx.require_input(i)
    batch, seq = _dims(require_rank(ctx, 0, (2,), "input_ids"), 2)
    if ctx.has_input(1):
        seg_batch, seg_seq = _dims(require_rank(ctx, 1, (2,), "segment_ids"), 2)
        batch = merge_dims(ctx, "batch size", batch, seg_batch)
        seq = merge_dims(ctx, "sequence length", seq, seg_seq)
    hiddens = [_dims(require_rank(ctx, i, (2,), "embedding"), 2)[1] for i in (2, 3)]
    if ctx.has_input(4):
        hiddens.append(_dims(require_rank(ctx, 4, (2,), "segment_embedding"), 2)[1])
    hiddens += [_dims(require_rank(ctx, i, (1,), "gamma/beta"), 1)[0] for i in (5, 6)]
    hidden = merge_dims(ctx, "hidden size", *hiddens)
    dtype = ctx.input_dtype(2)
    ctx.set_output(0, (batch, seq, hidden), dtype)
    ctx.set_output(1, (batch,), ir.DataType.INT32)
    ctx.set_output(2, (batch, seq, hidden), dtype)


@register(MS, "SkipGroupNorm", since=1)
def infer_skip_group_norm(ctx: NodeContext, node: ir.Node) -> None:
    """Y and the sum S have X's shape and type."""
    ctx.require_input(0)
    shape = ctx.input_shape(0)
    ctx.set_output(0, shape, ctx.input_dtype(0))
    ctx.set_output(1, shape, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Shape-preserving and splitting activations
# ----------------------------------------------------------------------------------------
@register(MS, "RotaryEmbedding", since=1)
def infer_rotary_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape and type as the input (3-D or 4-D)."""
    ctx.require_input(0)
    ctx.set_output(0, require_rank(ctx, 0, (3, 4), "input"), ctx.input_dtype(0))


@register(MS, "BiasSplitGelu", since=1)
def infer_bias_split_gelu(ctx: NodeContext, node: ir.Node) -> None:
    """``(N, S, D)`` to ``(N, S, D / 2)``: the halves are multiplied together."""
    ctx.require_input(0)
    shape = require_rank(ctx, 0, (3,), "X")
    if shape is not None:
        shape = (*shape[:2], divide(ctx, shape[2], 2, "hidden size"))
    ctx.set_output(0, shape, ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
def _matmul_shape(ctx: NodeContext, a: Shape | None, b: Shape | None) -> Shape | None:
    """The ``numpy.matmul`` output shape (1-D operands are promoted, then squeezed)."""
    if a is None or b is None:
        return None
    if not a or not b:
        ctx.fail("MatMul operands must have rank >= 1")
    a_mat = (1, a[0]) if len(a) == 1 else a
    b_mat = (b[0], 1) if len(b) == 1 else b
    k_a, k_b = a_mat[-1], b_mat[-2]
    if isinstance(k_a, int) and isinstance(k_b, int) and k_a != k_b:
        ctx.fail(f"inner dims differ: {k_a} vs {k_b}")
    batch = ctx.broadcast_shapes(a_mat[:-2], b_mat[:-2])
    assert batch is not None  # both ranks are known
    rows = () if len(a) == 1 else (a_mat[-2],)
    cols = () if len(b) == 1 else (b_mat[-1],)
    return (*batch, *rows, *cols)


def _transposed(shape: Shape | None, trans_batch: bool, trans: bool) -> Shape | None:
    """FusedMatMul's view of an operand.

    ``transBatch`` moves dim 0 to position ``-2``, then ``trans`` swaps the last two
    dims (ignored for 1-D).
    """
    if shape is None:
        return None
    if trans_batch:
        shape = (*shape[1:-1], shape[0], shape[-1])
    if trans and len(shape) >= 2:
        shape = (*shape[:-2], shape[-1], shape[-2])
    return shape


@register(MS, "FusedMatMul", since=1)
def infer_fused_matmul(ctx: NodeContext, node: ir.Node) -> None:
    """``alpha * op(A) @ op(B)`` with transA/transB and transBatchA/transBatchB."""
    ctx.require_input(0)
    ctx.require_input(1)
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    trans_batch_a = bool(ctx.attr_int("transBatchA", 0))
    trans_batch_b = bool(ctx.attr_int("transBatchB", 0))
    trans_batch = trans_batch_a or trans_batch_b
    if trans_batch and a is not None and b is not None and (len(a) != len(b) or len(a) < 3):
        ctx.fail("transBatchA/transBatchB need operands of the same rank >= 3")
    a = _transposed(a, trans_batch_a, bool(ctx.attr_int("transA", 0)))
    b = _transposed(b, trans_batch_b, bool(ctx.attr_int("transB", 0)))
    ctx.set_output(0, _matmul_shape(ctx, a, b), ctx.input_dtype(0))


@register(MS, "GemmFastGelu", since=1)
def infer_gemm_fast_gelu(ctx: NodeContext, node: ir.Node) -> None:
    """``FastGelu(X @ W + bias)``: MatMul shape of X and W."""
    ctx.require_input(0)
    ctx.require_input(1)
    shape = _matmul_shape(ctx, ctx.input_shape(0), ctx.input_shape(1))
    ctx.set_output(0, shape, ctx.input_dtype(0))


@register(MS, "MatMulNBits", since=1)
def infer_matmul_nbits(ctx: NodeContext, node: ir.Node) -> None:
    """``A (..., K) @ dequantized B (K, N)``: the last dim of A becomes attribute N."""
    ctx.require_input(0)
    n = ctx.attr_int("N")
    k = ctx.attr_int("K")
    if n is None or k is None or n < 0 or k < 0:
        ctx.fail("attributes N and K are required and non-negative")
    shape = ctx.input_shape(0)
    if shape is not None:
        if not shape:
            ctx.fail("A must have rank >= 1")
        if isinstance(shape[-1], int) and shape[-1] != k:
            ctx.fail(f"A's last dim {shape[-1]} differs from K={k}")
        ctx.ctx.add_constraint(shape[-1], k)  # the kernel checks it: every run has it
        shape = (*shape[:-1], n)
    ctx.set_output(0, shape, ctx.input_dtype(0))
