"""DropExpandBeforeBroadcastPass: an ``Expand`` that later broadcasting makes redundant goes.

Firing cases run before and after in onnxruntime (sizes 0 and 1 included); declining
cases name their reason and leave the graph as it was.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnx_symdims.rewrite import DropExpandBeforeBroadcastPass, optimize
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    assert_same_outputs,
    feeds_for,
    model,
    ops,
    proto,
    session,
)

SIZES = [{"B": b, "N": n, "S": s} for b, n, s in ((1, 0, 0), (2, 1, 1), (1, 3, 4), (3, 5, 2))]

#: ViT's attention mask: Where(Expand(ge[1, 1, N, 1], [B, 1, N, N]), 0, -1000) + scores.
_MASK = """
    g (float[B, 2, N, N] scores, float[N] keep) => (float[B, 2, N, N] y) {
        zero_f = Constant<value = float {0}>()
        ge = GreaterOrEqual(keep, zero_f)
        axes = Constant<value = int64[3] {0, 1, 3}>()
        col = Unsqueeze(ge, axes)
        b = Shape<end = 1>(scores)
        n = Shape<start = 2, end = 3>(scores)
        one = Constant<value = int64[1] {1}>()
        target = Concat<axis = 0>(b, one, n, n)
        full = Expand(col, target)
        low = Constant<value = float {-1000}>()
        bias = Where(full, zero_f, low)
        y = Add(scores, bias)
    }
