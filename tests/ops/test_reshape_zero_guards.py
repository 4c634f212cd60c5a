"""A torch GroupNorm(1, C) export after a strided op keeps the plain dims.

torch (dynamo) exports ``GroupNorm(1, C)`` as ``Reshape(x, [0, 1, -1])`` ->
``InstanceNormalization`` -> ``Reshape(_, Shape(x))``. When ``x``'s spatial dims are floor
divisions (a strided conv: ``(H+1)//4``), reshaping back used to give the piecewise dim
``h*(16*w - 16*w*min(1,h) + 1)`` (``h`` or, when ``h == 0``, the copied ``16*h*w``), which
then spread through every later op (PoolFormer). It is ``h`` in every run, and two proofs
now say so, each enough on its own: the copied dim ``16*h*w`` is a multiple of ``h`` by a
factor defined everywhere (``_is_multiple_of``), and ``16*h*w*min(1,h)`` is ``16*h*w``
for ``h >= 0`` (``expr.drop_zero_guards``).
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from onnx_symdims.ops import reshape
from tests.ops._ort_oracle import check_against_ort, infer, model_text

_GROUP_NORM = """
    r = Reshape(conv, target)
    normed = {norm}
    s = Shape(conv)
    back = Reshape(normed, s)
    scaled = Mul(back, gw)
    gn = Add(scaled, gb)
"""
_CONSTANTS = "int64[3] target = {0, 1, -1}, float[1] scale = {1.0}, float[1] bias = {0.0}"

# A PoolFormer block: patch-embedding conv, group norm, pooling token mixer, layer scale.
POOLFORMER = model_text(
    20,
    "float[N, 3, H, W] x, float[16, 3, 7, 7] cw, float[16, 1, 1] gw, float[16, 1, 1] gb, "
    "float[16, 1, 1] ls",
    "conv = Conv<pads=[2, 2, 2, 2], strides=[4, 4], kernel_shape=[7, 7]>(x, cw)"
    + _GROUP_NORM.format(norm="InstanceNormalization<epsilon=1e-5>(r, scale, bias)")
    + """
    pool = AveragePool<kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
                       count_include_pad=0>(gn)
    mixed = Sub(pool, gn)
    layer_scaled = Mul(ls, mixed)
    y = Add(conv, layer_scaled)
    """,
    constants=_CONSTANTS,
)

# The same shapes where the strided axis may be 0: a strided Slice instead of the conv
# (onnxruntime rejects a conv output of size 0), and Relu instead of the instance norm
# (onnxruntime 1.2x crashes on an empty InstanceNormalization input reshaped like this).
STRIDED_SLICE = model_text(
    20,
    "float[N, 16, H, W] x, float[16, 1, 1] gw, float[16, 1, 1] gb",
    "conv = Slice(x, starts, ends, axes, steps)"
    + _GROUP_NORM.format(norm="Relu(r)")
    + """
    y = Add(conv, gn)
    """,
    constants=_CONSTANTS
    + ", int64[2] starts = {0, 0}, int64[2] ends = {9223372036854775807, 9223372036854775807}"
    + ", int64[2] axes = {2, 3}, int64[2] steps = {4, 4}",
)

_PIECEWISE = {
    POOLFORMER: "((H+1)//4)*(16*((W+1)//4)-16*((W+1)//4)*min(1,(H+1)//4)+1)",
    STRIDED_SLICE: "((H+3)//4)*(16*((W+3)//4)-16*((W+3)//4)*min(1,(H+3)//4)+1)",
}
_PLAIN = {
    POOLFORMER: ["N", 16, "(H+1)//4", "(W+1)//4"],
    STRIDED_SLICE: ["N", 16, "(H+3)//4", "(W+3)//4"],
}
MODELS = pytest.mark.parametrize("text", [POOLFORMER, STRIDED_SLICE], ids=["conv", "slice"])


def _old_multiple_test(q):
    return not (isinstance(q, expr.DimExpr) and q.has_division())


@MODELS
def test_group_norm_reshape_back_keeps_the_plain_dims(text):
    inferred = infer(text)
    assert not inferred.errors
    for name in ("conv", "back", "gn", "y"):
        assert inferred.shape(name) == _PLAIN[text], name
    flat = _PLAIN[text][2:]
    assert inferred.shape("r") == ["N", 1, f"16*({flat[0]})*({flat[1]})"]


def test_poolformer_block_agrees_with_onnxruntime():
    # N = 0 makes [0, 1, -1] fail; an output of size 0 makes the conv fail.
    check_against_ort(
        POOLFORMER,
        [{"N": 2, "H": 9, "W": 13}, {"N": 1, "H": 3, "W": 4}, {"N": 3, "H": 14, "W": 7}],
    )


def test_zero_sized_axes_agree_with_onnxruntime():
    # (H+3)//4 == 0 at H = 0: the 0 of Shape(conv) copies the reshaped input's dim 2,
    # which is 16*0*w == 0 too. (W = 0 has no successful run: the 0 at axis 3 of the
    # target lies past the rank-3 input's dims; N = 0 makes [0, 1, -1] fail.)
    check_against_ort(
        STRIDED_SLICE,
        [
            {"N": 1, "H": 0, "W": 5},
            {"N": 2, "H": 0, "W": 1},
            {"N": 1, "H": 1, "W": 1},
            {"N": 2, "H": 9, "W": 13},
        ],
    )


@MODELS
def test_each_proof_is_enough_alone(text, monkeypatch):
    # Without the wider multiple test, the algebra drops the redundant guard ...
    with monkeypatch.context() as m:
        m.setattr(reshape, "_defined_everywhere", _old_multiple_test)
        assert infer(text).shape("y") == _PLAIN[text]
    # ... without the algebra rule, the multiple test keeps the target element ...
    with monkeypatch.context() as m:
        m.setattr(expr, "drop_zero_guards", lambda d, scope: d)
        assert infer(text).shape("y") == _PLAIN[text]
    # ... and without both, the piecewise dim comes back (sound, but long).
    monkeypatch.setattr(reshape, "_defined_everywhere", _old_multiple_test)
    monkeypatch.setattr(expr, "drop_zero_guards", lambda d, scope: d)
    inferred = infer(text)
    assert inferred.shape("back")[2] == _PIECEWISE[text]
    assert inferred.shape("y")[2] != _PLAIN[text][2]


@pytest.mark.parametrize(
    ("text", "defined"),
    [
        ("16*((W+3)//4)", True),
        ("W%3+max(H//2,(W+1)//4)", True),
        ("broadcast(W,H)*((W+3)//4)", True),
        ("W//H", False),  # H may be 0
        ("W/:2", False),  # may be inexact
        ("max(1,(W/:2))", False),
        ("((W//H)+1)//2", False),
    ],
)
def test_defined_everywhere(text, defined):
    assert reshape._defined_everywhere(expr.parse_expr(text)) is defined
