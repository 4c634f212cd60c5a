"""onnxruntime's generation loops (``com.microsoft``): BeamSearch, GreedySearch, Sampling.

WhisperBeamSearch is the beam search over an audio encoder.

The kernels pad every returned sequence to ``max_length`` (a scalar input), so the output
shapes follow from the inputs' values, not from the decoding run:

* ``sequences``: ``(B, num_return_sequences, max_length)`` for beam search,
  ``(B, max_length)`` for greedy search and sampling (INT32);
* ``sequences_scores``: ``(B, num_return_sequences)``;
* ``scores``: ``(max_length - S, B, num_beams, vocab_size)`` (one slice per generated
  token);
* Whisper's ``cross_qk``: ``(B, num_return_sequences, layer_heads, max_length, frames)``
  and ``non_speech_probs``: ``(B,)``.

``B`` and ``S`` come from ``input_ids`` (Whisper's ``input_ids`` are the audio features
``(B, feature_size, frames)``). A scalar that is not known becomes a fresh symbol (for
``max_length``, one at least ``S``); ``vocab_size`` comes from its attribute or the
decoder subgraph's declared ``logits`` shape.

The token-level helpers of decoding live here too: ``NGramRepeatBlock`` (scores like
its input), ``BifurcationDetector`` (speculative decoding: a data-dependent number of
accepted tokens, bounded) and the n-gram hash mappings.
"""

from __future__ import annotations

__all__: list[str] = []

import logging

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import fresh_at_most, merge_dims, single_element
from onnx_symdims.ops._registry import register
from onnx_symdims.ops.attention import require_rank
from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

MS = "com.microsoft"

Dim = expr.Dim
MaybeDim = Dim | None

INT32 = ir.DataType.INT32


def _scalar(ctx: NodeContext, i: int, what: str, minimum: int) -> Dim:
    """The value of scalar input ``i`` (at least ``minimum``), or one fresh symbol.

    One symbol, so that every output sized by the same unknown scalar agrees.
    """
    value = single_element(ctx.input_value(i)) if ctx.has_input(i) else None
    if value is None:
        return ctx.new_symbol(what)
    if isinstance(value, int) and value < minimum:
        ctx.fail(f"{what} must be >= {minimum}, got {value}")
    return value


def _max_length(ctx: NodeContext, seq: MaybeDim) -> Dim:
    """``max_length`` (input 1): its value, or a fresh symbol ``>= S`` (the prompt fits)."""
    ctx.require_input(1)
    value = single_element(ctx.input_value(1))
    if value is not None:
        if isinstance(value, int) and isinstance(seq, int) and value < seq:
            ctx.fail(f"max_length {value} is shorter than the input sequence length {seq}")
        return value
    length = ctx.new_symbol("max_length")
    if seq is not None:
        ctx.ctx.add_less_equal_constraint(seq, length)
    return length


def _vocab_size(ctx: NodeContext) -> Dim:
    """The ``vocab_size`` attribute, else the decoder's declared logits width, else fresh."""
    vocab = ctx.attr_int("vocab_size", -1)
    if vocab is not None and vocab > 0:
        return vocab
    attr = ctx.node.attributes.get("decoder")
    if attr is not None and attr.type == ir.AttributeType.GRAPH and attr.value.outputs:
        logits = attr.value.outputs[0].shape
        if logits is not None and len(logits) > 0 and isinstance(logits[-1], int):
            return logits[-1]
    return ctx.new_symbol("vocab_size")


def _prompt(ctx: NodeContext) -> tuple[MaybeDim, MaybeDim]:
    """``(B, S)`` of the ``input_ids`` (2-D)."""
    ctx.require_input(0)
    shape = require_rank(ctx, 0, (2,), "input_ids")
    # An unknown batch is one symbol for all outputs.
    return (shape[0], shape[1]) if shape is not None else (ctx.new_symbol("batch"), None)


def _generated(length: Dim, seq: MaybeDim) -> MaybeDim:
    return None if seq is None else expr.sub(length, seq)