"""

#: BART's positions: Gather(table, Expand(arange(S), [B, S]) + 2) + embeddings.
_POSITIONS = """
        g (float[B, S, 4] emb) => (float[B, S, 4] y)
        <float[16, 4] table = {0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 15.,
                               16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28.,
                               29., 30., 31., 32., 33., 34., 35., 36., 37., 38., 39., 40., 41.,
                               42., 43., 44., 45., 46., 47., 48., 49., 50., 51., 52., 53., 54.,
                               55., 56., 57., 58., 59., 60., 61., 62., 63.}> {
            b = Shape<end = 1>(emb)
            s = Shape<start = 1, end = 2>(emb)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            two = Constant<value = int64 {2}>()
            sq = Squeeze(s)
            positions = Range(zero, sq, one)
            target = Concat<axis = 0>(b, s)
            full = Expand(positions, target)
            shifted = Add(full, two)
            rows = Gather<axis = 0>(table, shifted)
            y = Add(emb, rows)
        }
        """

FIRES = {
    "attention_mask": (
        _MASK,
        ["GreaterOrEqual", "Unsqueeze", "Where", "Add"],
    ),
    # The gathered positions with a batch of 2: the expansion is never empty where x
    # is not, so the Gather may run on x's elements.
    "gathered_positions_of_a_fixed_batch": (
        _POSITIONS.replace(
            "float[B, S, 4] emb) => (float[B, S, 4] y)",
            "float[2, S, 4] emb) => (float[2, S, 4] y)",
        ),
        ["Shape", "Squeeze", "Range", "Add", "Gather", "Add"],
    ),
    # Absorbed by two ops at once, one of them after a recomputed op.
    "two_absorbing_users": (
        """
        g (float[B, N] x, float[N] v) => (float[B, N] y, float[B, N] z) {
            b = Shape<end = 1>(x)
            n = Shape<start = 1, end = 2>(x)
            target = Concat<axis = 0>(b, n)
            full = Expand(v, target)
            y = Mul(x, full)
            neg = Neg(full)
            z = Sub(x, neg)
        }
        """,
        ["Mul", "Neg", "Sub"],
    ),
}


@pytest.mark.parametrize("case", FIRES)
def test_drop_expand_before_broadcast_fires(case):
    body, expected_ops = FIRES[case]
    before, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    assert rewrite.fired["drop_expand_before_broadcast"] == 1
    assert ops(m) == expected_ops
    assert_equivalent(before, m, SIZES)


DECLINES = {
    # With a batch of 0 the original gathers nothing; a Gather of arange(S) + 2 would read
    # past the table when S > 14 (see test_an_empty_expansion_is_not_gathered_from).
    "a_gather_where_the_expansion_may_be_empty": (
        _POSITIONS,
        "an op that may fail on an element would run where the expansion is empty",
    ),
    # The expanded mask is an output: its shape is part of the model's contract.
    "a_graph_output": (
        """
        g (float[B, N] x, bool[N] v) => (bool[B, N] full, float[B, N] y) {
            s = Shape(x)
            full = Expand(v, s)
            zero = Constant<value = float {0}>()
            y = Where(full, x, zero)
        }
        """,
        "an expanded value is a graph output",
    ),
    # A Reshape reads the expanded shape itself.
    "reaches_a_reshape": (
        """
        g (float[B, N] x, float[N] v) => (float[?] y) {
            s = Shape(x)
            full = Expand(v, s)
            flat = Constant<value = int64[1] {-1}>()
            y = Reshape(full, flat)
        }
        """,
        "an expanded value reaches Reshape",
    ),
    # M may be 1 where N is not: without the Expand the Add could give [B, 1].
    "broadcast_not_proven": (
        """
        g (float[B, M] x, float[N] v) => (float[B, ?] y) {
            b = Shape<end = 1>(x)
            n = Shape(v)
            target = Concat<axis = 0>(b, n)
            full = Expand(v, target)
            y = Add(x, full)
        }
        """,
        "the broadcast without the expansion is not proven",
    ),
    # Float Max: onnxruntime's kernels may order -0.0 and +0.0 differently.
    "float_max": (
        """
        g (float[B, N] x, float[N] v) => (float[B, N] y) {
            s = Shape(x)
            full = Expand(v, s)
            y = Max(x, full)
        }
        """,
        "an expanded value reaches Max of floats",
    ),
    # Gather on axis 1: the index dims sit between data dims, broadcasting would misalign.
    "gather_on_axis_1": (
        """
        g (float[B, N] x, int64[N] i) => (float[B, B, N] y) {
            s = Shape(x)
            full = Expand(i, s)
            z = Gather<axis = 1>(x, full)
            y = Add(z, x)
        }
        """,
        "an expanded value indexes a Gather on an axis other than 0",
    ),
    # The expansion is the data, not the indices: the row read depends on its layout
    # (found by a mutation audit: only fuzz seed 100497 gathered from an expansion).
    "gathered_from": (
        """
        g (float[B, N] x, float[N] v) => (float[B, N] y) {
            s = Shape(x)
            full = Expand(v, s)
            first = Constant<value = int64[1] {0}>()
            row = Gather<axis = 0>(full, first)
            y = Add(x, row)
        }
        """,
        "an expanded value is gathered from",
    ),
}


@pytest.mark.parametrize("case", DECLINES)
def test_drop_expand_before_broadcast_declines(case):
    body, reason = DECLINES[case]
    before_ops = ops(model(body))
    _, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1
    assert ops(m) == before_ops


def test_optimize_drops_the_mask_expand_and_its_target():
    m = model(_MASK)
    before = proto(m)
    optimize(m)
    assert "Expand" not in ops(m)
    assert "Concat" not in ops(m)  # the target went with it
    given = {"keep": lambda sizes: np.linspace(-1, 1, sizes["N"], dtype=np.float32)}
    assert_equivalent(before, m, SIZES, given=given)


_X_SHAPES = ("N", "1, N", "B, 1", "1, 1", "N, 1")
_OTHER_SHAPES = ("B, N", "B, 1", "1, N", "2, B, N")
_CHAINS = {
    "none": ["chained = Identity(full)"],
    "neg": ["chained = Neg(full)"],
    "where": ["c0 = Constant<value = float {0}>()", "pos = Greater(full, c0)",
              "chained = Where(pos, full, c0)"],
}  # fmt: skip
_ABSORBING = {
    "add": "y = Add(other, chained)",
    "div": "y = Div(chained, other)",
    "where": "big = Greater(other, chained)\n            y = Where(big, other, chained)",
}


@pytest.mark.parametrize("x_shape", _X_SHAPES)
@pytest.mark.parametrize("other_shape", _OTHER_SHAPES)
@pytest.mark.parametrize("chain", _CHAINS)
@pytest.mark.parametrize("absorbing", _ABSORBING)
def test_every_expand_layout_keeps_the_outputs(x_shape, other_shape, chain, absorbing):
    """``Expand(x, Shape(t[B, N]))`` through an element-wise op into a broadcasting one,
    for x and the other operand of ranks 1 to 3 with 1s: fired or declined, the outputs
    are the same wherever the original runs (sizes 0 to 3, negative zeros included)."""
    lines = ["s = Shape(t)", "full = Expand(x, s)", *_CHAINS[chain], _ABSORBING[absorbing]]
    body = f"""
        g (float[{x_shape}] x, float[B, N] t, float[{other_shape}] other) => (float[?, ?, ?] y) {{
            {chr(10).join(lines)}
        }}
    """
    before, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    fired = rewrite.fired["drop_expand_before_broadcast"]
    # The absorbing op's output shape is proven unchanged when x and `other` still
    # broadcast to [B, N] (or [2, B, N]); x [N, 1] never does (N against B).
    covers = x_shape != "N, 1" and (
        other_shape in ("B, N", "2, B, N")
        or (other_shape == "B, 1" and x_shape in ("N", "1, N"))
        or (other_shape == "1, N" and x_shape == "B, 1")
    )
    assert bool(fired) == covers, rewrite.declined
    sessions = session(before), session(m)
    for k, (b, n) in enumerate(itertools.product(range(4), repeat=2)):
        feeds = feeds_for(before, {"B": b, "N": n}, seed=k)
        try:
            expected = sessions[0].run(None, feeds)
        except Exception:  # an invalid size for this layout (Expand of [N, 1] to [B, N])
            continue
        assert_same_outputs(sessions[1].run(None, feeds), expected)


def test_an_empty_expansion_is_not_gathered_from():
    """The declined case above: with B = 0 the original runs on any S (it gathers nothing)."""
    before, m, _ = apply_pass(DropExpandBeforeBroadcastPass, _POSITIONS)
    assert_equivalent(before, m, [{"B": 0, "S": 20}, {"B": 2, "S": 3}])


def test_an_integer_division_by_an_empty_expansion_is_not_moved_before_it():
    """``100 // Expand(v, [B, N])`` with a batch of 0 divides by nothing; recreated as
    ``100 // v`` it would divide by v's zeros (onnxruntime fails on an integer division by
    0). Found by a mutation audit: no other test covered the integer ``Div`` case."""
    body = """
        g (int64[B, N] x, int64[N] v) => (int64[B, N] y) {
            s = Shape(x)
            full = Expand(v, s)
            hundred = Constant<value = int64 {100}>()
            q = Div(hundred, full)
            y = Add(x, q)
        }
    """
    before, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    assert not rewrite.fired
    reason = "an op that may fail on an element would run where the expansion is empty"
    assert rewrite.declined[reason] == 1
    sizes = [{"B": b, "N": n} for b, n in ((0, 3), (0, 1), (2, 3), (1, 0))]
    # v has a 0 unless the batch is nonempty (the original divides by v's elements then)
    given = {"v": lambda s: np.arange(s["N"], dtype=np.int64) + (s["B"] > 0)}
    assert_equivalent(before, m, sizes, given=given)


def test_an_expansion_read_by_an_op_recreated_for_another_waits_for_the_next_round():
    """The ``Add`` reading both expansions is recreated on ``v`` when the first goes; the
    second expansion then reaches an op made in this round, which has no facts (nor a
    place in the graph order the walk follows) until the next analysis. Found by a
    mutation audit: without that check the walk failed on the new node."""
    body = """
        g (float[B, N] x, float[N] v, float[1] w) => (float[B, N] y) {
            s = Shape(x)
            full = Expand(v, s)
            n = Shape(v)
            spread = Expand(w, n)
            both = Add(full, spread)
            y = Mul(x, both)
        }
    """
    before, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    assert rewrite.fired == {"drop_expand_before_broadcast": 1}
    assert rewrite.declined["an expanded value reaches an op made in this round"] == 1
    assert_equivalent(before, m, SIZES)


# ``op(x, c)`` with ``c`` all the op's neutral element is ``Expand(x)``: RoBERTa's
# ``And(padding[B, 1, 1, N], arange(N)[:, None] >= 0)`` before the mask is added.
_NEUTRAL_OP = """
    g (float[B, 2, N, N] scores, {dtype}[B, 1, 1, N] x) => (float[B, 2, N, N] y) {{
        n = Shape<start = 2, end = 3>(scores)
        one = Constant<value = int64[1] {{1}}>()
        column = Concat<axis = 0>(n, one)
        c = ConstantOfShape<value = {dtype}[1] {{{fill}}}>(column)
        e = {op}({operands})
        {use}
    }}
