"""A torch GroupNorm(1, C) export after a strided op keeps the plain dims.

torch (dynamo) exports ``GroupNorm(1, C)`` as ``Reshape(x, [0, 1, -1])`` ->
``InstanceNormalization`` -> ``Reshape(_, Shape(x))``. When ``x``'s spatial dims are floor
divisions (a strided conv: ``(H+1)//4``), reshaping back used to give the piecewise dim
``h*(16*w - 16*w*min(1,h) + 1)`` (``h`` or, when ``h == 0``, the copied ``16*h*w``), which
then spread through every later op (PoolFormer). It is ``h`` in every run, and two proofs
now say so, each enough on its own: the copied dim ``16*h*w`` is a multiple of ``h`` by a
factor defined everywhere (``_is_multiple_of``), and ``16*h*w*min(1,h)`` is ``16*h*w``
for ``h >= 0`` (``expr.drop_zero_guards``). After a convolution a third settles it alone:
onnxruntime refuses a convolution without a window, so its output size is at least 1 (a
fact the conv hook records); the two proofs are shown on a strided ``Slice``, whose output
may be 0.
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from onnx_symdims.ops import reshape
from tests.ops._ort_oracle import check_against_ort, infer, infer_afresh, model_text

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


def test_a_convolution_output_needs_no_proof(monkeypatch):
    # onnxruntime refuses a convolution without a window: its output size is at least 1,
    # so (H+1)//4 is never 0 and neither proof below is needed.
    monkeypatch.setattr(reshape, "_defined_everywhere", _old_multiple_test)
    monkeypatch.setattr(expr, "drop_zero_guards", lambda d, scope: d)
    assert infer_afresh(POOLFORMER, monkeypatch).shape("y") == _PLAIN[POOLFORMER]


@pytest.mark.parametrize("text", [STRIDED_SLICE], ids=["slice"])
def test_each_proof_is_enough_alone(text, monkeypatch):
    # Without the wider multiple test, the algebra drops the redundant guard ...
    with monkeypatch.context() as m:
        m.setattr(reshape, "_defined_everywhere", _old_multiple_test)
        assert infer_afresh(text, monkeypatch).shape("y") == _PLAIN[text]
    # ... without the algebra rule, the multiple test keeps the target element ...
    with monkeypatch.context() as m:
        m.setattr(expr, "drop_zero_guards", lambda d, scope: d)
        assert infer_afresh(text, monkeypatch).shape("y") == _PLAIN[text]
    # ... and without both, the piecewise dim comes back (sound, but long).
    monkeypatch.setattr(reshape, "_defined_everywhere", _old_multiple_test)
    monkeypatch.setattr(expr, "drop_zero_guards", lambda d, scope: d)
    inferred = infer_afresh(text, monkeypatch)
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


# XLNet's relative shift: the input [B, 4, S + max(S-1, 0), S] (2*S - 1 rows once S >= 1)
# is reshaped to [B, 4, S, 2*S - 1] read from Shape. At S = 0 the last element is -1
# (infer) beside a 0 that copies the input's 0 rows: the run fails, so S >= 1 wherever it
# succeeds and the last dim is 2*S - 1. With the target's third element a constant 3 (not
# 0 when S is), a -1 at S = 0 infers a size: the dim stays unknown.
_SHIFT = """
    tail = Slice(x, one, big, two)
    rows = Concat<axis = 2>(x, tail)
    s = Shape(x)
    b = Gather<axis = 0>(s, zero)
    n = Gather<axis = 0>(s, three)
    n2 = Mul(n, two_s)
    last = Sub(n2, one_s)
    b1 = Unsqueeze(b, zero)
    n1 = Unsqueeze({third}, zero)
    l1 = Unsqueeze(last, zero)
    target = Concat<axis = 0>(b1, four, n1, l1)
    y = Reshape(rows, target)
