"""Resize and Upsample, checked against onnxruntime (which multiplies in float32)."""

from __future__ import annotations

import pytest

from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims

# ----------------------------------------------------------------------------------------
# Resize
# ----------------------------------------------------------------------------------------
RESIZE_BINDINGS = [
    {"N": 2, "H": 5, "W": 7},
    {"N": 0, "H": 9, "W": 4},
    {"N": 1, "H": 0, "W": 12},
]

SCALE_CASES = [
    # (scales, expected): float32 scales p/2^k are exact; others mint a fresh symbol.
    ("1.0, 1.0, 2.0, 2.0", ["N", 3, "2*H", "2*W"]),
    ("1.0, 1.0, 1.5, 0.75", ["N", 3, "3*H//2", "3*W//4"]),
    ("1.0, 1.0, 0.5, 0.25", ["N", 3, "H//2", "W//4"]),
    ("1.0, 1.0, 0.1, 3.0", ["N", 3, "?", "3*W"]),
    ("2.0, 0.7, 1.0, 1.0", ["2*N", 2, "H", "W"]),  # float32(0.7) * 3 is 2.1 -> 2
]


@pytest.mark.parametrize("opset", [10, 11, 13, 19])
@pytest.mark.parametrize(("scales", "expected"), SCALE_CASES)
def test_resize_scales(opset, scales, expected):
    constants = f"float[4] scales = {{{scales}}}"
    if opset == 10:
        body = "y = Resize(x, scales)"
    elif opset == 11:
        constants += ", float[0] roi = {}"
        body = "y = Resize(x, roi, scales)"
    else:
        body = 'y = Resize<mode="nearest">(x, , scales)'
    text = model_text(opset, "float[N, 3, H, W] x", body, constants=constants)
    inferred = check_against_ort(text, RESIZE_BINDINGS)
    assert same_dims(inferred.dims("y"), expected), inferred.shape("y")


def test_resize_scale_from_constant_node():
    body = "scales = Constant<value=float[4] {1.0, 1.0, 2.0, 0.5}>()\ny = Resize(x, , scales)"
    inferred = check_against_ort(model_text(13, "float[N, 3, H, W] x", body), RESIZE_BINDINGS)
    assert inferred.shape("y") == ["N", 3, "2*H", "W//2"]


@pytest.mark.parametrize("opset", [11, 13, 19])
def test_resize_sizes_from_a_shape_computation(opset):
    # sizes = concat(shape(x)[:2], shape(like)[2:]): symbolic dims flow through.
    body = (
        "shape_x = Shape(x)\n"
        "shape_like = Shape(like)\n"
        "sx = Gather(shape_x, first)\n"
        "sl = Gather(shape_like, last)\n"
        "sizes = Concat<axis=0>(sx, sl)\n"
        "y = Resize(x, roi, scales, sizes)"
    )
    constants = "float[0] roi = {}, float[0] scales = {}, int64[2] first = {0, 1}, int64[2] last = {2, 3}"
    text = model_text(
        opset, "float[N, 3, H, W] x, float[N, 8, A, B] like", body, constants=constants
    )
    inferred = check_against_ort(text, [{"N": 2, "H": 3, "W": 4, "A": 6, "B": 9}])
    assert inferred.shape("y") == ["N", 3, "A", "B"]


@pytest.mark.parametrize(
    ("attrs", "sizes", "expected"),
    [
        ("axes=[2, 3]", "{6, 10}", ["N", 3, 6, 10]),
        ("axes=[-1]", "{10}", ["N", 3, 4, 10]),
        ('axes=[2, 3], keep_aspect_ratio_policy="not_larger"', "{6, 10}", ["N", 3, 6, 8]),
        ('axes=[2, 3], keep_aspect_ratio_policy="not_smaller"', "{6, 10}", ["N", 3, 8, 10]),
    ],
)
def test_resize_axes_and_aspect_ratio(attrs, sizes, expected):
    count = sizes.count(",") + 1
    body = f"y = Resize<{attrs}>(x, , , sizes)"
    text = model_text(
        19, "float[N, 3, 4, 5] x", body, constants=f"int64[{count}] sizes = {sizes}"
    )
    inferred = check_against_ort(text, [{"N": 2}])
    assert inferred.shape("y") == expected