@register(MS, "BeamSearch", since=1)
def infer_beam_search(ctx: NodeContext, node: ir.Node) -> None:
    """``sequences (B, R, max_length)``, ``sequences_scores (B, R)``, ``scores``."""
    for i in (3, 4):
        ctx.require_input(i)
    batch, seq = _prompt(ctx)
    length = _max_length(ctx, seq)
    beams = _scalar(ctx, 3, "num_beams", 1)
    returned = _scalar(ctx, 4, "num_return_sequences", 1)
    if isinstance(beams, int) and isinstance(returned, int) and returned > beams:
        ctx.fail(f"num_return_sequences {returned} exceeds num_beams {beams}")
    score_dtype = ctx.input_dtype(5) or ir.DataType.FLOAT
    ctx.set_output(0, (batch, returned, length), INT32)
    ctx.set_output(1, (batch, returned), score_dtype)
    steps = _generated(length, seq)
    ctx.set_output(2, (steps, batch, beams, _vocab_size(ctx)), score_dtype)


@register(MS, "WhisperBeamSearch", since=1)
def infer_whisper_beam_search(ctx: NodeContext, node: ir.Node) -> None:
    """BeamSearch over audio features ``(B, feature_size, frames)``; ``cross_qk``; ``non_speech_probs``."""
    for i in (3, 4):
        ctx.require_input(i)
    ctx.require_input(0)
    features = require_rank(ctx, 0, (3,), "input_features")
    batch = features[0] if features is not None else ctx.new_symbol("batch")
    # The decoder prompt (decoder_input_ids) is what max_length must cover.
    prompt = require_rank(ctx, 10, (2,), "decoder_input_ids") if ctx.has_input(10) else None
    seq = prompt[1] if prompt is not None else None
    length = _max_length(ctx, seq)
    beams = _scalar(ctx, 3, "num_beams", 1)
    returned = _scalar(ctx, 4, "num_return_sequences", 1)
    score_dtype = ctx.input_dtype(5) or ir.DataType.FLOAT
    ctx.set_output(0, (batch, returned, length), INT32)
    ctx.set_output(1, (batch, returned), score_dtype)
    ctx.set_output(2, (None, batch, beams, _vocab_size(ctx)), score_dtype)
    heads = None
    if ctx.has_input(12):
        layer_head = require_rank(ctx, 12, (2,), "cross_qk_layer_head")
        heads = layer_head[0] if layer_head is not None else None
    # cross_qk's last dim is the encoder's output length (set by the encoder subgraph's
    # conv stem), not derivable from the node: fresh.
    ctx.set_output(3, (batch, returned, heads, length, None), score_dtype)
    ctx.set_output(4, (batch,), score_dtype)


@register(MS, ("GreedySearch", "Sampling"), since=1)
def infer_greedy_search(ctx: NodeContext, node: ir.Node) -> None:
    """``sequences (B, max_length)``; Sampling's ``filtered_logits (B, vocab_size)``."""
    batch, seq = _prompt(ctx)
    length = _max_length(ctx, seq)
    ctx.set_output(0, (batch, length), INT32)
    if node.op_type == "Sampling":
        ctx.set_output(1, (batch, _vocab_size(ctx)), ctx.input_dtype(3) or ir.DataType.FLOAT)


# ----------------------------------------------------------------------------------------
# Token-level decoding helpers
# ----------------------------------------------------------------------------------------
@register(MS, "NGramRepeatBlock", since=1)
def infer_ngram_repeat_block(ctx: NodeContext, node: ir.Node) -> None:
    """``scores_out`` has the shape and type of ``scores``."""
    ctx.require_input(0)
    ctx.require_input(1)
    ctx.set_output(0, ctx.input_shape(1), ctx.input_dtype(1))


