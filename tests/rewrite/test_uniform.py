"""``uniform_value`` and ``element_bounds`` checked against onnxruntime, and the rules they feed.

Each graph's output ``y`` is computed by onnxruntime on several sizes (incl. empty ones);
every claim (all elements equal to ``u``, bit for bit; ``lo <= x <= hi``) must hold on
each. The expected claim is asserted too, so an analysis that proves nothing fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import analyze, optimize
from onnx_symdims.rewrite._uniform import element_bounds, uniform_value
from tests.rewrite._rewrite_testing import assert_equivalent, feeds_for, model, ops, proto, run

SIZES = [{"N": 0}, {"N": 1}, {"N": 4}, {"N": 7}]

ZERO = "zero = Constant<value = int64 {0}>()\n            one = Constant<value = int64 {1}>()"
ARANGE = "n = Size(x)\n            r = Range(zero, n, one)"
SPREAD = """s = Shape(x)
            two = Constant<value = int64[1] {2}>()
            target = Concat<axis = 0>(s, two)
            pair = Constant<value = int64[2] {1, 5}>()
            e = Expand(pair, target)
            three = Constant<value = int64 {3}>()"""

SPREAD_INT8 = """s = Shape(x)
            two = Constant<value = int64[1] {{2}}>()
            target = Concat<axis = 0>(s, two)
            pair = Constant<value = int8[2] {{{}, {}}}>()
            e = Expand(pair, target)
            three = Constant<value = int8 {{3}}>()
            hundred = Constant<value = int8 {{100}}>()"""

# name: (nodes computing y from float[N] x, expected uniform (None: none), bounds)
CASES = {
    "arange_at_least_its_start": (
        f"{ARANGE}\n            y = GreaterOrEqual(r, zero)",
        True,
        (None, None),
    ),
    "arange_above_start_minus_one": (
        f"{ARANGE}\n            m = Constant<value = int64 {{-1}}>()\n            y = Greater(r, m)",
        True,
        (None, None),
    ),
    "arange_never_below_its_start": (
        f"{ARANGE}\n            y = Less(r, zero)",
        False,
        (None, None),
    ),
    "arange_compared_the_other_way": (
        f"{ARANGE}\n            y = LessOrEqual(zero, r)",
        True,
        (None, None),
    ),
    "arange_never_equal_to_below_start": (
        f"{ARANGE}\n            m = Constant<value = int64 {{-3}}>()\n            y = Equal(r, m)",
        False,
        (None, None),
    ),
    "arange_not_decided_at_its_second_element": (
        f"{ARANGE}\n            y = GreaterOrEqual(r, one)",
        None,
        (None, None),
    ),
    "falling_arange_at_most_its_start": (
        """five = Constant<value = int64 {5}>()
            down = Constant<value = int64 {-1}>()
            m = Neg(n0)
            n0 = Size(x)
            r = Range(five, m, down)
            y = LessOrEqual(r, five)""",
        True,
        (None, None),
    ),
    "arange_through_reshape_and_expand": (
        f"""{ARANGE}
            s4 = Constant<value = int64[4] {{1, 1, -1, 1}}>()
            r4 = Reshape(r, s4)
            s2 = Constant<value = int64[4] {{2, 1, 1, 3}}>()
            e = Expand(r4, s2)
            y = GreaterOrEqual(e, zero)""",
        True,
        (None, None),
    ),
    # Each of [1, 5] spread over [N, 2], shifted, negated, subtracted: bounded both ways.
    "spread_bounds_shifted": (f"{SPREAD}\n            y = Add(e, three)", None, (4, 8)),
    "spread_bounds_negated": (f"{SPREAD}\n            y = Neg(e)", None, (-5, -1)),
    "spread_bounds_subtracted": (f"{SPREAD}\n            y = Sub(three, e)", None, (-2, 2)),
    # arange >= 0, but unbounded above: r + r wraps in int64 (0 and 2**62 give 0 and
    # -2**63), so no bound is claimed for a sum.
    "a_sum_unbounded_above_may_wrap": (
        """zero_start = Constant<value = int64 {0}>()
            end = Constant<value = int64 {9223372036854775807}>()
            step = Constant<value = int64 {4611686018427387904}>()
            r = Range(zero_start, end, step)
            y = Add(r, r)""",
        None,
        (None, None),
    ),
    # The same in narrow types: [100, 120] + 100 wraps in int8 (onnxruntime gives -56 and
    # -36), [1, 5] - 3 wraps in uint8; inside the type's range the bounds hold.
    "int8_sum_may_wrap": (
        f"{SPREAD_INT8.format(100, 120)}\n            y = Add(e, hundred)",
        None,
        (None, None),
    ),
    "int8_sum_inside_the_type": (
        f"{SPREAD_INT8.format(1, 5)}\n            y = Add(e, hundred)",
        None,
        (101, 105),
    ),
    "uint8_difference_may_wrap": (
        f"{SPREAD_INT8.format(1, 5).replace('int8', 'uint8')}\n            y = Sub(e, three)",
        None,
        (None, None),
    ),
    "shape_is_never_negative": ("s = Shape(x)\n            y = Identity(s)", None, (0, None)),
    "mask_of_an_arange": (
        f"""{ARANGE}
            ge = GreaterOrEqual(r, zero)
            a = Constant<value = float {{0.0}}>()
            b = Constant<value = float {{-1e9}}>()
            y = Where(ge, a, b)""",
        np.float32(0.0),
        (None, None),
    ),
    "negative_zero_is_not_zero": (
        f"""{ARANGE}
            ge = Less(r, zero)
            a = Constant<value = float {{0.0}}>()
            b = Constant<value = float {{-0.0}}>()
            y = Where(ge, a, b)""",
        np.float32(-0.0),
        (None, None),
    ),
    "where_between_equal_branches": (
        """s = Shape(x)
            c = Constant<value = int64[1] {3}>()
            ge = Greater(s, c)
            a = Constant<value = int64[2] {7, 7}>()
            y = Where(ge, a, a)""",
        np.int64(7),
        (7, 7),
    ),
    "logic_of_decided_comparisons": (
        f"""{ARANGE}
            t = GreaterOrEqual(r, zero)
            f = Less(r, zero)
            nf = Not(f)
            both = And(t, nf)
            y = Xor(both, f)""",
        True,
        (None, None),
    ),
    "and_with_false_is_false_whatever_the_other": (
        f"""{ARANGE}
            f = Less(r, zero)
            u = Greater(r, one)
            y = And(u, f)""",
        False,
        (None, None),
    ),
    "constant_of_shape_filled": (
        """s = Shape(x)
            y = ConstantOfShape<value = int64[1] {4}>(s)""",
        np.int64(4),
        (4, 4),
    ),
    "concat_of_different_fills_is_not_uniform": (
        """s = Shape(x)
            a = ConstantOfShape<value = int64[1] {4}>(s)
            b = ConstantOfShape<value = int64[1] {5}>(s)
            y = Concat<axis = 0>(a, b)""",
        None,
        (4, 5),
    ),
    "a_reduction_is_not_a_copy": (
        # ReduceMax of an empty axis gives the lowest int64, not an element
        """s = Shape(x)
            a = ConstantOfShape<value = int64[1] {4}>(s)
            y = ReduceMax<keepdims = 1>(a)""",
        None,
        (None, None),
    ),
}


def _graph(nodes: str):
    out = "bool" if "Greater" in nodes or "Less" in nodes or "Equal" in nodes else "int64"
    for narrow in ("uint8", "int8"):
        if f"{narrow}[2]" in nodes:
            out = narrow
            break
    if "Where(ge, a, b)" in nodes:
        out = "float"
    if "Where(ge, a, a)" in nodes:
        out = "int64"
    return model(
        f"""
        g (float[N] x) => ({out}[?] y_flat) {{
            {ZERO}
            {nodes}
            flat = Constant<value = int64[1] {{-1}}>()
            y_flat = Reshape(y, flat)
        }}
        """
    )


@pytest.mark.parametrize("case", CASES)
def test_claims_hold_in_onnxruntime(case):
    nodes, expected, expected_bounds = CASES[case]
    m = _graph(nodes)
    facts = analyze(m)
    y = m.graph.outputs[0].producer().inputs[0]
    uniform = uniform_value(facts, y)
    lo, hi = element_bounds(facts, y)
    if expected is None:
        assert uniform is None
    else:
        assert uniform is not None and uniform.tobytes() == np.asarray(expected).tobytes()
    assert (lo, hi) == expected_bounds
    for sizes in SIZES:
        (values,) = run(m, feeds_for(m, sizes))
        if uniform is not None:
            assert all(
                v.tobytes() == uniform.tobytes() for v in values.astype(uniform.dtype)
            ), sizes
        if lo is not None:
            assert (values >= lo).all(), sizes
        if hi is not None:
            assert (values <= hi).all(), sizes


# ------------------------------------------------------------------------------------
# The rules: what ViT/BERT/RoBERTa dynamo exports compute for an unpadded mask
# ------------------------------------------------------------------------------------
MASK_SIZES = [{"B": 0, "S": 2}, {"B": 1, "S": 1}, {"B": 2, "S": 3}, {"B": 1, "S": 0}]

# ViT: an all-true comparison selects 0.0 for every element: the Add is a no-op.
# RoBERTa: the all-true comparison is and-ed with the padding mask [B, 1, 1, S]: the And
# is an Expand of the padding mask to [B, 1, S, S], which the Add broadcasts anyway.
_MASK = """
    g (float[B, 2, S, S] scores{padding}) => (float[B, 2, S, S] y) {{
        zero = Constant<value = int64 {{0}}>()
        one = Constant<value = int64 {{1}}>()
        n = Shape<start = 2, end = 3>(scores)
        s = Squeeze(n)
        r = Range(zero, s, one)
        shape = Constant<value = int64[4] {{1, 1, -1, 1}}>()
        r4 = Reshape(r, shape)
        ge = GreaterOrEqual(r4, zero)
        {condition}
        a = Constant<value = float {{0.0}}>()
        b = Constant<value = float {{-3.4e38}}>()
        mask = Where(c, a, b)
        masked = Add(scores, mask)
        y = Softmax<axis = -1>(masked)
    }}
"""
VIT_MASK = _MASK.format(padding="", condition="c = Identity(ge)")
ROBERTA_MASK = _MASK.format(
    padding=", bool[B, 1, 1, S] padding", condition="c = And(padding, ge)"
)


@pytest.mark.parametrize(
    ("body", "left"),
    [
        (VIT_MASK, ["Softmax"]),
        (ROBERTA_MASK, ["Where", "Add", "Softmax"]),
        # not decided: arange >= 1 is false at its first element
        (
            VIT_MASK.replace("ge = GreaterOrEqual(r4, zero)", "ge = GreaterOrEqual(r4, one)"),
            ["Range", "Reshape", "GreaterOrEqual", "Where", "Add", "Softmax"],
        ),
    ],
)
def test_a_mask_proven_constant_goes(body, left):
    m = model(body)
    before = proto(m)
    optimize(m)
    assert [op for op in ops(m) if op not in ("Shape", "Squeeze")] == left
    assert_equivalent(before, m, MASK_SIZES)
