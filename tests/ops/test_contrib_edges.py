"""Edge cases of the com.microsoft ops of contrib.py, checked against onnxruntime."""

from __future__ import annotations

import pytest

from tests.ops._ort_oracle import check_against_ort, infer, model_text


def _model(inputs: str, body: str, outputs: str) -> str:
    return model_text(17, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1})


BINDINGS = [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 3, "S": 0}]


@pytest.mark.parametrize(
    ("heads", "sizes", "y", "present"),
    [
        (2, [8, 8, 12], ["B", "S", 12], [2, "B", 2, "S", 6]),
        (2, [8, 8, 4], ["B", "S", 4], [2, "B", 2, "S", 2]),
        (2, [12, 12, 8], ["B", "S", 8], [2, "B", 2, "S", 4]),
        (1, [8, 8, 7], ["B", "S", 7], [2, "B", 1, "S", 7]),
        (2, [8, 8, 8], ["B", "S", 8], [2, "B", 2, "S", 4]),
    ],
)
def test_attention_present_has_the_value_head_size(heads, sizes, y, present):
    # onnxruntime's CPU kernel sizes the present cache by V's head size; the engine wrote
    # K's (qkv_hidden_sizes [8, 8, 12] over 2 heads: 4 where every run has 6).
    width = sum(sizes)
    inputs = f"float[B, S, 8] x, float[8, {width}] w, float[{width}] b"
    attrs = f"num_heads={heads}, qkv_hidden_sizes={sizes}"
    body = f"y, present = com.microsoft.Attention<{attrs}>(x, w, b)"
    inferred = check_against_ort(_model(inputs, body, "float y, float present"), BINDINGS)
    assert inferred.shape("y") == y
    assert inferred.shape("present") == present


def test_attention_value_hidden_size_not_divisible_by_heads_is_malformed():
    # onnxruntime: "hidden_size should be divisible by num_heads:5".
    inputs = "float[B, S, 8] x, float[8, 21] w, float[21] b"
    body = "y, present = com.microsoft.Attention<num_heads=2, qkv_hidden_sizes=[8, 8, 5]>(x, w, b)"
    assert infer(_model(inputs, body, "float y, float present")).errors
