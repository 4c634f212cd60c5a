"""onnxruntime contrib ops (``com.microsoft``), checked against onnxruntime when it has a
CPU kernel; otherwise against the shapes the op schema documents."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text


def _model(inputs: str, body: str, outputs: str, opset: int = 17) -> str:
    return model_text(
        opset, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1}
    )


def _shapes(inferred, names):
    return [inferred.shape(n) for n in names]


# ----------------------------------------------------------------------------------------
# Attention (merged QKV weights)
# ----------------------------------------------------------------------------------------
ATTENTION_CASES = [
    # (id, inputs, call arguments, attributes, expected y, expected present)
    (
        "past",
        "float[B, S, 8] x, float[8, 24] w, float[24] b, float[2, B, 2, P, 4] past",
        "x, w, b, , past",
        "num_heads=2",
        ["B", "S", 8],
        [2, "B", 2, "P+S", 4],
    ),
    (
        "no_past",
        "float[B, S, 8] x, float[8, 24] w, float[24] b",
        "x, w, b",
        "num_heads=2",
        ["B", "S", 8],
        [2, "B", 2, "S", 4],
    ),
    (
        "mask_unidirectional",
        "float[B, S, 8] x, float[8, 24] w, float[24] b, int32[B, M] mask, float[2, B, 2, P, 4] past",
        "x, w, b, mask, past",
        "num_heads=2, unidirectional=1",
        ["B", "S", 8],
        [2, "B", 2, "P+S", 4],
    ),
    (
        "symbolic_width",
        "float[B, S, 8] x, float[8, W] w",
        "x, w",
        "num_heads=2",
        ["B", "S", "W/3"],
        [2, "B", 2, "S", "W/6"],  # W/3 split into 2 heads
    ),
]
ATTENTION_BINDINGS = [
    {"B": 2, "S": 3, "P": 5, "W": 24},
    {"B": 1, "S": 1, "P": 0, "W": 12},
    {"B": 3, "S": 0, "P": 2, "W": 48},
]


@pytest.mark.parametrize(
    ("inputs", "args", "attrs", "y", "present"),
    [c[1:] for c in ATTENTION_CASES],
    ids=[c[0] for c in ATTENTION_CASES],
)
def test_attention(inputs, args, attrs, y, present):
    body = f"y, present = com.microsoft.Attention<{attrs}>({args})"
    bindings = [dict(b, M=b["P"] + b["S"]) for b in ATTENTION_BINDINGS]
    inferred = check_against_ort(_model(inputs, body, "float y, float present"), bindings)
    assert inferred.shape("y") == y
    # Compare values, not spellings: nested exact divisions may print as "W/3/2".
    for got, want in zip(inferred.dims("present"), present):
        for w in (0, 6, 12, 600):
            want_dim = want if isinstance(want, int) else expr.parse_dim(want)
            binding = {"B": 2, "S": 3, "P": 4, "W": w}
            assert expr.evaluate(got, binding) == expr.evaluate(want_dim, binding)


def test_attention_qkv_hidden_sizes():
    inputs = "float[B, S, 8] x, float[8, 28] w, float[28] b"
    body = "y = com.microsoft.Attention<num_heads=2, qkv_hidden_sizes=[8, 8, 12]>(x, w, b)"
    inferred = check_against_ort(_model(inputs, body, "float y"), ATTENTION_BINDINGS)
    assert inferred.shape("y") == ["B", "S", 12]


def test_attention_shared_buffer_keeps_the_past_shape():
    # Documented: present is (2, B, N, max_sequence_length, head) like past.
    inputs = "float[B, 1, 8] x, float[8, 24] w, float[24] b, float[2, B, 2, MAX, 4] past, int32[1] psl"
    body = "y, present = com.microsoft.Attention<num_heads=2, past_present_share_buffer=1>(x, w, b, , past, , psl)"
    inferred = infer(_model(inputs, body, "float y, float present"))
    assert inferred.shape("present") == [2, "B", 2, "MAX", 4]


ATTENTION_MALFORMED = [
    ("no num_heads", "float[B, S, 8] x, float[8, 24] w", ""),
    ("width not a multiple of 3", "float[B, S, 8] x, float[8, 25] w", "num_heads=1"),
    ("bad qkv_hidden_sizes", "float[B, S, 8] x, float[8, 24] w", "num_heads=2, qkv_hidden_sizes=[8, 8, 4]"),
    ("input of rank 2", "float[S, 8] x, float[8, 24] w", "num_heads=2"),
    ("head split", "float[B, S, 8] x, float[8, 24] w", "num_heads=3"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "attrs"),
    [m[1:] for m in ATTENTION_MALFORMED],
    ids=[m[0] for m in ATTENTION_MALFORMED],
)
def test_attention_malformed_is_a_diagnostic(inputs, attrs):
    call = (
        f"com.microsoft.Attention<{attrs}>(x, w)" if attrs else "com.microsoft.Attention(x, w)"
    )
    inferred = infer(_model(inputs, f"y, present = {call}", "float y, float present"))
    assert inferred.errors
    assert inferred.shape("y") is None


def test_domains_are_distinct():
    """ai.onnx Attention (opset 23) and com.microsoft Attention reach different hooks."""
    text = """
        <ir_version: 10, opset_import: ["" : 23, "com.microsoft" : 1]>
        g (float[B, S, 8] x, float[8, 24] w, float[B, 2, T, 4] q, float[B, 2, T, 4] k)
            => (float y_ms, float y_onnx) {
            y_ms = com.microsoft.Attention<num_heads=2>(x, w)
            y_onnx = Attention(q, k, k)
        }
    """
    inferred = check_against_ort(text, [{"B": 2, "S": 3, "T": 4}])
    assert inferred.shape("y_ms") == ["B", "S", 8]
    assert inferred.shape("y_onnx") == ["B", 2, "T", 4]
    assert not inferred.errors


# ----------------------------------------------------------------------------------------
# MultiHeadAttention
# ----------------------------------------------------------------------------------------
MHA_OUTPUTS = "float y, float present_k, float present_v, float qk"
MHA_NAMES = ["y", "present_k", "present_v", "qk"]
MHA_CASES = [
    (
        "cross",
        "float[B, S, 8] q, float[B, T, 8] k, float[B, T, 12] v",
        "q, k, v",
        [["B", "S", 12], ["B", 2, "T", 4], ["B", 2, "T", 6], ["B", 2, "S", "T"]],
    ),
    (
        "past",
        "float[B, S, 8] q, float[B, T, 8] k, float[B, T, 8] v, float[B, 2, P, 4] pk, float[B, 2, P, 4] pv",
        "q, k, v, , , , pk, pv",
        [["B", "S", 8], ["B", 2, "P+T", 4], ["B", 2, "P+T", 4], ["B", 2, "S", "P+T"]],
    ),
    (
        "bias_and_padding_mask",
        "float[B, S, 8] q, float[B, T, 8] k, float[B, T, 8] v, float[24] b, int32[B, T] mask",
        "q, k, v, b, mask",
        [["B", "S", 8], ["B", 2, "T", 4], ["B", 2, "T", 4], ["B", 2, "S", "T"]],
    ),
    (
        "bnsh_key_value",
        "float[B, S, 8] q, float[B, 2, T, 4] k, float[B, 2, T, 4] v",
        "q, k, v",
        [["B", "S", 8], ["B", 2, "T", 4], ["B", 2, "T", 4], ["B", 2, "S", "T"]],
    ),
]
MHA_BINDINGS = [
    {"B": 2, "S": 3, "T": 5, "P": 4},
    {"B": 1, "S": 1, "T": 0, "P": 0},
    {"B": 0, "S": 2, "T": 2, "P": 1},
]


@pytest.mark.parametrize(
    ("inputs", "args", "expected"), [c[1:] for c in MHA_CASES], ids=[c[0] for c in MHA_CASES]
)
def test_multi_head_attention(inputs, args, expected):
    body = (
        f"y, present_k, present_v, qk = com.microsoft.MultiHeadAttention<num_heads=2>({args})"
    )
    inferred = check_against_ort(_model(inputs, body, MHA_OUTPUTS), MHA_BINDINGS)
    assert _shapes(inferred, MHA_NAMES) == expected


PACKED_CASES = [
    # No CPU kernel: expectations from the schema (output (B, S, N * head)).
    (
        "packed_kv",
        "float[B, S, 8] q, float[B, T, 2, 2, 4] kv, float[B, 2, P, 4] pk, float[B, 2, P, 4] pv",
        "q, kv, , , , , pk, pv",
        [["B", "S", 8], ["B", 2, "P+T", 4], ["B", 2, "P+T", 4], ["B", 2, "S", "P+T"]],
    ),
    (
        "packed_qkv",
        "float[B, S, 2, 3, 4] qkv",
        "qkv",
        [["B", "S", 8], ["B", 2, "S", 4], ["B", 2, "S", 4], ["B", 2, "S", "S"]],
    ),
]


@pytest.mark.parametrize(
    ("inputs", "args", "expected"),
    [c[1:] for c in PACKED_CASES],
    ids=[c[0] for c in PACKED_CASES],
)
def test_multi_head_attention_packed(inputs, args, expected):
    body = (
        f"y, present_k, present_v, qk = com.microsoft.MultiHeadAttention<num_heads=2>({args})"
    )
    inferred = infer(_model(inputs, body, MHA_OUTPUTS))
    assert _shapes(inferred, MHA_NAMES) == expected


def test_multi_head_attention_shared_buffer():
    # present keeps the max-length buffer; qk spans past_sequence_length + kv positions.
    inputs = "float[B, 1, 8] q, float[B, 1, 8] k, float[B, 1, 8] v, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 4] pv"
    body = """
        psl = Constant<value=int32[1] {3}>()
        y, present_k, present_v, qk = com.microsoft.MultiHeadAttention<num_heads=2>(q, k, v, , , , pk, pv, psl)
    """
    inferred = check_against_ort(_model(inputs, body, MHA_OUTPUTS), [{"B": 2, "MAX": 10}])
    assert _shapes(inferred, MHA_NAMES) == [
        ["B", 1, 8],
        ["B", 2, "MAX", 4],
        ["B", 2, "MAX", 4],
        ["B", 2, 1, 4],
    ]


def test_multi_head_attention_runtime_past_sequence_length_gives_fresh_total():
    inputs = "float[B, 1, 8] q, float[B, 1, 8] k, float[B, 1, 8] v, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 4] pv, int32[1] psl"
    body = "y, present_k, present_v, qk = com.microsoft.MultiHeadAttention<num_heads=2>(q, k, v, , , , pk, pv, psl)"
    feeds = {"psl": np.array([3], dtype=np.int32)}
    inferred = check_against_ort(
        _model(inputs, body, MHA_OUTPUTS), [{"B": 2, "MAX": 10}], feeds
    )
    total = inferred.dims("qk")[3]
    assert isinstance(total, expr.DimExpr) and inferred.context.is_generated(total.name)


def test_multi_head_attention_indivisible_hidden():
    inputs = "float[B, S, 9] q, float[B, T, 9] k, float[B, T, 9] v"
    body = "y = com.microsoft.MultiHeadAttention<num_heads=2>(q, k, v)"
    assert infer(_model(inputs, body, "float y")).errors


# ----------------------------------------------------------------------------------------
# GroupQueryAttention
# ----------------------------------------------------------------------------------------
GQA_OUTPUTS = "float y, float present_k, float present_v"


def _seqlens(total):
    return lambda b: np.full((b["B"],), total(b) - 1, dtype=np.int32)


def test_group_query_attention_total_from_shapes():
    """total_sequence_length computed from shapes: present holds max(P, P + S) = P + S."""
    inputs = (
        "float[B, S, 32] q, float[B, S, 16] k, float[B, S, 16] v, "
        "float[B, 2, P, 8] pk, float[B, 2, P, 8] pv, int32[B] sk"
    )
    body = """
        two = Constant<value=int64 {2}>()
        one = Constant<value=int64 {1}>()
        past_shape = Shape(pk)
        p = Gather<axis=0>(past_shape, two)
        q_shape = Shape(q)
        s = Gather<axis=0>(q_shape, one)
        t = Add(p, s)
        tsl = Cast<to=6>(t)
        y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>(q, k, v, pk, pv, sk, tsl)
    """
    # onnxruntime needs batch 1 for a multi-token step with a past.
    bindings = [{"B": 1, "S": 3, "P": 4}, {"B": 2, "S": 1, "P": 5}, {"B": 1, "S": 2, "P": 0}]
    feeds = {"sk": _seqlens(lambda b: b["P"] + b["S"])}
    inferred = check_against_ort(_model(inputs, body, GQA_OUTPUTS), bindings, feeds)
    assert _shapes(inferred, ["y", "present_k", "present_v"]) == [
        ["B", "S", 32],
        ["B", 2, "P+S", 8],
        ["B", 2, "P+S", 8],
    ]


@pytest.mark.parametrize(("past", "total", "present"), [(5, 6, 6), (10, 6, 10), (0, 1, 1)])
def test_group_query_attention_constant_total(past, total, present):
    """present = max(past, total): a static cache keeps its capacity."""
    inputs = f"float[B, 1, 32] q, float[B, 1, 16] k, float[B, 1, 16] v, float[B, 2, {past}, 8] pk, float[B, 2, {past}, 8] pv, int32[B] sk"
    body = f"""
        tsl = Constant<value=int32 {{{total}}}>()
        y, present_k, present_v, qk = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2, qk_output=1>(q, k, v, pk, pv, sk, tsl)
    """
    feeds = {"sk": _seqlens(lambda b: total)}
    inferred = check_against_ort(
        _model(inputs, body, GQA_OUTPUTS + ", float qk"), [{"B": 2}, {"B": 1}], feeds
    )
    assert inferred.shape("present_k") == ["B", 2, present, 8]
    assert inferred.shape("qk") == ["B", 4, 1, total]


def test_group_query_attention_runtime_total_is_a_fresh_symbol():
    inputs = "float[B, S, 32] q, float[B, S, 16] k, float[B, S, 16] v, float[B, 2, P, 8] pk, float[B, 2, P, 8] pv, int32[B] sk, int32 tsl"
    body = "y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>(q, k, v, pk, pv, sk, tsl)"
    feeds = {
        "sk": _seqlens(lambda b: b["P"] + b["S"]),
        "tsl": lambda b: np.array(b["P"] + b["S"], dtype=np.int32),
    }
    inferred = check_against_ort(
        _model(inputs, body, GQA_OUTPUTS), [{"B": 1, "S": 3, "P": 4}], feeds
    )
    length = inferred.dims("present_k")[2]
    assert isinstance(length, expr.DimExpr) and inferred.context.is_generated(length.name)
    assert inferred.dims("present_v")[2] is length
    assert inferred.context.has_less_equal_constraint(expr.sym("P"), length)


def test_group_query_attention_packed_qkv():
    inputs = "float[B, 1, 64] qkv, float[B, 2, 5, 8] pk, float[B, 2, 5, 8] pv, int32[B] sk"
    body = """
        tsl = Constant<value=int32 {6}>()
        y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>(qkv, , , pk, pv, sk, tsl)
    """
    feeds = {"sk": _seqlens(lambda b: 6)}
    inferred = check_against_ort(_model(inputs, body, GQA_OUTPUTS), [{"B": 2}], feeds)
    assert _shapes(inferred, ["y", "present_k"]) == [["B", 1, 32], ["B", 2, 6, 8]]


def test_group_query_attention_sliding_window_keeps_capacity():
    inputs = "float[B, 1, 32] q, float[B, 1, 16] k, float[B, 1, 16] v, float[B, 2, C, 8] pk, float[B, 2, C, 8] pv, int32[B] sk"
    body = """
        tsl = Constant<value=int32 {10}>()
        y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2, sliding_window_cache=1, local_window_size=4>(q, k, v, pk, pv, sk, tsl)
    """
    feeds = {"sk": _seqlens(lambda b: 10)}
    inferred = check_against_ort(
        _model(inputs, body, GQA_OUTPUTS), [{"B": 1, "C": 4}, {"B": 1, "C": 6}], feeds
    )
    assert inferred.shape("present_k") == ["B", 2, "C", 8]


def test_group_query_attention_without_past():
    inputs = "float[B, 3, 32] q, float[B, 3, 16] k, float[B, 3, 16] v, int32[B] sk"
    body = """
        tsl = Constant<value=int32 {3}>()
        y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>(q, k, v, , , sk, tsl)
    """
    feeds = {"sk": _seqlens(lambda b: 3)}
    inferred = check_against_ort(_model(inputs, body, GQA_OUTPUTS), [{"B": 2}], feeds)
    assert inferred.shape("present_k") == ["B", 2, 3, 8]


@pytest.mark.parametrize(("inputs", "args"), [
    ("float[B, S, 30] q, float[B, S, 16] k, float[B, S, 16] v, int32[B] sk, int32 tsl", "q, k, v, , , sk, tsl"),
    ("float[B, S, 32] q, float[B, S, 16] k, int32[B] sk, int32 tsl", "q, k, , , , sk, tsl"),
])  # fmt: skip
def test_group_query_attention_malformed(inputs, args):
    body = f"y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>({args})"
    assert infer(_model(inputs, body, GQA_OUTPUTS)).errors


# ----------------------------------------------------------------------------------------
# Normalizations
# ----------------------------------------------------------------------------------------
SKIP_NORM_CASES = [
    ("SkipLayerNormalization", "float[B, S, H] x, float[B, S, H] s, float[H] g, float[H] b, float[H] bias", "x, s, g, b, bias"),
    ("SkipLayerNormalization", "float[B, S, H] x, float[S, H] s, float[H] g", "x, s, g"),
    ("SkipSimplifiedLayerNormalization", "float[B, S, H] x, float[1, S, H] s, float[H] g", "x, s, g"),
    ("SkipSimplifiedLayerNormalization", "float[B, S, H] x, float[B, S, H] s, float[H] g, float[H] bias", "x, s, g, bias"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "inputs", "args"), SKIP_NORM_CASES)
def test_skip_layer_normalization(op, inputs, args):
    body = f"y, mean, inv_std, total = com.microsoft.{op}({args})"
    outputs = "float y, float mean, float inv_std, float total"
    bindings = [{"B": 2, "S": 3, "H": 8}, {"B": 0, "S": 2, "H": 4}, {"B": 1, "S": 0, "H": 4}]
    inferred = check_against_ort(_model(inputs, body, outputs), bindings)
    assert _shapes(inferred, ["y", "mean", "inv_std", "total"]) == [
        ["B", "S", "H"],
        ["B", "S", 1],
        ["B", "S", 1],
        ["B", "S", "H"],
    ]


def test_skip_layer_normalization_2d_and_half_precision():
    inputs = "float16[T, H] x, float16[T, H] s, float16[H] g"
    body = "y, mean, inv_std = com.microsoft.SkipSimplifiedLayerNormalization(x, s, g)"
    inferred = check_against_ort(
        _model(inputs, body, "float16 y, float mean, float inv_std"), [{"T": 3, "H": 8}]
    )
    assert inferred.shape("mean") == ["T", 1]
    assert inferred.dtype("y") == ir.DataType.FLOAT16
    assert inferred.dtype("mean") == ir.DataType.FLOAT


def test_skip_layer_normalization_rank_4_is_a_diagnostic():
    inputs = "float[A, B, S, H] x, float[A, B, S, H] s, float[H] g"
    assert infer(
        _model(inputs, "y = com.microsoft.SkipLayerNormalization(x, s, g)", "float y")
    ).errors


@pytest.mark.parametrize(("attrs", "scale", "stats"), [
    ("", "H", ["B", "S", 1]),
    ("<axis=1>", "S, H", ["B", 1, 1]),
])  # fmt: skip
@pytest.mark.parametrize("domain", ["", "com.microsoft."])
def test_simplified_layer_normalization(domain, attrs, scale, stats):
    inputs = f"float16[B, S, H] x, float[{scale}] g"
    body = f"y, inv_std = {domain}SimplifiedLayerNormalization{attrs}(x, g)"
    text = _model(inputs, body, "float y, float inv_std")
    inferred = (
        check_against_ort(text, [{"B": 2, "S": 3, "H": 4}]) if not domain else infer(text)
    )
    assert _shapes(inferred, ["y", "inv_std"]) == [["B", "S", "H"], stats]
    assert inferred.dtype("y") == ir.DataType.FLOAT  # typed like the scale


@pytest.mark.parametrize(("inputs", "args"), [
    ("int32[B, S] ids, int32[B, S] seg, float[10, 8] we, float[6, 8] pe, float[2, 8] se, float[8] g, float[8] b, int32[B, S] mask",
     "ids, seg, we, pe, se, g, b, mask"),
    ("int32[B, S] ids, float[10, 8] we, float[6, 8] pe, float[8] g, float[8] b", "ids, , we, pe, , g, b"),
])  # fmt: skip
def test_embed_layer_normalization(inputs, args):
    body = f"y, mask_index, embedding_sum = com.microsoft.EmbedLayerNormalization({args})"
    outputs = "float y, int32 mask_index, float embedding_sum"
    feeds = {"mask": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32)}
    inferred = check_against_ort(
        _model(inputs, body, outputs), [{"B": 2, "S": 3}, {"B": 1, "S": 0}], feeds
    )
    assert _shapes(inferred, ["y", "mask_index", "embedding_sum"]) == [
        ["B", "S", 8],
        ["B"],
        ["B", "S", 8],
    ]
    assert inferred.dtype("mask_index") == ir.DataType.INT32


def test_skip_group_norm():
    # No CPU kernel: Y and S have the shape of X (schema).
    inputs = (
        "float16[N, H, W, C] x, float[C] g, float[C] b, float16[N, 1, 1, C] s, float16[C] bias"
    )
    body = "y, total = com.microsoft.SkipGroupNorm<groups=4, activation=1, epsilon=1e-5>(x, g, b, s, bias)"
    inferred = infer(_model(inputs, body, "float16 y, float16 total"))
    assert _shapes(inferred, ["y", "total"]) == [["N", "H", "W", "C"]] * 2


# ----------------------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------------------
def test_rotary_embedding():
    inputs = "float[B, S, 8] x, int64[B, S] pos, float[M, 2] cos, float[M, 2] sin"
    body = "y = com.microsoft.RotaryEmbedding<num_heads=2, rotary_embedding_dim=4>(x, pos, cos, sin)"
    inferred = check_against_ort(
        _model(inputs, body, "float y"), [{"B": 2, "S": 3, "M": 5}, {"B": 1, "S": 0, "M": 2}]
    )
    assert inferred.shape("y") == ["B", "S", 8]


@pytest.mark.parametrize(
    ("dims", "expected"), [("N, S, 2560", ["N", "S", 1280]), ("N, S, D", ["N", "S", "D/2"])]
)
def test_bias_split_gelu(dims, expected):
    # No CPU kernel: (N, S, D) -> (N, S, D / 2) (schema).
    text = _model(
        f"float[{dims}] x, float[{dims.split(', ')[-1]}] b",
        "y = com.microsoft.BiasSplitGelu(x, b)",
        "float y",
    )
    assert infer(text).shape("y") == expected


def test_bias_split_gelu_odd_hidden_is_a_diagnostic():
    text = _model(
        "float[N, S, 7] x, float[7] b", "y = com.microsoft.BiasSplitGelu(x, b)", "float y"
    )
    assert infer(text).errors


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
FUSED_MATMUL_CASES = [
    # (a, b, attributes, expected)
    ("B, M, K", "K, N", "", ["B", "M", "N"]),
    ("B, K, M", "N, K", "transA=1, transB=1", ["B", "M", "N"]),
    ("M, B, C, K", "B, C, K, N", "transBatchA=1", ["B", "C", "M", "N"]),
    ("B, C, M, K", "K, B, C, N", "transBatchB=1", ["B", "C", "M", "N"]),
    ("K, B, C, M", "B, C, K, N", "transBatchA=1, transA=1", ["B", "C", "M", "N"]),
    (
        "K, B, M",
        "N, B, K",
        "transBatchA=1, transA=1, transBatchB=1, transB=1",
        ["B", "M", "N"],
    ),
    ("K, M", "K", "transA=1", ["M"]),
    ("K", "K, N", "transA=1", ["N"]),  # transposing a vector does nothing
    ("K", "N, K", "transB=1", ["N"]),
    ("A, 1, M, K", "B, K, N", "alpha=0.5", ["A", "B", "M", "N"]),
]


@pytest.mark.parametrize(("a", "b", "attrs", "expected"), FUSED_MATMUL_CASES)
def test_fused_matmul(a, b, attrs, expected):
    call = (
        f"com.microsoft.FusedMatMul<{attrs}>(a, b)"
        if attrs
        else "com.microsoft.FusedMatMul(a, b)"
    )
    text = _model(f"float[{a}] a, float[{b}] b", f"y = {call}", "float y")
    bindings = [
        {"A": 2, "B": 3, "C": 2, "M": 4, "K": 5, "N": 6},
        {"A": 1, "B": 2, "C": 1, "M": 0, "K": 3, "N": 2},
        {"A": 3, "B": 1, "C": 2, "M": 2, "K": 0, "N": 1},
    ]
    inferred = check_against_ort(text, bindings)
    assert inferred.shape("y") == expected


@pytest.mark.parametrize(("a", "b", "attrs"), [
    ("M, B, K", "K, N", "transBatchA=1"),  # transBatch needs equal ranks >= 3
    ("B, M, 4", "5, N", ""),  # inner dims differ
    ("2, M, K", "3, K, N", ""),  # batch dims do not broadcast
])  # fmt: skip
def test_fused_matmul_malformed(a, b, attrs):
    call = (
        f"com.microsoft.FusedMatMul<{attrs}>(a, b)"
        if attrs
        else "com.microsoft.FusedMatMul(a, b)"
    )
    assert infer(_model(f"float[{a}] a, float[{b}] b", f"y = {call}", "float y")).errors


@pytest.mark.parametrize(
    ("a", "expected"), [("B, S, 32", ["B", "S", 6]), ("32", [6]), ("T, 32", ["T", 6])]
)
def test_matmul_nbits(a, expected):
    inputs = f"float[{a}] a, uint8[6, 1, 16] w, float[6, 1] scales"
    body = "y = com.microsoft.MatMulNBits<K=32, N=6, bits=4, block_size=32>(a, w, scales)"
    feeds = {"w": np.zeros((6, 1, 16), dtype=np.uint8)}
    inferred = check_against_ort(
        _model(inputs, body, "float y"), [{"B": 2, "S": 3, "T": 0}], feeds
    )
    assert inferred.shape("y") == expected


def test_matmul_nbits_wrong_k_is_a_diagnostic():
    inputs = "float[B, 16] a, uint8[6, 1, 16] w, float[6, 1] scales"
    body = "y = com.microsoft.MatMulNBits<K=32, N=6, bits=4, block_size=32>(a, w, scales)"
    assert infer(_model(inputs, body, "float y")).errors


def test_gemm_fast_gelu():
    # No CPU kernel: the MatMul shape of X and W (schema).
    text = _model(
        "float[B, S, K] x, float[K, N] w, float[N] b",
        "y = com.microsoft.GemmFastGelu(x, w, b)",
        "float y",
    )
    assert infer(text).shape("y") == ["B", "S", "N"]
