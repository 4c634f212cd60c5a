"""onnxruntime's linear-attention and state-space contrib ops (``com.microsoft``).

The recurrent relatives of :mod:`onnx_symdims.ops.contrib_attention`
(``LinearAttention``, ``LinearAttentionGate``, ``RMSNormRotary``, ``GatedDeltaNet``, the
causal convolutions with state, the state replays, ``Mamba2Verify``, ``AttnLSTM``,
``SparseAttentionIndexer``). Shapes follow onnxruntime's contrib schemas and CPU kernels
(checked against onnxruntime runs where a CPU kernel exists): outputs follow the token
layout, carried states keep the shape of the state inputs.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import divide, merge_dims
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
# Linear (recurrent) attention
# ----------------------------------------------------------------------------------------
@register(MS, "LinearAttention", since=1)
def infer_linear_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Output ``(B, T, max(H_q, H_kv) * d_v)``; state ``(B, H_kv, d_k, d_v)`` (windowed: ``(W, ...)``)."""
    for i in range(3):
        ctx.require_input(i)
    q_heads = heads_attr(ctx, "q_num_heads")
    kv_heads = heads_attr(ctx, "kv_num_heads")
    batch, seq, q_hidden = _dims(require_rank(ctx, 0, (3,), "query"), 3)
    k = _dims(require_rank(ctx, 1, (3,), "key"), 3)
    v = _dims(require_rank(ctx, 2, (3,), "value"), 3)
    batch = merge_dims(ctx, "batch size", batch, k[0], v[0])
    seq = merge_dims(ctx, "sequence length", seq, k[1], v[1])
    d_k = merge_dims(
        ctx,
        "key head size",
        divide(ctx, q_hidden, q_heads, "query hidden size"),
        divide(ctx, k[2], kv_heads, "key hidden size"),
    )
    d_v = divide(ctx, v[2], kv_heads, "value hidden size")
    ctx.set_output(0, (batch, seq, mul_dims(max(q_heads, kv_heads), d_v)), ctx.input_dtype(0))
    state: tuple[MaybeDim, ...] = (batch, kv_heads, d_k, d_v)
    window = ctx.attr_int("state_window", 0)
    if window:
        state = (window, *state)
    dtype = ctx.input_dtype(3) if ctx.has_input(3) else None
    ctx.set_output(1, state, dtype)


@register(MS, "LinearAttentionGate", since=1)
def infer_linear_attention_gate(ctx: NodeContext, node: ir.Node) -> None:
    """``decay`` like ``a``; ``beta`` like ``b``."""
    ctx.require_input(0)
    ctx.set_output(0, ctx.input_shape(0), ctx.input_dtype(0))
    if ctx.has_input(3):
        ctx.set_output(1, ctx.input_shape(3), ctx.input_dtype(3))


@register(MS, "RMSNormRotary", since=1)
def infer_rms_norm_rotary(ctx: NodeContext, node: ir.Node) -> None:
    """``X (B, S, heads, stride)`` to ``Y (B, S, heads * width)`` (``(1, B * S, ...)`` flattened).

    ``width`` is ``input_width`` (0: the whole last dim); ``normalized_fp32`` is
    ``(B, S, heads, width)`` FLOAT.
    """
    for i in range(5):
        ctx.require_input(i)
    x = require_rank(ctx, 0, (4,), "X")
    batch, seq, heads, stride = _dims(x, 4)
    width: MaybeDim = ctx.attr_int("input_width", 0) or stride
    flat = mul_dims(heads, width)
    if ctx.attr_int("flatten_batch", 0):
        y: tuple[MaybeDim, ...] = (1, mul_dims(batch, seq), flat)
    else:
        y = (batch, seq, flat)
    dtype = ir.DataType.FLOAT16 if ctx.attr_int("output_fp16", 0) else ir.DataType.BFLOAT16
    ctx.set_output(0, y, dtype)
    ctx.set_output(1, (batch, seq, heads, width), ir.DataType.FLOAT)


