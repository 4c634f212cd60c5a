"""TransposeThroughBinaryPass: firing (outputs compared in onnxruntime) and declining."""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import TransposeThroughBinaryPass
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    ops,
)

SIZES = [{"B": 0, "H": 2, "W": 3}, {"B": 1, "H": 1, "W": 1}, {"B": 2, "H": 3, "W": 4}]

# ConvNeXt's residual: both operands channels-last, summed channels-first, then back.
BOTH = """
    g (float[B, H, W, 4] a, float[B, H, W, 4] b) => (float[B, H, W, 4] y) {
        ta = Transpose<perm = [0, 3, 1, 2]>(a)
        tb = Transpose<perm = [0, 3, 1, 2]>(b)
        s = {op}(ta, tb)
        y = Transpose<perm = [0, 2, 3, 1]>(s)
    }
"""

# One operand already channels-first: the transpose moves to it.
ONE = """
    g (float[B, 4, H, W] x, float[B, H, W, 4] b) => (float[B, H, W, 4] y) {
        tb = Transpose<perm = [0, 3, 1, 2]>(b)
        s = Add(x, tb)
        y = Transpose<perm = [0, 2, 3, 1]>(s)
    }
"""


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_both_operands_transposed_alike_cancel_with_the_inverse(op):
    before, m, rewrite = apply_pass(TransposeThroughBinaryPass, BOTH.replace("{op}", op))
    assert rewrite.fired == {"transpose_through_binary": 1}
    assert ops(m) == [op]
    assert [v.name for v in m.graph.outputs] == ["y"]
    assert_equivalent(before, m, SIZES)


def test_one_transposed_operand_moves_the_transpose_to_the_other():
    before, m, rewrite = apply_pass(TransposeThroughBinaryPass, ONE)
    assert rewrite.fired == {"transpose_through_binary": 1}
    assert ops(m) == ["Transpose", "Add"]
    assert_equivalent(before, m, SIZES)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            BOTH.replace("{op}", "Add")
            .replace(
                "tb = Transpose<perm = [0, 3, 1, 2]>(b)",
                "tb = Transpose<perm = [0, 3, 2, 1]>(b)",
            )
            .replace("float[B, H, W, 4] b", "float[B, W, H, 4] b"),
            "the two Transposes permute differently",
        ),
        (
            BOTH.replace("{op}", "Add").replace(
                "=> (float[B, H, W, 4] y)", "=> (float[B, H, W, 4] y, float[B, 4, H, W] s)"
            ),
            "the result is a graph output or unused",
        ),
        (
            BOTH.replace("{op}", "Add")
            .replace(
                "y = Transpose<perm = [0, 2, 3, 1]>(s)",
                "y = Transpose<perm = [0, 2, 1, 3]>(s)",
            )
            .replace("=> (float[B, H, W, 4] y)", "=> (float[B, H, 4, W] y)"),
            "a use of the result is not the inverse Transpose",
        ),
        (
            ONE.replace(
                "=> (float[B, H, W, 4] y)", "=> (float[B, H, W, 4] y, float[B, 4, H, W] tb)"
            ),
            "one operand transposed, by a Transpose with other uses",
        ),
        (
            ONE.replace("float[B, 4, H, W] x", "float[W] x"),
            "an operand's rank is not proven equal to the perm's",
        ),
        (
            BOTH.replace("{op}", "Add")
            .replace(
                "=> (float[B, H, W, 4] y)", "=> (float[B, H, W, 4] y, float[B, H, W, 4] y2)"
            )
            .replace("    }\n", "    y2 = Transpose<perm = [0, 2, 3, 1]>(s)\n    }\n"),
            "two inverse Transposes are graph outputs",
        ),
        (
            """
            g (bool c, float[B, H, W, 4] a, float[B, H, W, 4] b) => (float[B, H, W, 4] y) {
                ta = Transpose<perm = [0, 3, 1, 2]>(a)
                tb = Transpose<perm = [0, 3, 1, 2]>(b)
                s = Add(ta, tb)
                y = If(c) <
                    then_branch = g1 () => (float[B, H, W, 4] t1) {
                        t1 = Transpose<perm = [0, 2, 3, 1]>(s)
                    },
                    else_branch = g2 () => (float[B, H, W, 4] t2) {
                        t2 = Transpose<perm = [0, 2, 3, 1]>(s)
                    }
                >
            }
            """,
            "a use of the result is not the inverse Transpose",
        ),
    ],
    ids=[
        "different_perms",
        "result_is_output",
        "not_the_inverse",
        "shared_transpose",
        "rank",
        "two_outputs",
        "inverse_in_a_subgraph",
    ],
)
def test_declines(body, reason):
    _, _, rewrite = apply_pass(TransposeThroughBinaryPass, body)
    assert not rewrite.fired
    assert reason in rewrite.declined


def test_broadcasting_operands_of_equal_rank_pair_the_same_elements():
    # b broadcasts over batch and height; the transposed operand is Sub's right one
    body = """
        g (float[B, H, W, 4] a, float[1, 1, W, 4] b) => (float[B, H, W, 4] y) {
            ta = Transpose<perm = [0, 3, 1, 2]>(a)
            tb = Transpose<perm = [0, 3, 1, 2]>(b)
            s = Sub(tb, ta)
            y = Transpose<perm = [0, 2, 3, 1]>(s)
        }
    """
    before, m, rewrite = apply_pass(TransposeThroughBinaryPass, body)
    assert rewrite.fired == {"transpose_through_binary": 1}
    assert ops(m) == ["Sub"]
    assert_equivalent(before, m, SIZES)
