"""``fold_constant_splits``: a ``Split`` of a constant becomes one initializer per chunk.

Each case is run in onnxruntime before and after (batch 0, 1 and 3); the folded model
must give the same outputs bit for bit, and a declined case must keep its ``Split``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import OptimizePass
from onnx_symdims.rewrite._fold_split import INPUT_SIZE_LIMIT, fold_constant_splits
from tests.rewrite._rewrite_testing import assert_equivalent, model, ops, proto

SIZES = [{"N": 0}, {"N": 1}, {"N": 3}]

# name: (opset, initializers, Split node); the first two chunks (2 elements each) are
# added to and multiplied with x[N, 2], all three concatenated.
_B6 = "float[6] b = {1., -2., 3., -0., 5., 6.}"
FOLDS = {
    "num_outputs_even": (18, _B6, "q, k, v = Split<axis = 0, num_outputs = 3>(b)"),
    "num_outputs_uneven_last_smaller": (
        18,
        "float[5] b = {1., 2., 3., 4., 5.}",
        "q, k, v = Split<axis = 0, num_outputs = 3>(b)",
    ),
    "sizes_as_input": (
        13,
        f"{_B6}, int64[3] s = {{2, 2, 2}}",
        "q, k, v = Split<axis = 0>(b, s)",
    ),
    "sizes_as_attribute_before_13": (
        11,
        _B6,
        "q, k, v = Split<axis = 0, split = [2, 2, 2]>(b)",
    ),
    "equal_chunks_without_sizes": (13, _B6, "q, k, v = Split<axis = 0>(b)"),
    "negative_axis_of_a_matrix": (
        18,
        "int64[2, 3] b = {1, 2, 3, 4, 5, 6}",
        "q, k, v = Split<axis = -1, num_outputs = 3>(b)",
    ),
    "uint8_chunks": (
        18,
        "uint8[6] b = {1, 0, 255, 7, 3, 9}",
        "q, k, v = Split<axis = 0, num_outputs = 3>(b)",
    ),
}


def _graph(opset: int, initializers: str, split: str):
    dtype = initializers.split("[", maxsplit=1)[0].rsplit(maxsplit=1)[-1]
    outputs = f"{dtype}[?] y0, {dtype}[?] y1, {dtype}[?] y2"
    return model(
        f"""
        g ({dtype}[N, 2] x) => ({outputs})
        <{initializers}>
        {{
            {split}
            flat = Constant<value = int64[1] {{-1}}>()
            q2 = Reshape(q, flat)
            k2 = Reshape(k, flat)
            v2 = Reshape(v, flat)
            y0 = Add(x, q2)
            y1 = Mul(x, k2)
            y2 = Concat<axis = 0>(q2, k2, v2)
        }}
        """,
        opset=opset,
    )


@pytest.mark.parametrize("case", FOLDS)
def test_a_split_of_a_constant_is_folded(case):
    opset, initializers, split = FOLDS[case]
    m = _graph(opset, initializers, split)
    before = proto(m)
    assert fold_constant_splits(m) == 1
    assert "Split" not in ops(m)
    assert_equivalent(before, m, SIZES)
    # the whole pipeline folds it too, and the reshapes and concat after it (small
    # integer chunks may be published as proven values first)
    result = OptimizePass()(ir.serde.deserialize_model(before))
    assert {n.op_type for n in result.model.graph} <= {"Add", "Mul", "Constant"}
    if initializers.startswith("float"):
        assert result.fired["FoldConstantSplit"] == 1


def test_uneven_chunks_as_onnxruntime_computes_them():
    m = model(
        """
        g (float[N] x) => (float[?] y0, float[?] y1, float[?] y2)
        <float[5] b = {1., 2., 3., 4., 5.}>
        {
            q, k, v = Split<axis = 0, num_outputs = 3>(b)
            y0 = Concat<axis = 0>(q, x)
            y1 = Concat<axis = 0>(k, x)
            y2 = Concat<axis = 0>(v, x)
        }
        """
    )
    before = proto(m)
    assert fold_constant_splits(m) == 1
    assert_equivalent(before, m, SIZES)
    chunks = [len(n.inputs[0].const_value.numpy()) for n in m.graph if n.op_type == "Concat"]
    assert chunks == [2, 2, 1]


# name: (model text, why it stays)
DECLINES = {
    "sizes_not_constant": """
        g (float[N] x, int64[2] s) => (float[?] y0, float[?] y1)
        <float[4] b = {1., 2., 3., 4.}>
        {
            q, k = Split<axis = 0>(b, s)
            y0 = Concat<axis = 0>(q, x)
            y1 = Concat<axis = 0>(k, x)
        }
    """,
    "a_chunk_is_a_graph_output": """
        g (float[N] x) => (float[?] y0, float[2] k)
        <float[4] b = {1., 2., 3., 4.}>
        {
            q, k = Split<axis = 0, num_outputs = 2>(b)
            y0 = Concat<axis = 0>(q, x)
        }
    """,
    "the_constant_is_a_graph_input": """
        g (float[N] x, float[4] b) => (float[?] y0, float[?] y1)
        <float[4] b = {1., 2., 3., 4.}>
        {
            q, k = Split<axis = 0, num_outputs = 2>(b)
            y0 = Concat<axis = 0>(q, x)
            y1 = Concat<axis = 0>(k, x)
        }
    """,
}


@pytest.mark.parametrize("case", DECLINES)
def test_a_split_that_must_stay(case):
    m = model(DECLINES[case])
    before = proto(m)
    assert fold_constant_splits(m) == 0
    assert "Split" in ops(m)
    if case != "sizes_not_constant":
        assert_equivalent(before, m, SIZES)


@pytest.mark.parametrize(
    ("split", "why"),
    [
        ("q, k = Split<axis = 0>(b, s)", "sizes that do not sum to the axis"),
        ("q, k = Split<axis = 0, num_outputs = 3>(b)", "num_outputs is not the outputs"),
        ("q, k, v = Split<axis = 0>(b)", "4 elements in 3 equal chunks"),
    ],
)
def test_an_invalid_split_is_left_to_onnxruntime(split, why):
    m = model(
        f"""
        g (float[N] x) => (float[?] y)
        <float[4] b = {{1., 2., 3., 4.}}, int64[2] s = {{1, 2}}>
        {{
            {split}
            y = Concat<axis = 0>(q, x)
        }}
        """
    )
    assert fold_constant_splits(m) == 0, why


def test_a_large_constant_read_elsewhere_is_not_copied():
    n = INPUT_SIZE_LIMIT + 2
    m = model(
        f"""
        g (float[{n}] x, float[{n}] w) => (float[{n // 2}] y, float[{n}] z) {{
            q, k = Split<axis = 0, num_outputs = 2>(w)
            y = Add(q, k)
            z = Add(x, w)
        }}
        """
    )
    w = m.graph.inputs.pop()  # a constant from here on: an initializer, not an input
    w.const_value = ir.tensor(np.full(n, 1.5, np.float32), name=w.name)
    m.graph.register_initializer(w)
    assert fold_constant_splits(m) == 0
    z = m.graph.node(2)  # once the Split alone reads it, it folds (the chunks replace it)
    z.replace_input_with(1, z.inputs[0])
    assert fold_constant_splits(m) == 1
