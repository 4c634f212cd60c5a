"""What a successful ``Reshape`` implies: copied dims, equal element counts, nonzero dims.

Each behaviour is shown on the dims it resolves, with the helper that proves it switched
off to show it is the one doing the work, and against onnxruntime at several sizes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnx_symdims.ops import conv_pool, reshape
from tests.ops._ort_oracle import check_against_ort, infer, infer_afresh, model_text

_KERNEL = ", ".join(["0.5"] * 80)

# A wav2vec2-style feature extractor: a strided conv, a group norm done as
# Reshape -> InstanceNormalization -> Reshape(Shape(conv)) (as torch exports GroupNorm).
FEATURE_EXTRACTOR = model_text(
    18,
    "float[b, 1, L] x",
    f"""
    w = Constant<value = float[8, 1, 10] {{{_KERNEL}}}>()
    c = Conv<strides = [5]>(x, w)
    grouped = Constant<value = int64[3] {{0, 1, -1}}>()
    r = Reshape(c, grouped)
    scale = Constant<value = float[1] {{1.0}}>()
    bias = Constant<value = float[1] {{0.0}}>()
    normed = InstanceNormalization(r, scale, bias)
    conv_shape = Shape(c)
    y = Reshape(normed, conv_shape)
    """,
    "float[?, ?, ?] y",
)


def test_reshape_back_to_the_conv_shape_keeps_its_dims():
    inferred = infer(FEATURE_EXTRACTOR)
    assert inferred.shape("c") == ["b", 8, "L//5-1"]
    assert inferred.shape("y") == ["b", 8, "L//5-1"]


def test_reshape_back_to_the_conv_shape_agrees_with_onnxruntime():
    # L < 10 has no successful run (the kernel is longer); b = 0 makes [0, 1, -1] fail.
    check_against_ort(
        FEATURE_EXTRACTOR, [{"b": 1, "L": 10}, {"b": 2, "L": 14}, {"b": 1, "L": 53}]
    )


# Target element h = L//5-1 where the copied dim is 8*h: h == 0 copies a dim that is 0 too.
MULTIPLE = model_text(
    18,
    "float[1, 1, L] x",
    f"""
    w = Constant<value = float[8, 1, 10] {{{_KERNEL}}}>()
    c = Conv<strides = [5]>(x, w)
    flat = Constant<value = int64[2] {{1, -1}}>()
    r = Reshape(c, flat)
    i2 = Constant<value = int64 {{2}}>()
    z = Constant<value = int64[1] {{0}}>()
    sc = Shape(c)
    h = Gather<axis=0>(sc, i2)
    h1 = Unsqueeze(h, z)
    ones = Constant<value = int64[1] {{1}}>()
    m1 = Constant<value = int64[1] {{-1}}>()
    target = Concat<axis=0>(ones, h1, m1)
    y = Reshape(r, target)
    """,
    "float[?, ?, ?] y",
)

# Target [h, 8] for an input [4, 2*h]: the element counts are equal, so h == 0 means an
# empty input and (8 > 0) an output dim 0, whatever h would copy.
SAME_NUMEL = model_text(
    18,
    "float[1, 1, L] x",
    f"""
    w = Constant<value = float[8, 1, 10] {{{_KERNEL}}}>()
    c = Conv<strides = [5]>(x, w)
    four = Constant<value = int64[2] {{4, -1}}>()
    r = Reshape(c, four)
    i2 = Constant<value = int64 {{2}}>()
    z = Constant<value = int64[1] {{0}}>()
    sc = Shape(c)
    h = Gather<axis=0>(sc, i2)
    h1 = Unsqueeze(h, z)
    eight = Constant<value = int64[1] {{8}}>()
    target = Concat<axis=0>(h1, eight)
    y = Reshape(r, target)
    """,
    "float[?, ?] y",
)


@pytest.mark.parametrize(
    ("text", "helper", "expected"),
    [
        (MULTIPLE, "_is_multiple_of", [1, "L//5-1", 8]),
        (SAME_NUMEL, "_same_numel", ["L//5-1", 8]),
    ],
    ids=["copied dim a multiple", "same element count"],
)
def test_target_element_kept_by_its_proof(text, helper, expected, monkeypatch):
    assert infer(text).shape("y") == expected
    check_against_ort(text, [{"L": 10}, {"L": 19}, {"L": 60}])
    # The conv's output size is at least 1 (onnxruntime refuses a convolution without a
    # window), which alone settles h == 0 now: without that fact h may be 0, as for a
    # size from an op that may give 0, and the proof does the work.
    monkeypatch.setattr(conv_pool, "conv_spatial_dim", _without_the_fact)
    assert infer_afresh(text, monkeypatch).shape("y") == expected
    monkeypatch.setattr(reshape, helper, lambda *args: False)
    assert infer_afresh(text, monkeypatch).shape("y") != expected


def _without_the_fact(ctx, axis, d, k, window):
    w = window
    args = (w.strides[axis], w.dilations[axis], w.pads_begin[axis], w.pads_end[axis])
    return conv_pool.conv_output_dim(d, k, *args, w.auto_pad)


# ----------------------------------------------------------------------------------------
# A -1 is inferred only when the other dims multiply to nonzero (allowzero = 0)
# ----------------------------------------------------------------------------------------
def _flatten_then_compare(allowzero: int) -> str:
    return model_text(
        18,
        "float[b, s] x",
        f"""
        z = Constant<value = int64 {{0}}>()
        z1 = Constant<value = int64[1] {{0}}>()
        sx = Shape(x)
        bb = Gather<axis=0>(sx, z)
        before = Greater(bb, z)
        b1 = Unsqueeze(bb, z1)
        m1 = Constant<value = int64[1] {{-1}}>()
        target = Concat<axis=0>(b1, m1)
        y = Reshape<allowzero = {allowzero}>(x, target)
        after = Greater(bb, z)
        """,
        "float[?, ?] y, bool before, bool after",
    )


def test_minus_one_makes_the_other_dims_nonzero_from_that_node_on():
    inferred = infer(_flatten_then_compare(0))
    assert inferred.shape("y") == ["b", "s"]
    assert inferred.elements("after") == [1]
    assert inferred.elements("before") != [1]  # computed before the Reshape: no leak
    check_against_ort(_flatten_then_compare(0), [{"b": 1, "s": 0}, {"b": 3, "s": 2}])


def test_allowzero_reshape_gives_no_nonzero_fact():
    # The spec calls a 0 beside a -1 invalid under allowzero = 1, but onnxruntime runs it
    # (below): no fact may rest on the spec there, as an exported ``view`` of an empty
    # batch does exactly this.
    inferred = infer(_flatten_then_compare(1))
    assert inferred.elements("after") != [1]
    proto = onnx.parser.parse_model(_flatten_then_compare(1))
    session = ort.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    y, _, after = session.run(None, {"x": np.zeros((0, 3), np.float32)})
    assert y.shape[0] == 0 and not after


# ----------------------------------------------------------------------------------------
# A sliding-window cache: the copied target element s + min(8, p) is 0 only when s and p are
# ----------------------------------------------------------------------------------------
SLIDING_WINDOW = model_text(
    18,
    "float[b, 6, p, 8] k, float[b, 6, s, 8] x",
    """
    st = Constant<value = int64[1] {-8}>()
    en = Constant<value = int64[1] {9223372036854775807}>()
    ax = Constant<value = int64[1] {2}>()
    window = Slice(k, st, en, ax)
    cat = Concat<axis = 2>(window, x)
    sh = Shape<start = 2, end = 3>(cat)
    m1 = Constant<value = int64[1] {-1}>()
    eight = Constant<value = int64[1] {8}>()
    target = Concat<axis = 0>(m1, sh, eight)
    y = Reshape(cat, target)
    """,
    "float[?, ?, ?] y",
)


def test_sliding_window_reshape_has_the_short_piecewise_form():
    inferred = infer(SLIDING_WINDOW)
    assert inferred.shape("cat") == ["b", 6, "s+min(8,p)", 8]
    # The same form as a plain cache's (4*batch*min(1,seq)), not an exact division by it.
    assert inferred.shape("y") == [
        "6*b*min(s+min(8,p),1)",
        "s-6*min(s+min(8,p),1)+min(8,p)+6",
        8,
    ]
    check_against_ort(
        SLIDING_WINDOW,
        [
            {"b": 1, "p": 0, "s": 0},  # empty: the 0 copies the 6
            {"b": 2, "p": 0, "s": 1},
            {"b": 2, "p": 12, "s": 3},
            {"b": 0, "p": 3, "s": 2},
            {"b": 1, "p": 5, "s": 0},
        ],
    )
