"""MergeDisjointSlicesPass, and reshape chains ending in a computed target.

``Slice(Slice(x, axis 1), axis 2)`` (Swin's ``x[:, 0::2, 1::2]``) becomes one ``Slice``;
``Reshape(Reshape(x, a), t)`` with a computed ``t`` becomes ``Reshape(x, t)`` when ``t``
reads the same against ``x`` (Swin's window reverse). Firing cases run before and after
in onnxruntime on sizes 0, 1 and more; declining cases name their reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import CollapseReshapeChainsPass, MergeDisjointSlicesPass
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    ops,
)
from tests.rewrite.test_layout import MINUS_ONE_NEXT_TO_MAYBE_ZERO

SIZES = [{"N": 0, "H": 4}, {"N": 1, "H": 1}, {"N": 2, "H": 0}, {"N": 3, "H": 7}]


SLICE_FIRES = {
    "swin_patch_merge": (
        # four strided slices over axes 1 and 2, through two shared axis-1 slices
        """
        g (float[N, H, H, 3] x) => (float[N, ?, ?, 12] y) {
            zero = Constant<value = int64[1] {0}>()
            one = Constant<value = int64[1] {1}>()
            two = Constant<value = int64[1] {2}>()
            big = Constant<value = int64[1] {9223372036854775807}>()
            e = Slice(x, zero, big, one, two)
            o = Slice(x, one, big, one, two)
            ee = Slice(e, zero, big, two, two)
            eo = Slice(e, one, big, two, two)
            oe = Slice(o, zero, big, two, two)
            oo = Slice(o, one, big, two, two)
            y = Concat<axis = -1>(ee, oe, eo, oo)
        }
        """,
        4,
        ["Slice", "Slice", "Slice", "Slice", "Concat"],
    ),
    "negative_axes_and_bounds_default_steps": (
        """
        g (float[N, H, 5] x) => (float[N, ?, ?] y) {
            s1 = Constant<value = int64[1] {-3}>()
            e1 = Constant<value = int64[1] {-1}>()
            a1 = Constant<value = int64[1] {-2}>()
            first = Slice(x, s1, e1, a1)
            s2 = Constant<value = int64[2] {1, 0}>()
            e2 = Constant<value = int64[2] {4, 1}>()
            a2 = Constant<value = int64[2] {-1, 0}>()
            y = Slice(first, s2, e2, a2)
        }
        """,
        1,
        ["Slice"],
    ),
    "int32_parameters_and_a_reverse_step": (
        """
        g (float[N, H] x) => (float[?, ?] y) {
            s1 = Constant<value = int32[1] {-1}>()
            e1 = Constant<value = int32[1] {-100}>()
            a1 = Constant<value = int32[1] {1}>()
            p1 = Constant<value = int32[1] {-1}>()
            first = Slice(x, s1, e1, a1, p1)
            s2 = Constant<value = int32[1] {0}>()
            e2 = Constant<value = int32[1] {2}>()
            a2 = Constant<value = int32[1] {0}>()
            y = Slice(first, s2, e2, a2)
        }
        """,
        1,
        ["Slice"],
    ),
}


@pytest.mark.parametrize("case", list(SLICE_FIRES))
def test_slices_on_disjoint_axes_merge(case):
    body, merged, left = SLICE_FIRES[case]
    before, m, rewrite = apply_pass(MergeDisjointSlicesPass, body)
    assert rewrite.fired == {"merge_disjoint_slices": merged}
    assert ops(m) == left
    # the patch merge concatenates halves: the original runs on even H only
    sizes = [s for s in SIZES if s["H"] % 2 == 0] if case == "swin_patch_merge" else SIZES
    assert_equivalent(before, m, sizes)


SLICE_DECLINES = {
    "same_axis_twice": (
        """
        g (float[N, H] x) => (float[N, ?] y) {
            one = Constant<value = int64[1] {1}>()
            big = Constant<value = int64[1] {100}>()
            first = Slice(x, one, big, one)
            y = Slice(first, one, big, one)
        }
        """,
        "the two slices share an axis",
    ),
    "negative_axis_naming_the_same_axis": (
        """
        g (float[N, H] x) => (float[N, ?] y) {
            one = Constant<value = int64[1] {1}>()
            minus = Constant<value = int64[1] {-1}>()
            big = Constant<value = int64[1] {100}>()
            first = Slice(x, one, big, one)
            y = Slice(first, one, big, minus)
        }
        """,
        "the two slices share an axis",
    ),
    "bounds_computed_at_run_time": (
        """
        g (float[N, H] x, int64[1] s) => (float[?, ?] y) {
            zero = Constant<value = int64[1] {0}>()
            one = Constant<value = int64[1] {1}>()
            big = Constant<value = int64[1] {100}>()
            first = Slice(x, s, big, zero)
            y = Slice(first, zero, big, one)
        }
        """,
        "starts or ends are not proven ints",
    ),
}


@pytest.mark.parametrize("case", list(SLICE_DECLINES))
def test_slices_decline_with_reason(case):
    body, reason = SLICE_DECLINES[case]
    _, m, rewrite = apply_pass(MergeDisjointSlicesPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1
    assert ops(m) == ["Slice", "Slice"]


WINDOW_REVERSE = """
    g (float[N, H, W, 24] x) => (float[N, H, W, 24] y) {
        a = Relu(x)
        t1 = Constant<value = int64[3] {-1, 4, 6}>()
        w = Reshape(a, t1)
        b = Relu(w)
        t2 = Constant<value = int64[4] {-1, 2, 2, 6}>()
        v = Reshape(b, t2)
        hw = Shape<start = 1, end = 3>(x)
        m1 = Constant<value = int64[1] {-1}>()
        c = Constant<value = int64[1] {24}>()
        t3 = Concat<axis = 0>(m1, hw, c)
        r = Reshape<allowzero = 1>(v, t3)
        y = Relu(r)
    }