@register(MS, "CausalConvWithState", since=1)
def infer_causal_conv_with_state(ctx: NodeContext, node: ir.Node) -> None:
    """Output like the input; present_state like past_state (else the carry it implies).

    Without a past, ``ndim=1`` channels-first gives ``(B, C, (k - 1) * dilation)``
    (``(W, ...)`` with ``state_window``); other layouts are left fresh.
    """
    ctx.require_input(0)
    ctx.require_input(1)
    x = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    if ctx.attr_int("input_channels", 0) and x is not None:
        x = (*x[:-1], ctx.attr_int("input_channels"))
    ctx.set_output(0, x, dtype)
    if ctx.has_input(3):
        ctx.set_output(1, ctx.input_shape(3), ctx.input_dtype(3))
    else:
        w = ctx.input_shape(1)
        state = None
        plain = (
            ctx.attr_int("ndim", 1) == 1
            and not ctx.attr_int("channels_last", 0)
            and not ctx.attr_int("state_length", 0)
        )
        if plain and x is not None and w is not None and len(x) == 3 and len(w) == 3:
            length = expr.mul(expr.sub(w[2], 1), ctx.attr_int("dilation", 1))
            state = (x[0], x[1], length)
            window = ctx.attr_int("state_window", 0)
            if window:
                state = (window, *state)
        ctx.set_output(1, state, dtype)
    capacity = ctx.attr_int("state_update_capacity", 0)
    if capacity and x is not None:
        ctx.set_output(2, (x[0], capacity, x[-1]), dtype)


@register(MS, "VarlenCausalConvWithState", since=1)
def infer_varlen_causal_conv_with_state(ctx: NodeContext, node: ir.Node) -> None:
    """Output like the packed input ``(T, C)``; final_state like initial_state ``(B, C, L)``."""
    for i in (0, 1, 2, 4):
        ctx.require_input(i)
    x = require_rank(ctx, 0, (2,), "input")
    state = require_rank(ctx, 4, (3,), "initial_state")
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, x, dtype)
    ctx.set_output(1, state, ctx.input_dtype(4))
    capacity = ctx.attr_int("state_update_capacity", 0)
    batch = state[0] if state is not None else None
    channels = x[1] if x is not None else None
    ctx.set_output(2, (batch, capacity, channels), dtype)


@register(MS, "GatedDeltaNet", since=1)
def infer_gated_delta_net(ctx: NodeContext, node: ir.Node) -> None:
    """Packed tokens: output ``(T, max(Hq, Hv), Dv)``; final_state like initial_state.

    With separate Q/K/V (``(T, H, D)`` each) the head counts and sizes come from the
    shapes; packed QKV (``key``/``value`` absent) leaves the output's trailing dims fresh.
    """
    ctx.require_input(0)
    q = ctx.input_shape(0)
    dtype = ctx.input_dtype(0)
    tokens = q[0] if q else None
    state = require_rank(ctx, 6, (4,), "initial_state") if ctx.has_input(6) else None
    heads: MaybeDim = None
    head_v: MaybeDim = None
    if ctx.has_input(2) and q is not None and len(q) == 3:
        v = require_rank(ctx, 2, (3,), "value") or (None,) * 3
        tokens = merge_dims(ctx, "token count", tokens, v[0])
        if isinstance(q[1], int) and isinstance(v[1], int):
            heads = max(q[1], v[1])
        elif v[1] is not None and q[1] is not None:
            heads = expr.dmax(q[1], v[1], scope=ctx.scope)
        head_v = v[2]
    elif state is not None:
        head_v = state[2]
    ctx.set_output(0, (tokens, heads, head_v), dtype)
    ctx.set_output(1, state, ctx.input_dtype(6) if ctx.has_input(6) else None)


@register(MS, ("ConvStateReplay", "GatedDeltaNetStateReplay"), since=1)
def infer_state_replay(ctx: NodeContext, node: ir.Node) -> None:
    """The destination backing, updated in place (same shape and type)."""
    ctx.require_input(2)
    ctx.set_output(0, ctx.input_shape(2), ctx.input_dtype(2))


