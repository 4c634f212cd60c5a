"""com.microsoft generation loops, checked against onnxruntime with a tiny GPT-2 decoder.

BeamSearch, GreedySearch and Sampling run on onnxruntime's CPU kernels.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text

# A one-layer "GPT-2" decoder: logits are one-hot rows of the token ids (vocab 5), and
# present_0 is past_0 grown by the step's tokens, as the GPT-2 subgraph contract wants.
DECODER = """decoder = dec (int32[b, s] input_ids, int32[b, s] position_ids, int32[b, t] attention_mask, float[2, b, 1, p, 2] past_0) => (float[b, s, 5] logits, float[2, b, 1, q, 2] present_0) {
        emb = Constant<value = float[6, 5] {1,0,0,0,0, 0,1,0,0,0, 0,0,1,0,0, 0,0,0,1,0, 0,0,0,0,1, 0,0,0,0,0}>()
        logits = Gather<axis=0>(emb, input_ids)
        ids_shape = Shape(input_ids)
        zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        two = Constant<value = int64[1] {2}>()
        bs = Slice(ids_shape, zero, one)
        ss = Slice(ids_shape, one, two)
        new_shape = Concat<axis=0>(two, bs, one, ss, two)
        zeros = ConstantOfShape(new_shape)
        present_0 = Concat<axis=3>(past_0, zeros)
    }"""


def _model(inputs: str, body: str, outputs: str, constants: str = "") -> str:
    return model_text(
        17, inputs, body, outputs, constants=constants, ir_version=10,
        domains={"com.microsoft": 1},
    )  # fmt: skip


def _i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


BEAM_INPUTS = "int32[B, S] ids, int32[1] max_len, int32[1] min_len, int32[1] beams, int32[1] ret, float[1] lp, float[1] rp"
BEAM_OUTPUTS = "int32 seqs, float seq_scores, float scores"
BEAM_ATTRS = "eos_token_id=5, pad_token_id=5"


def _beam_feeds(max_len: int, beams: int, ret: int):
    return {
        "ids": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32),
        "max_len": _i32(max_len),
        "min_len": _i32(1),
        "beams": _i32(beams),
        "ret": _i32(ret),
        "lp": np.array([1.0], np.float32),
        "rp": np.array([1.0], np.float32),
    }


@pytest.mark.parametrize(("max_len", "beams", "ret"), [(7, 3, 2), (4, 1, 1), (10, 2, 2)])
def test_beam_search_runtime_scalars(max_len, beams, ret):
    """Scalars fed at run time: fresh symbols, consistent across the outputs."""
    body = f"seqs, seq_scores, scores = com.microsoft.BeamSearch<{BEAM_ATTRS}, {DECODER}>(ids, max_len, min_len, beams, ret, lp, rp)"
    inferred = check_against_ort(
        _model(BEAM_INPUTS, body, BEAM_OUTPUTS),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 3, "S": 2}],
        _beam_feeds(max_len, beams, ret),
    )
    seqs, seq_scores, scores = (inferred.dims(n) for n in ("seqs", "seq_scores", "scores"))
    assert seqs[0] is expr.sym("B") and seqs[1] is seq_scores[1]
    assert scores[0] == expr.sub(seqs[2], expr.sym("S"))
    assert scores[3] == 5  # vocab from the decoder's declared logits
    assert inferred.context.has_less_equal_constraint(expr.sym("S"), seqs[2])


def test_beam_search_constant_scalars():
    constants = "int32[1] max_len = {6}, int32[1] beams = {3}, int32[1] ret = {2}"
    inputs = "int32[B, S] ids, int32[1] min_len, float[1] lp, float[1] rp"
    body = f"seqs, seq_scores, scores = com.microsoft.BeamSearch<{BEAM_ATTRS}, vocab_size=5, {DECODER}>(ids, max_len, min_len, beams, ret, lp, rp)"
    feeds = {
        k: v for k, v in _beam_feeds(6, 3, 2).items() if k in ("ids", "min_len", "lp", "rp")
    }
    inferred = check_against_ort(
        _model(inputs, body, BEAM_OUTPUTS, constants),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 1, "S": 5}],
        feeds,
    )
    assert inferred.shape("seqs") == ["B", 2, 6]
    assert inferred.shape("seq_scores") == ["B", 2]
    assert inferred.dims("scores") == (expr.parse_dim("6-S"), expr.sym("B"), 3, 5)


def test_beam_search_max_length_from_shape():
    """max_length computed from the prompt's shape is a shape quantity: S + 4."""
    inputs = "int32[B, S] ids, int32[1] min_len, int32[1] beams, int32[1] ret, float[1] lp, float[1] rp"
    body = f"""
        shape = Shape(ids)
        s = Slice(shape, c1, c2)
        total = Add(s, c4)
        max_len = Cast<to=6>(total)
        seqs, seq_scores, scores = com.microsoft.BeamSearch<{BEAM_ATTRS}, {DECODER}>(ids, max_len, min_len, beams, ret, lp, rp)
    """
    constants = "int64[1] c1 = {1}, int64[1] c2 = {2}, int64[1] c4 = {4}"
    feeds = {k: v for k, v in _beam_feeds(0, 2, 1).items() if k != "max_len"}
    inferred = check_against_ort(
        _model(inputs, body, BEAM_OUTPUTS, constants),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}],
        feeds,
    )
    assert inferred.shape("seqs")[2] == "S+4"
    assert inferred.shape("scores")[0] == 4


