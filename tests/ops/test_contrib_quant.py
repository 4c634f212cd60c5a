"""onnxruntime's quantized contrib ops (``com.microsoft``), checked against its CPU kernels.

Scales and zero points are constants (a run reads their values, never their shapes
beyond scalar / per-axis); the quantized tensors are fed as zeros by the oracle.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims

MS = "com.microsoft"

# Per-tensor quantization parameters: float scales s*, uint8 zero points z*, int8 zi*.
QPARAMS = (
    "float sa = {0.1}, uint8 za = {3}, float sb = {0.2}, uint8 zb = {5}, "
    "float sy = {0.3}, uint8 zy = {7}, int8 zi = {0}, float sw = {0.05}"
)


def _model(inputs: str, body: str, outputs: str, constants: str = QPARAMS) -> str:
    return model_text(
        17, inputs, body, outputs, constants=constants, ir_version=10, domains={MS: 1}
    )


def _no_fresh(inferred, name: str) -> bool:
    return not any(
        inferred.context.is_generated(s)
        for d in inferred.dims(name)
        if isinstance(d, expr.DimExpr)
        for s in d.symbols()
    )


IMAGE_BINDINGS = [
    {"N": 2, "H": 9, "W": 12},
    {"N": 1, "H": 1, "W": 7},
    {"N": 0, "H": 6, "W": 5},
    {"N": 3, "H": 16, "W": 1},
]


# ----------------------------------------------------------------------------------------
# Convolution and pooling
# ----------------------------------------------------------------------------------------
QLINEAR_CONV_CASES = [
    # (x, w, attributes, expected)
    ("N, 3, H, W", "4, 3, 1, 1", "", ["N", 4, "H", "W"]),
    ("N, 3, H, W", "4, 3, 3, 3", "pads=[1, 1, 1, 1], strides=[2, 2]",
     ["N", 4, "(H - 1)//2 + 1", "(W - 1)//2 + 1"]),
    ("N, H, W, 3", "4, 3, 1, 1", "channels_last=1", ["N", "H", "W", 4]),
    ("N, H, W, 3", "4, 3, 3, 3", "channels_last=1, pads=[1, 1, 1, 1]", ["N", "H", "W", 4]),
    ("N, H, W, 6", "6, 1, 3, 3", 'channels_last=1, group=6, auto_pad="SAME_UPPER", strides=[2, 1]',
     ["N", "(H + 1)//2", "W", 6]),
]  # fmt: skip


@pytest.mark.parametrize(("x", "w", "attrs", "expected"), QLINEAR_CONV_CASES)
def test_qlinear_conv(x, w, attrs, expected):
    call = f"{MS}.QLinearConv<{attrs}>" if attrs else f"{MS}.QLinearConv"
    text = _model(
        f"uint8[{x}] x, int8[{w}] w",
        f"y = {call}(x, sa, za, w, sw, zi, sy, zy)",
        "uint8 y",
    )
    inferred = check_against_ort(text, IMAGE_BINDINGS)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")
    assert inferred.dtype("y") == ir.DataType.UINT8


def test_qlinear_conv_channels_last_channel_mismatch_is_a_diagnostic():
    text = _model(
        "uint8[N, H, W, 3] x, int8[4, 2, 1, 1] w",
        f"y = {MS}.QLinearConv<channels_last=1>(x, sa, za, w, sw, zi, sy, zy)",
        "uint8 y",
    )
    assert infer(text).errors


@pytest.mark.parametrize(("x", "attrs"), [
    ("N, 8, H, W", "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]"),
    ("N, 8, H, W", "kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1"),
    ("N, H, W, 8", "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], channels_last=1"),
    ("N, H, W, 8", 'kernel_shape=[2, 2], auto_pad="SAME_UPPER", channels_last=1, count_include_pad=1'),
])  # fmt: skip
def test_qlinear_average_pool(x, attrs):
    text = _model(
        f"uint8[{x}] x", f"y = {MS}.QLinearAveragePool<{attrs}>(x, sa, za, sy, zy)", "uint8 y"
    )
    inferred = check_against_ort(text, IMAGE_BINDINGS)
    dims = inferred.dims("y")
    channels_last = "channels_last=1" in attrs
    assert dims[0] == expr.sym("N") and dims[-1 if channels_last else 1] == 8
    assert _no_fresh(inferred, "y")


@pytest.mark.parametrize(("x", "attrs", "expected"), [
    ("N, 8, H, W", "", ["N", 8, 1, 1]),
    ("N, H, W, 8", "<channels_last=1>", ["N", 1, 1, 8]),
])  # fmt: skip
def test_qlinear_global_average_pool(x, attrs, expected):
    text = _model(
        f"uint8[{x}] x",
        f"y = {MS}.QLinearGlobalAveragePool{attrs}(x, sa, za, sy, zy)",
        "uint8 y",
    )
    inferred = check_against_ort(text, [b for b in IMAGE_BINDINGS if b["H"] * b["W"]])
    assert same_dims(inferred.dims("y"), expected)


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------
SEQ_BINDINGS = [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 0, "S": 4}]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize(("a", "b", "expected"), [
    ("B, S, 8", "8", ["B", "S", 8]),
    ("B, S, 8", "B, 1, 8", ["B", "S", 8]),
    ("1", "B, S", ["B", "S"]),
    ("B, S, 8", "B, S, 8", ["B", "S", 8]),
])  # fmt: skip
def test_qlinear_binary(op, a, b, expected):
    text = _model(
        f"uint8[{a}] a, uint8[{b}] b",
        f"y = {MS}.{op}(a, sa, za, b, sb, zb, sy, zy)",
        "uint8 y",
    )
    inferred = check_against_ort(text, SEQ_BINDINGS)
    assert same_dims(inferred.dims("y"), expected)


def test_qlinear_binary_mismatch_is_a_diagnostic():
    text = _model(
        "uint8[B, 3] a, uint8[B, 4] b", f"y = {MS}.QLinearAdd(a, sa, za, b, sb, zb, sy, zy)",
        "uint8 y",
    )  # fmt: skip
    assert infer(text).errors


def test_qlinear_where():
    text = _model(
        "bool[B, 1] c, uint8[B, S] x, uint8[S] y",
        f"z = {MS}.QLinearWhere(c, x, sa, za, y, sb, za, sy, zy)",
        "uint8 z",
    )
    inferred = check_against_ort(text, SEQ_BINDINGS)
    assert same_dims(inferred.dims("z"), ["B", "S"])


@pytest.mark.parametrize(("op", "attrs"), [
    ("QLinearSoftmax", "<opset=13, axis=-1>"),
    ("QLinearSoftmax", "<opset=11, axis=1>"),
    ("QLinearSigmoid", ""),
    ("QLinearLeakyRelu", "<alpha=0.2>"),
])  # fmt: skip
def test_qlinear_unary(op, attrs):
    text = _model("uint8[B, S, 8] x", f"y = {MS}.{op}{attrs}(x, sa, za, sy, zy)", "uint8 y")
    inferred = check_against_ort(text, SEQ_BINDINGS)
    assert same_dims(inferred.dims("y"), ["B", "S", 8])


@pytest.mark.parametrize(("axis", "expected"), [
    (1, ["B", "S + T + 5", 8]),
    (-1, None),
])  # fmt: skip
def test_qlinear_concat(axis, expected):
    if expected is None:
        inputs = "uint8[B, S, 8] a, uint8[B, S, 3] b, uint8[B, S, 1] c"
        expected = ["B", "S", 12]
    else:
        inputs = "uint8[B, S, 8] a, uint8[B, T, 8] b, uint8[B, 5, 8] c"
    body = f"y = {MS}.QLinearConcat<axis={axis}>(sy, zy, a, sa, za, b, sb, zb, c, sa, za)"
    bindings = [{**b, "T": 2 * b["S"] + 1} for b in SEQ_BINDINGS]
    inferred = check_against_ort(_model(inputs, body, "uint8 y"), bindings)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_qlinear_concat_bad_arity_is_a_diagnostic():
    body = f"y = {MS}.QLinearConcat<axis=0>(sy, zy, a, sa)"
    assert infer(_model("uint8[B, 8] a", body, "uint8 y")).errors


@pytest.mark.parametrize(("attrs", "expected"), [
    ("axes=[1], keepdims=1", ["B", 1, 8]),
    ("axes=[1, 2], keepdims=0", ["B"]),
    ("axes=[-1], keepdims=0", ["B", "S"]),
])  # fmt: skip
def test_qlinear_reduce_mean(attrs, expected):
    # No CPU kernel: the ReduceMean shape (schema).
    text = _model(
        "uint8[B, S, 8] x",
        f"y = {MS}.QLinearReduceMean<{attrs}>(x, sa, za, sy, zy)",
        "uint8 y",
    )
    assert same_dims(infer(text).dims("y"), expected)


def _qdq_text(zero_point: str) -> str:
    constants = QPARAMS + ", int16 z16 = {1}, int4 z4 = {1}, uint4 zu4 = {1}"
    args = f"x, sy, {zero_point}" if zero_point else "x, sy"
    body = f"""
        q = {MS}.QuantizeLinear({args})
        y = {MS}.DequantizeLinear(q, sy{", " + zero_point if zero_point else ""})
    """
    return _model("float[B, S, 8] x", body, "float y", constants)


@pytest.mark.parametrize(("zero_point", "dtype"), [
    ("zy", "uint8"), ("zi", "int8"), ("z16", "int16"), ("", "uint8"),
])  # fmt: skip
def test_quantize_dequantize_linear(zero_point, dtype):
    inferred = check_against_ort(_qdq_text(zero_point), SEQ_BINDINGS)
    assert same_dims(inferred.dims("q"), ["B", "S", 8])
    assert same_dims(inferred.dims("y"), ["B", "S", 8])
    assert inferred.dtype("q") == getattr(ir.DataType, dtype.upper())
    assert inferred.dtype("y") == ir.DataType.FLOAT


@pytest.mark.parametrize(("zero_point", "dtype"), [("z4", "INT4"), ("zu4", "UINT4")])
def test_quantize_dequantize_linear_4_bit(zero_point, dtype):
    """onnxruntime's Python API cannot return a 4-bit tensor: only y is fetched."""
    import onnxruntime as ort

    inferred = infer(_qdq_text(zero_point))
    assert inferred.dtype("q") == getattr(ir.DataType, dtype)
    session = ort.InferenceSession(
        ir.serde.serialize_model(inferred.model).SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    for binding in SEQ_BINDINGS:
        x = np.zeros((binding["B"], binding["S"], 8), np.float32)
        (y,) = session.run(["y"], {"x": x})
        for name in ("q", "y"):
            dims = inferred.dims(name)
            assert [expr.evaluate(d, binding) for d in dims] == list(y.shape)


def test_quantize_linear_per_axis():
    constants = "float[8] s = {1, 2, 3, 4, 5, 6, 7, 8}, uint8[8] z = {0, 0, 0, 0, 1, 1, 1, 1}"
    body = f"""
        q = {MS}.QuantizeLinear<axis=2>(x, s, z)
        y = {MS}.DequantizeLinear<axis=-1>(q, s, z)
    """
    inferred = check_against_ort(
        _model("float[B, S, 8] x", body, "float y", constants), SEQ_BINDINGS
    )
    assert same_dims(inferred.dims("y"), ["B", "S", 8])


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("a", "b", "attrs", "args", "out", "expected"), [
    ("M, K", "K, 6", "", "a, sa, za, b, sw, zi", "float y", ["M", 6]),
    ("K, M", "6, K", "<transA=1, transB=1, alpha=0.5>", "a, sa, za, b, sw, zi, c", "float y", ["M", 6]),
    ("M, K", "K, 6", "", "a, sa, za, b, sw, zi, c, sy, zy", "uint8 y", ["M", 6]),
    ("M, K", "K, 6", "", "a, sa, za, b, sw, zi, , sy", "float y", ["M", 6]),  # no zero point
])  # fmt: skip
def test_qgemm(a, b, attrs, args, out, expected):
    constants = QPARAMS + ", int32[6] c = {1, 2, 3, 4, 5, 6}"
    text = _model(
        f"uint8[{a}] a, int8[{b}] b", f"y = {MS}.QGemm{attrs}({args})", out, constants
    )
    bindings = [{"M": 3, "K": 4}, {"M": 1, "K": 1}, {"M": 0, "K": 2}]
    inferred = check_against_ort(text, bindings)
    assert same_dims(inferred.dims("y"), expected)
    assert inferred.dtype("y") == (ir.DataType.UINT8 if "uint8" in out else ir.DataType.FLOAT)


