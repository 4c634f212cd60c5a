"""Convolutions, pooling, RoI ops and MaxUnpool, checked against onnxruntime.

The output-size formulas are onnxruntime's, including its quirks: floor-mode pooling
truncates (``MaxPool(k=2, s=2)`` of a size-1 axis is 1), ceil mode drops a last window
that starts in the end padding and ``SAME`` transposed convolutions clamp the padding
at 0.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.ops import conv_pool
from tests.ops._ort_oracle import check_against_ort, infer, model_text, run_ort, same_dims


def _op(name: str, attrs: str) -> str:
    return f"{name}<{attrs}>" if attrs else name


# ----------------------------------------------------------------------------------------
# Conv, ConvInteger, QLinearConv
# ----------------------------------------------------------------------------------------
HW = [{"N": 2, "H": 9, "W": 12}, {"N": 0, "H": 5, "W": 8}, {"N": 1, "H": 16, "W": 7}]

CONV_CASES = [
    # (attributes, weight shape, expected output shape for x [N, 3, H, W])
    ("", "[8, 3, 3, 3]", ["N", 8, "H-2", "W-2"]),
    ("pads=[1, 1, 1, 1]", "[8, 3, 3, 3]", ["N", 8, "H", "W"]),
    ("pads=[2, 2, 2, 2], strides=[2, 2]", "[8, 3, 5, 5]", ["N", 8, "(H+1)//2", "(W+1)//2"]),
    # pads are [H_begin, W_begin, H_end, W_end].
    ("pads=[0, 1, 2, 0], strides=[3, 2]", "[4, 3, 2, 3]", ["N", 4, "H//3+1", "W//2"]),
    ("dilations=[2, 2], strides=[2, 2]", "[4, 3, 3, 3]", ["N", 4, "(H-5)//2+1", "(W-5)//2+1"]),
    ("auto_pad=\"SAME_UPPER\", strides=[2, 2]", "[4, 3, 3, 3]", ["N", 4, "(H+1)//2", "(W+1)//2"]),
    ("auto_pad=\"SAME_LOWER\", strides=[3, 1]", "[4, 3, 2, 2]", ["N", 4, "(H+2)//3", "W"]),
    ("auto_pad=\"VALID\", strides=[2, 2]", "[4, 3, 3, 1]", ["N", 4, "(H-3)//2+1", "(W-1)//2+1"]),
    ("kernel_shape=[3, 3]", "[8, 3, 3, 3]", ["N", 8, "H-2", "W-2"]),
    ("group=3", "[6, 1, 1, 3]", ["N", 6, "H", "W-2"]),
]  # fmt: skip


@pytest.mark.parametrize("opset", [7, 11, 22])
@pytest.mark.parametrize(("attrs", "weight", "expected"), CONV_CASES)
def test_conv(opset, attrs, weight, expected):
    text = model_text(
        opset, f"float[N, 3, H, W] x, float{weight} w", f"y = {_op('Conv', attrs)}(x, w)"
    )
    inferred = check_against_ort(text, HW)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")
    assert inferred.dtype("y") == ir.DataType.FLOAT


@pytest.mark.parametrize(
    ("x", "w", "attrs", "expected"),
    [
        ("[N, 2, L]", "[4, 2, 3]", "pads=[1, 1]", ["N", 4, "L"]),
        ("[N, 2, L]", "[4, 2, 4]", "strides=[4]", ["N", 4, "L//4"]),
        ("[N, 2, D, H, W]", "[4, 1, 1, 2, 3]", "group=2", ["N", 4, "D", "H-1", "W-2"]),
        ("[N, C, L]", "[M, C, 3]", "", ["N", "M", "L-2"]),
        # A symbolic kernel size still gives a formula.
        ("[N, 2, L]", "[4, 2, K]", "strides=[2]", ["N", 4, "(L-K)//2+1"]),
        ("[N, 2, L]", "[4, 2, K]", 'auto_pad="SAME_UPPER", strides=[2]', ["N", 4, "(L+1)//2"]),
    ],
)
def test_conv_ranks_and_symbolic_weights(x, w, attrs, expected):
    text = model_text(22, f"float{x} x, float{w} w", f"y = {_op('Conv', attrs)}(x, w)")
    binding = {"N": 2, "L": 9, "D": 3, "H": 5, "W": 6, "C": 2, "M": 3, "K": 3}
    inferred = check_against_ort(text, [binding, {**binding, "N": 0, "K": 2, "L": 4}])
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_conv_with_bias_and_unknown_weight_rank():
    body = "y = Conv<kernel_shape=[3, 3], pads=[1, 1, 1, 1]>(x, w, b)"
    inferred = infer(model_text(22, "float[N, 3, H, W] x, float w, float[8] b", body), ["w"])
    dims = inferred.dims("y")
    assert dims is not None and len(dims) == 4
    assert dims[0] == expr.sym("N") and dims[2:] == (expr.sym("H"), expr.sym("W"))
    assert inferred.context.is_generated(dims[1].name)


def test_conv_unknown_input_rank_takes_the_weight_rank():
    inferred = infer(model_text(22, "float x, float[8, 3, 3, 3] w", "y = Conv(x, w)"), ["x"])
    dims = inferred.dims("y")
    assert dims is not None and len(dims) == 4 and dims[1] == 8


def test_conv_integer():
    text = model_text(
        10,
        "uint8[N, 2, H, W] x, uint8[3, 2, 2, 2] w, uint8 xz",
        "y = ConvInteger<strides=[2, 1]>(x, w, xz)",
        "int32 y",
    )
    inferred = check_against_ort(text, HW)
    assert inferred.shape("y") == ["N", 3, "H//2", "W-1"]
    assert inferred.dtype("y") == ir.DataType.INT32


def test_qlinear_conv():
    inputs = (
        "uint8[N, 2, H, W] x, float xs, uint8 xz, uint8[4, 2, 3, 3] w, float ws, uint8 wz,"
        " float ys, uint8 yz"
    )
    body = "y = QLinearConv<pads=[1, 1, 1, 1], strides=[2, 2]>(x, xs, xz, w, ws, wz, ys, yz)"
    inferred = check_against_ort(model_text(10, inputs, body, "uint8 y"), HW)
    assert inferred.shape("y") == ["N", 4, "(H+1)//2", "(W+1)//2"]
    assert inferred.dtype("y") == ir.DataType.UINT8


@pytest.mark.parametrize(
    ("x", "w", "attrs", "message"),
    [
        ("[N, 3, H, W]", "[8, 4, 3, 3]", "", "input channels"),
        ("[N, 4, H, W]", "[6, 1, 3, 3]", "group=4", "not divisible by group"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", "kernel_shape=[2, 2]", "does not match weight"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", "kernel_shape=[3]", "kernel_shape has 1 values"),
        ("[N, 3, H, W]", "[8, 3, 3]", "", "ranks differ"),
        ("[N, 3]", "[8, 3]", "", "rank >= 3"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", "strides=[1]", "'strides' has 1 values"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", "strides=[0, 1]", "must be >= 1"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", "pads=[1, 1]", "'pads' has 2 values"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", 'auto_pad="SAME"', "unknown auto_pad"),
        ("[N, 3, H, W]", "[8, 3, 3, 3]", 'auto_pad="VALID", pads=[1, 1, 1, 1]', "both"),
        ("[N, 3, 2, W]", "[8, 3, 3, 3]", "", "smaller than the kernel"),
    ],
)
def test_conv_malformed_gives_a_diagnostic(x, w, attrs, message):
    inferred = infer(
        model_text(22, f"float{x} x, float{w} w", f"y = {_op('Conv', attrs)}(x, w)")
    )
    assert any(message in e for e in inferred.errors), inferred.errors
    assert inferred.dims("y") is None


# ----------------------------------------------------------------------------------------
# ConvTranspose
# ----------------------------------------------------------------------------------------
CONV_TRANSPOSE_CASES = [
    # (attributes, weight shape, expected output shape for x [N, 4, H, W])
    ("", "[4, 2, 3, 3]", ["N", 2, "H+2", "W+2"]),
    ("strides=[2, 2]", "[4, 2, 3, 3]", ["N", 2, "2*H+1", "2*W+1"]),
    ("strides=[2, 3], pads=[1, 0, 1, 2], output_padding=[1, 2]", "[4, 3, 3, 3]",
     ["N", 3, "2*H", "3*W"]),
    ("dilations=[2, 1], strides=[2, 2]", "[4, 2, 3, 2]", ["N", 2, "2*H+3", "2*W"]),
    ("group=2", "[4, 3, 2, 2]", ["N", 6, "H+1", "W+1"]),
    ("auto_pad=\"VALID\", strides=[2, 2]", "[4, 2, 2, 2]", ["N", 2, "2*H", "2*W"]),
    # SAME pads by max(0, full - d*stride): d*stride unless the kernel is too small.
    ("auto_pad=\"SAME_UPPER\", strides=[2, 2]", "[4, 2, 3, 3]", ["N", 2, "2*H", "2*W"]),
    ("auto_pad=\"SAME_LOWER\", strides=[3, 3]", "[4, 2, 1, 2]", ["N", 2, "3*H-2", "3*W-1"]),
    ("auto_pad=\"SAME_UPPER\", strides=[3, 3], output_padding=[1, 2]", "[4, 2, 1, 1]",
     ["N", 2, "3*H-1", "3*W"]),
    # output_shape wins.
    ("strides=[2, 2], output_shape=[10, 11]", "[4, 2, 3, 3]", ["N", 2, 10, 11]),
]  # fmt: skip


@pytest.mark.parametrize("opset", [7, 11, 22])
@pytest.mark.parametrize(("attrs", "weight", "expected"), CONV_TRANSPOSE_CASES)
def test_conv_transpose(opset, attrs, weight, expected):
    text = model_text(
        opset,
        f"float[N, 4, H, W] x, float{weight} w",
        f"y = {_op('ConvTranspose', attrs)}(x, w)",
    )
    bindings = [{"N": 2, "H": 5, "W": 5}, {"N": 0, "H": 4, "W": 5}]
    if "output_shape" not in attrs:
        bindings.append({"N": 1, "H": 1, "W": 7})
    inferred = check_against_ort(text, bindings)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_conv_transpose_full_rank_output_shape_uses_the_spatial_part():
    # onnxruntime takes the last spatial values (it rejects the length only at load time
    # when ONNX's own inference sees the input shape).
    body = "y = ConvTranspose<strides=[2, 2], output_shape=[1, 2, 10, 12]>(x, w)"
    inferred = infer(model_text(22, "float[N, 4, H, W] x, float[4, 2, 3, 3] w", body))
    assert inferred.shape("y") == ["N", 2, 10, 12]


def test_conv_transpose_same_with_symbolic_kernel_is_fresh_when_undecidable():
    body = 'y = ConvTranspose<auto_pad="SAME_UPPER", strides=[3]>(x, w)'
    inferred = infer(model_text(22, "float[N, 2, L] x, float[2, 1, K] w", body))
    dims = inferred.dims("y")
    assert dims is not None and dims[:2] == (expr.sym("N"), 1)
    assert inferred.context.is_generated(dims[2].name)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ("output_shape=[10]", "output_shape has 1 values"),
        ("output_padding=[1]", "'output_padding' has 1 values"),
        ('auto_pad="SAME_UPPER", pads=[0, 0, 0, 0]', "both"),
    ],
)
def test_conv_transpose_malformed_gives_a_diagnostic(attrs, message):
    body = f"y = ConvTranspose<{attrs}>(x, w)"
    inferred = infer(model_text(22, "float[N, 4, H, W] x, float[4, 2, 3, 3] w", body))
    assert any(message in e for e in inferred.errors), inferred.errors


def test_conv_transpose_channel_mismatch_gives_a_diagnostic():
    body = "y = ConvTranspose(x, w)"
    inferred = infer(model_text(22, "float[N, 3, H, W] x, float[4, 2, 3, 3] w", body))
    assert any("input channels" in e for e in inferred.errors), inferred.errors


# ----------------------------------------------------------------------------------------
# MaxPool, AveragePool, LpPool
# ----------------------------------------------------------------------------------------
# Pooling runs with N=0 accept zero-sized spatial axes; otherwise they must be >= 1.
POOL_BINDINGS = [
    {"N": 2, "H": 9, "W": 12},
    {"N": 1, "H": 1, "W": 2},
    {"N": 3, "H": 4, "W": 3},
    {"N": 0, "H": 0, "W": 1},
]

POOL_CASES = [
    # (attributes, expected output shape for x [N, 3, H, W])
    ("kernel_shape=[3, 3], pads=[1, 1, 1, 1]", ["N", 3, "H", "W"]),
    # onnxruntime truncates: a size-1 axis still gives one window (H//2 would be 0).
    ("kernel_shape=[2, 2], strides=[2, 2]",
     ["N", 3, "max(H//2,min(1,H))", "max(W//2,min(1,W))"]),
    # k3 s2 p1 (ResNet): (H+1)//2 except H=0 (with N=0) where onnxruntime gives 1.
    ("kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]",
     ["N", 3, "max(1,(H+1)//2)", "max(1,(W+1)//2)"]),
    # A zero-sized axis (allowed with N=0) still gives one window: trunc(-1/s) + 1.
    ("kernel_shape=[1, 1], strides=[2, 3]", ["N", 3, "max(1,(H+1)//2)", "max(1,(W+2)//3)"]),
    ("kernel_shape=[2, 2], strides=[2, 2], auto_pad=\"SAME_UPPER\"",
     ["N", 3, "(H+1)//2", "(W+1)//2"]),
    ("kernel_shape=[3, 2], auto_pad=\"SAME_LOWER\"", ["N", 3, "H", "W"]),
    # VALID ignores pads.
    ("kernel_shape=[1, 2], pads=[0, 1, 0, 1], auto_pad=\"VALID\"", ["N", 3, "H", "W-1"]),
]  # fmt: skip

CEIL_CASES = [
    ("kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1", ["N", 3, "(H+1)//2", "(W+1)//2"]),
    ("kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1", ["N", 3, "H//2", "W//2"]),
    ("kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1",
     ["N", 3, "H//2+1", "W//2+1"]),
    # The last window would start in the end padding: onnxruntime drops it.
    ("kernel_shape=[2, 2], strides=[3, 3], pads=[0, 0, 1, 1], ceil_mode=1",
     ["N", 3, "min((H+1)//3,(H-1)//3)+1", "min((W+1)//3,(W-1)//3)+1"]),
    ("kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2], ceil_mode=1",
     ["N", 3, "(H-4)//2+1", "(W-4)//2+1"]),
    ("kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 1], pads=[1, 1, 1, 1]",
     ["N", 3, "max((H-1)//2,min(1,max(0,H-1)))", "max(1,(W+1)//2)"]),
    # SAME pads with the undilated kernel in onnxruntime (ceil(H/s) - 1 here), where the
    # spec and ONNX's inference at load say ceil(H/s): a fresh symbol, loadable and true.
    ("kernel_shape=[3, 3], dilations=[2, 2], auto_pad=\"SAME_UPPER\", strides=[2, 2]",
     ["N", 3, "?", "?"]),
    ("kernel_shape=[3, 3], auto_pad=\"SAME_UPPER\", strides=[2, 2], ceil_mode=1",
     ["N", 3, "(H+1)//2", "(W+1)//2"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "opset"),
    [("MaxPool", 7), ("MaxPool", 12), ("MaxPool", 22), ("AveragePool", 7),
     ("AveragePool", 11), ("AveragePool", 22), ("LpPool", 11), ("LpPool", 22)],
)  # fmt: skip
@pytest.mark.parametrize(("attrs", "expected"), POOL_CASES)
def test_pool(op, opset, attrs, expected):
    text = model_text(opset, "float[N, 3, H, W] x", f"y = {op}<{attrs}>(x)")
    inferred = check_against_ort(text, POOL_BINDINGS)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


@pytest.mark.parametrize(
    ("op", "opset"),
    [("MaxPool", 10), ("MaxPool", 22), ("AveragePool", 19), ("LpPool", 18), ("LpPool", 22)],
)
@pytest.mark.parametrize(("attrs", "expected"), CEIL_CASES)
def test_pool_ceil_mode_and_dilations(op, opset, attrs, expected):
    text = model_text(opset, "float[N, 3, H, W] x", f"y = {op}<{attrs}>(x)")
    bindings = [*POOL_BINDINGS, {"N": 1, "H": 10, "W": 11}, {"N": 2, "H": 6, "W": 7}]
    if "dilations" in attrs and "pads" not in attrs:
        # onnxruntime rejects a dilated window that overhangs tiny inputs by a stride.
        bindings = [{"N": 3, "H": 4, "W": 3}, {"N": 1, "H": 3, "W": 5}, *bindings[-2:]]
    inferred = check_against_ort(text, bindings)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("opset", [18, 21, 22])
def test_ceil_mode_dropped_window_at_an_int_size_keeps_the_model_loadable(op, opset):
    """Every run drops the last window (6 -> 3), but ONNX's inference before opset 22,
    which onnxruntime runs at load, says 4: a 3 written downstream would contradict it
    and onnxruntime would refuse the model (the ``Add``). There the dim is a fresh
    symbol; from opset 22 on, ONNX's inference drops the window too and we write 3.
    """
    import onnx
    import onnxruntime as ort

    text = model_text(
        opset,
        "float[N, 1, 6] x",
        f"""
        p = {op}<ceil_mode=1, kernel_shape=[1], strides=[2]>(x)
        s = Shape(p)
        e = Expand(c3, s)
        y = Add(p, e)
        """,
        "float[?, ?, ?] y",
        constants="float[1, 1, 1] c3 = {3.0}",
    )
    inferred = infer(text)
    dims = inferred.dims("p")
    if opset >= 22:
        assert dims[2] == 3
    else:
        assert isinstance(dims[2], expr.DimExpr) and inferred.context.is_generated(
            dims[2].name
        )
    proto = ir.serde.serialize_model(inferred.model)
    onnx.checker.check_model(proto)
    session = ort.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (y,) = session.run(None, {"x": np.ones((2, 1, 6), np.float32)})
    assert y.shape == (2, 1, 3)


@pytest.mark.parametrize("opset", [8, 12, 22])
def test_max_pool_indices(opset):
    text = model_text(
        opset,
        "float[N, C, L] x",
        "y, i = MaxPool<kernel_shape=[3], strides=[2], storage_order=1>(x)",
        "float y, int64 i",
    )
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "L": 9}, {"N": 0, "C": 2, "L": 4}])
    assert inferred.dims("y") == inferred.dims("i")
    assert same_dims(inferred.dims("y"), ["N", "C", "max((L-1)//2,min(1,max(0,L-1)))"])
    assert inferred.dtype("i") == ir.DataType.INT64


def test_max_pool_unknown_rank_shares_fresh_dims_between_outputs():
    body = "y, i = MaxPool<kernel_shape=[2, 2]>(x)"
    inferred = infer(model_text(12, "float x", body, "float y, int64 i"), ["x"])
    assert inferred.dims("y") == inferred.dims("i")
    assert len(inferred.dims("y")) == 4


def test_pool_with_integer_dims_emulates_onnxruntime_exactly():
    # 2**24 + 3 does not fit float32: onnxruntime's ceil mode rounds, and so do we.
    d = 2**24 + 3
    assert (
        conv_pool.pool_output_dim(d, 2, 2, 1, 0, 0, "NOTSET", True, expr.DIM_SCOPE)
        == 2**23 + 1
    )
    assert (
        conv_pool.pool_output_dim(d, 2, 2, 1, 0, 0, "NOTSET", False, expr.DIM_SCOPE)
        == 2**23 + 1
    )
    text = model_text(
        22, "float[N, 3, 5, 1] x", "y = MaxPool<kernel_shape=[2, 1], strides=[2, 1]>(x)"
    )
    inferred = check_against_ort(text, [{"N": 1}])
    assert inferred.shape("y") == ["N", 3, 2, 1]


@pytest.mark.parametrize(
    ("x", "attrs", "message"),
    [
        ("[N, 3, H, W]", "strides=[2, 2]", "'kernel_shape' is required"),
        ("[N, 3, H, W]", "kernel_shape=[2]", "does not match kernel_shape"),
        ("[N, 3, H, W]", "kernel_shape=[2, 0]", "must be >= 1"),
        ("[N, 3, H, W]", "kernel_shape=[2, 2], dilations=[1]", "'dilations' has 1 values"),
        ("[N, 3, H, W]", "kernel_shape=[2, 2], pads=[-1, 0, 0, 0]", "must be >= 0"),
        ("[N, 3, 1, W]", "kernel_shape=[5, 1]", "negative dim"),
    ],
)
def test_pool_malformed_gives_a_diagnostic(x, attrs, message):
    inferred = infer(model_text(22, f"float{x} x", f"y = MaxPool<{attrs}>(x)"))
    assert any(message in e for e in inferred.errors), inferred.errors
    assert inferred.dims("y") is None


def _pool_ground_truth_cases(count: int) -> list[tuple]:
    """A fixed random sample of one-axis pooling configurations."""
    rng = random.Random(1234)
    grid = list(
        itertools.product(
            ("MaxPool", "AveragePool"),
            (1, 2, 3, 4),  # kernel
            (1, 2, 3),  # stride
            (1, 2, 3),  # dilation
            (0, 1, 2),  # pad begin
            (0, 1, 2),  # pad end
            (False, True),  # ceil_mode
            ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"),
        )
    )
    cases = [c for c in grid if c[4] < c[1] and c[5] < c[1]]  # onnxruntime: pads < kernel
    return rng.sample(cases, count)


@pytest.mark.parametrize(
    ("op", "k", "s", "dil", "pb", "pe", "ceil", "auto_pad"), _pool_ground_truth_cases(60)
)
def test_pool_formula_matches_onnxruntime_on_every_small_size(
    op, k, s, dil, pb, pe, ceil, auto_pad
):
    """The symbolic formula evaluated at d equals onnxruntime's size for d in 0..9."""
    attrs = f'kernel_shape=[{k}], strides=[{s}], dilations=[{dil}], auto_pad="{auto_pad}"'
    if auto_pad == "NOTSET":
        attrs += f", pads=[{pb}, {pe}]"
    if ceil:
        attrs += ", ceil_mode=1"
    inferred = infer(model_text(22, "float[N, 1, L] x", f"y = {op}<{attrs}>(x)"))
    assert not inferred.errors
    formula = inferred.dims("y")[2]
    checked = 0
    for size in range(10):
        binding = {"N": 0 if size == 0 else 1, "L": size}
        try:
            actual = run_ort(inferred, binding)["y"].shape[2]
        except Exception:  # onnxruntime rejects the configuration for this size
            continue
        checked += 1
        if formula.is_symbol and inferred.context.is_generated(formula.name):
            continue  # not expressible: a fresh symbol is always sound
        assert expr.evaluate(formula, binding) == actual, (size, expr.to_onnx(formula))
    assert checked or auto_pad.startswith("SAME")


