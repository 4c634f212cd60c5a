"""onnxruntime's serving-time attention contrib ops (``com.microsoft``).

Attention, MultiHeadAttention, GroupQueryAttention and RotaryEmbedding live in
:mod:`onnx_symdims.ops.contrib`; this module has the other attention variants.

Shapes follow onnxruntime's contrib schemas and CPU kernels (checked against onnxruntime
runs where a CPU kernel exists):

* merged-weight attention (``DecoderMaskedSelfAttention``, ``QAttention``,
  ``PackedAttention``, ``QOrderedAttention``): V's hidden size from ``qkv_hidden_sizes``
  or a third of the weights' width; the past/present cache is
  ``(2, B, N, past + S, head)``, or the past buffer itself with
  ``past_present_share_buffer``;
* decoder attention with a max-length cache (``DecoderMaskedMultiHeadAttention``,
  ``SparseAttention``, ``PagedAttention``): the caches keep their capacity, the
  attended length is a value (``past_sequence_length``) tracked as a shape quantity;
* packed (padding-free) tokens: ``RemovePadding``'s token count is data dependent (a fresh
  symbol ``<= B * S``); ``RestorePadding`` and the packed ops follow ``token_offset``.

Linear attention and the state-space layers are in
:mod:`onnx_symdims.ops.contrib_recurrent`.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import divide, fresh_at_most, merge_dims, single_element
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.attention import add_dims, heads_attr, mul_dims, require_rank
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None

INT32 = ir.DataType.INT32


def _dims(shape: Shape | None, rank: int) -> tuple[MaybeDim, ...]:
    """``shape`` or ``rank`` unknown dims."""
    return shape if shape is not None else (None,) * rank


# ----------------------------------------------------------------------------------------
# Merged QKV weights
# ----------------------------------------------------------------------------------------
def _qkv_hidden_sizes(
    ctx: NodeContext, width: MaybeDim
) -> tuple[MaybeDim, MaybeDim, MaybeDim]:
    """Q, K and V hidden sizes from ``qkv_hidden_sizes`` or equal thirds of ``width``."""
    sizes = ctx.attr_ints("qkv_hidden_sizes")
    if sizes is not None:
        if len(sizes) != 3 or min(sizes) <= 0:
            ctx.fail(f"qkv_hidden_sizes must be 3 positive ints, got {list(sizes)}")
        if isinstance(width, int) and width != sum(sizes):
            ctx.fail(f"qkv_hidden_sizes {list(sizes)} do not sum to the weights width {width}")
        return sizes[0], sizes[1], sizes[2]
    third = divide(ctx, width, 3, "weights width (Q, K, V)")
    return third, third, third


def _merged_weights_width(ctx: NodeContext, weights: int, bias: int | None) -> MaybeDim:
    """The width of 2-D input ``weights``, checked against 1-D input ``bias``."""
    _, width = _dims(require_rank(ctx, weights, (2,), "weights"), 2)
    bias_shape = (
        require_rank(ctx, bias, (1,), "bias")
        if bias is not None and ctx.has_input(bias)
        else None
    )
    return merge_dims(ctx, "QKV hidden size", width, bias_shape[0] if bias_shape else None)


def _merged_present(
    ctx: NodeContext,
    past_index: int,
    batch: MaybeDim,
    seq: MaybeDim,
    heads: int,
    head: MaybeDim,
) -> tuple[MaybeDim, ...]:
    """``(2, B, N, past + S, head)``; the past buffer itself when it is shared."""
    if not ctx.has_input(past_index):
        return (2, batch, heads, seq, head)
    past = require_rank(ctx, past_index, (5,), "past")
    if past is not None and ctx.attr_int("past_present_share_buffer", 0):
        return past  # the buffer already has the max length
    _, p_batch, p_heads, p_seq, p_head = _dims(past, 5)
    return (
        2,
        merge_dims(ctx, "batch size", batch, p_batch),
        merge_dims(ctx, "num_heads", heads, p_heads),
        add_dims(p_seq, seq),
        merge_dims(ctx, "head size", head, p_head),
    )


@register(MS, ("DecoderMaskedSelfAttention", "QAttention"), since=1)
def infer_merged_weights_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, S, v_hidden)``; present ``(2, B, N, past + S, head)`` (or the past buffer).

    ``QAttention`` (int8 input and weights, scales at inputs 3/4, past at 8) gives the
    type of its ``input_scale``.
    """
    quantized = node.op_type == "QAttention"
    ctx.require_input(0)
    ctx.require_input(1)
    if quantized:
        ctx.require_input(3)
        ctx.require_input(4)
    else:
        ctx.require_input(4)  # DecoderMaskedSelfAttention needs its past buffer
    heads = heads_attr(ctx, "num_heads")
    batch, seq, _ = _dims(require_rank(ctx, 0, (3,), "input"), 3)
    width = _merged_weights_width(ctx, 1, 2)
    _, k_hidden, v_hidden = _qkv_hidden_sizes(ctx, width)
    dtype = ctx.input_dtype(3) if quantized else ctx.input_dtype(0)
    ctx.set_output(0, (batch, seq, v_hidden), dtype)
    head = divide(ctx, k_hidden, heads, "K hidden size")
    present = _merged_present(ctx, 8 if quantized else 4, batch, seq, heads, head)
    ctx.set_output(1, present, dtype)