"""
_SHIFT_CONSTANTS = (
    "int64[1] one = {1}, int64[1] big = {9223372036854775807}, int64[1] two = {2}, "
    "int64 zero_s = {0}, int64[1] zero = {0}, int64 three_s = {3}, int64 two_s = {2}, "
    "int64 one_s = {1}, int64[1] four = {4}"
)


def _shift(third: str) -> str:
    return model_text(
        18,
        "float[B, 4, S, S] x",
        _SHIFT.format(third=third)
        .replace("Gather<axis = 0>(s, zero)", "Gather<axis = 0>(s, zero_s)")
        .replace("Gather<axis = 0>(s, three)", "Gather<axis = 0>(s, three_s)"),
        constants=_SHIFT_CONSTANTS,
    )


def test_a_minus_one_beside_a_zero_proves_the_dim():
    text = _shift("n")
    inferred = check_against_ort(text, [{"B": 2, "S": 1}, {"B": 1, "S": 3}, {"B": 0, "S": 4}])
    assert inferred.shape("y") == ["B", 4, "S", "2*S-1"]


def test_a_minus_one_that_infers_a_size_stays_unknown():
    text = _shift("three_s")  # [B, 4, 3, 2*S - 1]: 3 rows of 2*S - 1 only if S == 3
    inferred = infer(text)
    shape = inferred.shape("y")
    assert shape[:3] == ["B", 4, 3] and shape[3] != "2*S-1"


def test_allowzero_rests_no_fact_on_a_zero_beside_a_minus_one():
    # allowzero=1: the 0 at S = 0 is a literal 0, and onnxruntime runs a -1 beside it
    # (the spec calls it invalid): S = 0 may succeed, so 2*S - 1 is not proven.
    text = _shift("n").replace(
        "y = Reshape(rows, target)", "y = Reshape<allowzero = 1>(rows, target)"
    )
    inferred = check_against_ort(
        text, [{"B": 2, "S": 1}, {"B": 1, "S": 3}, {"B": 2, "S": 0}, {"B": 0, "S": 4}]
    )
    assert inferred.shape("y")[3] != "2*S-1"


# CvT exported by TorchScript: the class token is split off a [N, C, 1 + h*w] sequence
# (a Slice: min(L, h*w) tokens) and the rest reshaped back to Shape(conv). The 0 a zero
# h puts in the target copies min(L, h*w), which h == 0 makes 0 too: the dim is h. It
# was the piecewise h + min(L, h*w) - min(1, h)*min(L, h*w), and past the next Reshape a
# fresh symbol (104 dims of cvt_legacy12 unresolved).
TOKEN_SPLIT = model_text(
    20,
    "float[N, 4, H, W] img, float[N, L] x",
    """
    conv = Slice(img, starts, ends, axes, steps)
    flat = Reshape(conv, flat_target)
    sl = Shape(x)
    l = Slice(sl, one, two)
    tokens = Slice(flat, zero, l, two)
    s = Shape(conv)
    back = Reshape(tokens, s)
    y = Relu(back)
    """,
    constants="int64[3] flat_target = {0, 4, -1}"
    ", int64[2] starts = {0, 0}, int64[2] ends = {9223372036854775807, 9223372036854775807}"
    ", int64[2] axes = {2, 3}, int64[2] steps = {4, 4}"
    ", int64[1] zero = {0}, int64[1] one = {1}, int64[1] two = {2}",
)


def test_a_token_slice_that_vanishes_with_the_target_keeps_the_plain_dim():
    inferred = check_against_ort(
        TOKEN_SPLIT,
        [
            {"N": 2, "H": 9, "W": 13, "L": 20},
            {"N": 2, "H": 0, "W": 5, "L": 3},  # h == 0: the 0 copies min(3, 0) == 0
            {"N": 1, "H": 1, "W": 1, "L": 1},
            {"N": 2, "H": 3, "W": 2, "L": 7},
        ],
    )
    assert inferred.shape("tokens") == ["N", 4, "min(L,((H+3)//4)*((W+3)//4))"]
    assert inferred.shape("back") == ["N", 4, "(H+3)//4", "(W+3)//4"]


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("h", True),
        ("3*h*w", True),
        ("min(L, h*w)", True),
        ("min(L, min(K, 2*h))", True),
        ("min(L, w)", False),
        ("max(L, h*w)", False),
        ("h + w", False),
    ],
)
def test_at_most_zero_with(text, holds):
    assert reshape._at_most_zero_with(expr.parse_expr(text), expr.parse_expr("h")) is holds