MATMUL_BINDINGS = [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 3, "S": 0}]


@pytest.mark.parametrize(("a", "expected"), [
    ("B, S, 8", ["B", "S", 6]), ("S, 8", ["S", 6]), ("8", [6]),
])  # fmt: skip
@pytest.mark.parametrize("bias", ["", ", bias"])
def test_dynamic_quantize_matmul(a, expected, bias):
    constants = "float sb = {0.2}, int8 zb = {0}, float[6] bias = {1, 2, 3, 4, 5, 6}"
    text = _model(
        f"float[{a}] a, int8[8, 6] b",
        f"y = {MS}.DynamicQuantizeMatMul(a, b, sb, zb{bias})",
        "float y",
        constants,
    )
    inferred = check_against_ort(text, MATMUL_BINDINGS)
    assert same_dims(inferred.dims("y"), expected)


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("B, S, 8", "8, 6", ["B", "S", 6]),
    ("B, S, 8", "B, 8, 6", ["B", "S", 6]),
])  # fmt: skip
def test_matmul_integer_to_float(a, b, expected):
    constants = "float sa = {0.1}, float sb = {0.2}, uint8 za = {1}, int8 zb = {0}"
    text = _model(
        f"uint8[{a}] a, int8[{b}] b",
        f"y = {MS}.MatMulIntegerToFloat(a, b, sa, sb, za, zb)",
        "float y",
        constants,
    )
    inferred = check_against_ort(text, MATMUL_BINDINGS)
    assert same_dims(inferred.dims("y"), expected)
    assert inferred.dtype("y") == ir.DataType.FLOAT