@register(MS, "PackedAttention", since=1)
def infer_packed_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Packed tokens ``(T, in_hidden)`` to ``(T, v_hidden)``."""
    for i in range(5):
        ctx.require_input(i)
    heads_attr(ctx, "num_heads")
    tokens, _ = _dims(require_rank(ctx, 0, (2,), "input"), 2)
    width = _merged_weights_width(ctx, 1, 2)
    _, _, v_hidden = _qkv_hidden_sizes(ctx, width)
    ctx.set_output(0, (tokens, v_hidden), ctx.input_dtype(0))


@register(MS, "QOrderedAttention", since=1)
def infer_qordered_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Separate Q/K/V weights: output ``(B, S, v_hidden)`` INT8 (V's weight width)."""
    for i in (0, 5, 6, 7):
        ctx.require_input(i)
    batch, seq, _ = _dims(require_rank(ctx, 0, (3,), "input"), 3)
    _, v_width = _dims(require_rank(ctx, 7, (2,), "V_weight"), 2)
    sizes = ctx.attr_ints("qkv_hidden_sizes")
    v_hidden = merge_dims(ctx, "V hidden size", v_width, sizes[2] if sizes else None)
    ctx.set_output(0, (batch, seq, v_hidden), ir.DataType.INT8)


@register(MS, ("LongformerAttention", "QOrderedLongformerAttention"), since=1)
def infer_longformer_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output like the input ``(B, S, hidden)`` (QOrdered: INT8)."""
    ctx.require_input(0)
    heads_attr(ctx, "num_heads")
    shape = require_rank(ctx, 0, (3,), "input")
    dtype = ir.DataType.INT8 if node.op_type.startswith("QOrdered") else ctx.input_dtype(0)
    ctx.set_output(0, shape, dtype)


# ----------------------------------------------------------------------------------------
# Decoder attention with a max-length cache
# ----------------------------------------------------------------------------------------
@register(MS, "DecoderMaskedMultiHeadAttention", since=1)
def infer_decoder_masked_mha(ctx: NodeContext, node: ir.Node) -> None:
    """One decoding step; caches ``(B, N, L, head)``.

    * self attention (3-D key/value, or packed QKV ``(B, S, 2 * hidden + v_hidden)``):
      output ``(B, S, v_hidden)``; present = the past buffer with
      ``past_present_share_buffer``, else ``(B, N, past + 1, head)``;
    * cross attention (4-D key/value caches): output ``(B, S, N * v_head)``.

    ``qk`` is ``(B, N, 1, total)`` with ``total = past_sequence_length + 1`` (the
    input's value, a fresh symbol when unknown), the past length, or the cross length.
    """
    ctx.require_input(0)
    heads = heads_attr(ctx, "num_heads")
    query = require_rank(ctx, 0, (3,), "query")
    batch, seq, q_hidden = _dims(query, 3)
    key = require_rank(ctx, 1, (3, 4), "key") if ctx.has_input(1) else None
    value = require_rank(ctx, 2, (3, 4), "value") if ctx.has_input(2) else None
    dtype = ctx.input_dtype(0)
    cross = (key is not None and len(key) == 4) or (value is not None and len(value) == 4)
    if cross:
        k = _dims(key if key is not None and len(key) == 4 else None, 4)
        v = _dims(value if value is not None and len(value) == 4 else None, 4)
        batch = merge_dims(ctx, "batch size", batch, k[0], v[0])
        heads_dim = merge_dims(ctx, "num_heads", heads, k[1], v[1])
        ctx.set_output(0, (batch, seq, mul_dims(heads_dim, v[3])), dtype)
        ctx.set_output(1, key, dtype)
        ctx.set_output(2, value, dtype)
        ctx.set_output(3, (batch, heads, 1, merge_dims(ctx, "kv length", k[2], v[2])), dtype)
        return
    if not ctx.has_input(1):
        # Packed QKV (B, S, 2 * hidden + v_hidden): the split comes from the caches' heads.
        past_k_head = _dims(ctx.input_shape(5), 4)[3] if ctx.has_input(5) else None
        past_v_head = _dims(ctx.input_shape(6), 4)[3] if ctx.has_input(6) else None
        hidden = mul_dims(heads, past_k_head)
        v_hidden = mul_dims(heads, past_v_head)
        widths = (hidden, v_hidden, q_hidden)
        if all(isinstance(d, int) for d in widths) and 2 * hidden + v_hidden != q_hidden:  # type: ignore[operator]
            ctx.fail(f"packed QKV width {q_hidden} != 2 * {hidden} + {v_hidden}")
    else:
        hidden = merge_dims(ctx, "hidden size", q_hidden, _dims(key, 3)[2])
        v_hidden = _dims(value, 3)[2]
    ctx.set_output(0, (batch, seq, v_hidden), dtype)
    head = divide(ctx, hidden, heads, "hidden size")
    v_head = divide(ctx, v_hidden, heads, "V hidden size")
    past_k = _dims(require_rank(ctx, 5, (4,), "past_key") if ctx.has_input(5) else None, 4)
    past_v = _dims(require_rank(ctx, 6, (4,), "past_value") if ctx.has_input(6) else None, 4)
    if ctx.attr_int("past_present_share_buffer", 0) and ctx.has_input(5):
        present_k: tuple[MaybeDim, ...] = past_k
        present_v: tuple[MaybeDim, ...] = past_v
        past_len = single_element(ctx.input_value(7)) if ctx.has_input(7) else None
        total = (
            expr.add(past_len, 1)
            if past_len is not None
            else fresh_at_most(ctx, "total_sequence_length", past_k[2])
        )
    else:
        total = add_dims(past_k[2], 1) if ctx.has_input(5) else 1
        present_k = (batch, heads, total, merge_dims(ctx, "head size", head, past_k[3]))
        present_v = (batch, heads, total, merge_dims(ctx, "head size", v_head, past_v[3]))
    ctx.set_output(1, present_k, dtype)
    ctx.set_output(2, present_v, dtype)
    ctx.set_output(3, (batch, heads, 1, total), dtype)


def _gqa_query(ctx: NodeContext) -> tuple[MaybeDim, MaybeDim, MaybeDim, int]:
    """``(B, S, head, num_heads)`` of a GQA-style query, separate or packed QKV."""
    heads = heads_attr(ctx, "num_heads")
    kv_heads = heads_attr(ctx, "kv_num_heads")
    batch, seq, hidden = _dims(require_rank(ctx, 0, (3,), "query"), 3)
    if ctx.has_input(1) != ctx.has_input(2):
        ctx.fail("key and value must be given together (or neither, for packed QKV)")
    parts = heads if ctx.has_input(1) else heads + 2 * kv_heads
    head = divide(ctx, hidden, parts, "query hidden size")
    return batch, seq, head, heads


@register(MS, ("SparseAttention", "DynamicSparseAttention"), since=1)
def infer_sparse_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, S, N * head)``; present caches keep the past buffers' shapes."""
    ctx.require_input(0)
    if node.op_type == "SparseAttention":
        for i in (3, 4, 5, 6, 7, 8):
            ctx.require_input(i)
    batch, seq, head, heads = _gqa_query(ctx)
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (batch, seq, mul_dims(heads, head)), dtype)
    if node.op_type == "SparseAttention":  # the kernel updates the caches in place
        ctx.set_output(1, require_rank(ctx, 3, (4,), "past_key"), ctx.input_dtype(3))
        ctx.set_output(2, require_rank(ctx, 4, (4,), "past_value"), ctx.input_dtype(4))
        return
    # DynamicSparseAttention: the schema does not say whether a cache grows; keep what
    # is sure (B, kv heads, head size) and a fresh length of at least the past's.
    for out, i in ((1, 3), (2, 4)):
        past = _dims(require_rank(ctx, i, (4,), "past cache") if ctx.has_input(i) else None, 4)
        length = ctx.new_symbol("present_seq")
        if past[2] is not None:
            ctx.ctx.add_less_equal_constraint(past[2], length)
        kv_heads = merge_dims(ctx, "kv_num_heads", ctx.attr_int("kv_num_heads"), past[1])
        shape = (merge_dims(ctx, "batch size", batch, past[0]), kv_heads, length, past[3])
        ctx.set_output(out, shape, ctx.input_dtype(i) or dtype)


