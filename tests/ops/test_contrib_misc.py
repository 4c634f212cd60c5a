"""com.microsoft math, indexing, norm and text ops, checked against onnxruntime where it has
a CPU kernel; otherwise against the shapes the op schema documents."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, check_runs, infer, model_text


def _model(inputs: str, body: str, outputs: str) -> str:
    return model_text(17, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1})


SIZES = [{"B": 2, "S": 3, "N": 4}, {"B": 1, "S": 1, "N": 1}, {"B": 3, "S": 0, "N": 2}]
POOL_SIZES = [{"B": 2, "S": 3, "N": 4}, {"B": 1, "S": 1, "N": 1}, {"B": 0, "S": 2, "N": 5}]
NONEMPTY = [{"B": 2, "S": 3, "N": 4}, {"B": 1, "S": 1, "N": 1}, {"B": 3, "S": 2, "N": 0}]

# (id, inputs, body, outputs, expected shapes by output name, bindings or None: no CPU kernel)
CASES = [
    ("gather_nd", "float[B, S, 4] x, int64[N, 2] i", "y = com.microsoft.GatherND(x, i)",
     "float y", {"y": ["N", 4]}, NONEMPTY),
    ("pad_2d_pads", "float[B, S] x", """
        p = Constant<value=int64[1, 4] {1, 0, 2, 3}>()
        y = com.microsoft.Pad(x, p)""", "float y", {"y": ["B+3", "S+3"]}, SIZES),
    ("pad_1d_pads", "float[B, S] x", """
        p = Constant<value=int64[4] {0, 1, 0, 2}>()
        y = com.microsoft.Pad<mode="edge">(x, p)""", "float y", {"y": ["B", "S+3"]},
     [{"B": 2, "S": 3}, {"B": 1, "S": 1}]),
    ("trilu", "float[B, S, N] x", "y = com.microsoft.Trilu<upper=0>(x)", "float y",
     {"y": ["B", "S", "N"]}, SIZES),
    ("range_no_delta", "float[B] x", """
        a = Constant<value=int64 {2}>()
        b = Constant<value=int64 {7}>()
        y = com.microsoft.Range(a, b)""", "int64 y", {"y": [5]}, SIZES),
    ("range_delta", "float[B] x", """
        a = Constant<value=int32 {10}>()
        b = Constant<value=int32 {1}>()
        d = Constant<value=int32 {-3}>()
        y = com.microsoft.Range(a, b, d)""", "int32 y", {"y": [3]}, SIZES),
    ("maxpool_with_mask", "float[B, 2, S, N] x, int32[B, 1, S, N] m",
     "y = com.microsoft.MaxpoolWithMask<kernel_shape=[2, 2], pads=[1, 1, 1, 1], strides=[2, 2]>(x, m)",
     "float y", {"y": ["B", 2, "S//2+1", "N//2+1"]}, POOL_SIZES),
    ("conv_transpose_const_pads", "float[B, 2, S, N] x, float[2, 3, 2, 2] w", """
        p = Constant<value=int64[4] {1, 0, 0, 1}>()
        y = com.microsoft.ConvTransposeWithDynamicPads<strides=[2, 2]>(x, w, p)""",
     "float y", {"y": ["B", 3, "2*S-1", "2*N-1"]}, POOL_SIZES),
    ("conv_transpose_runtime_pads", "float[B, 2, S, N] x, float[2, 3, 2, 2] w, int64[4] pads",
     "y = com.microsoft.ConvTransposeWithDynamicPads(x, w, pads)",
     "float y", {"y": ["B", 3, "?", "?"]}, POOL_SIZES),
    ("inverse", "float[B, N, N] x", "y = com.microsoft.Inverse(x)", "float y",
     {"y": ["B", "N", "N"]}, SIZES),
    ("sample_op", "float[B, S] x", "y = com.microsoft.SampleOp(x)", "float y",
     {"y": ["B", "S"]}, SIZES),
    ("scaled_silu", "float[B, S] x", "y = com.microsoft.ScaledSiLU<alpha=0.5>(x)", "float y",
     {"y": ["B", "S"]}, SIZES),
    ("branchwise_rms_norm", "float[B, S, 4, N] x, float[N] g",
     "y = com.microsoft.BranchwiseRMSNorm(x, g)", "float y", {"y": ["B", "S", 4, "N"]}, SIZES),
    ("gated_rms_norm", "float[B, S, 8] x, float[4] g, float[B, S, 8] z",
     "y = com.microsoft.GatedRMSNorm<activation=\"silu\">(x, g, z)", "float y",
     {"y": ["B", "S", 8]}, SIZES),
    ("murmur_hash_positive", "int32[B, S] x", "y = com.microsoft.MurmurHash3(x)", "uint32 y",
     {"y": ["B", "S"]}, SIZES),
    ("murmur_hash_signed", "string[B] x", "y = com.microsoft.MurmurHash3<positive=0>(x)",
     "int32 y", {"y": ["B"]}, None),
    ("gated_add", "float[B, S, N] x, float[B, S, N] y, float[B, S, 1] g",
     "out = com.microsoft.GatedAdd(x, y, g)", "float out", {"out": ["B", "S", "N"]}, SIZES),
    ("engram_gate", "float[B, S, 2, 8] k, float[B, S, 2, 8] q, float[B, S, 8] v, float[2, 8] ks, float[2, 8] qs, float[2, 8] cs",
     "out, normed = com.microsoft.EngramGate(k, q, v, ks, qs, cs)", "float out, float normed",
     {"out": ["B", "S", 2, 8], "normed": ["B", "S", 2, 8]}, SIZES),
    ("hc_pre_mix_grouped", "float[B, S, 4, N] x, float[B, S, 4] mix",
     "y = com.microsoft.HyperConnectionPreMix(x, mix)", "float y", {"y": ["B", "S", "N"]}, SIZES),
    ("hc_pre_mix_flat", "float[B, S, 12] x, float[B, S, 4] mix",
     "y = com.microsoft.HyperConnectionPreMix<num_branches=4>(x, mix)", "float y",
     {"y": ["B", "S", 3]}, SIZES),
    ("hc_post_mix", "float[B, S, 4, N] x, float[B, S, N] o, float[B, S, 4] mix",
     "y = com.microsoft.HyperConnectionPostMix(x, o, mix)", "float y",
     {"y": ["B", "S", 4, "N"]}, SIZES),
    ("cdist", "float[S, 3] a, float[N, 3] b", "c = com.microsoft.CDist<metric=\"euclidean\">(a, b)",
     "float c", {"c": ["S", "N"]}, SIZES),
    ("matmul_integer16", "int16[B, S, 3] a, int16[3, N] b", "y = com.microsoft.MatMulInteger16(a, b)",
     "int32 y", {"y": ["B", "S", "N"]}, SIZES),
    ("expand_dims", "float[B, S] x", """
        a = Constant<value=int32 {-1}>()
        y = com.microsoft.ExpandDims(x, a)""", "float y", {"y": ["B", "S", 1]}, SIZES),
    ("expand_dims_front", "float[B, S] x", """
        a = Constant<value=int32 {0}>()
        y = com.microsoft.ExpandDims(x, a)""", "float y", {"y": [1, "B", "S"]}, SIZES),
    ("unfold", "float[B, N, 5] x", "y = com.microsoft.UnfoldTensor<dim=1, size=1, step=2>(x)",
     "float y", {"y": ["B", "(N-1)//2+1", 5, 1]}, SIZES[:2]),
    ("unfold_last", "float[B, 7] x", "y = com.microsoft.UnfoldTensor<size=3, step=2>(x)",
     "float y", {"y": ["B", 3, 3]}, SIZES),
    ("grid_sample", "float[B, 3, S, N] x, float[B, 5, 6, 2] g",
     "y = com.microsoft.GridSample(x, g)", "float y", {"y": ["B", 3, 5, 6]}, POOL_SIZES),
    ("crop_and_resize", "float[B, 3, 8, 8] x, float[N, 4] rois, int32[N] idx", """
        c = Constant<value=int32[2] {5, 6}>()
        y = com.microsoft.CropAndResize(x, rois, idx, c)""", "float y",
     {"y": ["N", 3, 5, 6]}, SIZES),
    ("word_conv_embedding", "int32[S, 6] seq, float[5, 1, 2, 3] w, float[5] b, float[10, 3] c",
     "y = com.microsoft.WordConvEmbedding(seq, w, b, c)", "float y", {"y": ["S", 5]}, SIZES),
    ("unique", "float[N] x", "y, idx, counts = com.microsoft.Unique(x)",
     "float y, int64 idx, int64 counts", {"y": ["?"], "idx": ["N"], "counts": ["?"]}, SIZES),
    ("dtw", "float[S, N] x", "y = com.microsoft.DynamicTimeWarping(x)", "int32 y",
     {"y": [2, "?"]}, [{"S": 3, "N": 4}, {"S": 1, "N": 1}, {"S": 5, "N": 2}]),
    ("moe_packed_tokens", "float[N, 8] x, float[N, 4] r, float[4, 6, 8] w1, float[4, 8, 6] w2",
     'y = com.microsoft.MoE<k=2, activation_type="relu">(x, r, w1, , w2)', "float y",
     {"y": ["N", 8]}, SIZES),
    ("moe_3d", "float[B, S, 8] x, float[N, 4] r, float[4, 6, 8] w1, float[4, 8, 6] w2",
     'y = com.microsoft.MoE<k=1, activation_type="gelu">(x, r, w1, , w2)', "float y",
     {"y": ["B", "S", 8]}, [{"B": 2, "S": 3, "N": 6}, {"B": 1, "S": 1, "N": 1}, {"B": 2, "S": 0, "N": 0}]),
    ("qmoe", "float[N, 8] x, float[N, 4] r, uint8[4, 6, 4] w1, float[4, 6] s1, uint8[4, 8, 3] w2, float[4, 8] s2",
     'y = com.microsoft.QMoE<k=1, activation_type="relu", expert_weight_bits=4>(x, r, w1, s1, , w2, s2)',
     "float y", {"y": ["N", 8]}, SIZES),
    ("moe_group_router", "float[N, 8] logits, float[8] bias",
     "p = com.microsoft.MoEGroupRouter<top_k=2, n_group=2, topk_group=1, group_topk=2>(logits, bias)",
     "float p", {"p": ["N", 8]}, SIZES),
    # No CPU kernel: expected shapes from the schemas.
    ("moe_packed", "float16[N, 8] x, float[N, 4] r, uint8[4, 6, 4] g, uint8[4, 6, 4] u, uint8[4, 8, 3] d",
     "y = com.microsoft.MoEPacked<k=1, gate_type=1, up_type=1, down_type=1>(x, r, g, u, d)", "float16 y",
     {"y": ["N", 8]}, None),
    ("router_gate_up_proj", "float16[B, S, 8] x, float16[8, 20] w",
     "router, act = com.microsoft.RouterGateUpProj<router_size=4>(x, w)", "float16 router, float16 act",
     {"router": ["B", "S", 4], "act": ["B", "S", 8]}, None),
    ("hc_low_rank_mix", "float[B, S, 12] x, float[12] ns, float[12, 2] dw, float[2, 12] uw, float[12, 4] iw",
     "pre, gate, out = com.microsoft.HyperConnectionLowRankMix<num_branches=4>(x, ns, dw, uw, iw)",
     "float pre, float gate, float out", {"pre": ["B", "S", 3], "gate": ["B", "S", 4], "out": ["B", "S", 12]}, None),
    ("quantize_bfp_roundtrip", "float[B, S] x", """
        q, shape, strides = com.microsoft.QuantizeBFP<bfp_type=1>(x)
        y = com.microsoft.DequantizeBFP<bfp_type=1>(q, shape, strides)""", "float y",
     {"y": ["B", "S"], "shape": [2], "q": ["?"]}, None),
    ("group_norm", "float16[B, S, N, 8] x, float[8] g, float[8] b",
     "y = com.microsoft.GroupNorm<groups=4, activation=0, epsilon=1e-5>(x, g, b)",
     "float16 y", {"y": ["B", "S", "N", 8]}, None),
    ("complex_mul", "float[B, 1, N, 2] a, float[S, N, 2] b", "c = com.microsoft.ComplexMul(a, b)",
     "float c", {"c": ["B", "S", "N", 2]}, None),
    ("mul_integer", "int8[B, S] a, int8 az, int8[S] b", "c = com.microsoft.MulInteger(a, az, b)",
     "int32 c", {"c": ["B", "S"]}, None),
    ("reduce_sum_integer", "int8[B, S, N] x",
     "y = com.microsoft.ReduceSumInteger<axes=[1], keepdims=0>(x)", "int32 y", {"y": ["B", "N"]}, None),
    ("rfft", "float[B, 8] x", "y = com.microsoft.Rfft<signal_ndim=1>(x)", "float y",
     {"y": ["B", 5, 2]}, None),
    ("rfft_symbolic", "float[B, N] x", "y = com.microsoft.Rfft<signal_ndim=1>(x)", "float y",
     {"y": ["B", "N//2+1", 2]}, None),
    ("irfft", "float[B, N, 2] x", "y = com.microsoft.Irfft<signal_ndim=1>(x)", "float y",
     {"y": ["B", "2*N-2"]}, None),
    ("swiglu_packed", "float[B, S, 8] g", "y = com.microsoft.SwiGLU(g)", "float y",
     {"y": ["B", "S", 4]}, None),
    ("swiglu_separate", "float[B, S, N] g, float[B, S, N] u", "y = com.microsoft.SwiGLU(g, u)",
     "float y", {"y": ["B", "S", "N"]}, None),
    ("is_all_finite", "float[B] a, float[S, N] b", "y = com.microsoft.IsAllFinite(a, b)",
     "bool y", {"y": []}, None),
    ("torch_embedding", "float[10, 4] w, int64[B, S] i", "y = com.microsoft.TorchEmbedding(w, i)",
     "float y", {"y": ["B", "S", 4]}, None),
    ("bitmask_dropout", "float[B, 40] x", "y, mask = com.microsoft.BitmaskDropout(x)",
     "float y, uint32 mask", {"y": ["B", 40], "mask": ["(40*B+31)//32"]}, None),
    ("quantize_with_order", "float16[B, S, 8] x, float s",
     "y = com.microsoft.QuantizeWithOrder<order_input=1, order_output=1>(x, s)", "int8 y",
     {"y": ["B", "S", 8]}, None),
    ("dequantize_with_order", "int8[B, S, 8] x, float s",
     "y = com.microsoft.DequantizeWithOrder<order_input=1, order_output=1, to=10>(x, s)",
     "float16 y", {"y": ["B", "S", 8]}, None),
    ("qordered_matmul", "int8[B, S, 8] a, float sa, int8[8, N] b, float sb, float sy",
     "y = com.microsoft.QOrderedMatMul<order_A=1, order_B=1, order_Y=1>(a, sa, b, sb, sy)",
     "int8 y", {"y": ["B", "S", "N"]}, None),
    ("gemm_float8", "float8e4m3fn[S, 8] a, float8e4m3fn[N, 8] b",
     "y = com.microsoft.GemmFloat8<transB=1, dtype=10>(a, b)", "float16 y", {"y": ["S", "N"]}, None),
    ("matmul_fp8_weight", "float16[B, S, 32] a, float8e4m3fn[N, 32] b, float[N, 1] s",
     "y = com.microsoft.MatMulBlockQuantizedFp8Weight<block_size=32>(a, b, s)", "float16 y",
     {"y": ["B", "S", "N"]}, None),
]  # fmt: skip


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
            {"B": 2, "S": 3, "N": 4},
            {"B": 1, "S": 5, "N": 9},
            {"B": 0, "S": 1, "N": 2},
        ):
            if expr.evaluate(g, binding) != expr.evaluate(w_dim, binding):
                return False
    return True


@pytest.mark.parametrize(
    ("inputs", "body", "outputs", "expected", "bindings"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_contrib_misc(inputs, body, outputs, expected, bindings):
    text = _model(inputs, body, outputs)
    inferred = check_against_ort(text, bindings) if bindings else infer(text)
    assert not inferred.errors, inferred.errors
    for name, want in expected.items():
        assert _equal(inferred.dims(name), want), (name, inferred.shape(name), want)


def test_unique_and_dtw_record_bounds():
    text = _model(
        "float[N] x, float[S, N] c",
        """
        y, idx, counts = com.microsoft.Unique(x)
        path = com.microsoft.DynamicTimeWarping(c)
        """,
        "float y, int64 idx, int64 counts, int32 path",
    )
    inferred = infer(text)
    unique = inferred.dims("y")[0]
    assert inferred.dims("counts")[0] is unique
    assert inferred.context.has_less_equal_constraint(unique, expr.sym("N"))
    length = inferred.dims("path")[1]
    assert inferred.context.has_less_equal_constraint(length, expr.parse_dim("S+N"))


def test_tokenizer_fresh_token_count():
    # [B, S] may be empty, and an empty X keeps its rank: the rank is unknown here
    # (tests/ops/test_contrib_misc_edges.py has the provably empty and non-empty forms).
    text = _model(
        "string[B, S] x",
        'y = com.microsoft.Tokenizer<mark=0, mincharnum=1, pad_value="#", separators=[" "]>(x)',
        "string y",
    )
    inferred = infer(text)
    assert inferred.dims("y") is None
    check_runs(inferred, [
        {"x": np.array([["a b", "c"], ["d e f", ""]], dtype=object)},
        {"x": np.array([["a"]], dtype=object)},
    ])  # fmt: skip


def test_matmul_fp_q4_schema():
    # The CPU kernel needs B prepacked by MLAS (no public packer): shapes from B_shape.
    text = _model(
        "float[B, S, 32] a, uint8[400] b",
        """
        shape = Constant<value=int64[2] {32, 6}>()
        y = com.microsoft.MatMulFpQ4<blk_quant_type=1>(a, b, shape)
        """,
        "float y",
    )
    assert infer(text).shape("y") == ["B", "S", 6]


MALFORMED = [
    ("float[S, 3] a, float[N, 4] b", "c = com.microsoft.CDist(a, b)"),
    ("float[B, 3, 4, 4] x, float[B, 5, 6, 3] g", "y = com.microsoft.GridSample(x, g)"),
    ("float[B, 7] x", "y = com.microsoft.SwiGLU(x)"),
    ("float[B, 2] x", "y = com.microsoft.UnfoldTensor<size=3>(x)"),
    ("float[B, S] x", "y = com.microsoft.Unique(x)"),
    ("float[B, S, 10] x, float[B, S, 4] m", "y = com.microsoft.HyperConnectionPreMix<num_branches=4>(x, m)"),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "body"), MALFORMED)
def test_malformed_is_a_diagnostic(inputs, body):
    inferred = infer(_model(inputs, body, "float y"))
    assert inferred.errors


def test_dequantize_with_order_dtype():
    text = _model(
        "int8[B, 8] x, float s",
        "y = com.microsoft.DequantizeWithOrder<order_input=1, order_output=1>(x, s)",
        "float y",
    )
    assert infer(text).dtype("y") == ir.DataType.FLOAT
