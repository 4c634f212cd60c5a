"""com.microsoft serving-time attention ops, checked against onnxruntime where it has a CPU
kernel; otherwise against the shapes the op schema documents."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text


def _model(inputs: str, body: str, outputs: str) -> str:
    return model_text(17, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1})


def _equal(got, want) -> bool:
    """Dims equal as functions of the symbols (spellings of divisions may differ)."""
    if got is None or len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if w == "?":
            if not (isinstance(g, expr.DimExpr) and g.is_symbol):
                return False
            continue
        w_dim = w if isinstance(w, int) else expr.parse_dim(w)
        for binding in (
            {
                "B": 2,
                "S": 3,
                "P": 4,
                "T": 5,
                "L": 6,
                "MAX": 8,
                "W": 24,
                "N": 2,
                "D": 7,
                "R": 3,
            },
            {
                "B": 1,
                "S": 1,
                "P": 0,
                "T": 0,
                "L": 1,
                "MAX": 3,
                "W": 48,
                "N": 1,
                "D": 0,
                "R": 1,
            },
        ):
            if expr.evaluate(g, binding) != expr.evaluate(w_dim, binding):
                return False
    return True


def _check(inferred, expected):
    assert not inferred.errors, inferred.errors
    for name, want in expected.items():
        assert _equal(inferred.dims(name), want), (name, inferred.shape(name), want)


# ----------------------------------------------------------------------------------------
# Merged QKV weights
# ----------------------------------------------------------------------------------------
QATTENTION_CASES = [
    ("no_past", "uint8[B, S, 8] x, int8[8, 24] w, float[24] b, float xs, float ws", "x, w, b, xs, ws",
     "num_heads=2", {"y": ["B", "S", 8], "present": [2, "B", 2, "S", 4]}),
    ("past", "uint8[B, S, 8] x, int8[8, 24] w, float[24] b, float xs, float ws, float[2, B, 2, P, 4] past",
     "x, w, b, xs, ws, , , , past", "num_heads=2, unidirectional=1",
     {"y": ["B", "S", 8], "present": [2, "B", 2, "P+S", 4]}),
    ("mask_index", "uint8[B, S, 8] x, int8[8, 24] w, float[24] b, float xs, float ws, int32[B] mask",
     "x, w, b, xs, ws, mask", "num_heads=4", {"y": ["B", "S", 8], "present": [2, "B", 4, "S", 2]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "args", "attrs", "expected"),
    [c[1:] for c in QATTENTION_CASES],
    ids=[c[0] for c in QATTENTION_CASES],
)
def test_qattention(inputs, args, attrs, expected):
    body = f"y, present = com.microsoft.QAttention<{attrs}>({args})"
    feeds = {
        "xs": np.array(0.1, dtype=np.float32),
        "ws": np.array(0.1, dtype=np.float32),
        "mask": lambda b: np.full((b["B"],), b["S"], dtype=np.int32),
    }
    bindings = [{"B": 2, "S": 3, "P": 4}, {"B": 1, "S": 1, "P": 0}, {"B": 3, "S": 2, "P": 1}]
    inferred = check_against_ort(
        _model(inputs, body, "float y, float present"),
        bindings,
        {k: v for k, v in feeds.items() if k in inputs},
    )
    _check(inferred, expected)


MERGED_SCHEMA_CASES = [
    # No CPU kernel: expected shapes from the schemas.
    ("dmsa_shared_buffer", "DecoderMaskedSelfAttention",
     "float[B, 1, 8] x, float[8, 24] w, float[24] b, float[2, B, 2, MAX, 4] past, int32[1] psl",
     "x, w, b, , past, , psl", "num_heads=2, past_present_share_buffer=1",
     {"y": ["B", 1, 8], "present": [2, "B", 2, "MAX", 4]}),
    ("dmsa_growing_past", "DecoderMaskedSelfAttention",
     "float[B, 1, 8] x, float[8, 28] w, float[28] b, float[2, B, 2, P, 4] past, int32[1] psl",
     "x, w, b, , past, , psl", "num_heads=2, qkv_hidden_sizes=[8, 8, 12]",
     {"y": ["B", 1, 12], "present": [2, "B", 2, "P+1", 4]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "inputs", "args", "attrs", "expected"),
    [c[1:] for c in MERGED_SCHEMA_CASES],
    ids=[c[0] for c in MERGED_SCHEMA_CASES],
)
def test_merged_weights_schema_only(op, inputs, args, attrs, expected):
    body = f"y, present = com.microsoft.{op}<{attrs}>({args})"
    _check(infer(_model(inputs, body, "float y, float present")), expected)


SCHEMA_CASES = [
    # (id, inputs, body, outputs, expected): no CPU kernel, shapes from the schemas.
    ("packed_attention", "float[T, 8] x, float[8, W] w, float[W] b, int32[B, S] off, int32[L] cu",
     "y = com.microsoft.PackedAttention<num_heads=2>(x, w, b, off, cu)", "float y",
     {"y": ["T", "W/3"]}),
    ("packed_attention_sizes", "float[T, 8] x, float[8, 28] w, float[28] b, int32[B, S] off, int32[L] cu",
     "y = com.microsoft.PackedAttention<num_heads=2, qkv_hidden_sizes=[8, 8, 12]>(x, w, b, off, cu)",
     "float y", {"y": ["T", 12]}),
    ("packed_mha", "float[T, 8] q, float[T, 8] k, float[T, 12] v, int32[B, S] off, int32[L] cu",
     "y = com.microsoft.PackedMultiHeadAttention<num_heads=2>(q, k, v, , off, cu)", "float y",
     {"y": ["T", 12]}),
    ("packed_mha_qkv", "float[T, 2, 3, 4] qkv, int32[B, S] off, int32[L] cu",
     "y = com.microsoft.PackedMultiHeadAttention<num_heads=2>(qkv, , , , off, cu)", "float y",
     {"y": ["T", 8]}),
    ("longformer", "float[B, S, 8] x, float[8, 24] w, float[24] b, float[B, S] m, float[8, 24] gw, float[24] gb, int32[B, S] g",
     "y = com.microsoft.LongformerAttention<num_heads=2, window=2>(x, w, b, m, gw, gb, g)",
     "float y", {"y": ["B", "S", 8]}),
    ("paged_separate", "float16[T, 32] q, float16[T, 16] k, float16[T, 16] v, float16[L, 16, 2, 8] kc, float16[L, 16, 2, 8] vc, int32[S] cu, int32[B] past, int32[B, MAX] table",
     "y, kco, vco = com.microsoft.PagedAttention<num_heads=4, kv_num_heads=2>(q, k, v, kc, vc, cu, past, table)",
     "float16 y, float16 kco, float16 vco",
     {"y": ["T", 32], "kco": ["L", 16, 2, 8], "vco": ["L", 16, 2, 8]}),
    ("paged_packed", "float16[T, 64] qkv, float16[L, 16, 2, 8] kc, float16[L, 16, 2, 8] vc, int32[S] cu, int32[B] past, int32[B, MAX] table",
     "y, kco, vco = com.microsoft.PagedAttention<num_heads=4, kv_num_heads=2>(qkv, , , kc, vc, cu, past, table)",
     "float16 y, float16 kco, float16 vco", {"y": ["T", 32], "kco": ["L", 16, 2, 8]}),
    ("decoder_attention", "float[S, B, 8] q, float[L, B, 8] k, float[8, 8] qw, float[8, 16] kvw, float[24] b, float[B, 2, P, 4] kc, float[B, 2, P, 4] vc, bool s, bool u, bool h, bool m",
     "y, nk, nv = com.microsoft.DecoderAttention<num_heads=2>(q, k, qw, kvw, b, , kc, vc, s, u, h, m)",
     "float y, float nk, float nv", {"y": ["S", "B", 8], "nk": ["B", 2, "?", 4]}),
    ("qordered_attention", "int8[B, S, 8] x, float si, float sq, float sk, float sv, int8[8, 8] qw, int8[8, 8] kw, int8[8, 12] vw, float sqw, float skw, float svw, float[8] qb, float[8] kb, float[12] vb, float sqk, float sqks, float sval",
     "y = com.microsoft.QOrderedAttention<num_heads=2, order_input=1, order_output=1, order_weight=0>(x, si, sq, sk, sv, qw, kw, vw, sqw, skw, svw, qb, kb, vb, sqk, sqks, sval)",
     "int8 y", {"y": ["B", "S", 12]}),
    ("remove_padding", "float[B, S, 8] x, int32[B] count",
     "y, off, cu, mx = com.microsoft.RemovePadding(x, count)",
     "float y, int32 off, int32 cu, int32 mx",
     {"y": ["?", 8], "off": ["B", "S"], "cu": ["B+1"], "mx": [1]}),
    ("restore_padding", "float[T, 8] x, int32[B, S] off", "y = com.microsoft.RestorePadding(x, off)",
     "float y", {"y": ["B", "S", 8]}),
    ("gemma_rotary", "float[B, S, 8] emb, float16[B, 2, S, 8] q, float16[B, 2, S, 8] qr, float16[B, 2, S, 8] k, float16[B, 2, S, 8] kr",
     "q2, k2 = com.microsoft.GemmaRotaryEmbedding(emb, q, qr, k, kr)", "float16 q2, float16 k2",
     {"q2": ["B", 2, "S", 8], "k2": ["B", 2, "S", 8]}),
    ("relative_position_bias", "float[32, 4] table, int64 q, int64 k", """
        ql = Constant<value=int64 {5}>()
        kl = Constant<value=int64 {5}>()
        y = com.microsoft.RelativePositionBias<max_distance=16, is_bidirectional=1>(table, ql, kl)""",
     "float y", {"y": [1, 4, 5, 5]}),
    ("relative_position_bias_from_shape", "float[32, 4] table, float[B, S, 8] x", """
        shape = Shape(x)
        one = Constant<value=int64 {1}>()
        s = Gather<axis=0>(shape, one)
        y = com.microsoft.RelativePositionBias<max_distance=16, is_bidirectional=1>(table, s, s)""",
     "float y", {"y": [1, 4, "S", "S"]}),
    ("gated_relative_position_bias", "float[B, S, 8] q, float[8] qb, float[1, 2, S, S] rel, float[4, 6] w, float[6] b, float[1, 2, 1, 1] eco",
     "y = com.microsoft.GatedRelativePositionBias<num_heads=2>(q, qb, rel, w, b, eco)", "float y",
     {"y": ["B", 2, "S", "S"]}),
    ("gated_relative_position_bias_packed", "float[T, 8] q, float[8] qb, float[1, 2, S, S] rel, float[4, 6] w, float[6] b, float[1, 2, 1, 1] eco, int32[B, S] off",
     "y = com.microsoft.GatedRelativePositionBias<num_heads=2>(q, qb, rel, w, b, eco, off)",
     "float y", {"y": ["B", 2, "S", "S"]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inputs", "body", "outputs", "expected"),
    [c[1:] for c in SCHEMA_CASES],
    ids=[c[0] for c in SCHEMA_CASES],
)
def test_schema_only(inputs, body, outputs, expected):
    _check(infer(_model(inputs, body, outputs)), expected)


def test_remove_padding_bounds_the_token_count():
    inputs = "float[B, S, 8] x, int32[B] count"
    body = """
        y, off, cu, mx = com.microsoft.RemovePadding(x, count)
        z = com.microsoft.RestorePadding(y, off)
    """
    inferred = infer(_model(inputs, body, "float z"))
    tokens = inferred.dims("y")[0]
    assert inferred.context.has_less_equal_constraint(tokens, expr.parse_dim("B*S"))
    assert inferred.shape("z") == ["B", "S", 8]


# ----------------------------------------------------------------------------------------
# DecoderMaskedMultiHeadAttention (CPU kernel)
# ----------------------------------------------------------------------------------------
DMMHA_OUTPUTS = "float y, float present_k, float present_v, float qk"


def test_dmmha_self_attention_shared_buffer_tracks_past_length():
    inputs = "float[B, 1, 8] q, float[B, 1, 8] k, float[B, 1, 8] v, int32[B, 4] mask, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 4] pv"
    body = """
        psl = Constant<value=int32 {3}>()
        y, present_k, present_v, qk = com.microsoft.DecoderMaskedMultiHeadAttention<num_heads=2, past_present_share_buffer=1, output_qk=1>(q, k, v, mask, , pk, pv, psl)
    """
    feeds = {"mask": lambda b: np.ones((b["B"], 4), dtype=np.int32)}
    inferred = check_against_ort(
        _model(inputs, body, DMMHA_OUTPUTS), [{"B": 2, "MAX": 8}, {"B": 1, "MAX": 4}], feeds
    )
    _check(inferred, {
        "y": ["B", 1, 8], "present_k": ["B", 2, "MAX", 4], "present_v": ["B", 2, "MAX", 4],
        "qk": ["B", 2, 1, 4],
    })  # fmt: skip


def test_dmmha_runtime_past_length_is_bounded():
    inputs = "float[B, 1, 8] q, float[B, 1, 8] k, float[B, 1, 8] v, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 4] pv, int32 psl"
    body = "y, present_k, present_v, qk = com.microsoft.DecoderMaskedMultiHeadAttention<num_heads=2, past_present_share_buffer=1, output_qk=1>(q, k, v, , , pk, pv, psl)"
    feeds = {"psl": np.array(2, dtype=np.int32)}
    inferred = check_against_ort(
        _model(inputs, body, DMMHA_OUTPUTS), [{"B": 2, "MAX": 8}], feeds
    )
    total = inferred.dims("qk")[3]
    assert isinstance(total, expr.DimExpr) and inferred.context.is_generated(total.name)
    assert inferred.context.has_less_equal_constraint(total, expr.sym("MAX"))


def test_dmmha_cross_attention_schema():
    # The CPU kernel reads 4-D key/value as a self-attention cache (it fails without a
    # max-length past): the documented cross-attention shapes.
    inputs = "float[B, 1, 8] q, float[B, 2, L, 4] k, float[B, 2, L, 4] v"
    body = "y, present_k, present_v, qk = com.microsoft.DecoderMaskedMultiHeadAttention<num_heads=2, output_qk=1>(q, k, v)"
    inferred = infer(_model(inputs, body, DMMHA_OUTPUTS))
    _check(inferred, {"y": ["B", 1, 8], "present_k": ["B", 2, "L", 4], "qk": ["B", 2, 1, "L"]})


def test_dmmha_packed_qkv_schema():
    # The CPU kernel fails on packed QKV (a reshape of the wrong size): the schema's
    # (B, 1, 2 * hidden + v_hidden), split by the caches' head size.
    inputs = (
        "float[B, 1, 28] qkv, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 6] pv, int32[1] psl"
    )
    body = "y, present_k, present_v = com.microsoft.DecoderMaskedMultiHeadAttention<num_heads=2, past_present_share_buffer=1>(qkv, , , , , pk, pv, psl)"
    _check(infer(_model(inputs, body, "float y, float present_k, float present_v")), {
        "y": ["B", 1, 12], "present_k": ["B", 2, "MAX", 4], "present_v": ["B", 2, "MAX", 6],
    })  # fmt: skip


def test_dmmha_packed_qkv_width_mismatch_is_a_diagnostic():
    inputs = (
        "float[B, 1, 24] qkv, float[B, 2, MAX, 4] pk, float[B, 2, MAX, 6] pv, int32[1] psl"
    )
    body = "y, present_k, present_v = com.microsoft.DecoderMaskedMultiHeadAttention<num_heads=2, past_present_share_buffer=1>(qkv, , , , , pk, pv, psl)"
    assert infer(_model(inputs, body, "float y, float present_k, float present_v")).errors


# ----------------------------------------------------------------------------------------
# SparseAttention, MRotaryEmbedding, LinearAttention (CPU kernels)
# ----------------------------------------------------------------------------------------
def test_sparse_attention():
    """The CPU kernel updates the caches in place: run with io binding, present = past."""
    import onnxruntime as ort

    from tests.ops._ort_oracle import check_dim, exposed_model, ort_session

    inputs = "float[B, S, 32] q, float[B, S, 16] k, float[B, S, 16] v, float[B, 2, MAX, 8] pk, float[B, 2, MAX, 8] pv, int32[1, 5] rows, int32[1, 4] cols, int32[1] total, int32[B] ktsl"
    body = "y, present_k, present_v = com.microsoft.SparseAttention<num_heads=4, kv_num_heads=2, sparse_block_size=16>(q, k, v, pk, pv, rows, cols, total, ktsl)"
    inferred = infer(_model(inputs, body, "float y, float present_k, float present_v"))
    _check(inferred, {"y": ["B", "S", 32], "present_k": ["B", 2, "MAX", 8]})
    session = ort_session(exposed_model(inferred))
    rng = np.random.default_rng(0)
    for b, s, cap in [(2, 3, 64), (1, 1, 64), (1, 5, 16)]:
        feeds = {
            "q": rng.standard_normal((b, s, 32), dtype=np.float32),
            "k": rng.standard_normal((b, s, 16), dtype=np.float32),
            "v": rng.standard_normal((b, s, 16), dtype=np.float32),
            "rows": np.array([[0, 1, 2, 3, 4]], dtype=np.int32),
            "cols": np.array([[0, 1, 2, 3]], dtype=np.int32),
            "total": np.array([s], dtype=np.int32),
            "ktsl": np.full((b,), s, dtype=np.int32),
        }
        binding = session.io_binding()
        binding.bind_output("y")  # outputs come back in binding order
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for past, present in (("pk", "present_k"), ("pv", "present_v")):
            cache = ort.OrtValue.ortvalue_from_numpy(np.zeros((b, 2, cap, 8), np.float32))
            binding.bind_ortvalue_input(past, cache)
            binding.bind_ortvalue_output(present, cache)
        session.run_with_iobinding(binding)
        names = ["y", "present_k", "present_v"]
        bound = {"B": b, "S": s, "MAX": cap}
        for name, array in zip(names, binding.copy_outputs_to_cpu()):
            for axis, (d, size) in enumerate(zip(inferred.dims(name), array.shape)):
                check_dim(inferred.context, d, size, bound, f"{name}[{axis}]")


@pytest.mark.parametrize("dims", ["B, S, 16", "B, 2, S, 8"])
def test_mrotary_embedding(dims):
    inputs = f"float[{dims}] x, int64[3, B, S] pos, float[M, 4] cos, float[M, 4] sin"
    body = "y = com.microsoft.MRotaryEmbedding<num_heads=2, mrope_section=[2, 1, 1]>(x, pos, cos, sin)"
    inferred = check_against_ort(
        _model(inputs, body, "float y"),
        [{"B": 2, "S": 3, "M": 6}, {"B": 1, "S": 1, "M": 2}, {"B": 1, "S": 0, "M": 2}],
    )
    assert inferred.shape("y") == [
        d.strip() if not d.strip().isdigit() else int(d) for d in dims.split(",")
    ]


@pytest.mark.parametrize(("attrs", "past", "state"), [
    ("update_rule=\"linear\"", "", ["B", 2, 4, 6]),
    ("update_rule=\"linear\"", "float[B, 2, 4, 6] ps", ["B", 2, 4, 6]),
])  # fmt: skip
def test_linear_attention(attrs, past, state):
    inputs = "float[B, S, 8] q, float[B, S, 8] k, float[B, S, 12] v" + (
        f", {past}" if past else ""
    )
    args = "q, k, v" + (", ps" if past else "")
    body = f"y, present = com.microsoft.LinearAttention<q_num_heads=2, kv_num_heads=2, {attrs}>({args})"
    inferred = check_against_ort(
        _model(inputs, body, "float y, float present"),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}],
    )
    _check(inferred, {"y": ["B", "S", 12], "present": state})


MALFORMED = [
    ("float[B, 1, 8] x, float[8, 25] w, float[25] b, float[2, B, 2, P, 4] past, int32[1] psl",
     "y, present = com.microsoft.DecoderMaskedSelfAttention<num_heads=2>(x, w, b, , past, , psl)"),
    ("float[T, 9] q, int32[B, S] off, int32[L] cu",
     "y = com.microsoft.PackedMultiHeadAttention(q, , , , off, cu)"),
    ("float[B, S, 30] q, float[B, 2, MAX, 8] pk, float[B, 2, MAX, 8] pv, int32[1, 5] r, int32[1, 4] c, int32[1] t, int32[B] k",
     "y = com.microsoft.SparseAttention<num_heads=4, kv_num_heads=2, sparse_block_size=16>(q, , , pk, pv, r, c, t, k)"),
    ("float[T, 8] x, int32[B] off", "y = com.microsoft.RestorePadding(x, off)"),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "body"), MALFORMED)
def test_malformed_is_a_diagnostic(inputs, body):
    assert infer(_model(inputs, body, "float y")).errors


def test_qattention_output_type_follows_the_scale():
    inputs = "uint8[B, S, 8] x, int8[8, 24] w, float16[24] b, float16 xs, float16 ws"
    body = "y = com.microsoft.QAttention<num_heads=2>(x, w, b, xs, ws)"
    assert infer(_model(inputs, body, "float16 y")).dtype("y") == ir.DataType.FLOAT16


# ----------------------------------------------------------------------------------------
# Linear attention and state-space helpers
# ----------------------------------------------------------------------------------------
STATE_CASES = [
    # (id, inputs, body, outputs, expected, bindings or None: no CPU kernel, feeds)
    ("linear_attention_gate", "float[B, S, 4] a, float[4] dt, float[4] ds, float[B, S, 4] b",
     "decay, beta = com.microsoft.LinearAttentionGate(a, dt, ds, b)", "float decay, float beta",
     {"decay": ["B", "S", 4], "beta": ["B", "S", 4]}, "BS", None),
    ("causal_conv_no_past", "float[B, 4, L] x, float[4, 1, 3] w",
     'y, state = com.microsoft.CausalConvWithState<activation="silu">(x, w)', "float y, float state",
     {"y": ["B", 4, "L"], "state": ["B", 4, 2]}, "BL", None),
    ("causal_conv_dilated_past", "float[B, 4, L] x, float[4, 1, 3] w, float[4] b, float[B, 4, 4] past",
     "y, state = com.microsoft.CausalConvWithState<dilation=2>(x, w, b, past)", "float y, float state",
     {"y": ["B", 4, "L"], "state": ["B", 4, 4]}, "BL", None),
    ("varlen_causal_conv", "float[T, 4] x, float[4, 1, 3] w, int32[C] cu, float[N, 4, 2] init",
     "y, state = com.microsoft.VarlenCausalConvWithState(x, w, cu, , init)", "float y, float state",
     {"y": ["T", 4], "state": ["N", 4, 2]}, "TCN", None),
    ("gated_delta_net", "float[T, 2, 4] q, float[T, 2, 4] k, float[T, 2, 6] v, float[T, 2] decay, float[T, 2] beta, float[N, 2, 6, 4] init, int32[C] cu",
     "y, state = com.microsoft.GatedDeltaNet(q, k, v, cu, decay, beta, init)", "float y, float state",
     {"y": ["T", 2, 6], "state": ["N", 2, 6, 4]}, "TCN", None),
    ("attn_lstm", "float[S, B, 3] x, float[1, 16, 7] w, float[1, 16, 4] r, float[1, 4, 5] qw, float[1, 4, 5] mw, float[1, 5] v, float[B, 6, 4] m, int32[B] msl",
     "y, yh, yc = com.microsoft.AttnLSTM<hidden_size=4>(x, w, r, , , , , , qw, mw, v, m, msl)",
     "float y, float yh, float yc", {"y": ["S", 1, "B", 4], "yh": [1, "B", 4], "yc": [1, "B", 4]},
     "BS1", None),
    # No CPU kernel: expected shapes from the schemas.
    ("mamba2_verify", "bfloat16[R, 1104] p, bfloat16[4, 1040, 3] cs, float[4, 8, 128, 64] ss, bfloat16[1040, 4] cw, bfloat16[1040] cb, float[8] dt, float[8] a, float[8] d, float[512] nw, int32[1] row",
     "y, conv, ssm, xbc, readout = com.microsoft.Mamba2Verify<heads=8, n_groups=1>(p, cs, ss, cw, cb, dt, a, d, nw, row)",
     "bfloat16 y, bfloat16 conv, float ssm, bfloat16 xbc, float readout",
     {"y": ["R", 512], "conv": [4, 1040, 3], "ssm": [4, 8, 128, 64], "xbc": ["R", 768], "readout": ["R", 512]},
     None, None),
    ("rms_norm_rotary", "bfloat16[B, S, 4, 16] x, float[16] g, int64[B, S] pos, float[M, 4] cos, float[M, 4] sin",
     "y, n = com.microsoft.RMSNormRotary<rotary_embedding_dim=8>(x, g, pos, cos, sin)",
     "bfloat16 y, float n", {"y": ["B", "S", 64], "n": ["B", "S", 4, 16]}, None, None),
    ("rms_norm_rotary_flat", "bfloat16[B, S, 4, 16] x, float[8] g, int64[B, S] pos, float[M, 4] cos, float[M, 4] sin",
     "y = com.microsoft.RMSNormRotary<rotary_embedding_dim=8, input_width=8, flatten_batch=1, output_fp16=1>(x, g, pos, cos, sin)",
     "float16 y", {"y": [1, "B*S", 32]}, None, None),
    ("dynamic_sparse_attention", "float16[B, S, 32] q, float16[B, S, 16] k, float16[B, S, 16] v, float16[B, 2, MAX, 8] pk, float16[B, 2, MAX, 8] pv, int32[T, 4] sel, int32[T] cnt, int32[B] sk, int32 tsl",
     "y, present_k, present_v = com.microsoft.DynamicSparseAttention<num_heads=4, kv_num_heads=2>(q, k, v, pk, pv, , , sel, cnt, sk, tsl)",
     "float16 y, float16 present_k, float16 present_v",
     {"y": ["B", "S", 32], "present_k": ["B", 2, "?", 8]}, None, None),
    ("sparse_paged_attention", "float16[T, 32] q, float16[T, 16] k, float16[T, 16] v, float16[L, 16, 2, 8] kc, float16[L, 16, 2, 8] vc, int32[S] cu, int32[B] past, int32[B, MAX] table, int32[T, 4] sel, int32[T] cnt",
     "y, kco, vco = com.microsoft.SparsePagedAttention<num_heads=4, kv_num_heads=2>(q, k, v, kc, vc, cu, past, table, , sel, cnt)",
     "float16 y, float16 kco, float16 vco", {"y": ["T", 32], "kco": ["L", 16, 2, 8]}, None, None),
    ("indexer_qsa", "float16[B, S, 32] q, float16[B, S, 8] k, float16[8] qn, float16[8] kn, float16[M, 4] cos, float16[M, 4] sin, float16[B, P, 8] pk",
     'idx, present = com.microsoft.SparseAttentionIndexer<policy_mode="qsa", token_budget=64, compress_ratio=4>(q, k, qn, kn, cos, sin, , pk)',
     "int32 idx, float16 present", {"idx": ["B", "S", 67], "present": ["B", "P+S", 8]}, None, None),
    ("indexer_csa_capacity", "float16[B, S, 32] q, float16[B, S, 16] k, float16[8] qn, float16[8] kn, float16[M, 4] cos, float16[M, 4] sin, float16[B, MAX, 8] pk, int32[1] psl",
     'idx, present = com.microsoft.SparseAttentionIndexer<policy_mode="csa", index_topk=16, compress_ratio=4>(q, k, qn, kn, cos, sin, , pk, , , , , psl)',
     "int32 idx, float16 present", {"idx": ["B", "S", 16], "present": ["B", "MAX", 8]}, None, None),
    ("conv_state_replay", "float16[A] src, float16[P] cap, float16[D] dst, int64[8] meta",
     "out = com.microsoft.ConvStateReplay(src, cap, dst, meta)", "float16 out", {"out": ["D"]}, None, None),
]  # fmt: skip

STATE_BINDINGS = {
    "BS": [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 2, "S": 0}],
    "BL": [{"B": 2, "L": 5}, {"B": 1, "L": 1}, {"B": 0, "L": 3}],
    "TCN": [{"T": 6, "C": 3, "N": 2}, {"T": 1, "C": 2, "N": 1}, {"T": 4, "C": 2, "N": 1}],
    "BS1": [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 3, "S": 2}],
}


def _state_feeds(inputs: str):
    feeds = {
        "cu": lambda b: np.linspace(0, b["T"], b["C"]).astype(np.int32),
        "msl": lambda b: np.full((b["B"],), 6, np.int32),
    }
    return {k: v for k, v in feeds.items() if f"] {k}" in inputs}


@pytest.mark.parametrize(
    ("inputs", "body", "outputs", "expected", "bindings"),
    [c[1:6] for c in STATE_CASES],
    ids=[c[0] for c in STATE_CASES],
)
def test_state_ops(inputs, body, outputs, expected, bindings):
    text = _model(inputs, body, outputs)
    if bindings is None:
        inferred = infer(text)
    else:
        inferred = check_against_ort(text, STATE_BINDINGS[bindings], _state_feeds(inputs))
    _check(inferred, expected)


# ----------------------------------------------------------------------------------------
# com.microsoft Attention (hook in contrib.py): every mask_index format leaves the shapes
# ----------------------------------------------------------------------------------------
MASK_FORMATS = [
    ("right_padding_lengths", "int32[B] mask", lambda b: np.full((b["B"],), b["S"], np.int32)),
    ("left_padding_ends_starts", "int32[M2] mask",
     lambda b: np.concatenate([np.full((b["B"],), b["P"] + b["S"]), np.zeros(b["B"])]).astype(np.int32)),
    ("raw_2d", "int32[B, T] mask", lambda b: np.ones((b["B"], b["P"] + b["S"]), np.int32)),
    ("raw_3d", "int32[B, S, T] mask", lambda b: np.ones((b["B"], b["S"], b["P"] + b["S"]), np.int32)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("decl", "make"), [m[1:] for m in MASK_FORMATS], ids=[m[0] for m in MASK_FORMATS]
)
def test_attention_mask_formats(decl, make):
    inputs = (
        f"float[B, S, 8] x, float[8, 24] w, float[24] b, {decl}, float[2, B, 2, P, 4] past"
    )
    body = "y, present = com.microsoft.Attention<num_heads=2>(x, w, b, mask, past)"
    bindings = [
        dict(b, T=b["P"] + b["S"], M2=2 * b["B"])
        for b in ({"B": 2, "S": 3, "P": 4}, {"B": 1, "S": 1, "P": 0}, {"B": 3, "S": 2, "P": 1})
    ]
    inferred = check_against_ort(
        _model(inputs, body, "float y, float present"), bindings, {"mask": make}
    )
    _check(inferred, {"y": ["B", "S", 8], "present": [2, "B", 2, "P+S", 4]})


# ----------------------------------------------------------------------------------------
# com.microsoft GroupQueryAttention (hook in contrib.py): the GenAI export's mask plumbing
# ----------------------------------------------------------------------------------------
def test_gqa_lengths_from_the_attention_mask_are_shape_values():
    """total_sequence_length = mask width (a shape value); seqlens_k = row sums - 1 (data)."""
    inputs = (
        "float[B, S, 32] q, float[B, S, 16] k, float[B, S, 16] v, "
        "float[B, 2, P, 8] pk, float[B, 2, P, 8] pv, int64[B, T] mask"
    )
    body = """
        one = Constant<value=int64 {1}>()
        axes = Constant<value=int64[1] {1}>()
        mask_shape = Shape(mask)
        width = Gather<axis=0>(mask_shape, one)
        total = Cast<to=6>(width)
        sums = ReduceSum<keepdims=0>(mask, axes)
        last = Sub(sums, one)
        seqlens = Cast<to=6>(last)
        y, present_k, present_v = com.microsoft.GroupQueryAttention<num_heads=4, kv_num_heads=2>(q, k, v, pk, pv, seqlens, total)
    """
    bindings = [{"B": 1, "S": 3, "P": 4}, {"B": 2, "S": 1, "P": 5}, {"B": 1, "S": 2, "P": 0}]
    bindings = [dict(b, T=b["P"] + b["S"]) for b in bindings]
    feeds = {"mask": lambda b: np.ones((b["B"], b["T"]), np.int64)}
    inferred = check_against_ort(
        _model(inputs, body, "float y, float present_k, float present_v"), bindings, feeds
    )
    assert inferred.elements("total") == ["T"]
    present = inferred.dims("present_k")
    assert present[:2] == (expr.sym("B"), 2) and present[3] == 8
    assert expr.evaluate(present[2], {"P": 4, "T": 7}) == 7
    assert expr.evaluate(present[2], {"P": 9, "T": 7}) == 9  # max(past, total)
