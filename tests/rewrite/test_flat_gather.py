"""GatherOfFlatIndexGridPass: ``Gather(flatten(m), row-major offsets of m)`` becomes ``m``.

Firing cases run before and after in onnxruntime (sizes 0 and 1 included); declining
cases name their reason and keep the ``Gather``.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import GatherOfFlatIndexGridPass, analyze
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, model, ops, proto

#: The padding mask of a TorchScript BERT export: mask[b, t] for every (b, t) as
#: [B, 1, 1, T, 1], read from the flattened mask at b * T + t.
MASK = """
    g (bool[B, T] mask) => (bool[?, ?, ?, ?, ?] y) {{
        zero = Constant<value = int64 {{0}}>()
        one = Constant<value = int64 {{1}}>()
        s = Shape(mask)
        b = Gather(s, zero)
        t = Gather(s, one)
        rb = Range(zero, {limit_b}, one)
        rt = Range(zero, {limit_t}, one)
        vb = Constant<value = int64[4] {{-1, 1, 1, 1}}>()
        vt = Constant<value = int64[4] {{1, 1, 1, -1}}>()
        pb = Reshape(rb, vb)
        pt = Reshape(rt, vt)
        rows = Mul(pb, {stride})
        idx = Add(pt, rows)
        flat = {flatten}
        y = Gather<axis = {axis}>(flat, idx)
    }}