@register(MS, "Mamba2Verify", since=1)
def infer_mamba2_verify(ctx: NodeContext, node: ir.Node) -> None:
    """Rows ``(R, width)``: Y and readout ``(R, heads * head_dim)``, xbc ``(R, channels)``.

    ``channels = heads * head_dim + 2 * n_groups * d_state``; the snapshots keep the
    state inputs' shapes.
    """
    for i in range(10):
        ctx.require_input(i)
    heads = heads_attr(ctx, "heads")
    groups = heads_attr(ctx, "n_groups")
    inner = heads * (ctx.attr_int("head_dim", 64) or 64)
    channels = inner + 2 * groups * (ctx.attr_int("d_state", 128) or 128)
    rows = _dims(require_rank(ctx, 0, (2,), "projection"), 2)[0]
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (rows, inner), dtype)
    ctx.set_output(1, ctx.input_shape(1), ctx.input_dtype(1))
    ctx.set_output(2, ctx.input_shape(2), ctx.input_dtype(2))
    ctx.set_output(3, (rows, channels), dtype)
    ctx.set_output(4, (rows, inner), ir.DataType.FLOAT)


@register(MS, "AttnLSTM", since=1)
def infer_attn_lstm(ctx: NodeContext, node: ir.Node) -> None:
    """LSTM with attention: Y ``(T, dirs, B, hidden)``; Y_h and Y_c ``(dirs, B, hidden)``."""
    for i in range(3):
        ctx.require_input(i)
    seq, batch, _ = _dims(require_rank(ctx, 0, (3,), "X"), 3)
    w = _dims(require_rank(ctx, 1, (3,), "W"), 3)
    r = _dims(require_rank(ctx, 2, (3,), "R"), 3)
    direction = ctx.attr_str("direction", "forward")
    dirs = merge_dims(
        ctx, "num_directions", 2 if direction == "bidirectional" else 1, w[0], r[0]
    )
    hidden = merge_dims(ctx, "hidden_size", ctx.attr_int("hidden_size"), r[2])
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (seq, dirs, batch, hidden), dtype)
    ctx.set_output(1, (dirs, batch, hidden), dtype)
    ctx.set_output(2, (dirs, batch, hidden), dtype)


@register(MS, "SparseAttentionIndexer", since=1)
def infer_sparse_attention_indexer(ctx: NodeContext, node: ir.Node) -> None:
    """``selected_indices (B, S, capacity)``; the key cache grows by the call's entries.

    ``capacity`` is ``token_budget + compress_ratio - 1`` ('qsa') or ``index_topk``
    ('csa'). With ``past_sequence_length`` the caches keep the past's max capacity;
    otherwise 'qsa' appends the S raw keys and 'csa' a data-dependent number of
    compressed ones (fresh).
    """
    for i in range(6):
        ctx.require_input(i)
    ctx.require_input(7)
    mode = ctx.attr_str("policy_mode")
    if mode not in ("qsa", "csa"):
        ctx.fail(f"policy_mode must be 'qsa' or 'csa', got {mode!r}")
    batch, seq, _ = _dims(require_rank(ctx, 0, (3,), "query"), 3)
    ratio = ctx.attr_int("compress_ratio")
    if mode == "qsa":
        budget = ctx.attr_int("token_budget")
        capacity = None if budget is None or ratio is None else budget + ratio - 1
    else:
        capacity = ctx.attr_int("index_topk")
    ctx.set_output(0, (batch, seq, capacity), INT32)
    past = require_rank(ctx, 7, (3,), "past_key")
    if ctx.has_input(12):
        ctx.set_output(1, past, ctx.input_dtype(7))
    else:
        p_batch, p_seq, p_head = _dims(past, 3)
        grown = add_dims(p_seq, seq) if mode == "qsa" else None
        batch = merge_dims(ctx, "batch size", batch, p_batch)
        ctx.set_output(1, (batch, grown, p_head), ctx.input_dtype(7))
    if mode == "csa" and ctx.has_input(13):
        buffer = _dims(require_rank(ctx, 13, (4,), "past_proj_buffer"), 4)
        ctx.set_output(2, (2, batch, None, buffer[3]), ctx.input_dtype(13))
