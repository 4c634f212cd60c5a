"""onnxruntime's NCHWc layout ops (``com.microsoft.nchwc``), checked against its CPU kernels.

The tensors hold blocked channels (a multiple of 16 is a multiple of every MLAS block
size); the data layout inside does not change a shape, so random data is enough.
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims

NCHWC = "com.microsoft.nchwc"


def _model(inputs: str, body: str, outputs: str = "float y") -> str:
    return model_text(17, inputs, body, outputs, ir_version=10, domains={NCHWC: 1})


BINDINGS = [
    {"N": 2, "H": 9, "W": 12},
    {"N": 1, "H": 1, "W": 5},
    {"N": 0, "H": 6, "W": 7},
    {"N": 3, "H": 16, "W": 1},
]


# ----------------------------------------------------------------------------------------
# Reorders
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("x", "attrs", "expected"), [
    ("N, 16, H, W", "", ["N", 16, "H", "W"]),
    ("N, 32, H, W", "", ["N", 32, "H", "W"]),
    ("N, H, W, 48", "<channels_last=1>", ["N", 48, "H", "W"]),
])  # fmt: skip
def test_reorder_input_block_aligned(x, attrs, expected):
    inferred = check_against_ort(
        _model(f"float[{x}] x", f"y = {NCHWC}.ReorderInput{attrs}(x)"), BINDINGS
    )
    assert same_dims(inferred.dims("y"), expected)


@pytest.mark.parametrize(("channels", "attrs"), [(8, ""), (24, ""), (4, "<channels_last=1>")])
def test_reorder_input_unaligned_is_bounded_by_the_largest_block(channels, attrs):
    """8, 24 or 4 channels pad to a machine-dependent count: a fresh symbol, bounded."""
    x = f"N, H, W, {channels}" if attrs else f"N, {channels}, H, W"
    inferred = check_against_ort(
        _model(f"float[{x}] x", f"y = {NCHWC}.ReorderInput{attrs}(x)"), BINDINGS
    )
    blocked = inferred.dims("y")[1]
    assert isinstance(blocked, expr.DimExpr) and inferred.context.is_generated(blocked.name)
    bounds = inferred.bounds()
    assert bounds[blocked.name] == str((channels + 15) // 16 * 16)
    assert bounds[str(channels)] == blocked.name


def test_reorder_input_symbolic_channels():
    inferred = infer(_model("float[N, C, H, W] x", f"y = {NCHWC}.ReorderInput(x)"))
    blocked = inferred.dims("y")[1]
    assert inferred.bounds() == {blocked.name: "C+15", "C": blocked.name}


@pytest.mark.parametrize(("x", "attrs"), [
    ("float[N, 6, H, W] x", ""),  # not a multiple of 4 channels: the kernel rejects it
    ("float[N, 16, H] x", ""),  # the kernel needs a 4-D input
])  # fmt: skip
def test_reorder_input_malformed(x, attrs):
    assert infer(_model(x, f"y = {NCHWC}.ReorderInput{attrs}(x)")).errors


@pytest.mark.parametrize(("attrs", "expected"), [
    ("channels=10", ["N", 10, "H", "W"]),
    ("channels=16", ["N", 16, "H", "W"]),
    ("channels=12, channels_last=1", ["N", "H", "W", 12]),
])  # fmt: skip
def test_reorder_output(attrs, expected):
    """The kernel needs ``16 - channels`` below its block size: 8 on AVX2, 16 on AVX-512,
    so every case keeps that gap under 8 and runs on both kinds of machine."""
    inferred = check_against_ort(
        _model("float[N, 16, H, W] x", f"y = {NCHWC}.ReorderOutput<{attrs}>(x)"), BINDINGS
    )
    assert same_dims(inferred.dims("y"), expected)


@pytest.mark.parametrize("attrs", ["channels=0", "channels=40"])
def test_reorder_output_malformed(attrs):
    text = _model("float[N, 16, H, W] x", f"y = {NCHWC}.ReorderOutput<{attrs}>(x)")
    assert infer(text).errors


def test_reorder_round_trip():
    body = f"""
        b = {NCHWC}.ReorderInput(x)
        y = {NCHWC}.ReorderOutput<channels=32>(b)
    """
    inferred = check_against_ort(_model("float[N, 32, H, W] x", body), BINDINGS)
    assert same_dims(inferred.dims("y"), ["N", 32, "H", "W"])


# ----------------------------------------------------------------------------------------
# Conv, pools, upsample
# ----------------------------------------------------------------------------------------
NCHWC_CONV_CASES = [
    ("16, 16, 3, 3", "pads=[1, 1, 1, 1]", ["N", 16, "H", "W"]),
    ("32, 16, 1, 1", 'activation="Relu"', ["N", 32, "H", "W"]),
    ("16, 16, 3, 3", "strides=[2, 2], pads=[1, 1, 1, 1]", ["N", 16, "(H - 1)//2 + 1", "(W - 1)//2 + 1"]),
    ("16, 16, 3, 3", 'auto_pad="SAME_UPPER", strides=[2, 2]', ["N", 16, "(H + 1)//2", "(W + 1)//2"]),
]  # fmt: skip


@pytest.mark.parametrize(("w", "attrs", "expected"), NCHWC_CONV_CASES)
def test_nchwc_conv(w, attrs, expected):
    text = _model(
        f"float[N, 16, H, W] x, float[{w}] w, float[{w.split(',')[0]}] b",
        f"y = {NCHWC}.Conv<{attrs}>(x, w, b)",
    )
    inferred = check_against_ort(text, BINDINGS)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_nchwc_conv_from_plain_nchw_input_with_sum():
    """The first conv of a model reads NCHW (3 channels) and may fuse an added tensor."""
    text = _model(
        "float[N, 3, H, W] x, float[16, 3, 3, 3] w, float[16] b, float[N, 16, H, W] s",
        f'y = {NCHWC}.Conv<pads=[1, 1, 1, 1], activation="Relu">(x, w, b, s)',
    )
    inferred = check_against_ort(text, BINDINGS)
    assert same_dims(inferred.dims("y"), ["N", 16, "H", "W"])


@pytest.mark.parametrize(("op", "attrs"), [
    ("MaxPool", "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]"),
    ("MaxPool", "kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1"),
    ("AveragePool", "kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1"),
    ("AveragePool", 'kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"'),
])  # fmt: skip
def test_nchwc_pool(op, attrs):
    text = _model("float[N, 16, H, W] x", f"y = {NCHWC}.{op}<{attrs}>(x)")
    inferred = check_against_ort(text, BINDINGS)
    dims = inferred.dims("y")
    assert dims[:2] == (expr.sym("N"), 16)
    assert not any(
        inferred.context.is_generated(s)
        for d in dims
        if isinstance(d, expr.DimExpr)
        for s in d.symbols()
    )


@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool"])
def test_nchwc_global_pool(op):
    inferred = check_against_ort(
        _model("float[N, 32, H, W] x", f"y = {NCHWC}.{op}(x)"),
        [b for b in BINDINGS if b["H"] * b["W"]],
    )
    assert same_dims(inferred.dims("y"), ["N", 32, 1, 1])


@pytest.mark.parametrize("attrs", [
    "scales=[1, 1, 2, 2]",
    'scales=[1, 1, 2, 3], mode="linear"',
    'scales=[1, 1, 3, 1], mode="linear", coordinate_transformation_mode="align_corners"',
])  # fmt: skip
def test_nchwc_upsample(attrs):
    text = _model("float[N, 16, H, W] x", f"y = {NCHWC}.Upsample<{attrs}>(x)")
    scales = [int(s) for s in attrs.split("[")[1].split("]")[0].split(",")]
    inferred = check_against_ort(text, [b for b in BINDINGS if b["N"]])
    assert same_dims(inferred.dims("y"), ["N", 16, f"H*{scales[2]}", f"W*{scales[3]}"])


def test_nchwc_upsample_without_scales_is_a_diagnostic():
    assert infer(_model("float[N, 16, H, W] x", f"y = {NCHWC}.Upsample(x)")).errors


def test_nchwc_conv_pins_the_blocked_channels_of_its_input():
    """24 channels pad to 24 or 32; the conv's weight says 32, so every run has 32."""
    body = f"""
        b = {NCHWC}.ReorderInput(x)
        y = {NCHWC}.Conv(b, w)
    """
    inferred = infer(_model("float[N, 24, H, W] x, float[16, 32, 1, 1] w", body))
    blocked = inferred.dims("b")[1]
    assert inferred.context.is_generated(blocked.name)
    assert (32, blocked) in inferred.context.constraint_dims()