GREEDY_INPUTS = "int32[B, S] ids, int32[1] max_len"


@pytest.mark.parametrize("op", ["GreedySearch", "Sampling"])
@pytest.mark.parametrize("max_len", [5, 4])
def test_greedy_search_and_sampling(op, max_len):
    body = f"""
        ml = Constant<value = int32[1] {{{max_len}}}>()
        seqs = com.microsoft.{op}<eos_token_id=5, pad_token_id=5, {DECODER}>(ids, ml)
    """
    feeds = {"ids": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32)}
    inferred = check_against_ort(
        _model("int32[B, S] ids", body, "int32 seqs"),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}],
        feeds,
    )
    assert inferred.shape("seqs") == ["B", max_len]


def test_sampling_filtered_logits_schema():
    # onnxruntime leaves filtered_logits unset in a plain run: (B, vocab) per the schema.
    body = f"seqs, filtered = com.microsoft.Sampling<eos_token_id=5, pad_token_id=5, {DECODER}>(ids, max_len)"
    inferred = infer(_model(GREEDY_INPUTS, body, "int32 seqs, float filtered"))
    assert inferred.shape("filtered") == ["B", 5]


def test_greedy_search_runtime_max_length():
    body = f"seqs = com.microsoft.GreedySearch<eos_token_id=5, pad_token_id=5, {DECODER}>(ids, max_len)"
    feeds = {"ids": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32), "max_len": _i32(6)}
    inferred = check_against_ort(
        _model(GREEDY_INPUTS, body, "int32 seqs"),
        [{"B": 2, "S": 3}, {"B": 1, "S": 0 + 1}],
        feeds,
    )
    length = inferred.dims("seqs")[1]
    assert inferred.context.is_generated(length.name)
    assert inferred.dtype("seqs") == ir.DataType.INT32


def test_whisper_beam_search_schema():
    # The CPU kernel needs a Whisper encoder-decoder pair of subgraphs: shapes from the
    # schema (sequences padded to max_length, cross_qk per selected layer head).
    inputs = "float[B, 80, F] feats, int32[1] min_len, float[1] lp, float[1] rp, int32[H, 2] layer_heads"
    constants = "int32[1] max_len = {448}, int32[1] beams = {4}, int32[1] ret = {1}"
    body = f"""
        seqs, seq_scores, scores, cross_qk, nsp = com.microsoft.WhisperBeamSearch<eos_token_id=5, pad_token_id=5, decoder_start_token_id=0, vocab_size=51865, {DECODER}>(feats, max_len, min_len, beams, ret, lp, rp, , , , , , layer_heads)
    """
    outputs = "int32 seqs, float seq_scores, float scores, float cross_qk, float nsp"
    inferred = infer(_model(inputs, body, outputs, constants))
    assert not inferred.errors, inferred.errors
    assert inferred.shape("seqs") == ["B", 1, 448]
    assert inferred.shape("seq_scores") == ["B", 1]
    assert inferred.shape("scores")[1:] == ["B", 4, 51865]
    assert inferred.shape("cross_qk")[:4] == ["B", 1, "H", 448]
    assert inferred.shape("nsp") == ["B"]


@pytest.mark.parametrize(("constants", "inputs"), [
    ("int32[1] max_len = {2}, int32[1] beams = {3}, int32[1] ret = {2}", "int32[B, 5] ids"),  # max_len < S
    ("int32[1] max_len = {9}, int32[1] beams = {2}, int32[1] ret = {3}", "int32[B, 5] ids"),  # ret > beams
    ("int32[1] max_len = {9}, int32[1] beams = {0}, int32[1] ret = {1}", "int32[B, 5] ids"),
])  # fmt: skip
def test_beam_search_malformed(constants, inputs):
    body = (
        f"seqs = com.microsoft.BeamSearch<{BEAM_ATTRS}, {DECODER}>(ids, max_len, , beams, ret)"
    )
    assert infer(_model(inputs, body, "int32 seqs", constants)).errors