"""
_FLOAT_USE = "y = Add(scores, e)"
_BOOL_USE = """zero = Constant<value = float {0}>()
        low = Constant<value = float {-1000}>()
        w = Where(e, zero, low)
        y = Add(scores, w)"""


@pytest.mark.parametrize(
    ("op", "fill", "c_first", "fires"),
    [
        ("Add", "0", False, True),
        ("Add", "0", True, True),
        ("Sub", "0", False, True),
        ("Sub", "0", True, False),  # 0 - x is -x
        ("Mul", "1", True, True),
        ("Div", "1", False, True),
        ("Div", "1", True, False),  # 1 / x
        ("Add", "1", False, False),
        ("Mul", "0", False, False),
        ("And", "1", True, True),
        ("Or", "0", False, True),
        ("And", "0", False, False),
        ("Or", "1", True, False),
    ],
)
def test_an_op_by_its_neutral_element_is_an_expansion(op, fill, c_first, fires):
    boolean = op in ("And", "Or")
    body = _NEUTRAL_OP.format(
        dtype="bool" if boolean else "float",
        fill=fill,
        op=op,
        operands="c, x" if c_first else "x, c",
        use=_BOOL_USE if boolean else _FLOAT_USE,
    )
    before, m, rewrite = apply_pass(DropExpandBeforeBroadcastPass, body)
    assert rewrite.fired["drop_expand_before_broadcast"] == (1 if fires else 0)
    assert ops(m).count(op) == ops(model(body)).count(op) - fires
    assert_equivalent(before, m, SIZES)