"""


def _mask(limit_b="b", limit_t="t", stride="t", flatten="Flatten<axis = 2>(mask)", axis=0):
    return MASK.format(
        limit_b=limit_b, limit_t=limit_t, stride=stride, flatten=flatten, axis=axis
    )


SIZES = [{"B": b, "T": t} for b, t in ((2, 3), (0, 2), (1, 0), (1, 1), (3, 5))]

FIRES = {
    "flatten_with_a_trailing_axis": (_mask(), ["Unsqueeze"]),
    # A Reshape to [-1] flattens as well; the output has no trailing axis.
    "reshape_to_a_vector": (
        _mask(flatten="Reshape(mask, minus_one)").replace(
            "vb = Constant",
            "minus_one = Constant<value = int64[1] {-1}>()\n        vb = Constant",
        ),
        ["Unsqueeze"],
    ),
    # The multiplier as a one-element vector, the terms added the other way around.
    "vector_multiplier": (
        _mask(stride="tv")
        .replace(
            "rows = Mul(pb, tv)",
            "tv = Shape<start = 1, end = 2>(mask)\n        rows = Mul(tv, pb)",
        )
        .replace("idx = Add(pt, rows)", "idx = Add(rows, pt)"),
        ["Unsqueeze"],
    ),
}


@pytest.mark.parametrize("case", FIRES)
def test_gather_of_flat_index_grid_fires(case):
    body, expected = FIRES[case]
    before, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, body)
    assert rewrite.fired == {"gather_of_flat_index_grid": 1}, rewrite.declined
    assert ops(m) == expected
    assert_equivalent(before, m, SIZES)


def test_a_three_axis_tensor_with_its_strides():
    """m[i, j, k] for every (i, j, k) at i*J*K + j*K + k, each Range on its own axis."""
    body = """
        g (float[I, J, K] m) => (float[?, ?, ?, ?] y) {
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            two = Constant<value = int64 {2}>()
            s = Shape(m)
            i = Gather(s, zero)
            j = Gather(s, one)
            k = Gather(s, two)
            ri = Range(zero, i, one)
            rj = Range(zero, j, one)
            rk = Range(zero, k, one)
            vi = Constant<value = int64[3] {-1, 1, 1}>()
            vj = Constant<value = int64[2] {-1, 1}>()
            pi = Reshape(ri, vi)
            pj = Reshape(rj, vj)
            jk = Mul(j, k)
            ti = Mul(pi, jk)
            tj = Mul(pj, k)
            ij = Add(ti, tj)
            idx = Add(ij, rk)
            minus_one = Constant<value = int64[1] {-1}>()
            flat = Reshape(m, minus_one)
            y0 = Gather(flat, idx)
            y = Unsqueeze(y0, zero)
        }
    """
    before, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, body)
    assert rewrite.fired == {"gather_of_flat_index_grid": 1}, rewrite.declined
    assert ops(m) == ["Unsqueeze"]  # y0 is m itself (an Identity), then y
    sizes = [
        {"I": i, "J": j, "K": k} for i, j, k in ((2, 3, 4), (1, 0, 2), (0, 2, 2), (1, 1, 1))
    ]
    assert_equivalent(before, m, sizes)


DECLINES = {
    # A prefix of the mask (a KV decoder's past + seq): an empty batch would gather n
    # columns of nothing where m has fewer; not this rule's (GatherNDOfIndexGrid's) case.
    "a_prefix": (
        _mask(limit_t="n").replace("bool[B, T] mask)", "bool[B, T] mask, int64 n)"),
        "a Range does not span its data axis",
    ),
    "a_wrong_stride": (
        _mask(stride="b"),
        "a term's multiplier is not its axis's row-major stride",
    ),
    "axis_1": (
        _mask(axis=1),
        "the Gather is not on axis 0",
    ),
    "rows_of_a_partial_flatten": (
        _mask(flatten="Flatten<axis = 1>(mask)"),
        "the gathered tensor is not a row-major flattening",
    ),
    "one_term_per_axis_missing": (
        _mask().replace("rows = Mul(", "idx = Mul(").replace("idx = Add(pt, rows)", ""),
        "the index does not have one term per axis of the data",
    ),
}


@pytest.mark.parametrize("case", DECLINES)
def test_gather_of_flat_index_grid_declines(case):
    body, reason = DECLINES[case]
    _, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1, rewrite.declined
    assert "Gather" in ops(m)
    assert "Gather" in ops(m)[3:]


def test_the_prefix_it_declines_is_left_exact():
    """The declined prefix case runs as before (the Gather stays) on an empty batch too."""
    body = _mask(limit_t="n").replace("bool[B, T] mask)", "bool[B, T] mask, int64 n)")
    before, m, _ = apply_pass(GatherOfFlatIndexGridPass, body)
    given = {"n": lambda sizes: np.array(min(sizes["T"], 2), np.int64)}
    assert_equivalent(before, m, SIZES, given=given)


# Found by a mutation audit: each case would be rewritten wrongly (or crash the rule)
# with the check that declines it weakened.
AUDIT_DECLINES = {
    # A third term on an axis of its own (a [B, 1, T, C] grid of a [B, T] mask): the
    # data has no axis for it (the rule must not index past the data's rank).
    "three_terms_for_two_axes": (
        _mask()
        .replace(
            "vt = Constant<value = int64[4] {1, 1, 1, -1}>()",
            "vt = Constant<value = int64[4] {1, 1, -1, 1}>()",
        )
        .replace("bool[B, T] mask)", "bool[B, T] mask, float[C] c)")
        .replace(
            "idx = Add(pt, rows)",
            """sc = Shape(c)
        nc = Squeeze(sc)
        rc = Range(zero, nc, one)
        vc = Constant<value = int64[4] {1, 1, 1, -1}>()
        pc = Reshape(rc, vc)
        two_terms = Add(pt, rows)
        idx = Add(two_terms, pc)""",
        ),
        "the index does not have one term per axis of the data",
    ),
    # m[i, i] * N + i: both terms on axis 0 of a square mask, the diagonal-like offsets
    # i * N + i, not m's own.
    "two_terms_on_one_axis": (
        _mask(limit_t="b")
        .replace("bool[B, T] mask", "bool[B, B] mask")
        .replace(
            "vt = Constant<value = int64[4] {1, 1, 1, -1}>()",
            "vt = Constant<value = int64[4] {-1, 1, 1, 1}>()",
        )
        .replace("idx = Add(pt, rows)", "idx = Add(rows, pt)"),
        "two terms lie on one axis",
    ),
    # Range(-1, T - 1): T positions, shifted by one; Gather reads index -1 as the last
    "a_range_from_minus_one": (
        _mask(limit_t="t1").replace(
            "rt = Range(zero, t1, one)",
            """minus_one = Constant<value = int64 {-1}>()
        t1 = Sub(t, one)
        rt = Range(minus_one, t1, one)""",
        ),
        "the index is not a sum of placed Range terms",
    ),
    # Range(0, -T, -1): T positions read backwards (Gather wraps negative indices)
    "a_range_with_step_minus_one": (
        _mask(limit_t="neg_t").replace(
            "rt = Range(zero, neg_t, one)",
            """minus_one = Constant<value = int64 {-1}>()
        neg_t = Neg(t)
        rt = Range(zero, neg_t, minus_one)""",
        ),
        "the index is not a sum of placed Range terms",
    ),
}


@pytest.mark.parametrize("case", AUDIT_DECLINES)
def test_gather_of_flat_index_grid_declines_where_a_rewrite_would_differ(case):
    body, reason = AUDIT_DECLINES[case]
    before, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1, rewrite.declined
    sizes = [{**s, "C": c} for s in SIZES for c in (0, 1)]  # C > 1: out of range
    if "B, B]" in body:  # a square mask: indices i * B + i stay in range
        sizes = [{"B": b, "T": b} for b in (0, 1, 2, 3)]
    assert_equivalent(before, m, sizes)


def test_gather_of_flat_index_grid_declines_before_opset_13():
    """Unsqueeze takes its axes as an attribute before opset 13."""
    m = model(_mask(), opset=12)
    before = proto(m)
    rewrite = GatherOfFlatIndexGridPass(analyze(m))
    rewrite(m)
    assert not rewrite.fired
    assert rewrite.declined["opset before 13 (Unsqueeze axes as an attribute)"] == 1
    assert_equivalent(before, m, SIZES)


# The batch fixed at 1 (``optimize(symbol_ranges={"B": (1, 1)})``): the folder has made
# the batch term Range(0, 1) * T zero and dropped it, leaving one term for two axes.
ONE_ROW = """
    g (bool[1, T] mask) => (bool[?, ?, ?, ?, ?] y) {
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        s = Shape(mask)
        t = Gather(s, one)
        rt = Range(zero, t, one)
        vt = Constant<value = int64[4] {1, 1, 1, -1}>()
        idx = Reshape(rt, vt)
        flat = Flatten<axis = 2>(mask)
        y = Gather(flat, idx)
    }
