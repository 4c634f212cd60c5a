"""``fold_float_ranges``: a float ``Range`` of constants becomes ONNX's accumulated values.

Each folded case runs in onnxruntime before and after (N = 0, 1, 3) and must give the same
outputs bit for bit; ``numpy.arange`` (the folder's reference) gives other bits for most
of them, which is why the exact-floats policy kept such a ``Range`` before. A declined
case keeps its ``Range``.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnx_symdims
from onnx_symdims.rewrite._fold_range import MAX_ELEMENTS, fold_float_ranges
from tests.rewrite._rewrite_testing import assert_equivalent, model, ops, proto

SIZES = [{"N": 0}, {"N": 1}, {"N": 3}]


def _range_model(dtype: str, start: str, limit: str, delta: str, count: int | str):
    return model(
        f"""
        g ({dtype}[N, {count}] x) => ({dtype}[N, {count}] y)
        <{dtype} s = {{{start}}}, {dtype} l = {{{limit}}}, {dtype} d = {{{delta}}}>
        {{
            r = Range(s, l, d)
            y = Add(x, r)
        }}
        """
    )


FOLDS = [
    ("float", "-1.0", "1.0", "0.4", 5),  # affine_grid's linspace steps
    ("float", "0.5", "-3.2", "-0.7", 6),  # a negative step
    ("float", "-3.3", "7.2", "0.13", 81),
    ("double", "0.0", "1.0", "0.1", 10),
    ("double", "-2.5", "3.0", "0.55", 10),
    ("float", "2.0", "1.0", "0.5", 0),  # empty: limit below start
]


@pytest.mark.parametrize(("dtype", "start", "limit", "delta", "count"), FOLDS)
def test_a_float_range_of_constants_folds_to_what_onnxruntime_computes(
    dtype, start, limit, delta, count
):
    m = _range_model(dtype, start, limit, delta, count)
    before = proto(m)
    assert fold_float_ranges(m) == 1
    assert ops(m) == ["Add"]
    assert_equivalent(before, m, SIZES)


def test_numpy_arange_would_have_given_other_bits():
    m = _range_model("float", "-3.3", "7.2", "0.13", 81)
    fold_float_ranges(m)
    folded = m.graph.node(0).inputs[1].const_value.numpy()
    arange = np.arange(np.float32(-3.3), np.float32(7.2), np.float32(0.13), dtype=np.float32)
    assert not np.array_equal(folded, arange)


DECLINES = {
    # 0.3/0.1 is 3 in float and 3.0000000745 in double (onnxruntime counts 4): unclear
    "count_differs_by_precision": _range_model("float", "0.0", "0.3", "0.1", "?"),
    # 81 elements in onnxruntime's double count, 80 in ONNX's float inference
    "count_differs_between_runtime_and_inference": _range_model(
        "float", "-3.3", "7.1", "0.13", "?"
    ),
    "zero_delta": _range_model("float", "0.0", "1.0", "0.0", "?"),
    "nan_limit": _range_model("float", "0.0", "NaN", "0.5", "?"),
    "integer_range_left_to_the_folder": _range_model("int64", "0", "6", "2", 3),
    "too_long": _range_model("float", "0.0", str(float(MAX_ELEMENTS + 1)), "1.0", "?"),
    "start_an_input": model(
        """
        g (float[N, 4] x, float s) => (float[N, 4] y) <float l = {4.0}, float d = {1.0}> {
            r = Range(s, l, d)
            y = Add(x, r)
        }
        """
    ),
    "graph_output": model(
        """
        g (float[N] x) => (float[?] r) <float s = {0.0}, float l = {1.0}, float d = {0.25}> {
            r = Range(s, l, d)
        }
        """
    ),
}


@pytest.mark.parametrize("name", sorted(DECLINES))
def test_declines(name):
    m = DECLINES[name]
    assert fold_float_ranges(m) == 0
    assert "Range" in ops(m)


def test_optimize_folds_an_affine_grid_linspace_and_what_follows():
    """``affine_grid``'s base grid: a float ``Range``, then exact float math on it."""
    m = model(
        """
        g (float[N, 5] x) => (float[N, 5] y)
        <float s = {-1.0}, float l = {1.0}, float d = {0.4}, float half = {0.2}, float c = {0.0}>
        {
            r = Range(s, l, d)
            lt = Less(r, c)
            a = Add(r, half)
            b = Sub(r, half)
            w = Where(lt, a, b)
            y = Mul(x, w)
        }
        """
    )
    before = proto(m)
    result = onnx_symdims.optimize(m)
    assert ops(result) == ["Mul"]
    assert_equivalent(before, result, SIZES)