def test_resize_aspect_ratio_with_symbolic_dims_is_fresh():
    body = 'y = Resize<axes=[2, 3], keep_aspect_ratio_policy="not_larger">(x, , , sizes)'
    text = model_text(19, "float[N, 3, H, 5] x", body, constants="int64[2] sizes = {6, 10}")
    inferred = check_against_ort(text, [{"N": 2, "H": 4}])
    assert same_dims(inferred.dims("y"), ["N", 3, "?", "?"])


def test_resize_scales_with_axes():
    body = "y = Resize<axes=[3, 1]>(x, , scales)"
    text = model_text(
        18, "float[N, 3, H, W] x", body, constants="float[2] scales = {2.0, 0.5}"
    )
    inferred = check_against_ort(text, RESIZE_BINDINGS)
    assert inferred.shape("y") == ["N", 1, "H", "2*W"]


def test_resize_runtime_scales_keep_the_rank():
    body = "y = Resize(x, , s)"
    inferred = infer(model_text(13, "float[N, 3, H, W] x, float[4] s", body))
    assert same_dims(inferred.dims("y"), ["?", "?", "?", "?"])
    assert not inferred.errors


@pytest.mark.parametrize(
    ("inputs", "body", "message"),
    [
        ("float[2] s = {2.0, 2.0}", "y = Resize(x, , s)", "scales has 2 values"),
        ("int64[3] s = {1, 2, 3}", "y = Resize(x, , , s)", "sizes has 3 values"),
        ("float[4] s = {1.0, 1.0, 0.0, 1.0}", "y = Resize(x, , s)", "positive"),
        ("int64[4] s = {1, 1, -2, 3}", "y = Resize(x, , , s)", "sizes must be >= 0"),
        ("float[4] s = {1.0, 1.0, 2.0, 2.0}, int64[4] z = {1, 1, 2, 2}",
         "y = Resize(x, , s, z)", "only one of"),
        ("float[0] s = {}", "y = Resize(x, , s)", "one of scales and sizes must be given"),
        ("int64[2] s = {2, 2}", "y = Resize<axes=[2, -2]>(x, , , s)", "repeated axis"),
    ],
)  # fmt: skip
def test_resize_malformed_gives_a_diagnostic(inputs, body, message):
    inferred = infer(model_text(19, "float[N, 3, H, W] x", body, constants=inputs))
    assert any(message in e for e in inferred.errors), inferred.errors
    assert inferred.dims("y") is None


def test_resize_unknown_input_rank_takes_known_sizes():
    body = "y = Resize(x, , , sizes)"
    text = model_text(13, "float x", body, constants="int64[3] sizes = {2, 5, 7}")
    assert infer(text, ["x"]).shape("y") == [2, 5, 7]
    assert (
        infer(model_text(13, "float x, float[4] s", "y = Resize(x, , s)"), ["x"]).dims("y")
        is None
    )


# ----------------------------------------------------------------------------------------
# Upsample
# ----------------------------------------------------------------------------------------
def test_upsample_attribute_scales():
    text = model_text(7, "float[N, C, H, W] x", "y = Upsample<scales=[1.0, 1.0, 2.0, 1.5]>(x)")
    inferred = check_against_ort(
        text, [{"N": 2, "C": 3, "H": 4, "W": 5}, {"N": 0, "C": 1, "H": 3, "W": 3}]
    )
    assert inferred.shape("y") == ["N", "C", "2*H", "3*W//2"]


def test_upsample_input_scales():
    constants = "float[4] s = {1.0, 1.0, 3.0, 2.0}"
    text = model_text(9, "float[N, C, H, W] x", "y = Upsample(x, s)", constants=constants)
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4, "W": 5}])
    assert inferred.shape("y") == ["N", "C", "3*H", "2*W"]


def test_upsample_rejects_downscaling():
    inferred = infer(
        model_text(8, "float[N, C, H, W] x", "y = Upsample<scales=[1.0, 1.0, 0.5, 1.0]>(x)")
    )
    assert any(">= 1" in e for e in inferred.errors), inferred.errors