"""
CHAIN_SIZES = [
    {"N": 0, "H": 2, "W": 3},
    {"N": 1, "H": 1, "W": 1},
    {"N": 2, "H": 3, "W": 2},
    {"N": 3, "H": 2, "W": 1},
]


def test_reshape_chain_ends_in_its_computed_target():
    # Swin's window reverse: [B*nW, 4, 6] -> [-1, 2, 2, 6] -> [-1, H, W, 24] (computed,
    # allowzero=1: every element literal): the middle Reshape goes
    before, m, chains = apply_pass(CollapseReshapeChainsPass, WINDOW_REVERSE)
    assert chains.fired["chain_to_last_target"] == 1
    assert ops(m) == ["Relu", "Reshape", "Relu", "Shape", "Concat", "Reshape", "Relu"]
    assert_equivalent(before, m, CHAIN_SIZES)


def test_reshape_chain_copying_the_same_dim_fires():
    # allowzero=0: the 0 copies dim 0, N in both the intermediate and the chain's input;
    # H at position 2 may be 0, but the intermediate has no dim 2 (a 0 there fails the
    # original). No constant target: [0, 2, -1, 12] would need N >= 1 for its -1.
    body = """
        g (float[N, H, 24] x) => (float[N, 2, H, 12] y) {
            a = Relu(x)
            f = Flatten<axis = 1>(a)
            z = Constant<value = int64[2] {0, 2}>()
            h = Shape<start = 1, end = 2>(x)
            c = Constant<value = int64[1] {12}>()
            t2 = Concat<axis = 0>(z, h, c)
            r = Reshape(f, t2)
            y = Relu(r)
        }
        """
    before, m, chains = apply_pass(CollapseReshapeChainsPass, body)
    assert chains.fired["chain_to_last_target"] == 1
    assert ops(m) == ["Relu", "Shape", "Concat", "Reshape", "Relu"]
    assert_equivalent(before, m, [s for s in SIZES if s["H"]])  # H = 0 fails the original


TARGET_FED = """
    g (float[N, H, 24] x, int64[2] t) => (float[?, ?] y) {
        a = Relu(x)
        t1 = Constant<value = int64[2] {-1, 24}>()
        f = Reshape(a, t1)
        r = Reshape<allowzero = Z>(f, t)
        y = Relu(r)
    }
"""


def test_reshape_chain_with_a_fed_literal_target_fires():
    before, m, chains = apply_pass(CollapseReshapeChainsPass, TARGET_FED.replace("Z", "1"))
    assert chains.fired["chain_to_last_target"] == 1
    assert ops(m) == ["Relu", "Reshape", "Relu"]
    given = {"t": lambda s: np.array([s["N"], 24 * s["H"]], np.int64)}
    assert_equivalent(before, m, SIZES, given=given)


def test_reshape_chain_copying_a_dim_that_may_differ_declines():
    # allowzero=0 and the fed target may hold a 0: it would copy dim 0 of the chain's
    # input (N) instead of the intermediate's (N*H)
    _, m, chains = apply_pass(CollapseReshapeChainsPass, TARGET_FED.replace("Z", "0"))
    assert not chains.fired.get("chain_to_last_target")
    assert chains.declined["more than one output dim is neither an int nor a copied dim"] == 1
    assert ops(m).count("Reshape") == 2


def test_reshape_chain_without_a_constant_target_keeps_its_computed_one():
    # [N, M, 3] -> Unsqueeze [N, M, 3, 1] -> Reshape [N, 3*M] (allowzero=0): a constant
    # [0, -1] would fail at N = 0; the computed [N, 3*M] copies only where N and M sit
    # at the same positions in x and in the Unsqueeze output
    before, m, chains = apply_pass(CollapseReshapeChainsPass, MINUS_ONE_NEXT_TO_MAYBE_ZERO)
    assert chains.fired == {"chain_to_last_target": 1}
    assert "Unsqueeze" not in ops(m)
    assert_equivalent(before, m, [{"N": 0, "M": 2}, {"N": 1, "M": 1}, {"N": 3, "M": 0}])