@pytest.mark.parametrize("quant_type", [0, 1])
@pytest.mark.parametrize(("a", "expected"), [("B, S, 32", ["B", "S", 6]), ("S, 32", ["S", 6])])
def test_matmul_bnb4(a, expected, quant_type):
    # B packs N*K 4-bit values two per byte; absmax has one value per block of 16.
    text = _model(
        f"float[{a}] a, uint8[96] b, float[12] absmax",
        f"y = {MS}.MatMulBnb4<K=32, N=6, block_size=16, quant_type={quant_type}>(a, b, absmax)",
        "float y",
        "",
    )
    inferred = check_against_ort(text, MATMUL_BINDINGS)
    assert same_dims(inferred.dims("y"), expected)


@pytest.mark.parametrize(
    ("bits", "block", "level"), [(4, 16, 0), (4, 32, 4), (8, 16, 1), (2, 16, 0)]
)
def test_matmul_nbits_bits_and_blocks(bits, block, level):
    k, n = 32, 6
    blocks = k // block
    inputs = f"float[B, S, 32] a, uint8[6, {blocks}, {block * bits // 8}] w, float[{n * blocks}] scales"
    attrs = f"K={k}, N={n}, bits={bits}, block_size={block}, accuracy_level={level}"
    text = _model(inputs, f"y = {MS}.MatMulNBits<{attrs}>(a, w, scales)", "float y", "")
    inferred = check_against_ort(text, MATMUL_BINDINGS)
    assert same_dims(inferred.dims("y"), ["B", "S", 6])