"""


def test_a_size_one_axis_needs_no_term():
    before, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, ONE_ROW)
    assert rewrite.fired == {"gather_of_flat_index_grid": 1}, rewrite.declined
    assert ops(m) == ["Unsqueeze"]
    assert_equivalent(before, m, [{"T": t} for t in (0, 1, 4)])


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # The mask's first axis is B, not proven 1: its term cannot be left out.
        (ONE_ROW.replace("bool[1, T]", "bool[B, T]"), "a Range does not span its data axis"),
        # [1, 3, T]: the term spans T but axis 1 (size 3, not 1) has none.
        (
            ONE_ROW.replace("bool[1, T]", "bool[1, 3, T]")
            .replace("Flatten<axis = 2>", "Flatten<axis = 3>")
            .replace(
                "t = Gather(s, one)",
                "two = Constant<value = int64 {2}>()\n        t = Gather(s, two)",
            ),
            "a Range does not span its data axis",
        ),
        # Every index axis is taken by the term or is not of size 1: the size-1 data
        # axis has no index axis to go to (a [T] index).
        (
            ONE_ROW.replace("int64[4] {1, 1, 1, -1}", "int64[1] {-1}"),
            "an axis of size 1 without a term has no index axis of its own",
        ),
    ],
    ids=["batch_not_one", "middle_axis_not_one", "no_axis_left"],
)
def test_a_missing_term_declines_unless_its_axis_has_size_one(body, reason):
    _, m, rewrite = apply_pass(GatherOfFlatIndexGridPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1, rewrite.declined
    assert "Gather" in ops(m)