@register(MS, "BifurcationDetector", since=1)
def infer_bifurcation_detector(ctx: NodeContext, node: ir.Node) -> None:
    """``tokens``: cur_tokens plus ``1..len(pred)`` predicted tokens (cur_tokens without pred).

    The kernel appends ``pred_tokens[:k + 1]`` for a data-dependent ``k``, so
    ``len(cur) + 1 <= len(tokens) <= len(cur) + len(pred)``; the suffix index keeps the
    shape of ``prev_suffix_match_idx``.
    """
    for i in range(3):
        ctx.require_input(i)
    cur = require_rank(ctx, 1, (1,), "cur_tokens")
    pred = require_rank(ctx, 3, (1,), "pred_tokens") if ctx.has_input(3) else None
    length: MaybeDim = None
    if not ctx.has_input(3):
        length = cur[0] if cur is not None else None
    elif pred is not None and isinstance(pred[0], int) and pred[0] == 1 and cur is not None:
        length = expr.add(cur[0], 1)
    else:
        bound = None if cur is None or pred is None else expr.add(cur[0], pred[0])
        length = fresh_at_most(ctx, "tokens", bound)
        if cur is not None:
            ctx.ctx.add_less_equal_constraint(expr.add(cur[0], 1), length)
    ctx.set_output(0, (length,), ctx.input_dtype(1))
    ctx.set_output(1, ctx.input_shape(2), ctx.input_dtype(2))


def _hash_heads(ctx: NodeContext) -> tuple[int | None, int | None]:
    """``(max_ngram_size - 1, (max_ngram_size - 1) * n_head_per_ngram)``."""
    order = ctx.attr_int("max_ngram_size")
    heads = ctx.attr_int("n_head_per_ngram")
    if order is not None and order < 2:
        ctx.fail(f"max_ngram_size must be >= 2, got {order}")
    if heads is not None and heads < 1:
        ctx.fail(f"n_head_per_ngram must be >= 1, got {heads}")
    history = None if order is None else order - 1
    width = None if history is None or heads is None else history * heads
    return history, width


@register(MS, "NGramHashMapping", since=1)
def infer_ngram_hash_mapping(ctx: NodeContext, node: ir.Node) -> None:
    """``hash_ids (B, S, (n - 1) * heads)``; ``present_ids (B, n - 1)``."""
    for i in range(3):
        ctx.require_input(i)
    ids = require_rank(ctx, 0, (2,), "input_ids")
    batch, seq = ids if ids is not None else (None, None)
    history, width = _hash_heads(ctx)
    ctx.set_output(0, (batch, seq, width), ctx.input_dtype(0))
    ctx.set_output(1, (batch, history), ctx.input_dtype(0))


@register(MS, "VarlenNGramHashMapping", since=1)
def infer_varlen_ngram_hash_mapping(ctx: NodeContext, node: ir.Node) -> None:
    """Packed tokens ``(T,)``: ``hash_ids (T, (n - 1) * heads)``; per request ``(B, n - 1)``.

    B is one less than ``cumulative_sequence_length``'s length (or ``past_ids``' rows).
    """
    for i in range(4):
        ctx.require_input(i)
    ids = require_rank(ctx, 0, (1,), "input_ids")
    history, width = _hash_heads(ctx)
    cumulative = require_rank(ctx, 3, (1,), "cumulative_sequence_length")
    batch: MaybeDim = None
    if cumulative is not None:
        if isinstance(cumulative[0], int) and cumulative[0] < 1:
            ctx.fail("cumulative_sequence_length must have at least one element")
        batch = expr.sub(cumulative[0], 1)
    if ctx.has_input(4):
        past = require_rank(ctx, 4, (2,), "past_ids")
        batch = merge_dims(ctx, "batch size", batch, past[0] if past else None)
    dtype = ctx.input_dtype(0)
    ctx.set_output(0, (ids[0] if ids else None, width), dtype)
    ctx.set_output(1, (batch, history), dtype)
    ctx.set_output(2, (batch, history), ctx.input_dtype(7) if ctx.has_input(7) else dtype)
    capacity = ctx.attr_int("state_update_capacity", 0)
    ctx.set_output(3, (batch, capacity, history), dtype)
