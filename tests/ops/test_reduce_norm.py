"""Reductions, arg-reductions, softmax-like and normalization ops, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text

REDUCE_OPS = [
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
]  # fmt: skip
# The opset where the axes attribute became an input.
AXES_INPUT_OPSET = {op: 13 if op == "ReduceSum" else 18 for op in REDUCE_OPS}

XYZ = [{"N": 2, "C": 3, "H": 4}, {"N": 0, "C": 5, "H": 1}, {"N": 3, "C": 2, "H": 0}]
NONEMPTY = [{"N": 2, "C": 3, "H": 4}, {"N": 5, "C": 1, "H": 3}]


# ----------------------------------------------------------------------------------------
# Reductions with the axes attribute
# ----------------------------------------------------------------------------------------
ATTRIBUTE_CASES = [
    # (attributes, expected output shape of a [N, C, H] input)
    ("axes=[1]", ["N", 1, "H"]),
    ("axes=[1], keepdims=0", ["N", "H"]),
    ("axes=[-1, 0], keepdims=0", ["C"]),
    ("axes=[0, 2]", [1, "C", 1]),
    ("keepdims=0", []),
    ("keepdims=1", [1, 1, 1]),
]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize(("attrs", "expected"), ATTRIBUTE_CASES)
def test_reduce_axes_attribute(op, attrs, expected):
    opset = AXES_INPUT_OPSET[op] - 1
    text = model_text(opset, "float[N, C, H] x", f"y = {op}<{attrs}>(x)")
    inferred = check_against_ort(
        text, XYZ if op not in ("ReduceMax", "ReduceMin") else NONEMPTY
    )
    assert inferred.shape("y") == expected
    assert inferred.dtype("y") == ir.DataType.FLOAT


@pytest.mark.parametrize("opset", [1, 11])
def test_reduce_attribute_older_opsets(opset):
    text = model_text(opset, "float[N, C, H] x", "y = ReduceSum<axes=[1], keepdims=0>(x)")
    assert infer(text).shape("y") == ["N", "H"]


def test_reduce_repeated_axis_is_reduced_once():
    # onnxruntime accepts a repeated axis and removes that dim once.
    text = model_text(13, "float[N, C, H] x", "y = ReduceMean<axes=[1, -2], keepdims=0>(x)")
    inferred = check_against_ort(text, XYZ)
    assert inferred.shape("y") == ["N", "H"]
    assert any("repeated axis" in w for w in inferred.warnings)


def test_reduce_rank_unknown():
    # Only a full reduction without keepdims has a known rank (a scalar).
    body = (
        "y = ReduceMean<keepdims=0>(x)\n"
        "z = ReduceMean<keepdims=1>(x)\n"
        "w = ReduceMean<axes=[0], keepdims=0>(x)"
    )
    inferred = infer(model_text(13, "float[N] x", body, "float y, float z, float w"), ["x"])
    shape_of = {name: inferred.dims(name) for name in "yzw"}
    assert shape_of == {"y": (), "z": None, "w": None}


# ----------------------------------------------------------------------------------------
# Reductions with the axes input
# ----------------------------------------------------------------------------------------
CONSTANT_AXES_CASES = [
    # (axes constant, attributes, expected output of [N, C, H])
    ("int64[1] {1}", "keepdims=1", ["N", 1, "H"]),
    ("int64[2] {-1, 0}", "keepdims=0", ["C"]),
    ("int64[0] {}", "keepdims=0", []),  # empty axes: every axis
    ("int64[0] {}", "keepdims=0, noop_with_empty_axes=1", ["N", "C", "H"]),
    ("int64[1] {2}", "keepdims=0, noop_with_empty_axes=1", ["N", "C"]),
]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize(("axes", "attrs", "expected"), CONSTANT_AXES_CASES)
def test_reduce_constant_axes_input(op, axes, attrs, expected):
    body = f"a = Constant<value={axes}>()\ny = {op}<{attrs}>(x, a)"
    text = model_text(AXES_INPUT_OPSET[op], "float[N, C, H] x", body)
    inferred = check_against_ort(
        text, XYZ if op not in ("ReduceMax", "ReduceMin") else NONEMPTY
    )
    assert inferred.shape("y") == expected


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ("keepdims=0", []),
        ("keepdims=1", [1, 1, 1]),
        ("noop_with_empty_axes=1", ["N", "C", "H"]),
    ],
)
def test_reduce_without_axes_input(op, attrs, expected):
    text = model_text(AXES_INPUT_OPSET[op], "float[N, C, H] x", f"y = {op}<{attrs}>(x)")
    inferred = check_against_ort(text, NONEMPTY)
    assert inferred.shape("y") == expected


def _axes(values):
    return {"a": np.array(values, dtype=np.int64)}


@pytest.mark.parametrize("axes", [[1], [0, 2], [-1], [], [1, 1], [0, 1, 2]], ids=str)
def test_reduce_runtime_axes_keepdims(axes):
    # The rank is kept; every dim is either kept or 1, so only a dim 1 stays known.
    text = model_text(18, "float[N, 1, H] x, int64[K] a", "y = ReduceMax<keepdims=1>(x, a)")
    inferred = check_against_ort(text, [{"N": 2, "H": 3, "K": len(axes)}], _axes(axes))
    shape = inferred.shape("y")
    assert len(shape) == 3 and shape[1] == 1
    assert isinstance(shape[0], str) and shape[0] not in ("N", "H")
    # Each fresh dim is bounded by the dim it replaces (or 1).
    first, _, last = inferred.dims("y")
    assert inferred.context.has_less_equal_constraint(first, expr.dmax(expr.sym("N"), 1))
    assert inferred.context.has_less_equal_constraint(last, expr.dmax(expr.sym("H"), 1))


@pytest.mark.parametrize("axes", [[1], [0, 2], [1, 1]], ids=str)
def test_reduce_runtime_axes_no_keepdims_has_unknown_rank(axes):
    # [1, 1] removes one dim in onnxruntime, [0, 2] two: the rank cannot be known.
    # A length that is itself unknown could be 1 or 2.
    text = model_text(18, "float[N, C, H] x, int64[K] a", "y = ReduceSum<keepdims=0>(x, a)")
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4, "K": len(axes)}], _axes(axes))
    assert inferred.shape("y") is None


@pytest.mark.parametrize("axes", [[0, 2], [1, 1], [0, -3]], ids=str)
def test_reduce_runtime_axes_of_length_2_no_keepdims_has_unknown_rank(axes):
    # Repeats are accepted ([1, 1] and [0, -3] remove one dim): the length is no rank.
    text = model_text(18, "float[N, C, H] x, int64[2] a", "y = ReduceMax<keepdims=0>(x, a)")
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4}], _axes(axes))
    assert inferred.shape("y") is None


# (input dims, expected output of one runtime axis removed; "?" is a fresh symbol)
ONE_RUNTIME_AXIS_CASES = [
    ("N, C, H", ["?", "?"]),
    ("N, N, N", ["N", "N"]),
    ("3, 3, 2", [3, "?"]),
    ("N, 4, 4, C", ["?", 4, "?"]),
    ("N, 1", ["?"]),
]


@pytest.mark.parametrize(("dims", "expected"), ONE_RUNTIME_AXIS_CASES)
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_reduce_one_runtime_axis_no_keepdims_keeps_the_rank(dims, expected, axis):
    # One axis removes exactly one dim: dim k of the output is input dim k or k + 1.
    text = model_text(18, f"float[{dims}] x, int64[1] a", "y = ReduceSum<keepdims=0>(x, a)")
    sizes = [{"N": 2, "C": 3, "H": 4}, {"N": 5, "C": 1, "H": 0}, {"N": 1, "C": 4, "H": 4}]
    inferred = check_against_ort(text, sizes, _axes([axis]))
    shape = inferred.shape("y")
    assert len(shape) == len(expected)
    for got, want in zip(shape, expected):
        if want == "?":
            assert isinstance(got, str) and inferred.context.is_generated(got)
        else:
            assert got == want


def test_reduce_one_runtime_axis_fresh_dim_lies_between_its_candidates():
    text = model_text(18, "float[N, 4, C] x, int64[1] a", "y = ReduceMean<keepdims=0>(x, a)")
    inferred = check_against_ort(text, [{"N": 2, "C": 3}, {"N": 7, "C": 0}], _axes([1]))
    first, second = inferred.dims("y")
    context = inferred.context
    assert context.has_less_equal_constraint(first, expr.dmax(expr.sym("N"), 4))
    assert context.has_less_equal_constraint(expr.dmin(expr.sym("N"), 4), first)
    assert context.has_less_equal_constraint(second, expr.dmax(expr.sym("C"), 4))


@pytest.mark.parametrize(
    ("axes", "noop"), [([0], 0), ([-1], 1), ([], 0), ([0, 0], 1)], ids=str
)
def test_reduce_runtime_axes_rank1_keepdims_is_one(axes, noop):
    # The only axis is reduced (an empty list reduces every axis without noop).
    attrs = f"keepdims=1, noop_with_empty_axes={noop}"
    text = model_text(18, f"float[N] x, int64[{len(axes)}] a", f"y = ReduceL2<{attrs}>(x, a)")
    inferred = check_against_ort(text, [{"N": 3}, {"N": 0}, {"N": 1}], _axes(axes))
    assert inferred.shape("y") == [1]


@pytest.mark.parametrize(
    ("axes", "noop", "expected"), [([0], 0, []), ([], 0, []), ([0], 1, [])]
)
def test_reduce_runtime_axes_rank1_becomes_scalar(axes, noop, expected):
    # The axes length is declared, so whether the axes are empty is known.
    attrs = f"keepdims=0, noop_with_empty_axes={noop}"
    text = model_text(18, f"float[N] x, int64[{len(axes)}] a", f"y = ReduceL1<{attrs}>(x, a)")
    inferred = check_against_ort(text, [{"N": 3}, {"N": 0}], _axes(axes))
    assert inferred.shape("y") == expected


def test_reduce_runtime_axes_rank1_with_noop_is_unknown():
    # With noop_with_empty_axes=1 an empty axes list keeps the only axis.
    text = model_text(
        18, "float[N] x, int64[K] a", "y = ReduceL1<keepdims=0, noop_with_empty_axes=1>(x, a)"
    )
    inferred = check_against_ort(text, [{"N": 3, "K": 0}], _axes([]))
    assert inferred.shape("y") is None


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduce_axes_attribute_after_it_became_an_input(op):
    # onnxruntime rejects the model ("Unrecognized attribute: axes").
    inferred = infer(
        model_text(AXES_INPUT_OPSET[op], "float[N, C] x", f"y = {op}<axes=[1]>(x)")
    )
    assert any("axes is an input" in e for e in inferred.errors)


def test_reduce_axes_input_must_be_1d():
    text = model_text(18, "float[N, C] x, int64[1, 1] a", "y = ReduceMean(x, a)")
    inferred = infer(text)
    assert inferred.shape("y") is None
    assert any("1-D" in e for e in inferred.errors)


@pytest.mark.parametrize("axes", ["[3]", "[-4]"])
def test_reduce_axis_out_of_range_is_a_diagnostic(axes):
    inferred = infer(model_text(13, "float[N, C, H] x", f"y = ReduceMean<axes={axes}>(x)"))
    assert inferred.shape("y") is None
    assert any("out of range" in e for e in inferred.errors)


# ----------------------------------------------------------------------------------------
# Value as shape
# ----------------------------------------------------------------------------------------
VALUE_CASES = [
    # (reduction of s = Shape(x) of x[N, C, H], expected elements)
    ("ReduceProd<keepdims=0>(s)", ["C*H*N"]),
    ("ReduceSum<keepdims=0>(s)", ["C+H+N"]),
    ("ReduceSum<keepdims=1>(s)", ["C+H+N"]),
    ("ReduceMax<keepdims=0>(s)", ["max(C,H,N)"]),
    ("ReduceMin<keepdims=1>(s)", ["min(C,H,N)"]),
    ("ReduceSum<keepdims=0, noop_with_empty_axes=1>(s)", ["N", "C", "H"]),
    ("ReduceMean<keepdims=0>(s)", None),  # not tracked: integer mean truncates
]


@pytest.mark.parametrize(("reduction", "expected"), VALUE_CASES)
def test_reduce_value_as_shape(reduction, expected):
    body = f"s = Shape(x)\ny = {reduction}"
    text = model_text(18, "float[N, C, H] x", body, "int64 y")
    inferred = check_against_ort(text, XYZ)
    assert inferred.elements("y") == expected


def test_reduce_value_of_2d_constant_over_axis():
    body = (
        "a = Constant<value=int64[1] {0}>()\n"
        "c = Constant<value=int64[2, 3] {1, 2, 3, 4, 5, 6}>()\n"
        "y = ReduceSum<keepdims=0>(c, a)"
    )
    inferred = check_against_ort(model_text(13, "float[N] x", body, "int64 y"), [{"N": 1}])
    assert inferred.elements("y") == [5, 7, 9]


def test_reduce_value_product_feeds_a_known_shape():
    # The element count of x, as the ReduceProd of its shape, is exactly N*C*H.
    body = "s = Shape(x)\nn = ReduceProd<keepdims=1>(s)\ny = Reshape<allowzero=1>(x, n)"
    inferred = check_against_ort(model_text(18, "float[N, C, H] x", body), XYZ)
    assert inferred.elements("n") == ["C*H*N"]


# ----------------------------------------------------------------------------------------
# ArgMax / ArgMin
# ----------------------------------------------------------------------------------------
ARG_CASES = [
    # (opset, attributes, expected output of [N, C, H])
    (11, "axis=1", ["N", 1, "H"]),
    (11, "axis=-1, keepdims=0", ["N", "C"]),
    (12, "axis=0, keepdims=0, select_last_index=1", ["C", "H"]),
    (13, "", [1, "C", "H"]),
    (13, "axis=-3, keepdims=1, select_last_index=1", [1, "C", "H"]),
]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(("opset", "attrs", "expected"), ARG_CASES)
def test_arg_reduce(op, opset, attrs, expected):
    call = f"{op}<{attrs}>(x)" if attrs else f"{op}(x)"
    text = model_text(opset, "float[N, C, H] x", f"y = {call}", "int64 y")
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4}, {"N": 5, "C": 1, "H": 2}])
    assert inferred.shape("y") == expected
    assert inferred.dtype("y") == ir.DataType.INT64


@pytest.mark.parametrize("axis", [3, -4])
def test_arg_reduce_axis_out_of_range(axis):
    inferred = infer(
        model_text(13, "float[N, C, H] x", f"y = ArgMax<axis={axis}>(x)", "int64 y")
    )
    assert inferred.shape("y") is None and inferred.errors


# ----------------------------------------------------------------------------------------
# Softmax family
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize(
    ("opset", "attrs"), [(11, ""), (11, "<axis=-1>"), (13, ""), (13, "<axis=0>")]
)
def test_softmax_keeps_shape(op, opset, attrs):
    text = model_text(opset, "float[N, C, H] x", f"y = {op}{attrs}(x)")
    inferred = check_against_ort(text, XYZ)
    assert inferred.shape("y") == ["N", "C", "H"]


@pytest.mark.parametrize(("opset", "inputs", "attrs"), [
    (11, "float[N, C] x", "<axis=2>"),
    (13, "float[N, C] x", "<axis=-3>"),
    (13, "float x", ""),
])  # fmt: skip
def test_softmax_bad_axis_or_scalar_is_a_diagnostic(opset, inputs, attrs):
    inferred = infer(model_text(opset, inputs, f"y = Softmax{attrs}(x)"))
    assert inferred.shape("y") is None and inferred.errors


# ----------------------------------------------------------------------------------------
# LayerNormalization
# ----------------------------------------------------------------------------------------
LAYER_NORM_CASES = [
    # (opset, attributes, expected Mean/InvStdDev shape for X [N, S, H])
    (17, "", ["N", "S", 1]),
    (17, "<axis=1>", ["N", 1, 1]),
    (17, "<axis=-3>", [1, 1, 1]),  # onnxruntime rejects an empty normalized block
    (17, "<axis=0, epsilon=1e-3>", [1, 1, 1]),
    (14, "", ["N", "S", 1]),  # onnxruntime's LayerNormalization before opset 17
]


@pytest.mark.parametrize(("opset", "attrs", "stats"), LAYER_NORM_CASES)
def test_layer_normalization(opset, attrs, stats):
    scale = {"": "H", "<axis=1>": "S, H"}.get(attrs, "N, S, H")
    text = model_text(
        opset,
        f"float16[N, S, H] x, float16[{scale}] g, float16[{scale}] b",
        f"y, m, i = LayerNormalization{attrs}(x, g, b)",
        "float16 y, float m, float i",
    )
    bindings = [{"N": 2, "S": 3, "H": 4}, {"N": 5, "S": 1, "H": 3}]
    if stats[0] != 1:  # N is not normalized over: it may be 0
        bindings.append({"N": 0, "S": 2, "H": 3})
    inferred = check_against_ort(text, bindings)
    assert inferred.shape("y") == ["N", "S", "H"]
    assert inferred.shape("m") == stats and inferred.shape("i") == stats
    assert inferred.dtype("y") == ir.DataType.FLOAT16
    assert inferred.dtype("m") == ir.DataType.FLOAT


def test_layer_normalization_pre17_y_is_typed_like_scale():
    text = model_text(
        14,
        "float16[N, H] x, float[H] g",
        "y, m = LayerNormalization(x, g)",
        "float y, float m",
    )
    inferred = check_against_ort(text, [{"N": 2, "H": 3}])
    assert inferred.dtype("y") == ir.DataType.FLOAT
    assert inferred.shape("m") == ["N", 1]


def test_layer_normalization_bad_axis():
    inferred = infer(
        model_text(17, "float[N, H] x, float[H] g", "y = LayerNormalization<axis=2>(x, g)")
    )
    assert inferred.errors


def test_rms_normalization():
    text = model_text(
        23, "float[N, S, H] x, float[H] g", "y = RMSNormalization<axis=-1>(x, g)"
    )
    inferred = check_against_ort(text, [{"N": 2, "S": 3, "H": 4}, {"N": 0, "S": 2, "H": 3}])
    assert inferred.shape("y") == ["N", "S", "H"]


# ----------------------------------------------------------------------------------------
# BatchNormalization and shape-preserving normalizations
# ----------------------------------------------------------------------------------------
def test_batch_normalization_inference():
    text = model_text(
        15,
        "float[N, C, H] x, float[C] s, float[C] b, float[C] m, float[C] v",
        "y = BatchNormalization(x, s, b, m, v)",
    )
    inferred = check_against_ort(text, XYZ)
    assert inferred.shape("y") == ["N", "C", "H"]


@pytest.mark.parametrize("opset", [14, 15])
def test_batch_normalization_training_outputs(opset):
    text = model_text(
        opset,
        "float[N, C, H] x, float[C] s, float[C] b, float[C] m, float[C] v",
        "y, rm, rv = BatchNormalization<training_mode=1>(x, s, b, m, v)",
        "float y, float rm, float rv",
    )
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4}])
    assert inferred.shape("rm") == ["C"] and inferred.shape("rv") == ["C"]


@pytest.mark.parametrize("opset", [7, 9])
def test_batch_normalization_legacy_outputs(opset):
    text = model_text(
        opset,
        "float[N, C, H] x, float[C] s, float[C] b, float[C] m, float[C] v",
        "y, rm, rv, sm, sv = BatchNormalization(x, s, b, m, v)",
        "float y, float rm, float rv, float sm, float sv",
    )
    inferred = check_against_ort(text, [{"N": 2, "C": 3, "H": 4}])
    assert [inferred.shape(n) for n in ("rm", "rv", "sm", "sv")] == [["C"]] * 4


@pytest.mark.parametrize(("opset", "body", "inputs"), [
    (6, "y = InstanceNormalization(x, s, b)", "float[N, C, H] x, float[C] s, float[C] b"),
    (22, "y = InstanceNormalization(x, s, b)", "float[N, C, H] x, float[C] s, float[C] b"),
    (13, "y = LpNormalization<axis=1, p=1>(x)", "float[N, C, H] x"),
    (22, "y = LpNormalization(x)", "float[N, C, H] x"),
    (13, "y = MeanVarianceNormalization<axes=[0, 2]>(x)", "float[N, C, H] x"),
    (13, "y = LRN<size=3>(x)", "float[N, C, H, W] x"),
    (18, "y = GroupNormalization<num_groups=2>(x, s, b)", "float[N, 4, H] x, float[2] s, float[2] b"),
    (21, "y = GroupNormalization<num_groups=2>(x, s, b)", "float[N, 4, H] x, float[4] s, float[4] b"),
])  # fmt: skip
def test_shape_preserving_normalizations(opset, body, inputs):
    bindings = [{"N": 2, "C": 3, "H": 4, "W": 5}, {"N": 1, "C": 2, "H": 3, "W": 2}]
    inferred = check_against_ort(model_text(opset, inputs, body), bindings)
    assert inferred.dims("y") == inferred.context.shape_of(inferred.model.graph.inputs[0])


def test_group_normalization_indivisible_channels():
    text = model_text(
        21,
        "float[N, 5, H] x, float[5] s, float[5] b",
        "y = GroupNormalization<num_groups=2>(x, s, b)",
    )
    inferred = infer(text)
    assert inferred.shape("y") is None
    assert any("divisible" in e for e in inferred.errors)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize(
    "axes", [[], [0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2], [-1, -3]], ids=str
)
def test_reduce_every_axes_subset(axes, keepdims):
    values = ", ".join(str(a) for a in axes)
    body = f"a = Constant<value=int64[{len(axes)}] {{{values}}}>()\ny = ReduceSum<keepdims={keepdims}>(x, a)"
    inferred = check_against_ort(model_text(13, "float[N, C, H] x", body), XYZ)
    reduced = {a % 3 for a in axes} if axes else {0, 1, 2}
    dims = ["N", "C", "H"]
    if keepdims:
        expected = [1 if k in reduced else d for k, d in enumerate(dims)]
    else:
        expected = [d for k, d in enumerate(dims) if k not in reduced]
    assert inferred.shape("y") == expected


def test_reduce_partly_known_axes_keepdims():
    # axes = [1, a]: axis 1 is certainly reduced, the others may be.
    body = """
        one = Constant<value=int64[1] {1}>()
        axes = Concat<axis=0>(one, a)
        y = ReduceMean<keepdims=1>(x, axes)
    """
    text = model_text(18, "float[N, C, H] x, int64[1] a", body)
    inferred = check_against_ort(text, XYZ, _axes([0]))
    shape = inferred.shape("y")
    assert shape[1] == 1 and shape[0] != "N" and shape[2] != "H"


@pytest.mark.parametrize(
    ("op", "elements", "expected"),
    [
        # onnxruntime reduces int64 in double: [2**53 + 1, 0] sums to 2**53 there, while
        # the spec's exact sum is 2**53 + 1. Where the two differ no value is published.
        ("ReduceSum", "9007199254740993, 0", None),
        ("ReduceProd", "9007199254740993, 1", None),
        ("ReduceSum", "4503599627370496, 4503599627370496", [2**53]),  # exact in double
        ("ReduceProd", "94906265, 94906265", [94906265**2]),  # just below 2**53
    ],
)
def test_reduce_value_only_where_double_is_exact(op, elements, expected):
    body = f"c = Constant<value=int64[2] {{{elements}}}>()\ny = {op}<keepdims=0>(c)"
    inferred = check_against_ort(model_text(18, "float[N] x", body, "int64 y"), [{"N": 1}])
    assert inferred.elements("y") == expected
