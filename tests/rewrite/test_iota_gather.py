"""GatherOfIotaPass: a Gather of every index in order is a Reshape.

Firing cases run before and after in onnxruntime (sizes 0 and 1 included); declining
cases name their reason, or are not candidates at all.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import GatherOfIotaPass
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    ops,
    reshape_targets,
)

SIZES = [{"B": 0}, {"B": 1}, {"B": 3}]

FIRES = {
    # TorchScript's flat mask gather with the batch fixed at 1: the grid is a constant
    "flat_mask_gather_with_a_constant_grid": (
        """
        g (int64[1, 8] m) => (int64[1, 1, 1, 8, 1] y) {
            f = Flatten<axis = 2>(m)
            i = Constant<value = int64[1, 1, 1, 8] {0, 1, 2, 3, 4, 5, 6, 7}>()
            y = Gather(f, i)
        }
        """,
        [[1, 1, 1, 8, 1]],
    ),
    "symbolic_dims_before_the_axis_are_copied": (
        """
        g (float[B, 6] x) => (float[B, 1, 2, 3] y) {
            i = Constant<value = int64[1, 2, 3] {0, 1, 2, 3, 4, 5}>()
            y = Gather<axis = 1>(x, i)
        }
        """,
        [[0, 1, 2, 3]],
    ),
    "symbolic_dims_after_a_rank_1_index_are_copied": (
        """
        g (float[3, B] x) => (float[3, B] y) {
            i = Constant<value = int64[3] {0, 1, 2}>()
            y = Gather(x, i)
        }
        """,
        [[3, 0]],
    ),
    # x[:, 0] of a size-1 axis: the scalar index 0 drops the axis
    "scalar_index_of_a_size_one_axis": (
        """
        g (float[B, 1, 4] x) => (float[B, 4] y) {
            i = Constant<value = int64 {0}>()
            y = Gather<axis = 1>(x, i)
        }
        """,
        [[0, 4]],
    ),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_gather_becomes_a_reshape(case):
    body, targets = FIRES[case]
    before, after, rewrite = apply_pass(GatherOfIotaPass, body)
    assert rewrite.fired == {"gather_of_iota": 1}, dict(rewrite.declined)
    assert [op for op in ops(after) if op != "Flatten"] == ["Reshape"]
    assert reshape_targets(after) == targets
    assert_equivalent(before, after, SIZES)


DECLINES = {
    "the indices do not cover the axis": """
        g (float[8, B] x) => (float[2, 3, B] y) {
            i = Constant<value = int64[2, 3] {0, 1, 2, 3, 4, 5}>()
            y = Gather(x, i)
        }
    """,
    "a symbolic dim after the axis moves": """
        g (float[6, B] x) => (float[2, 3, B] y) {
            i = Constant<value = int64[2, 3] {0, 1, 2, 3, 4, 5}>()
            y = Gather(x, i)
        }
    """,
}


@pytest.mark.parametrize("case", sorted(DECLINES))
def test_declines_with_reason(case):
    _, after, rewrite = apply_pass(GatherOfIotaPass, DECLINES[case])
    assert not rewrite.fired
    assert rewrite.declined[case] == 1, dict(rewrite.declined)
    assert ops(after) == ["Gather"]


@pytest.mark.parametrize(
    "indices",
    ["int64[3] {0, 2, 1}", "int64[3] {-3, -2, -1}", "int64[0] {}"],
)
def test_other_indices_are_no_candidates(indices):
    # out of order, negative (the same elements, but not proven 0..n-1), empty
    body = f"""
        g (float[3, 4] x) => (float[?, 4] y) {{
            i = Constant<value = {indices}>()
            y = Gather(x, i)
        }}
    """
    _, after, rewrite = apply_pass(GatherOfIotaPass, body)
    assert not rewrite.fired and not rewrite.declined
    assert ops(after) == ["Gather"]