# ----------------------------------------------------------------------------------------
# Global pooling
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("op", "opset"),
    [("GlobalAveragePool", 7), ("GlobalAveragePool", 22), ("GlobalMaxPool", 7),
     ("GlobalMaxPool", 22), ("GlobalLpPool", 7)],
)  # fmt: skip
@pytest.mark.parametrize(
    ("x", "expected"),
    [("[N, C, L]", ["N", "C", 1]), ("[N, C, H, W]", ["N", "C", 1, 1]),
     ("[N, C, D, H, W]", ["N", "C", 1, 1, 1])],
)  # fmt: skip
def test_global_pool(op, opset, x, expected):
    text = model_text(opset, f"float{x} x", f"y = {op}(x)")
    bindings = [
        {"N": 2, "C": 3, "L": 5, "D": 2, "H": 4, "W": 3},
        {"N": 0, "C": 2, "L": 0, "D": 0, "H": 0, "W": 0},
    ]
    inferred = check_against_ort(text, bindings)
    assert inferred.shape("y") == expected


def test_global_pool_rank_two_and_malformed():
    assert infer(model_text(22, "float[N, C] x", "y = GlobalMaxPool(x)")).shape("y") == [
        "N",
        "C",
    ]
    inferred = infer(model_text(22, "float[N] x", "y = GlobalMaxPool(x)"))
    assert any("rank >= 2" in e for e in inferred.errors), inferred.errors