@register(MS, ("PagedAttention", "SparsePagedAttention"), since=1)
def infer_paged_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Packed tokens: output ``(T, N * v_head)``; the caches are updated in place."""
    for i in (0, 3, 5, 6, 7):
        ctx.require_input(i)
    heads = heads_attr(ctx, "num_heads")
    kv_heads = heads_attr(ctx, "kv_num_heads")
    tokens, hidden = _dims(require_rank(ctx, 0, (2,), "query"), 2)
    layout = (
        ctx.attr_str("kv_cache_layout", "SEPARATE")
        if node.op_type == "PagedAttention"
        else None
    )
    latent = (layout or "SEPARATE").upper() == "LATENT"
    packed = not ctx.has_input(1)
    if packed and latent:
        head = None  # the latent layout packs no V: the split is not documented
    else:
        parts = heads + 2 * kv_heads if packed else heads
        head = divide(ctx, hidden, parts, "query hidden size")
    v_head = ctx.attr_int("v_head_size") if latent and ctx.has_attr("v_head_size") else head
    ctx.set_output(0, (tokens, mul_dims(heads, v_head)), ctx.input_dtype(0))
    ctx.set_output(1, ctx.input_shape(3), ctx.input_dtype(3))
    if ctx.has_input(4):
        ctx.set_output(2, ctx.input_shape(4), ctx.input_dtype(4))


@register(MS, "DecoderAttention", since=1)
def infer_decoder_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output like query ``(S, B, hidden)``; caches ``(B, N, L', head)`` (L' set at run time)."""
    ctx.require_input(0)
    heads = heads_attr(ctx, "num_heads")
    query = require_rank(ctx, 0, (3,), "query")
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, query, dtype)
    _, batch, hidden = _dims(query, 3)
    head = divide(ctx, hidden, heads, "hidden size")
    cache = _dims(require_rank(ctx, 6, (4,), "key_cache") if ctx.has_input(6) else None, 4)
    # The new cache length depends on the runtime flags static_kv / use_past.
    shape = (
        merge_dims(ctx, "batch size", batch, cache[0]),
        heads,
        None,
        merge_dims(ctx, "head size", head, cache[3]),
    )
    ctx.set_output(1, shape, dtype)
    ctx.set_output(2, shape, dtype)


