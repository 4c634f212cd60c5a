"""ReshapesAroundElementwisePass: reshapes into a layout and back around element-wise ops.

Firing cases run before and after in onnxruntime (sizes 0 and 1 included, floats bit for
bit); declining cases name their reason and keep the graph.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import ReshapesAroundElementwisePass
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, ops

SIZES = [{"N": 0, "S": 0}, {"N": 1, "S": 1}, {"N": 3, "S": 3}]

FIRES = {
    # GPT-2's Conv1D: Gemm output viewed 3-D, tanh-GELU, viewed back to 2-D
    "gelu_between_views": (
        """
        g (float[N, 8] x) => (float[N, 8] y) {
            t3 = Constant<value = int64[3] {0, 2, 4}>()
            r = Reshape(x, t3)
            half = Constant<value = float {0.5}>()
            three = Constant<value = float[1] {3.0}>()
            c = Constant<value = float[1, 1] {0.044715}>()
            p = Pow(r, three)
            m = Mul(p, c)
            a = Add(r, m)
            t = Tanh(a)
            h = Mul(half, r)
            one = Constant<value = float {1.0}>()
            t1 = Add(t, one)
            z = Mul(h, t1)
            t2 = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(z, t2)
        }
        """,
        ["Pow", "Mul", "Add", "Tanh", "Mul", "Add", "Mul"],
    ),
    "unsqueeze_then_squeeze_with_two_ends": (
        """
        g (float[N, 4] x) => (float[N, 4] y, float[N, 4] w) {
            ax = Constant<value = int64[1] {1}>()
            u = Unsqueeze(x, ax)
            e = Exp(u)
            s = Squeeze(e, ax)
            y = Relu(s)
            f = Flatten<axis = 1>(e)
            w = Neg(f)
        }
        """,
        ["Exp", "Relu", "Neg"],
    ),
    # DeBERTa's relative positions: int64 clipped between two views
    "integer_tensor_and_a_reshape_back_as_graph_output": (
        """
        g (int64[N, 5] x) => (int64[N, 5] y) {
            ax = Constant<value = int64[1] {0}>()
            u = Unsqueeze(x, ax)
            lo = Constant<value = int64 {-2}>()
            hi = Constant<value = int64 {2}>()
            c = Clip(u, lo, hi)
            y = Squeeze(c, ax)
        }
        """,
        ["Clip"],
    ),
    # DeBERTa-v2: relative positions viewed [1, 1, S, S], clipped, squeezed to [1, S, S]:
    # the Clip runs on [S, S] and one Unsqueeze gives the [1, S, S]
    "a_reshape_back_that_keeps_a_size_one_axis": (
        """
        g (int64[S, S] x) => (int64[1, S, S] y) {
            axes = Constant<value = int64[2] {0, 1}>()
            u = Unsqueeze(x, axes)
            lo = Constant<value = int64 {-2}>()
            hi = Constant<value = int64 {2}>()
            c = Clip(u, lo, hi)
            one = Constant<value = int64[1] {1}>()
            y = Squeeze(c, one)
        }
        """,
        ["Clip", "Unsqueeze"],
    ),
    "a_direct_reshape_back_next_to_the_element_wise_use": (
        """
        g (float[N, 6] x) => (float[N, 6] y) {
            t3 = Constant<value = int64[3] {0, 2, 3}>()
            r = Reshape(x, t3)
            s = Sigmoid(r)
            t2 = Constant<value = int64[2] {0, 6}>()
            b1 = Reshape(s, t2)
            b2 = Reshape(r, t2)
            y = Mul(b1, b2)
        }
        """,
        ["Sigmoid", "Mul"],
    ),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_reshapes_go_and_outputs_stay(case):
    body, expected_ops = FIRES[case]
    before, after, rewrite = apply_pass(ReshapesAroundElementwisePass, body)
    assert rewrite.fired["reshapes_around_elementwise"] == 1, dict(rewrite.declined)
    assert ops(after) == expected_ops
    assert [v.name for v in after.graph.outputs] == [v.name for v in before.graph.output]
    assert_equivalent(before, after, SIZES)


DECLINES = {
    "an operand of the element-wise ops is not one element": """
        g (float[N, 8] x, float[4] b) => (float[N, 8] y) {
            t3 = Constant<value = int64[3] {0, 2, 4}>()
            r = Reshape(x, t3)
            a = Add(r, b)
            t2 = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(a, t2)
        }
    """,
    "an element-wise result has another use": """
        g (float[N, 8] x) => (float[N, 8] y, float[N, 2, 4] w) {
            t3 = Constant<value = int64[3] {0, 2, 4}>()
            r = Reshape(x, t3)
            a = Tanh(r)
            w = Softmax<axis = 2>(a)
            t2 = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(a, t2)
        }
    """,
    "an element-wise result is a graph output": """
        g (float[N, 8] x) => (float[N, 8] y, float[N, 2, 4] a) {
            t3 = Constant<value = int64[3] {0, 2, 4}>()
            r = Reshape(x, t3)
            a = Tanh(r)
            t2 = Constant<value = int64[2] {-1, 8}>()
            y = Reshape(a, t2)
        }
    """,
    "a reshape back is not proven to give the input's shape": """
        g (float[N, 8] x) => (float[N, 4, 2] y) {
            t3 = Constant<value = int64[3] {0, 2, 4}>()
            r = Reshape(x, t3)
            a = Tanh(r)
            t2 = Constant<value = int64[3] {0, 4, 2}>()
            y = Reshape(a, t2)
        }
    """,
    # a one-element operand of a higher rank than x broadcasts x's layout up
    "an operand of the element-wise ops is not one element (rank)": """
        g (float[8] x) => (float[8] y) {
            t3 = Constant<value = int64[2] {2, 4}>()
            r = Reshape(x, t3)
            c = Constant<value = float[1, 1] {2.0}>()
            a = Mul(r, c)
            t2 = Constant<value = int64[1] {8}>()
            y = Reshape(a, t2)
        }
    """,
    "one element": """
        g (int64[1] x) => (int64[1] y) {
            s = Squeeze(x)
            two = Constant<value = int64 {2}>()
            a = Mul(s, two)
            ax = Constant<value = int64[1] {0}>()
            y = Unsqueeze(a, ax)
        }
    """,
}


@pytest.mark.parametrize("case", sorted(DECLINES))
def test_declines_with_reason(case):
    before, after, rewrite = apply_pass(ReshapesAroundElementwisePass, DECLINES[case])
    assert not rewrite.fired
    assert rewrite.declined[case.split(" (")[0]] >= 1, dict(rewrite.declined)
    assert len(ops(after)) == len([n for n in before.graph.node if n.op_type != "Constant"])
