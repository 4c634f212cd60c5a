"""ai.onnx Attention (opset 23+) and RotaryEmbedding, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text


def _model(opset: int, inputs: str, body: str, outputs: str) -> str:
    return model_text(opset, inputs, body, outputs, ir_version=10)


OUTPUTS = "float y, float present_k, float present_v, float qk"
NO_PAST = "y, present_k, present_v, qk = Attention{attrs}(q, k, v)"
WITH_PAST = "y, present_k, present_v, qk = Attention{attrs}(q, k, v, , past_k, past_v)"

ATTENTION_CASES = [
    # (id, inputs, body, expected shapes of y, present_k, present_v, qk)
    (
        "4d",
        "float[B, 4, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 12] v",
        NO_PAST.format(attrs=""),
        [["B", 4, "S", 12], ["B", 2, "T", 8], ["B", 2, "T", 12], ["B", 4, "S", "T"]],
    ),
    (
        "4d_past",
        (
            "float[B, 4, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 12] v, "
            "float[B, 2, P, 8] past_k, float[B, 2, P, 12] past_v"
        ),
        WITH_PAST.format(attrs=""),
        [["B", 4, "S", 12], ["B", 2, "P+T", 8], ["B", 2, "P+T", 12], ["B", 4, "S", "P+T"]],
    ),
    (
        "3d_gqa",
        "float[B, S, 32] q, float[B, T, 16] k, float[B, T, 24] v",
        NO_PAST.format(attrs="<q_num_heads=4, kv_num_heads=2>"),
        [["B", "S", 48], ["B", 2, "T", 8], ["B", 2, "T", 12], ["B", 4, "S", "T"]],
    ),
    (
        "3d_past_causal",
        (
            "float[B, S, 32] q, float[B, T, 32] k, float[B, T, 32] v, "
            "float[B, 4, P, 8] past_k, float[B, 4, P, 8] past_v"
        ),
        WITH_PAST.format(attrs="<q_num_heads=4, kv_num_heads=4, is_causal=1>"),
        [["B", "S", 32], ["B", 4, "P+T", 8], ["B", 4, "P+T", 8], ["B", 4, "S", "P+T"]],
    ),
    (
        "3d_symbolic_hidden",
        "float[B, S, HQ] q, float[B, T, HQ] k, float[B, T, HV] v",
        NO_PAST.format(attrs="<q_num_heads=2, kv_num_heads=2>"),
        [["B", "S", "HV"], ["B", 2, "T", "HQ/2"], ["B", 2, "T", "HV/2"], ["B", 2, "S", "T"]],
    ),
]
BINDINGS = [
    {"B": 2, "S": 3, "T": 5, "P": 4, "HQ": 8, "HV": 6},
    {"B": 1, "S": 1, "T": 2, "P": 0, "HQ": 4, "HV": 10},
    {"B": 3, "S": 2, "T": 3, "P": 1, "HQ": 2, "HV": 4},
]  # onnxruntime rejects an empty batch or query; the past may be empty


@pytest.mark.parametrize(
    ("inputs", "body", "expected"),
    [case[1:] for case in ATTENTION_CASES],
    ids=[case[0] for case in ATTENTION_CASES],
)
@pytest.mark.parametrize("opset", [23, 24])
def test_attention(opset, inputs, body, expected):
    inferred = check_against_ort(_model(opset, inputs, body, OUTPUTS), BINDINGS)
    assert [inferred.shape(n) for n in ("y", "present_k", "present_v", "qk")] == expected


def test_attention_latest_opset_uses_the_same_hook():
    inputs = "float[B, 4, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 12] v"
    inferred = infer(_model(25, inputs, NO_PAST.format(attrs=""), OUTPUTS))
    assert inferred.shape("y") == ["B", 4, "S", 12]
    assert inferred.shape("qk") == ["B", 4, "S", "T"]


def test_attention_external_cache_with_nonpad_kv_seqlen():
    # Opset 24: K/V are the whole cache, nonpad_kv_seqlen only masks.
    inputs = "float[B, 4, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 8] v, int64[B] nonpad"
    body = "y, present_k, present_v, qk = Attention(q, k, v, , , , nonpad)"
    feeds = {"nonpad": lambda b: np.full((b["B"],), b["T"], dtype=np.int64)}
    inferred = check_against_ort(
        _model(24, inputs, body, OUTPUTS), [{"B": 2, "S": 3, "T": 5}], feeds
    )
    assert inferred.shape("y") == ["B", 4, "S", 8]
    assert inferred.shape("qk") == ["B", 4, "S", "T"]


def test_attention_only_y():
    inputs = "float[B, S, 16] q, float[B, T, 16] k, float[B, T, 16] v"
    body = "y = Attention<q_num_heads=2, kv_num_heads=2>(q, k, v)"
    inferred = check_against_ort(_model(23, inputs, body, "float y"), BINDINGS)
    assert inferred.shape("y") == ["B", "S", 16]


def test_attention_known_batch_wins_over_symbol():
    # All inputs share the batch: the int from K is the batch of every output.
    inputs = "float[B, 2, S, 8] q, float[3, 2, T, 8] k, float[3, 2, T, 8] v"
    inferred = infer(_model(23, inputs, NO_PAST.format(attrs=""), OUTPUTS))
    assert inferred.shape("y") == [3, 2, "S", 8]


def test_attention_unknown_q_rank():
    inputs = "float[B, 2, T, 8] k, float[B, 2, T, 8] v, float q"
    inferred = infer(_model(23, inputs, NO_PAST.format(attrs=""), OUTPUTS), unranked=["q"])
    assert inferred.shape("y") is None
    present = inferred.shape("present_k")
    assert present == ["B", 2, "T", 8]
    qk = inferred.dims("qk")
    assert qk[0] == expr.sym("B") and qk[3] == expr.sym("T")


MALFORMED = [
    ("3-D Q without q_num_heads", "float[B, S, 8] q, float[B, T, 8] k, float[B, T, 8] v", ""),
    ("Q of rank 2", "float[S, 8] q, float[B, T, 8] k, float[B, T, 8] v", "<q_num_heads=2, kv_num_heads=2>"),
    ("indivisible hidden", "float[B, S, 30] q, float[B, T, 30] k, float[B, T, 30] v", "<q_num_heads=4, kv_num_heads=2>"),
    ("negative heads", "float[B, S, 8] q, float[B, T, 8] k, float[B, T, 8] v", "<q_num_heads=-2, kv_num_heads=2>"),
    ("conflicting batch", "float[2, 2, S, 8] q, float[3, 2, T, 8] k, float[3, 2, T, 8] v", ""),
    ("conflicting head size", "float[B, 2, S, 8] q, float[B, 2, T, 4] k, float[B, 2, T, 8] v", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "attrs"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_attention_malformed_is_a_diagnostic(inputs, attrs):
    inferred = infer(_model(23, inputs, NO_PAST.format(attrs=attrs), OUTPUTS))
    assert inferred.errors
    assert inferred.shape("y") is None


def test_attention_past_key_without_past_value():
    inputs = "float[B, 2, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 8] v, float[B, 2, P, 8] past_k"
    body = "y, present_k, present_v, qk = Attention(q, k, v, , past_k)"
    inferred = infer(_model(23, inputs, body, OUTPUTS))
    assert any("together" in e for e in inferred.errors)


# ----------------------------------------------------------------------------------------
# RotaryEmbedding
# ----------------------------------------------------------------------------------------
ROPE_CASES = [
    (
        "float[B, S, 8] x, float[M, 2] cos, float[M, 2] sin, int64[B, S] pos",
        "y = RotaryEmbedding<num_heads=2>(x, cos, sin, pos)",
        ["B", "S", 8],
    ),
    (
        "float[B, N, S, 4] x, float[M, 2] cos, float[M, 2] sin, int64[B, S] pos",
        "y = RotaryEmbedding(x, cos, sin, pos)",
        ["B", "N", "S", 4],
    ),
    (
        "float[B, N, S, 8] x, float[B, S, 2] cos, float[B, S, 2] sin",
        "y = RotaryEmbedding<rotary_embedding_dim=4, interleaved=1>(x, cos, sin)",
        ["B", "N", "S", 8],
    ),
]


@pytest.mark.parametrize(("inputs", "body", "expected"), ROPE_CASES)
def test_rotary_embedding(inputs, body, expected):
    bindings = [{"B": 2, "N": 3, "S": 4, "M": 6}, {"B": 1, "N": 2, "S": 0, "M": 3}]
    inferred = check_against_ort(_model(23, inputs, body, "float y"), bindings)
    assert inferred.shape("y") == expected


def test_rotary_embedding_rank_2_is_a_diagnostic():
    inputs = "float[S, 8] x, float[M, 4] cos, float[M, 4] sin"
    inferred = infer(_model(23, inputs, "y = RotaryEmbedding(x, cos, sin)", "float y"))
    assert inferred.errors and inferred.shape("y") is None