# ----------------------------------------------------------------------------------------
# MaxRoiPool, RoiAlign, MaxUnpool
# ----------------------------------------------------------------------------------------
def test_max_roi_pool():
    text = model_text(
        7,
        "float[N, C, H, W] x, float[R, 5] rois",
        "y = MaxRoiPool<pooled_shape=[2, 3]>(x, rois)",
    )
    rois = lambda b: np.zeros((b["R"], 5), np.float32)  # noqa: E731
    inferred = check_against_ort(
        text, [{"N": 1, "C": 3, "H": 8, "W": 8, "R": 4}], feeds={"rois": rois}
    )
    assert inferred.shape("y") == ["R", "C", 2, 3]


@pytest.mark.parametrize("opset", [10, 16])
def test_roi_align(opset):
    text = model_text(
        opset,
        "float[N, C, H, W] x, float[R, 4] rois, int64[R2] idx",
        "y = RoiAlign<output_height=3, output_width=5>(x, rois, idx)",
    )
    binding = {"N": 1, "C": 3, "H": 8, "W": 8, "R": 4, "R2": 4}
    inferred = check_against_ort(text, [binding, {**binding, "R": 0, "R2": 0}])
    assert inferred.shape("y") == ["R", "C", 3, 5]


def test_roi_align_prefers_an_integer_roi_count_and_defaults_to_1x1():
    text = model_text(
        16, "float[N, C, H, W] x, float[R, 4] rois, int64[6] idx", "y = RoiAlign(x, rois, idx)"
    )
    assert infer(text).shape("y") == [6, "C", 1, 1]
    text = model_text(
        16, "float[N, C, H, W] x, float[5, 4] rois, int64[6] idx", "y = RoiAlign(x, rois, idx)"
    )
    assert any("differs" in e for e in infer(text).errors)


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ("kernel_shape=[2, 2], strides=[2, 2]", ["N", "C", "2*H", "2*W"]),
        (
            "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]",
            ["N", "C", "2*H-1", "2*W-1"],
        ),
        ("kernel_shape=[3, 2], pads=[0, 1, 2, 0]", ["N", "C", "H", "W"]),
    ],
)
def test_max_unpool(attrs, expected):
    text = model_text(
        11, "float[N, C, H, W] x, int64[N, C, H, W] i", f"y = MaxUnpool<{attrs}>(x, i)"
    )
    inferred = check_against_ort(
        text, [{"N": 2, "C": 3, "H": 4, "W": 5}, {"N": 0, "C": 1, "H": 2, "W": 3}]
    )
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_max_unpool_output_shape_from_a_shape_computation():
    # output_shape = Shape(like): symbolic values become the output dims.
    body = "s = Shape(like)\ny = MaxUnpool<kernel_shape=[2, 2], strides=[2, 2]>(x, i, s)"
    text = model_text(
        11, "float[N, C, H, W] x, int64[N, C, H, W] i, float[N, C, A, B] like", body
    )
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 2, "W": 3, "A": 5, "B": 7}])
    assert inferred.shape("y") == ["N", "C", "A", "B"]


def test_max_unpool_constant_and_unknown_output_shape():
    body = "y = MaxUnpool<kernel_shape=[2]>(x, i, s)"
    inputs = "float[N, C, L] x, int64[N, C, L] i"
    const = model_text(11, inputs, body, constants="int64[3] s = {1, 2, 9}")
    assert infer(const).shape("y") == [1, 2, 9]  # N and C must equal 1 and 2
    dims = infer(model_text(11, f"{inputs}, int64[3] s", body)).dims("y")
    assert dims[:2] == (expr.sym("N"), expr.sym("C")) and dims[2].is_symbol
