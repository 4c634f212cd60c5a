"""``Squeeze`` with runtime axes and float ``Range`` over cast integers, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_against_ort, infer, model_text


def _axes(values):
    return {"a": np.array(values, dtype=np.int64)}


# (input dims, axes fed at run time, expected output)
SINGLE_CANDIDATE_CASES = [
    ("3, 1, 4", [1], [3, 4]),
    ("3, 1, 4", [-2], [3, 4]),
    ("N, 4", [0], [4]),
    ("2, N, 5, 7", [1], [2, 5, 7]),
    # A repeated axis is squeezed once by onnxruntime: the only 1 still goes.
    ("3, 1, 4", [1, -2], [3, 4]),
    ("N, 4", [0, 0, -2], [4]),
]


@pytest.mark.parametrize(("dims", "axes", "expected"), SINGLE_CANDIDATE_CASES)
def test_squeeze_runtime_axes_with_a_single_dim_that_can_be_1(dims, axes, expected):
    # Every squeezed dim must be 1: with one dim that can be 1, the axes point at it.
    text = model_text(13, f"float[{dims}] x, int64[{len(axes)}] a", "y = Squeeze(x, a)")
    inferred = check_against_ort(text, [{"N": 1}], _axes(axes))
    assert inferred.shape("y") == expected


def test_squeeze_one_runtime_axis_between_two_dims_that_can_be_1():
    # Axis 0 (N == 1) or axis 1 goes: dim 0 is N or 1, dim 1 is 3 either way.
    text = model_text(13, "float[N, 1, 3] x, int64[1] a", "y = Squeeze(x, a)")
    feeds = {"a": lambda b: np.array([0 if b["N"] == 1 else 1], dtype=np.int64)}
    inferred = check_against_ort(text, [{"N": 1}, {"N": 4}, {"N": 0}], feeds)
    first, second = inferred.dims("y")
    assert second == 3
    assert isinstance(first, expr.DimExpr) and inferred.context.is_generated(first.name)
    n = expr.sym("N")
    assert inferred.context.has_less_equal_constraint(first, expr.dmax(n, 1))
    assert inferred.context.has_less_equal_constraint(expr.dmin(n, 1), first)


def test_squeeze_one_runtime_axis_among_equal_dims_is_exact():
    # Whichever of the three 1s goes, the output is [1, 1, 5].
    text = model_text(13, "float[1, 1, 1, 5] x, int64[1] a", "y = Squeeze(x, a)")
    for axis in (0, 1, 2, -2):
        inferred = check_against_ort(text, [{}], _axes([axis]))
        assert inferred.shape("y") == [1, 1, 5]


@pytest.mark.parametrize("axes", [[0, 1], [1, 1], [0, -3]], ids=str)
def test_squeeze_two_runtime_axes_over_two_candidates_has_unknown_rank(axes):
    # [1, 1] squeezes one dim, [0, 1] two: the length of the axes is no rank.
    text = model_text(13, "float[N, 1, 3] x, int64[2] a", "y = Squeeze(x, a)")
    inferred = check_against_ort(text, [{"N": 1}], _axes(axes))
    assert inferred.shape("y") is None


# (float type, its code, integer size cast to it, expected length)
FLOAT_RANGE_CASES = [
    ("float", 1, 10, [10]),
    ("double", 11, 7, [7]),
    ("float", 1, 0, [0]),
]


@pytest.mark.parametrize(("name", "code", "size", "expected"), FLOAT_RANGE_CASES)
def test_float_range_up_to_a_cast_integer(name, code, size, expected):
    # The expanded window functions: Range(0.0, Cast(size), 1.0) over Constant nodes.
    inferred = check_against_ort(_float_range(name, code, size), [{"N": 1}])
    assert inferred.shape("y") == expected


def test_float_range_up_to_an_integer_float_rounds_is_fresh():
    # float32 holds integers up to 2**24 exactly; 2**24 + 1 is rounded by the Cast.
    inferred = infer(_float_range("float", 1, 2**24 + 1))
    (length,) = inferred.dims("y")
    assert inferred.context.is_generated(length.name)


def _float_range(name: str, code: int, size: int) -> str:
    return model_text(
        18,
        "float[N] q",
        f"""
        start = Constant<value = {name} {{0}}>()
        step = Constant<value = {name} {{1}}>()
        size = Constant<value = int32 {{{size}}}>()
        limit = Cast<to = {code}>(size)
        y = Range(start, limit, step)
        """,
        f"{name} y",
    )


@pytest.mark.parametrize("unsigned", [12, 13], ids=["uint32", "uint64"])
def test_a_symbolic_unsigned_element_that_may_be_negative_is_unknown(unsigned):
    # N - 5 wraps to 2**64 - 3 (2**32 - 3) at N = 2: Less(u, 3) is false there, so the
    # ConstantOfShape is empty; exact arithmetic would say N - 5 < 3 and a length of 1.
    text = model_text(
        18,
        "float[N] x",
        f"""
        s = Shape(x)
        d = Sub(s, c5)
        u = Cast<to = {unsigned}>(d)
        k = Cast<to = {unsigned}>(c3)
        less = Less(u, k)
        b = Cast<to = 7>(less)
        y = ConstantOfShape(b)
        """,
        "float[?] y",
        constants="int64[1] c5 = {5}, int64[1] c3 = {3}",
    )
    check_against_ort(text, [{"N": 2}, {"N": 7}, {"N": 0}, {"N": 9}])


def test_a_symbolic_unsigned_element_proven_nonnegative_is_kept():
    text = model_text(
        18,
        "float[N] x",
        """
        s = Shape(x)
        a = Add(s, c5)
        u = Cast<to = 13>(a)
        b = Cast<to = 7>(u)
        y = ConstantOfShape(b)
        """,
        "float[?] y",
        constants="int64[1] c5 = {5}",
    )
    inferred = check_against_ort(text, [{"N": 2}, {"N": 0}])
    assert inferred.shape("y") == ["N+5"]


# (start, limit, delta, expected length): counted exactly, not through a double quotient.
HUGE_INT_RANGE_CASES = [
    (10, -(2**63) + 1, -(2**62), 3),  # (limit - start) / delta rounds to 2.0: 3 elements
    (0, 2**62, 2**61 - 1, 3),
    (5, 5, 7, 0),
    (0, 10, 3, 4),
]


@pytest.mark.parametrize(("start", "limit", "delta", "expected"), HUGE_INT_RANGE_CASES)
def test_int_range_length_of_huge_constants(start, limit, delta, expected):
    body = (
        f"s = Constant<value = int64 {{{start}}}>()\n"
        f"l = Constant<value = int64 {{{limit}}}>()\n"
        f"d = Constant<value = int64 {{{delta}}}>()\n"
        "y = Range(s, l, d)"
    )
    inferred = check_against_ort(model_text(18, "float[N] q", body, "int64 y"), [{"N": 1}])
    assert inferred.shape("y") == [expected]