def test_matmul_nbits_fused_variants():
    # No CPU kernels: (..., N) per weight (schemas).
    inputs = "float[B, S, 32] a, float[32] g, uint8[6, 1, 16] w, float[6] s"
    body = f"""
        m, msum = {MS}.MatMulNBitsMlp<K=32, N=6, block_size=32, activation="silu">(a, a, g, w, s, , w, s)
        q, k, v, qsum = {MS}.MatMulNBitsQkv<K=32, Nq=12, Nkv=6, block_size=32>(a, a, g, w, s, , w, s, , w, s)
        r = {MS}.MatMulNBitsQLoRA<K=32, N=6>(a, w, s, w, s, w, s)
    """
    inferred = infer(_model(inputs, body, "float m, float q, float k, float r", ""))
    shapes = [inferred.shape(n) for n in ("m", "msum", "q", "k", "v", "qsum", "r")]
    assert shapes == [
        ["B", "S", 6], ["B", "S", 32], ["B", "S", 12], ["B", "S", 6], ["B", "S", 6],
        ["B", "S", 32], ["B", "S", 6],
    ]  # fmt: skip


# ----------------------------------------------------------------------------------------
# Gathers, embeddings, LSTM
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("data", "attrs", "scales", "expected"), [
    ("uint8[10, 16]", "bits=4, block_size=16", "float[10, 2]", ["B", "S", 32]),
    ("uint8[10, 32]", "bits=8, block_size=16", "float[10, 2]", ["B", "S", 32]),
    ("uint8[10, 8]", "bits=2, block_size=16", "float[10, 2]", ["B", "S", 32]),
    ("int4[10, 32]", "block_size=16", "float[10, 2]", ["B", "S", 32]),
    ("int4[10, 32]", "block_size=16, gather_axis=1, quantize_axis=0", "float[1, 32]", [10, "B", "S"]),
])  # fmt: skip
def test_gather_block_quantized(data, attrs, scales, expected):
    if data.startswith("int4"):  # no numpy int4 feed: a constant of zeros, two per int32 field
        inputs, constants = (
            f"int64[B, S] i, {scales} s",
            f"{data} d = {{{', '.join(['0'] * 160)}}}",
        )
    else:
        inputs, constants = f"{data} d, int64[B, S] i, {scales} s", ""
    text = _model(
        inputs, f"y = {MS}.GatherBlockQuantized<{attrs}>(d, i, s)", "float y", constants
    )
    inferred = check_against_ort(text, SEQ_BINDINGS)
    assert same_dims(inferred.dims("y"), expected)


