"""DropLeadingOnesBeforeBroadcastPass: a reshape prepending size-1 axes before broadcasting.

Firing cases run before and after in onnxruntime (sizes 0 and 1 included, floats bit for
bit); declining cases name their reason and keep the graph.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import DropLeadingOnesBeforeBroadcastPass
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, ops

SIZES = [{"B": 0, "S": 2, "H": 2}, {"B": 1, "S": 1, "H": 1}, {"B": 2, "S": 3, "H": 3}]

FIRES = {
    # T5's position bias: bias.unsqueeze(0) + scores
    "unsqueeze_before_add": (
        """
        g (float[H, S, S] bias, float[B, H, S, S] scores) => (float[B, H, S, S] y) {
            zero = Constant<value = int64[1] {0}>()
            u = Unsqueeze(bias, zero)
            y = Add(scores, u)
        }
        """,
        ["Add"],
    ),
    # a causal mask viewed [1, 1, S, S] before Where and And with batch-sized operands
    "reshape_before_where_and_and": (
        """
        g (bool[S, S] m, bool[B, 2, S, S] keep, float[B, 2, S, S] scores) => (float[B, 2, S, S] y) {
            ones = Constant<value = int64[2] {1, 1}>()
            s = Shape(m)
            t = Concat<axis = 0>(ones, s)
            r = Reshape(m, t)
            both = And(keep, r)
            low = Constant<value = float {-1000.0}>()
            w = Where(r, scores, low)
            y = Where(both, w, low)
        }
        """,
        ["And", "Where", "Where"],  # the target chain dies with the Reshape
    ),
    "unsqueeze_two_leading_axes_before_sub": (
        """
        g (int64[S] pos, int64[B, 3, 1, S] q) => (int64[B, 3, 1, S] y) {
            axes = Constant<value = int64[2] {0, 1}>()
            u = Unsqueeze(pos, axes)
            y = Sub(q, u)
        }
        """,
        ["Sub"],
    ),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_leading_ones_go_and_outputs_stay(case):
    body, expected_ops = FIRES[case]
    before, after, rewrite = apply_pass(DropLeadingOnesBeforeBroadcastPass, body)
    assert rewrite.fired["drop_leading_ones_before_broadcast"] == 1, dict(rewrite.declined)
    assert ops(after) == expected_ops
    assert_equivalent(before, after, SIZES)


DECLINES = {
    # Add(Unsqueeze(x), y) with y of x's rank: the output would lose its leading axis
    "no other operand of the rank of the reshaped one": """
        g (float[S] x, float[S] z) => (float[1, S] y) {
            zero = Constant<value = int64[1] {0}>()
            u = Unsqueeze(x, zero)
            y = Add(u, z)
        }
    """,
    "not only size-1 axes prepended": """
        g (float[S, 1] x, float[B, 1, S] z) => (float[B, 1, S] y) {
            t = Constant<value = int64[3] {1, 1, -1}>()
            r = Reshape(x, t)
            y = Add(z, r)
        }
    """,
}


@pytest.mark.parametrize("case", sorted(DECLINES))
def test_declines_with_reason(case):
    before, after, rewrite = apply_pass(DropLeadingOnesBeforeBroadcastPass, DECLINES[case])
    assert not rewrite.fired
    assert rewrite.declined[case] >= 1, dict(rewrite.declined)
    assert len(ops(after)) == len([n for n in before.graph.node if n.op_type != "Constant"])


def test_a_use_that_does_not_broadcast_keeps_the_reshape():
    body = """
        g (bool[S, S] m, float[B, 2, S, S] scores) => (float[B, 2, S, S] y) {
            axes = Constant<value = int64[2] {0, 1}>()
            r = Unsqueeze(m, axes)
            low = Constant<value = float {-1000.0}>()
            w = Where(r, scores, low)
            c = Cast<to = 1>(r)
            y = Mul(w, c)
        }
    """
    _, after, rewrite = apply_pass(DropLeadingOnesBeforeBroadcastPass, body)
    assert not rewrite.fired
    assert "Unsqueeze" in ops(after)


def test_the_same_value_twice_in_one_op_needs_another_operand():
    # Add(u, u): both operands become x, the output would lose the leading axis
    body = """
        g (float[S] x) => (float[1, S] y) {
            zero = Constant<value = int64[1] {0}>()
            u = Unsqueeze(x, zero)
            y = Add(u, u)
        }
    """
    _, _, rewrite = apply_pass(DropLeadingOnesBeforeBroadcastPass, body)
    assert not rewrite.fired
    assert rewrite.declined["no other operand of the rank of the reshaped one"] == 1