# ----------------------------------------------------------------------------------------
# Packed (padding-free) tokens
# ----------------------------------------------------------------------------------------
@register(MS, "PackedMultiHeadAttention", since=1)
def infer_packed_multi_head_attention(ctx: NodeContext, node: ir.Node) -> None:
    """``(T, hidden)`` Q/K/V to ``(T, v_hidden)``; packed QKV ``(T, N, 3, head)`` to ``(T, N * head)``."""
    for i in (0, 4, 5):
        ctx.require_input(i)
    heads = heads_attr(ctx, "num_heads")
    query = require_rank(ctx, 0, (2, 4), "query")
    if query is not None and len(query) == 4:
        merge_dims(ctx, "num_heads", heads, query[1])
        out = (query[0], mul_dims(query[1], query[3]))
    else:
        tokens, _ = _dims(query, 2)
        value = require_rank(ctx, 2, (2,), "value") if ctx.has_input(2) else None
        out = (tokens, value[1] if value is not None else None)
    ctx.set_output(0, out, ctx.input_dtype(0))


@register(MS, "RemovePadding", since=1)
def infer_remove_padding(ctx: NodeContext, node: ir.Node) -> None:
    """``(B, S, H)`` to ``(T, H)`` with ``T <= B * S`` tokens; offsets ``(B, S)``; ``(B + 1,)``; ``(1,)``."""
    ctx.require_input(0)
    ctx.require_input(1)
    batch, seq, hidden = _dims(require_rank(ctx, 0, (3,), "input"), 3)
    bound = mul_dims(batch, seq)
    tokens = fresh_at_most(ctx, "total_tokens", bound)
    ctx.set_output(0, (tokens, hidden), ctx.input_dtype(0))
    ctx.set_output(1, (batch, seq), ctx.input_dtype(1))
    ctx.set_output(2, (add_dims(batch, 1),), ctx.input_dtype(1))
    ctx.set_output(3, (1,), ctx.input_dtype(1))