def test_gather_block_quantized_packed_last_axis_is_a_diagnostic():
    text = _model(
        "uint8[10, 16] d, int64[B] i, float[10, 2] s",
        f"y = {MS}.GatherBlockQuantized<bits=4, gather_axis=1, quantize_axis=0>(d, i, s)",
        "float y",
        "",
    )
    assert infer(text).errors


def test_qembed_layer_normalization():
    inputs = (
        "int32[B, S] ids, int32[B, S] seg, uint8[10, 8] we, uint8[6, 8] pe, uint8[2, 8] se, "
        "uint8[8] g, uint8[8] b, int32[B, S] mask"
    )
    constants = "float s = {0.1}, uint8 z = {1}"
    body = f"y, mask_index = {MS}.QEmbedLayerNormalization(ids, seg, we, pe, se, g, b, mask, s, s, s, s, s, z, z, z, z, z)"
    feeds = {"mask": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32)}
    inferred = check_against_ort(
        _model(inputs, body, "float y, int32 mask_index", constants),
        [{"B": 2, "S": 3}, {"B": 1, "S": 1}],
        feeds,
    )
    assert same_dims(inferred.dims("y"), ["B", "S", 8])
    assert same_dims(inferred.dims("mask_index"), ["B"])


@pytest.mark.parametrize(("direction", "dirs"), [("forward", 1), ("bidirectional", 2)])
def test_dynamic_quantize_lstm(direction, dirs):
    inputs = f"float[T, B, 5] x, int8[{dirs}, 5, 16] w, int8[{dirs}, 4, 16] r"
    constants = f"float[{dirs}] ws = {{{', '.join(['0.1'] * dirs)}}}, int8[{dirs}] wz = {{{', '.join(['0'] * dirs)}}}"
    body = f'y, y_h, y_c = {MS}.DynamicQuantizeLSTM<hidden_size=4, direction="{direction}">(x, w, r, , , , , , ws, wz, ws, wz)'
    inferred = check_against_ort(
        _model(inputs, body, "float y, float y_h, float y_c", constants),
        [{"T": 3, "B": 2}, {"T": 1, "B": 1}],
    )
    assert same_dims(inferred.dims("y"), ["T", dirs, "B", 4])
    assert same_dims(inferred.dims("y_h"), [dirs, "B", 4])
    assert same_dims(inferred.dims("y_c"), [dirs, "B", 4])


def test_packed_weight_ops():
    # No CPU kernels (CUDA): ``(..., N)`` and ``indices.shape + (K,)`` (schemas).
    inputs = "float[B, S, 64] a, uint8[6, 36] w, uint8[100, 36] table, int64[B, S] ids"
    body = f"""
        y = {MS}.MatMulPacked<packed_type=1, N=6, K=64>(a, w)
        e = {MS}.GatherPacked<packed_type=1, K=64>(table, ids)
        f = {MS}.GatherPacked<packed_type=1, K=64, output_dtype=1>(table, ids)
    """
    inferred = infer(_model(inputs, body, "float y, bfloat16 e, float f", ""))
    assert inferred.shape("y") == ["B", "S", 6]
    assert inferred.shape("e") == ["B", "S", 64]
    assert inferred.dtype("e") == ir.DataType.BFLOAT16
    assert inferred.dtype("f") == ir.DataType.FLOAT