# ----------------------------------------------------------------------------------------
# Token-level decoding helpers
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cur", "match", "prev"), [(3, 4, 0), (1, 0, 2), (0, 2, 5), (2, 6, 0)]
)
def test_bifurcation_detector(cur, match, prev):
    """pred_tokens has len(src) + 1 - prev elements; ``match`` of them agree with src."""
    inputs = "int64[M] src, int64[C] cur, int64[1] idx, int64[P] pred"
    body = "tokens, match = com.microsoft.BifurcationDetector<min_ngram_size=1, max_ngram_size=3>(src, cur, idx, pred)"
    text = _helper_model(inputs, body, "int64 tokens, int64 match")
    src = np.arange(6, dtype=np.int64)
    pred = np.full(7 - prev, 100, dtype=np.int64)
    agree = min(match, 6 - prev)
    pred[:agree] = src[prev : prev + agree]
    feeds = {
        "src": src,
        "cur": np.arange(cur, dtype=np.int64),
        "idx": np.array([prev], dtype=np.int64),
        "pred": pred,
    }
    inferred = check_against_ort(text, [{"M": 6, "C": cur, "P": 7 - prev}], feeds)
    tokens = inferred.dims("tokens")[0]
    assert isinstance(tokens, expr.DimExpr) and inferred.context.is_generated(tokens.name)
    assert inferred.context.has_less_equal_constraint(tokens, expr.parse_dim("C+P"))
    assert inferred.shape("match") == [1]


def test_bifurcation_detector_without_prediction():
    inputs = "int64[M] src, int64[C] cur, int64[1] idx"
    body = "tokens, match = com.microsoft.BifurcationDetector<min_ngram_size=1, max_ngram_size=3>(src, cur, idx)"
    feeds = {"idx": np.array([0], dtype=np.int64)}
    inferred = check_against_ort(
        _helper_model(inputs, body, "int64 tokens, int64 match"),
        [{"M": 6, "C": 3}, {"M": 2, "C": 0}],
        feeds,
    )
    assert inferred.shape("tokens") == ["C"]


def _helper_model(inputs: str, body: str, outputs: str) -> str:
    return model_text(17, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1})


def test_ngram_repeat_block():
    text = _helper_model(
        "int64[B, S] ids, float[B, V] scores",
        "y = com.microsoft.NGramRepeatBlock<ngram_size=2>(ids, scores)",
        "float y",
    )
    inferred = check_against_ort(
        text, [{"B": 2, "S": 3, "V": 4}, {"B": 1, "S": 1, "V": 1}, {"B": 3, "S": 0, "V": 2}]
    )
    assert inferred.shape("y") == ["B", "V"]


def test_ngram_hash_mapping():
    inputs = "int64[B, S] ids, int64[3] mult, int64[4] vocab"
    body = "h, present = com.microsoft.NGramHashMapping<max_ngram_size=3, n_head_per_ngram=2, pad_id=0>(ids, mult, vocab)"
    feeds = {
        "mult": np.array([3, 5, 7], dtype=np.int64),
        "vocab": np.array([11, 13, 17, 19], dtype=np.int64),
    }
    inferred = check_against_ort(
        _helper_model(inputs, body, "int64 h, int64 present"),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 2, "S": 0}],
        feeds,
    )
    assert inferred.shape("h") == ["B", "S", 4]
    assert inferred.shape("present") == ["B", 2]


def test_varlen_ngram_hash_mapping():
    inputs = "int64[T] ids, int64[3] mult, int64[4] vocab, int32[C] cu"
    body = "h, present = com.microsoft.VarlenNGramHashMapping<max_ngram_size=3, n_head_per_ngram=2, pad_id=0>(ids, mult, vocab, cu)"
    feeds = {
        "mult": np.array([3, 5, 7], dtype=np.int64),
        "vocab": np.array([11, 13, 17, 19], dtype=np.int64),
        "cu": lambda b: np.linspace(0, b["T"], b["C"]).astype(np.int32),
    }
    inferred = check_against_ort(
        _helper_model(inputs, body, "int64 h, int64 present"),
        [{"T": 6, "C": 3}, {"T": 1, "C": 2}, {"T": 2, "C": 3}],
        feeds,
    )
    assert inferred.shape("h") == ["T", 4]
    assert inferred.shape("present") == ["C-1", 2]