@register(MS, "RestorePadding", since=1)
def infer_restore_padding(ctx: NodeContext, node: ir.Node) -> None:
    """``(T, H)`` and token_offset ``(B, S)`` to ``(B, S, H)``."""
    ctx.require_input(1)
    _, hidden = _dims(require_rank(ctx, 0, (2,), "input"), 2)
    batch, seq = _dims(require_rank(ctx, 1, (2,), "token_offset"), 2)
    ctx.set_output(0, (batch, seq, hidden), ctx.input_dtype(0))


# ----------------------------------------------------------------------------------------
# Position embeddings and biases
# ----------------------------------------------------------------------------------------
@register(MS, "MRotaryEmbedding", since=1)
def infer_mrotary_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape and type as the input (3-D or 4-D)."""
    ctx.require_input(0)
    ctx.set_output(0, require_rank(ctx, 0, (3, 4), "input"), ctx.input_dtype(0))


@register(MS, "GemmaRotaryEmbedding", since=1)
def infer_gemma_rotary_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """``q * cos + q_rot * sin`` and the same for k: shaped like q and k."""
    for i in range(5):
        ctx.require_input(i)
    q = ctx.broadcast_shapes(ctx.input_shape(1), ctx.input_shape(2))
    k = ctx.broadcast_shapes(ctx.input_shape(3), ctx.input_shape(4))
    ctx.set_output(0, q, ctx.input_dtype(1))
    ctx.set_output(1, k, ctx.input_dtype(3))


@register(MS, "RelativePositionBias", since=1)
def infer_relative_position_bias(ctx: NodeContext, node: ir.Node) -> None:
    """``(1, num_heads, query_length, key_length)``; the lengths are scalar inputs' values."""
    for i in range(3):
        ctx.require_input(i)
    _, heads = _dims(require_rank(ctx, 0, (2,), "bias_table"), 2)
    q_len = single_element(ctx.input_value(1))
    k_len = single_element(ctx.input_value(2))
    ctx.set_output(0, (1, heads, q_len, k_len), ctx.input_dtype(0))


@register(MS, "GatedRelativePositionBias", since=1)
def infer_gated_relative_position_bias(ctx: NodeContext, node: ir.Node) -> None:
    """``(B, N, S, S)``: B and S from the 3-D query (or token_offset when packed)."""
    for i in range(6):
        ctx.require_input(i)
    heads = heads_attr(ctx, "num_heads")
    query = require_rank(ctx, 0, (2, 3), "query_layer")
    if ctx.has_input(6):
        batch, seq = _dims(require_rank(ctx, 6, (2,), "token_offset"), 2)
    elif query is not None and len(query) == 3:
        batch, seq = query[0], query[1]
    else:
        batch = seq = None
    rel_pos = _dims(require_rank(ctx, 2, (4,), "rel_pos"), 4)
    seq = merge_dims(ctx, "sequence length", seq, rel_pos[2], rel_pos[3])
    heads_dim = merge_dims(ctx, "num_heads", heads, rel_pos[1])
    ctx.set_output(0, (batch, heads_dim, seq, seq), ctx.input_dtype(0))
