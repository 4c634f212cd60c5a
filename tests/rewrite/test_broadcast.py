"""BroadcastScalarOperandsPass, and the boolean neutral elements it leads to.

``op(x, Expand(c, s))`` with ``c`` one element becomes ``op(x, c)`` when the output shape
is proven unchanged (T5's ``min(x, full_like(x, 3))``, its all-zero cross-attention
bias). Firing cases run before and after in onnxruntime on sizes 0, 1 and more; the
declining cases name their reason. ``AndByTrue``/``OrByFalse`` (``NeutralElement``) are
tested here too.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import BroadcastScalarOperandsPass, analyze, optimize
from tests.rewrite._rewrite_testing import (
    RULE_DRIVERS,
    apply_rules,
    assert_equivalent,
    cleanup,
    model,
    ops,
    proto,
)

SIZES = [{"N": 0, "M": 2}, {"N": 1, "M": 1}, {"N": 3, "M": 4}, {"N": 2, "M": 0}]


def _run_pass(body: str, opset: int = 18):
    m = model(body, opset=opset)
    before = proto(m)
    rewrite = BroadcastScalarOperandsPass(analyze(m))
    rewrite(m)
    cleanup(m)
    return before, m, rewrite


# name: (graph, operands replaced, ops left)
FIRES = {
    "min_with_full_like_of_ints": (
        """
        g (int64[N, M] x) => (int64[N, M] y) {
            s = Shape(x)
            c = Constant<value = int64 {3}>()
            f = Expand(c, s)
            y = Min(x, f)
        }
        """,
        1,
        ["Min"],
    ),
    "add_of_expanded_zeros_to_a_broadcast_shape": (
        # T5 cross attention: scores [N, 4, M] + zeros [1, 4, M]
        """
        g (float[N, 4, M] x) => (float[N, 4, M] y) {
            m = Shape<start = 2>(x)
            head = Constant<value = int64[2] {1, 4}>()
            s = Concat<axis = 0>(head, m)
            z = Constant<value = float[1] {0.0}>()
            zeros = Expand(z, s)
            y = Add(x, zeros)
        }
        """,
        1,
        ["Add"],
    ),
    "constant_of_shape_first_operand": (
        """
        g (float[N, M] x) => (float[N, M] y) {
            s = Shape(x)
            f = ConstantOfShape<value = float[1] {2.5}>(s)
            y = Sub(f, x)
        }
        """,
        1,
        ["Sub"],
    ),
    "where_with_an_expanded_branch": (
        """
        g (bool[N, M] c, float[N, M] x) => (float[N, M] y) {
            s = Shape(x)
            v = Constant<value = float {-1.0}>()
            f = Expand(v, s)
            y = Where(c, x, f)
        }
        """,
        1,
        ["Where"],
    ),
    "comparison_with_a_row_of_the_other_shape": (
        # the expanded operand is [1, M]: the other operand [N, M] still gives the shape
        """
        g (int64[N, M] x) => (bool[N, M] y) {
            m = Shape<start = 1>(x)
            one = Constant<value = int64[1] {1}>()
            s = Concat<axis = 0>(one, m)
            v = Constant<value = int64[1, 1] {2}>()
            f = Expand(v, s)
            y = Less(x, f)
        }
        """,
        1,
        ["Less"],
    ),
}


@pytest.mark.parametrize("case", list(FIRES))
def test_operand_broadcasts_the_constant(case):
    body, replaced, left = FIRES[case]
    before, m, rewrite = _run_pass(body)
    assert rewrite.fired == {"broadcast_scalar_operand": replaced}
    assert ops(m) == left
    given = {"c": lambda s: np.arange(s["N"] * s["M"]).reshape(s["N"], s["M"]) % 2 == 0}
    assert_equivalent(before, m, SIZES, given=given if "bool[N, M] c" in body else None)


DECLINES = {
    "the expansion grows the output": (
        """
        g (int64[N] x, int64[2] s) => (int64[?, ?] y) {
            c = Constant<value = int64 {3}>()
            f = Expand(c, s)
            y = Min(x, f)
        }
        """,
        "the output shape without the expansion is not proven equal",
    ),
    # Same rank, a wider dim: Min(x, 3) would be [N, 1] (found by a mutation audit: only
    # fuzz seed 100101 had an expansion that kept the rank).
    "the expansion widens a dim": (
        """
        g (int64[N, 1] x, int64[N, M] z) => (int64[N, M] y) {
            s = Shape(z)
            c = Constant<value = int64 {3}>()
            f = Expand(c, s)
            y = Min(x, f)
        }
        """,
        "the output shape without the expansion is not proven equal",
    ),
    "min_of_floats": (
        """
        g (float[N, M] x) => (float[N, M] y) {
            s = Shape(x)
            c = Constant<value = float {0.0}>()
            f = Expand(c, s)
            y = Min(x, f)
        }
        """,
        "Min of floats (kernels may differ in a zero's sign)",
    ),
}


@pytest.mark.parametrize("case", list(DECLINES))
def test_broadcast_declines_with_reason(case):
    body, reason = DECLINES[case]
    _, _, rewrite = _run_pass(body)
    assert not rewrite.fired
    assert rewrite.declined[reason] == 1


@pytest.mark.parametrize(
    "body",
    [
        # more than one element: not every element is the same
        """
        g (int64[N, 2] x) => (int64[N, 2] y) {
            s = Shape(x)
            c = Constant<value = int64[2] {3, 4}>()
            f = Expand(c, s)
            y = Min(x, f)
        }
        """,
        # Pow: onnxruntime has fast paths for a scalar exponent
        """
        g (float[N, M] x) => (float[N, M] y) {
            s = Shape(x)
            c = Constant<value = float {3.0}>()
            f = Expand(c, s)
            y = Pow(x, f)
        }
        """,
        # the expanded value is a graph input (a feed may replace it)
        """
        g (float[N, M] x, float c) => (float[N, M] y) {
            s = Shape(x)
            f = Expand(c, s)
            y = Add(x, f)
        }
        """,
    ],
)
def test_broadcast_leaves_other_operands(body):
    _, m, rewrite = _run_pass(body)
    assert not rewrite.fired
    assert "Expand" in ops(m)


def test_t5_style_bias_disappears_in_the_pipeline():
    body = FIRES["add_of_expanded_zeros_to_a_broadcast_shape"][0].replace(
        "y = Add(x, zeros)", "b = Add(x, zeros)\n            y = Softmax(b)"
    )
    m = model(body)
    before = proto(m)
    result = optimize(m)
    assert ops(result) == ["Softmax"]
    assert_equivalent(before, result, SIZES)


BOOL_FIRES = {
    "and_true_first": (
        """
        g (bool[N, M] x) => (bool[N, M] y) {
            t = Constant<value = bool[1, 1] {1}>()
            a = And(t, x)
            y = Not(a)
        }
        """,
        "AndByTrueCommuted",
    ),
    "and_true_second": (
        """
        g (bool[N, M] x) => (bool[N, M] y) {
            t = Constant<value = bool {1}>()
            a = And(x, t)
            y = Not(a)
        }
        """,
        "AndByTrue",
    ),
    "or_false": (
        """
        g (bool[N, M] x) => (bool[N, M] y) {
            t = Constant<value = bool[1] {0}>()
            a = Or(x, t)
            y = Not(a)
        }
        """,
        "OrByFalse",
    ),
}


@pytest.mark.parametrize("driver", RULE_DRIVERS)
@pytest.mark.parametrize("case", list(BOOL_FIRES))
def test_boolean_neutral_elements(case, driver):
    body, rule = BOOL_FIRES[case]
    m = model(body)
    before = proto(m)
    rules = apply_rules(m, driver=driver)
    assert rules[rule].fired == 1
    assert ops(m) == ["Not"]
    assert_equivalent(before, m, SIZES)


@pytest.mark.parametrize(
    "body, rule, reason",
    [
        (
            """
            g (bool[N, M] x) => (bool[N, M] y) {
                t = Constant<value = bool[2] {1, 0}>()
                a = And(x, t)
                y = Not(a)
            }
            """,
            "AndByTrue",
            "the other operand is not proven to be all True",
        ),
        (
            # true broadcast over a [N, 1] x grows it
            """
            g (bool[N, 1] x) => (bool[N, 3] y) {
                t = Constant<value = bool[3] {1, 1, 1}>()
                a = And(x, t)
                y = Not(a)
            }
            """,
            "AndByTrue",
            "output shape is not proven equal to the input shape",
        ),
    ],
)
def test_boolean_neutral_elements_decline(body, rule, reason):
    m = model(body)
    rules = apply_rules(m, driver="dispatch")
    assert rules[rule].fired == 0
    assert rules[rule].declined[reason] == 1
    cleanup(m)
    assert "And" in ops(m)
