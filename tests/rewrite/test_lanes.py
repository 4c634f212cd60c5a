"""VectorizeShapeLanesPass: per-dim scalar chains gathered by a Concat, as one vector chain.

Firing cases run before and after in onnxruntime (zero-size dims included); declining
cases name their reason.
"""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import VectorizeShapeLanesPass
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    ops,
)

SIZES = [
    {"N": 0, "C": 3, "H": 0, "W": 3},
    {"N": 1, "C": 1, "H": 1, "W": 1},
    {"N": 2, "C": 2, "H": 7, "W": 10},
]

# convnet: Resize sizes [N, C, (H + 1) // 2 + 1, (W + 1) // 2 + 1], lane by lane.
CONVNET = """
    g (float[N, C, H, W] x) => (int64[4] sizes) {
        one = Constant<value = int64 {1}>()
        two = Constant<value = int64 {2}>()
        flat = Constant<value = int64[1] {1}>()
        h = Shape<start = 2, end = 3>(x)
        hs = Squeeze(h)
        w = Shape<start = 3, end = 4>(x)
        ws = Squeeze(w)
        h1 = Add(hs, one)
        h2 = Div(h1, two)
        h3 = Add(one, h2)
        w1 = Add(ws, one)
        w2 = Div(w1, two)
        w3 = Add(one, w2)
        hr = Reshape(h3, flat)
        wr = Reshape(w3, flat)
        nc = Shape<start = 0, end = 2>(x)
        sizes = Concat<axis = 0>(nc, hr, wr)
    }
"""


def test_per_dim_chains_become_one_vector_chain():
    before, m, rewrite = apply_pass(VectorizeShapeLanesPass, CONVNET)
    assert rewrite.fired == {"vectorize_lanes": 1}
    # Shape(x, 0, 4), then +[0, 0, 1, 1], /[1, 1, 2, 2], [0, 0, 1, 1]+ : the run of
    # bare dims N, C joins with neutral constants.
    assert ops(m) == ["Shape", "Add", "Div", "Add", "Concat"]
    assert_equivalent(before, m, SIZES)


def test_a_run_with_a_proven_int_is_left_to_proven_values():
    # C == 3 is a proven int: Shape(x, 0, 2) stays for ProvenValues (which can write the
    # 3 as a constant); the H and W lanes still merge.
    before, m, rewrite = apply_pass(
        VectorizeShapeLanesPass, CONVNET.replace("float[N, C, H, W]", "float[N, 3, H, W]")
    )
    assert rewrite.fired == {"vectorize_lanes": 1}
    assert sorted(ops(m)) == ["Add", "Add", "Concat", "Div", "Shape", "Shape"]
    assert_equivalent(before, m, SIZES)


def test_a_gathered_dim_is_a_lane():
    before, m, rewrite = apply_pass(
        VectorizeShapeLanesPass,
        """
        g (float[N, H, W] x) => (int64[2] s) {
            sx = Shape(x)
            i1 = Constant<value = int64 {1}>()
            i2 = Constant<value = int64 {-1}>()
            three = Constant<value = int64 {3}>()
            four = Constant<value = int64 {4}>()
            a = Gather(sx, i1)
            b = Gather(sx, i2)
            a3 = Mul(a, three)
            b3 = Mul(b, four)
            ax = Constant<value = int64[1] {0}>()
            au = Unsqueeze(a3, ax)
            bu = Unsqueeze(b3, ax)
            s = Concat<axis = 0>(au, bu)
        }
        """,
    )
    assert rewrite.fired == {"vectorize_lanes": 1}
    assert ops(m) == ["Shape", "Mul", "Concat"]
    assert_equivalent(before, m, SIZES)


DECLINES = {
    "the lanes apply different ops": (
        CONVNET.replace("w2 = Div(w1, two)", "w2 = Mul(w1, two)")
        .replace("sizes = Concat<axis = 0>(nc, hr, wr)", "sizes = Concat<axis = 0>(hr, wr)")
        .replace("int64[4] sizes", "int64[2] sizes"),
        "the lanes apply different ops",
    ),
    # 0 - d is not d: a bare dim cannot join a lane computing c - d.
    "a bare dim next to a constant-left Sub": (
        """
        g (float[N, H, W] x) => (int64[2] s) {
            five = Constant<value = int64 {5}>()
            flat = Constant<value = int64[1] {1}>()
            n = Shape<start = 0, end = 1>(x)
            h = Shape<start = 1, end = 2>(x)
            hs = Squeeze(h)
            d = Sub(five, hs)
            dr = Reshape(d, flat)
            s = Concat<axis = 0>(n, dr)
        }
        """,
        "the lanes apply different ops",
    ),
    "every lane is used elsewhere": (
        """
        g (float[N, H, W] x) => (int64[2] s, int64 h1, int64 w1) {
            h = Shape<start = 1, end = 2>(x)
            hs = Squeeze(h)
            w = Shape<start = 2, end = 3>(x)
            ws = Squeeze(w)
            one = Constant<value = int64 {1}>()
            h1 = Add(hs, one)
            w1 = Add(ws, one)
            flat = Constant<value = int64[1] {1}>()
            hr = Reshape(h1, flat)
            wr = Reshape(w1, flat)
            s = Concat<axis = 0>(hr, wr)
        }
        """,
        "removes no more nodes than it adds",
    ),
}


@pytest.mark.parametrize("case", list(DECLINES))
def test_lanes_decline_with_reason(case):
    """Each group is kept, with its reason."""
    body, reason = DECLINES[case]
    _, _, rewrite = apply_pass(VectorizeShapeLanesPass, body)
    assert not rewrite.fired
    assert reason in rewrite.declined


def test_lanes_of_two_tensors_are_not_read_from_one():
    """Dim 2 of ``x`` then dim 3 of ``z``: consecutive axes, but of two tensors (found by
    a mutation audit: a vector ``Shape(x, 2, 4)`` would read ``x``'s dim 3)."""
    body = CONVNET.replace(
        "g (float[N, C, H, W] x) => (int64[4] sizes) {",
        "g (float[N, C, H, W] x, float[N, C, H, V] z) => (int64[4] sizes) {",
    ).replace("w = Shape<start = 3, end = 4>(x)", "w = Shape<start = 3, end = 4>(z)")
    before, m, p = apply_pass(VectorizeShapeLanesPass, body)
    assert p.fired == {"vectorize_lanes": 1}  # N, C and x's H only
    assert any(n.op_type == "Shape" and n.inputs[0].name == "z" for n in m.graph)
    assert_equivalent(before, m, [{**s, "V": s["W"] + 2} for s in SIZES])


def test_lanes_of_dims_out_of_order_are_not_read_as_a_run():
    """W's lane then H's: one tensor, but not consecutive axes (found by a mutation audit:
    only fuzz seed 100052 had them; ``Shape(x, 0, 4)`` would give H where W goes)."""
    body = CONVNET.replace("Concat<axis = 0>(nc, hr, wr)", "Concat<axis = 0>(nc, wr, hr)")
    before, m, p = apply_pass(VectorizeShapeLanesPass, body)
    assert not p.fired
    assert_equivalent(before, m, SIZES)
