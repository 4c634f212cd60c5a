"""onnxruntime's fused contrib ops (``com.microsoft``) from its offline optimizations.

Every op with a CPU kernel is checked against onnxruntime on several sizes (1 and 0
where the kernel accepts them); the CUDA/training-only ops against their schema.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims


def _model(inputs: str, body: str, outputs: str, opset: int = 17) -> str:
    return model_text(
        opset, inputs, body, outputs, ir_version=10, domains={"com.microsoft": 1}
    )


def _call(op: str, attrs: str, args: str) -> str:
    return f"com.microsoft.{op}<{attrs}>({args})" if attrs else f"com.microsoft.{op}({args})"


IMAGE_BINDINGS = [
    {"N": 2, "H": 9, "W": 12},
    {"N": 1, "H": 1, "W": 7},
    {"N": 0, "H": 6, "W": 5},
    {"N": 3, "H": 16, "W": 1},
]


# ----------------------------------------------------------------------------------------
# FusedConv
# ----------------------------------------------------------------------------------------
FUSED_CONV_CASES = [
    # (weight, attributes, extra inputs, expected y)
    ("4, 3, 1, 1", 'activation="Relu"', "", ["N", 4, "H", "W"]),
    ("4, 3, 3, 3", 'activation="Relu", pads=[1, 1, 1, 1]', "", ["N", 4, "H", "W"]),
    ("4, 3, 3, 3", 'activation="Sigmoid", strides=[2, 2], pads=[1, 1, 1, 1]', "",
     ["N", 4, "(H - 1)//2 + 1", "(W - 1)//2 + 1"]),
    ("6, 2, 3, 3", 'activation="LeakyRelu", activation_params=[0.1], group=3, auto_pad="SAME_UPPER"',
     "", ["N", 6, "H", "W"]),
    ("4, 3, 1, 3", 'activation="Clip", activation_params=[0.0, 6.0], pads=[0, 1, 0, 1]',
     "b", ["N", 4, "H", "W"]),
    ("4, 3, 1, 1", 'activation="Relu"', "b, z", ["N", 4, "H", "W"]),
]  # fmt: skip


@pytest.mark.parametrize(("weight", "attrs", "extra", "expected"), FUSED_CONV_CASES)
def test_fused_conv(weight, attrs, extra, expected):
    channels = 6 if "group=3" in attrs else 3
    inputs = (
        f"float[N, {channels}, H, W] x, float[{weight}] w, float[4] b, float[N, 4, H, W] z"
    )
    args = "x, w" + (f", {extra}" if extra else "")
    body = f"y = {_call('FusedConv', attrs, args)}"
    inferred = check_against_ort(_model(inputs, body, "float y"), IMAGE_BINDINGS)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_fused_conv_dilated_valid_window():
    inputs = "float[N, 2, H, W] x, float[5, 2, 3, 3] w"
    body = 'y = com.microsoft.FusedConv<activation="Relu", dilations=[2, 2]>(x, w)'
    bindings = [{"N": 2, "H": 5, "W": 9}, {"N": 1, "H": 6, "W": 5}]
    inferred = check_against_ort(_model(inputs, body, "float y"), bindings)
    assert same_dims(inferred.dims("y"), ["N", 5, "H - 4", "W - 4"])


def test_fused_conv_channel_mismatch_is_a_diagnostic():
    text = _model(
        "float[N, 3, H, W] x, float[4, 2, 1, 1] w",
        'y = com.microsoft.FusedConv<activation="Relu">(x, w)',
        "float y",
    )
    assert infer(text).errors


# ----------------------------------------------------------------------------------------
# Channels-last convolutions and pools
# ----------------------------------------------------------------------------------------
NHWC_MAX_POOL_CASES = [
    # onnxruntime truncates: a window overhanging a 1-pixel input still yields one output.
    ("kernel_shape=[2, 2], strides=[2, 2]", ["N", "max(H//2, min(1, H))", "max(W//2, min(1, W))", 8]),
    ("kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]",
     ["N", "max(1, (H + 1)//2)", "max(1, (W + 1)//2)", 8]),
    ("kernel_shape=[1, 1]", ["N", "H", "W", 8]),
    ("kernel_shape=[3, 3], auto_pad=\"SAME_UPPER\", strides=[2, 2]",
     ["N", "(H + 1)//2", "(W + 1)//2", 8]),
    ("kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1", None),
    ("kernel_shape=[2, 3], dilations=[2, 1]", None),
]  # fmt: skip


@pytest.mark.parametrize(("attrs", "expected"), NHWC_MAX_POOL_CASES)
def test_nhwc_max_pool(attrs, expected):
    text = _model(
        "uint8[N, H, W, 8] x", f"y = com.microsoft.NhwcMaxPool<{attrs}>(x)", "uint8 y"
    )
    bindings = [{"N": 2, "H": 9, "W": 12}, {"N": 1, "H": 5, "W": 7}, {"N": 0, "H": 8, "W": 6}]
    inferred = check_against_ort(text, bindings)
    assert inferred.dtype("y") == ir.DataType.UINT8
    if expected is not None:
        assert same_dims(inferred.dims("y"), expected), inferred.shape("y")
    else:  # no fresh symbol: every dim is a formula of the input's
        assert not any(inferred.context.is_generated(s) for d in inferred.dims("y")
                       if not isinstance(d, int) for s in d.symbols())  # fmt: skip


NHWC_CONV_CASES = [
    # No CPU kernel (CUDA only): the schema's channels-last Conv shape; the kernel comes
    # from kernel_shape only (the CUDA layout pass may reorder the weight's dims).
    ("float[4, 3, 3, 3] w", "kernel_shape=[3, 3], pads=[1, 1, 1, 1]", ["N", "H", "W", 4]),
    ("float[4, 3, 3, 3] w", "kernel_shape=[3, 3], strides=[2, 2]",
     ["N", "(H - 3)//2 + 1", "(W - 3)//2 + 1", 4]),
    ("float[4, 1, 1, 3] w", "kernel_shape=[1, 1]", ["N", "H", "W", 4]),
]  # fmt: skip


@pytest.mark.parametrize("op", ["NhwcConv", "NhwcFusedConv"])
@pytest.mark.parametrize(("weight", "attrs", "expected"), NHWC_CONV_CASES)
def test_nhwc_conv(op, weight, attrs, expected):
    text = _model(
        f"float[N, H, W, 3] x, {weight}", f"y = com.microsoft.{op}<{attrs}>(x, w)", "float y"
    )
    assert same_dims(infer(text).dims("y"), expected), infer(text).shape("y")


def test_nhwc_conv_without_kernel_shape_keeps_batch_and_channels():
    text = _model(
        "float[N, H, W, 3] x, float[4, 3, 3, 3] w",
        "y = com.microsoft.NhwcConv(x, w)",
        "float y",
    )
    shape = infer(text).shape("y")
    assert shape[0] == "N" and shape[3] == 4
    assert all("NhwcConv" in d for d in shape[1:3])  # fresh: the weight layout is unknown


# ----------------------------------------------------------------------------------------
# Matrix products
# ----------------------------------------------------------------------------------------
FUSED_GEMM_CASES = [
    # onnxruntime's kernel rejects a FusedGemm without an activation.
    ("M, K", "K, N", "N", 'activation="Relu"', ["M", "N"]),
    ("K, M", "N, K", "1, N", 'activation="Tanh", transA=1, transB=1', ["M", "N"]),
    ("M, K", "K, 5", "5", 'activation="Relu", alpha=0.5, beta=2.0', ["M", 5]),
    ("M, K", "K, N", "M, N", 'activation="LeakyRelu", activation_alpha=0.2', ["M", "N"]),
]  # fmt: skip


@pytest.mark.parametrize(("a", "b", "c", "attrs", "expected"), FUSED_GEMM_CASES)
def test_fused_gemm(a, b, c, attrs, expected):
    text = _model(
        f"float[{a}] a, float[{b}] b, float[{c}] c",
        f"y = {_call('FusedGemm', attrs, 'a, b, c')}",
        "float y",
    )
    bindings = [{"M": 3, "K": 4, "N": 5}, {"M": 1, "K": 1, "N": 5}, {"M": 0, "K": 2, "N": 5}]
    inferred = check_against_ort(text, bindings)
    assert inferred.shape("y") == expected


TRANSPOSE_MATMUL_CASES = [
    ("B, M, K", "K, N", "", ["B", "M", "N"]),
    ("B, K, M", "B, N, K", "transA=1, transB=1, alpha=2.0", ["B", "M", "N"]),
    ("M, K", "N, K", "transB=1", ["M", "N"]),
]


@pytest.mark.parametrize(("a", "b", "attrs", "expected"), TRANSPOSE_MATMUL_CASES)
def test_transpose_matmul(a, b, attrs, expected):
    text = _model(
        f"float[{a}] a, float[{b}] b",
        f"y = {_call('TransposeMatMul', attrs, 'a, b')}",
        "float y",
    )
    bindings = [{"B": 2, "M": 3, "K": 4, "N": 5}, {"B": 1, "M": 0, "K": 1, "N": 1}]
    inferred = check_against_ort(text, bindings)
    assert inferred.shape("y") == expected


def test_fused_matmul_activation():
    # No CPU kernel: the FusedMatMul shape (schema).
    text = _model(
        "float[K, B, M] a, float[B, K, N] b",
        'y = com.microsoft.FusedMatMulActivation<activation="Relu", transBatchA=1, transA=1>(a, b)',
        "float y",
    )
    assert infer(text).shape("y") == ["B", "M", "N"]


# ----------------------------------------------------------------------------------------
# Bias + softmax / dropout (CUDA / training kernels only: schema shapes)
# ----------------------------------------------------------------------------------------
def test_bias_softmax():
    text = _model(
        "float[B, N, S, T] x, float[B, 1, 1, T] bias",
        "y = com.microsoft.BiasSoftmax<is_inner_broadcast=0, axis=3>(x, bias)",
        "float y",
    )
    assert infer(text).shape("y") == ["B", "N", "S", "T"]


@pytest.mark.parametrize("residual", ["", ", r"])
def test_bias_dropout(residual):
    text = _model(
        "float[B, S, H] x, float[H] bias, float[B, S, H] r",
        f"y, mask = com.microsoft.BiasDropout(x, bias{residual})",
        "float y, bool mask",
    )
    inferred = infer(text)
    assert inferred.shape("y") == ["B", "S", "H"]
    assert inferred.shape("mask") == ["B", "S", "H"]
    assert inferred.dtype("mask") == ir.DataType.BOOL


def test_bitmask_bias_dropout_packs_the_mask():
    text = _model(
        "float[B, S, 40] x, float[40] bias",
        "y, mask = com.microsoft.BitmaskBiasDropout(x, bias)",
        "float y, uint32 mask",
    )
    inferred = infer(text)
    assert inferred.shape("y") == ["B", "S", 40]
    assert same_dims(inferred.dims("mask"), ["(B*S*40 + 31)//32"])
    assert inferred.dtype("mask") == ir.DataType.UINT32


# ----------------------------------------------------------------------------------------
# Activations and embeddings the optimizer fuses
# ----------------------------------------------------------------------------------------
GELU_CASES = [
    # (op, inputs, args); BiasAdd has no CPU kernel (schema shape).
    ("Gelu", "float[B, S, 8] x", "x"),
    ("QuickGelu", "float[B, S, 8] x", "x"),
    ("FastGelu", "float[B, S, 8] x", "x"),
    ("FastGelu", "float[B, S, 8] x, float[8] b", "x, b"),
    ("BiasGelu", "float[B, S, 8] x, float[8] b", "x, b"),
]


@pytest.mark.parametrize(("op", "inputs", "args"), GELU_CASES)
def test_gelu_family(op, inputs, args):
    text = _model(inputs, f"y = com.microsoft.{op}({args})", "float y")
    bindings = [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 0, "S": 2}]
    inferred = check_against_ort(text, bindings)
    assert same_dims(inferred.dims("y"), ["B", "S", 8])


def test_bias_add():
    text = _model(
        "float[B, S, 8] x, float[8] b, float[B, S, 8] skip",
        "y = com.microsoft.BiasAdd(x, b, skip)",
        "float y",
    )
    assert same_dims(infer(text).dims("y"), ["B", "S", 8])


EMBED_CASES = [
    # (attributes, inputs, arguments); the CPU kernel writes mask_index in every mode.
    ("", "int32[B, S] ids, float[10, 8] we, float[6, 8] pe, float[8] g, float[8] b",
     "ids, , we, pe, , g, b"),
    ("mask_index_type=0", "int32[B, S] ids, float[10, 8] we, float[6, 8] pe, float[8] g, float[8] b",
     "ids, , we, pe, , g, b"),
    ("mask_index_type=1", ("int32[B, S] ids, int32[B, S] seg, float[10, 8] we, float[6, 8] pe, "
     "float[2, 8] se, float[8] g, float[8] b, int32[B, S] mask"), "ids, seg, we, pe, se, g, b, mask"),
    ("", "int32[B, S] ids, float[10, 8] we, float[6, 8] pe, float[8] g, float[8] b, int32[1, S] pos",
     "ids, , we, pe, , g, b, , pos"),
]  # fmt: skip


@pytest.mark.parametrize(("attrs", "inputs", "args"), EMBED_CASES)
def test_embed_layer_normalization_modes(attrs, inputs, args):
    body = f"y, mask_index, total = {_call('EmbedLayerNormalization', attrs, args)}"
    outputs = "float y, int32 mask_index, float total"
    feeds = {
        "mask": lambda b: np.ones((b["B"], b["S"]), dtype=np.int32),
        "pos": lambda b: np.arange(b["S"], dtype=np.int32).reshape(1, -1),
    }
    bindings = [{"B": 2, "S": 3}, {"B": 1, "S": 1}, {"B": 3, "S": 6}]
    inferred = check_against_ort(_model(inputs, body, outputs), bindings, feeds)
    assert same_dims(inferred.dims("y"), ["B", "S", 8])
    assert same_dims(inferred.dims("mask_index"), ["B"])
    assert same_dims(inferred.dims("total"), ["B", "S", 8])


def test_embed_layer_normalization_hidden_from_gamma():
    text = _model(
        "int32[B, S] ids, float[V, H] we, float[P, H] pe, float[8] g, float[8] b",
        "y = com.microsoft.EmbedLayerNormalization(ids, , we, pe, , g, b)",
        "float y",
    )
    assert same_dims(infer(text).dims("y"), ["B", "S", 8])


def test_embed_layer_normalization_hidden_mismatch_is_a_diagnostic():
    text = _model(
        "int32[B, S] ids, float[10, 8] we, float[6, 8] pe, float[4] g, float[4] b",
        "y = com.microsoft.EmbedLayerNormalization(ids, , we, pe, , g, b)",
        "float y",
    )
    assert infer(text).errors
