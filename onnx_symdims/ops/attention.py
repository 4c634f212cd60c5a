"""``Attention`` and ``RotaryEmbedding`` of the ``ai.onnx`` domain (opset 23+).

These are NOT the ``com.microsoft`` ops of the same names (see
:mod:`onnx_symdims.ops.contrib`): the registry keys hooks by domain, so an opset-23
``Attention`` never reaches the contrib hook (onnxruntime's symbolic shape tool dispatches
by op type only and crashes there).

``Attention`` accepts Q/K/V as 4-D ``(batch, heads, seq, head_size)`` or 3-D
``(batch, seq, heads * head_size)`` tensors (3-D needs ``q_num_heads``/``kv_num_heads``).
With ``past_key``/``past_value`` the present caches hold ``past + kv`` positions.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
from typing import NamedTuple

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import divide, merge_dims
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
MaybeDim = Dim | None


# ----------------------------------------------------------------------------------------
# Helpers shared with the contrib attention ops
# ----------------------------------------------------------------------------------------
def add_dims(a: MaybeDim, b: MaybeDim) -> MaybeDim:
    """``a + b``, unknown when either is."""
    return None if a is None or b is None else expr.add(a, b)


def mul_dims(a: MaybeDim, b: MaybeDim) -> MaybeDim:
    """``a * b``, unknown when either is."""
    return None if a is None or b is None else expr.mul(a, b)


def heads_attr(ctx: NodeContext, name: str, required: bool = True) -> int | None:
    """A positive head-count attribute; fails when missing (if required) or not positive."""
    heads = ctx.attr_int(name)
    if heads is None:
        if required:
            ctx.fail(f"attribute {name!r} is required")
        return None
    if heads <= 0:
        ctx.fail(f"attribute {name!r} must be positive, got {heads}")
    return heads


def require_rank(ctx: NodeContext, i: int, ranks: tuple[int, ...], what: str) -> Shape | None:
    """Input ``i``'s shape (``None`` if unknown); fails when its rank is not in ``ranks``."""
    shape = ctx.input_shape(i)
    if shape is not None and len(shape) not in ranks:
        allowed = " or ".join(str(r) for r in ranks)
        ctx.fail(f"{what} must have rank {allowed}, got {len(shape)}")
    return shape


# ----------------------------------------------------------------------------------------
# ai.onnx Attention
# ----------------------------------------------------------------------------------------
class _Heads(NamedTuple):
    """A Q/K/V tensor seen as ``(batch, heads, seq, head_size)``; ``None`` is unknown."""

    batch: MaybeDim = None
    heads: MaybeDim = None
    seq: MaybeDim = None
    size: MaybeDim = None


def _heads_view(ctx: NodeContext, i: int, heads_name: str, what: str) -> _Heads:
    """Input ``i`` (3-D split by attribute ``heads_name``, or 4-D) as a :class:`_Heads`."""
    shape = require_rank(ctx, i, (3, 4), what)
    if shape is None:
        return _Heads(heads=ctx.attr_int(heads_name))
    if len(shape) == 4:
        return _Heads(*shape)
    heads = heads_attr(ctx, heads_name)
    return _Heads(
        shape[0], heads, shape[1], divide(ctx, shape[2], heads, f"{what} hidden size")
    )


@register("", "Attention", since=23)
def infer_attention(ctx: NodeContext, node: ir.Node) -> None:
    """Y, present key/value caches (``past + kv`` positions) and the QK scores.

    Y is ``(B, q_heads, q_seq, v_head)`` for 4-D Q and ``(B, q_seq, q_heads * v_head)``
    for 3-D Q; the caches are ``(B, kv_heads, total, head)``; qk is
    ``(B, q_heads, q_seq, total)``.
    """
    for i in range(3):
        ctx.require_input(i)
    q = _heads_view(ctx, 0, "q_num_heads", "Q")
    k = _heads_view(ctx, 1, "kv_num_heads", "K")
    v = _heads_view(ctx, 2, "kv_num_heads", "V")
    has_past = ctx.has_input(4) or ctx.has_input(5)
    if has_past and not (ctx.has_input(4) and ctx.has_input(5)):
        ctx.fail("past_key and past_value must be given together")
    past_k = _Heads(*(require_rank(ctx, 4, (4,), "past_key") or (None,) * 4))
    past_v = _Heads(*(require_rank(ctx, 5, (4,), "past_value") or (None,) * 4))

    batch = merge_dims(
        ctx, "batch size", q.batch, k.batch, v.batch, past_k.batch, past_v.batch
    )
    kv_heads = merge_dims(ctx, "kv_num_heads", k.heads, v.heads, past_k.heads, past_v.heads)
    head = merge_dims(ctx, "head size of Q and K", q.size, k.size, past_k.size)
    v_head = merge_dims(ctx, "head size of V", v.size, past_v.size)
    kv_seq = merge_dims(ctx, "kv sequence length", k.seq, v.seq)
    past_seq = merge_dims(ctx, "past sequence length", past_k.seq, past_v.seq)
    total = add_dims(past_seq, kv_seq) if has_past else kv_seq

    q_shape = ctx.input_shape(0)
    if q_shape is None:
        y = None
    elif len(q_shape) == 4:
        y = (batch, q.heads, q.seq, v_head)
    else:
        y = (batch, q.seq, mul_dims(q.heads, v_head))
    ctx.set_output(0, y, ctx.input_dtype(0))
    ctx.set_output(1, (batch, kv_heads, total, head), ctx.input_dtype(1))
    ctx.set_output(2, (batch, kv_heads, total, v_head), ctx.input_dtype(2))
    ctx.set_output(3, (batch, q.heads, q.seq, total), ctx.input_dtype(0))


@register("", "RotaryEmbedding", since=23)
def infer_rotary_embedding(ctx: NodeContext, node: ir.Node) -> None:
    """Same shape and type as X (3-D or 4-D)."""
    ctx.require_input(0)
    shape = require_rank(ctx, 0, (3, 4), "X")
    ctx.set_output(0, shape, ctx.input_dtype(0))