def test_matmul_packed_wrong_k_is_a_diagnostic():
    body = f"y = {MS}.MatMulPacked<packed_type=1, N=6, K=64>(a, w)"
    assert infer(_model("float[B, 32] a, uint8[6, 36] w", body, "float y", "")).errors


def test_dequantize_linear_float16_scale():
    """The output takes the scale's type (onnxruntime rejects a FLOAT y for FLOAT16 s)."""
    body = f"""
        q = {MS}.QuantizeLinear(x, s, zy)
        y = {MS}.DequantizeLinear(q, s, zy)
    """
    text = _model("float16[B, S, 8] x, float16 s", body, "float16 y")
    feeds = {"s": np.array(0.1, np.float16)}
    inferred = check_against_ort(text, SEQ_BINDINGS, feeds)
    assert inferred.dtype("y") == ir.DataType.FLOAT16
    assert same_dims(inferred.dims("y"), ["B", "S", 8])


UNRANKED_CASES = [
    # (call, inputs that lose their rank, rank of y if known); no diagnostic expected.
    ("QLinearConv(x, sa, za, w, sw, zi, sy, zy)", "uint8[N, 3, H, W] x, int8[4, 3, 1, 1] w", None),
    ("QLinearConv<channels_last=1>(x, sa, za, w, sw, zi, sy, zy)",
     "uint8[N, H, W, 3] x, int8[4, 3, 1, 1] w", None),
    ("QLinearAdd(x, sa, za, w, sb, zb, sy, zy)", "uint8[N, 3] x, uint8[3] w", None),
    ("QLinearConcat<axis=1>(sy, zy, x, sa, za, w, sb, zb)", "uint8[N, 3] x, uint8[N, 2] w", None),
    ("QLinearAveragePool<kernel_shape=[2, 2], channels_last=1>(x, sa, za, sy, zy)",
     "uint8[N, H, W, 3] x, uint8[1] w", 4),
    ("QLinearGlobalAveragePool<channels_last=1>(x, sa, za, sy, zy)", "uint8[N, H, W, 3] x, uint8[1] w", None),
    ("QGemm(x, sa, za, w, sw, zi)", "uint8[M, 4] x, int8[4, 6] w", 2),
    ("MatMulIntegerToFloat(x, w, sa, sw)", "uint8[M, 4] x, int8[4, 6] w", None),
    ("GatherBlockQuantized(w, x, sa)", "int64[B] x, uint8[10, 16] w", None),
    ("MatMulBnb4<K=32, N=6, block_size=16, quant_type=0>(x, w, sa)", "float[B, 32] x, uint8[96] w", None),
    ("QEmbedLayerNormalization(x, , w, w, , w, w, , sa, sa, , sa, sa, za, za, , za, za)",
     "int32[B, S] x, uint8[10, 8] w", 3),
]  # fmt: skip


@pytest.mark.parametrize(("call", "inputs", "rank"), UNRANKED_CASES)
def test_unranked_inputs_degrade_without_diagnostics(call, inputs, rank):
    float_out = call.split("(")[0].split("<")[0] in (
        "MatMulIntegerToFloat", "GatherBlockQuantized", "MatMulBnb4", "QEmbedLayerNormalization", "QGemm"
    )  # fmt: skip
    text = _model(inputs, f"y = {MS}.{call}", "float y" if float_out else "uint8 y")
    inferred = infer(text, unranked=("x", "w"))
    assert not inferred.errors, inferred.errors
    dims = inferred.dims("y")
    assert (dims is None) if rank is None else (len(dims) == rank)


@pytest.mark.parametrize(("op", "attrs", "args"), [
    ("MatMulNBits", "K=32, N=6, bits=4, block_size=32", "a, w, s"),
    ("MatMulBnb4", "K=32, N=6, block_size=16, quant_type=1", "a, b, absmax"),
])  # fmt: skip
def test_blockwise_matmul_pins_a_symbolic_k(op, attrs, args):
    inputs = "float[B, D] a, uint8[6, 1, 16] w, float[6] s, uint8[96] b, float[12] absmax"
    inferred = infer(_model(inputs, f"y = {MS}.{op}<{attrs}>({args})", "float y", ""))
    assert inferred.shape("y") == ["B", 6]
    assert (32, expr.sym("D")) in inferred.context.constraint_dims()
