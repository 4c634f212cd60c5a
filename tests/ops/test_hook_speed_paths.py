"""The hooks' inline fast paths give what their general paths give, onnxruntime agreeing.

Unsqueeze by one constant axis, Gather of a scalar index from a shape vector, Range with
a step of 1, and MatMulIntegerToFloat of activations by a weight matrix each have a path
that skips the general one's calls; these tests drive both sides of each path's
conditions (negative and out-of-range axes and indices, empty ranges, a contraction dim
that differs) and check every dim, dtype and known element against onnxruntime.
"""

from __future__ import annotations

import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text, same_dims

_SIZES = [{"N": 1, "S": 3}, {"N": 2, "S": 5}, {"N": 0, "S": 1}]


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_unsqueeze_by_one_constant_axis(axis):
    text = model_text(
        13,
        "float[N, S] x",
        f"a = Constant<value = int64[1] {{{axis}}}>()\ny = Unsqueeze(x, a)",
    )
    inferred = check_against_ort(text, _SIZES)
    expected = ["N", "S"]
    expected.insert(axis + 3 if axis < 0 else axis, 1)
    assert same_dims(inferred.dims("y"), expected)


def test_unsqueeze_keeps_the_elements_of_a_shape_scalar():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the exported reshape chain.
    body = """
        s = Shape(x)
        i1 = Constant<value = int64 {1}>()
        d = Gather<axis = 0>(s, i1)
        a0 = Constant<value = int64[1] {0}>()
        u = Unsqueeze(d, a0)
        m = Constant<value = int64[1] {-1}>()
        t = Concat<axis = 0>(m, u)
        y = Reshape(x, t)
    """
    inferred = check_against_ort(model_text(13, "float[N, S] x", body), _SIZES)
    assert same_dims(inferred.dims("y"), ["N", "S"])
    assert inferred.context.value_of(inferred.value("u")) == (expr.sym("S"),)


@pytest.mark.parametrize("axis", [2, -3])
def test_unsqueeze_by_an_axis_out_of_range_fails_the_node(axis):
    text = model_text(
        13,
        "float[N] x",
        f"a = Constant<value = int64[1] {{{axis}}}>()\ny = Unsqueeze(x, a)",
    )
    assert any("out of range" in message for message in infer(text).errors)


@pytest.mark.parametrize(
    ("index", "attribute", "expected"),
    [
        (0, "", "N"),
        (1, "", "S"),
        (-1, "", "S"),
        (-2, "<axis = 0>", "N"),
        (1, "<axis = -1>", "S"),
    ],
)
def test_gather_of_a_scalar_index_from_a_shape(index, attribute, expected):
    body = f"""
        s = Shape(x)
        i = Constant<value = int64 {{{index}}}>()
        g = Gather{attribute}(s, i)
        z = Cast<to = 1>(g)
        y = Add(x, z)
    """
    inferred = check_against_ort(model_text(13, "float[N, S] x", body), _SIZES)
    assert inferred.dims("g") == ()
    assert inferred.context.value_of(inferred.value("g")) == (expr.sym(expected),)


def test_gather_of_a_vector_of_indices_from_a_shape():
    # indices of rank 1: the general path (not the scalar one)
    body = """
        s = Shape(x)
        i = Constant<value = int64[2] {1, 0}>()
        y = Gather(s, i)
    """
    text = model_text(13, "float[N, S] x", body, "int64 y")
    inferred = check_against_ort(text, _SIZES)
    assert inferred.context.value_of(inferred.value("y")) == (expr.sym("S"), expr.sym("N"))


@pytest.mark.parametrize("index", [2, -3])
def test_gather_of_a_scalar_index_out_of_range_fails_the_node(index):
    body = f"""
        s = Shape(x)
        i = Constant<value = int64 {{{index}}}>()
        y = Gather(s, i)
    """
    text = model_text(13, "float[N, S] x", body, "int64 y")
    assert any("out of range" in message for message in infer(text).errors)


@pytest.mark.parametrize(
    ("start", "delta", "expected"),
    [(0, 1, "N"), (2, 1, "max(N - 2, 0)"), (0, 2, "(N + 1)//2"), (1, 3, "(N + 1)//3")],
)
def test_range_up_to_a_dim(start, delta, expected):
    body = f"""
        s = Shape(x)
        i0 = Constant<value = int64 {{0}}>()
        n = Gather(s, i0)
        a = Constant<value = int64 {{{start}}}>()
        d = Constant<value = int64 {{{delta}}}>()
        y = Range(a, n, d)
    """
    sizes = [{"N": n} for n in (0, 1, 2, 3, 7)]
    inferred = check_against_ort(model_text(13, "float[N] x", body, "int64 y"), sizes)
    assert same_dims(inferred.dims("y"), [expected])


_MS = {"com.microsoft": 1}


def test_matmul_integer_to_float_of_activations_by_a_weight_matrix():
    body = """
        y = com.microsoft.MatMulIntegerToFloat(a, b, sa, sb)
    """
    text = model_text(
        13,
        "uint8[N, S, 4] a, int8[4, 3] b, float sa, float[3] sb",
        body,
        "float y",
        domains=_MS,
    )
    inferred = check_against_ort(text, _SIZES)
    assert same_dims(inferred.dims("y"), ["N", "S", 3])


def test_matmul_integer_to_float_with_batched_weights_broadcasts():
    # B of rank 3: the general matmul path
    text = model_text(
        13,
        "uint8[N, S, 4] a, int8[1, 4, 3] b, float sa, float[3] sb",
        "y = com.microsoft.MatMulIntegerToFloat(a, b, sa, sb)",
        "float y",
        domains=_MS,
    )
    inferred = check_against_ort(text, _SIZES)
    assert same_dims(inferred.dims("y"), ["N", "S", 3])


def test_matmul_integer_to_float_with_different_contraction_dims_fails_the_node():
    text = model_text(
        13,
        "uint8[N, 5] a, int8[4, 3] b, float sa, float[3] sb",
        "y = com.microsoft.MatMulIntegerToFloat(a, b, sa, sb)",
        "float y",
        domains=_MS,
    )
    assert any("inner dimensions differ" in message for message in infer(text).errors)
