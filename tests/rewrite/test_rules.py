"""The onnxscript rules of ``shape_rules``: each fires on a proof and declines without one.

A firing case names the rule that must fire and the ops left; it is run before and after
in onnxruntime on several sizes (0 and 1 included). A declining case names the reason
the rule records (``rule.declined``, the text of onnxscript's ``MatchResult.fail``).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import analyze, optimize, shape_rules
from tests.rewrite._rewrite_testing import (
    RULE_DRIVERS,
    apply_rules,
    assert_equivalent,
    assert_same_outputs,
    model,
    ops,
    proto,
    reshape_targets,
    run,
)

SIZES_N = [{"N": 0}, {"N": 1}, {"N": 3}]

# name: (graph, rule expected to fire, ops left, sizes)
FIRES = {
    "expand_to_own_shape": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Shape(x)
            e = Expand(x, s)
            y = Relu(e)
        }
        """,
        "ExpandToOwnShape",
        ["Relu"],
    ),
    "expand_by_ones": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Constant<value = int64[2] {1, 1}>()
            e = Expand(x, s)
            y = Relu(e)
        }
        """,
        "ExpandToOwnShape",
        ["Relu"],
    ),
    "tile_by_ones": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            r = Constant<value = int64[2] {1, 1}>()
            e = Tile(x, r)
            y = Relu(e)
        }
        """,
        "TileToOwnShape",
        ["Relu"],
    ),
    "reshape_to_own_shape_with_minus_one_and_zero": (
        """
        g (float[N, 4, 6] x) => (float[N, 4, 6] y) {
            t = Constant<value = int64[3] {-1, 0, 6}>()
            e = Reshape(x, t)
            y = Relu(e)
        }
        """,
        "ReshapeToOwnShape",
        ["Relu"],
    ),
    "reshape_to_own_computed_shape": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Shape(x)
            e = Reshape(x, s)
            y = Relu(e)
        }
        """,
        "ReshapeToOwnShape",
        ["Relu"],
    ),
    "flatten_of_a_matrix_at_axis_1": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            e = Flatten<axis = 1>(x)
            y = Relu(e)
        }
        """,
        "FlattenToOwnShape",
        ["Relu"],
    ),
    "slice_covering_the_axes": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            st = Constant<value = int64[2] {0, 0}>()
            en = Constant<value = int64[2] {9223372036854775807, 4}>()
            ax = Constant<value = int64[2] {0, 1}>()
            e = Slice(x, st, en, ax)
            y = Relu(e)
        }
        """,
        "SliceCoveringAxes",
        ["Relu"],
    ),
    "slice_with_explicit_steps_of_one": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            st = Constant<value = int64[1] {-4}>()
            en = Constant<value = int64[1] {100}>()
            ax = Constant<value = int64[1] {1}>()
            sp = Constant<value = int64[1] {1}>()
            e = Slice(x, st, en, ax, sp)
            y = Relu(e)
        }
        """,
        "SliceCoveringAxes",
        ["Relu"],
    ),
    "pad_by_zeros": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            p = Constant<value = int64[4] {0, 0, 0, 0}>()
            e = Pad(x, p)
            y = Relu(e)
        }
        """,
        "PadByZeros",
        ["Relu"],
    ),
    "cast_to_own_type": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            e = Cast<to = 1>(x)
            y = Relu(e)
        }
        """,
        "CastToOwnType",
        ["Relu"],
    ),
    "where_on_a_proven_true_condition": (
        """
        g (float[N, 4] x, float[N, 4] z) => (float[N, 4] y) {
            s = Shape<start = 1>(x)
            four = Constant<value = int64[1] {4}>()
            c = Equal(s, four)
            e = Where(c, x, z)
            y = Relu(e)
        }
        """,
        "WhereOnProvenCondition",
        ["Relu"],
    ),
    "where_on_a_proven_false_condition": (
        """
        g (float[N, 4] x, float[N, 4] z) => (float[N, 4] y) {
            s = Shape<start = 1>(x)
            four = Constant<value = int64[1] {5}>()
            c = Equal(s, four)
            e = Where(c, x, z)
            y = Relu(e)
        }
        """,
        "WhereOnProvenCondition",
        ["Relu"],
    ),
    # The original reads its target with allowzero=1 (0 would mean 0); the new one is
    # computed from the proven shapes and read with allowzero=0.
    "materialize_reshape_target_of_an_allowzero_reshape": (
        """
        g (float[N, M, 6] x) => (float[N, M, 2, 3] y) {
            s = Shape<start = 0, end = 2>(x)
            c = Constant<value = int64[2] {2, 3}>()
            t = Concat<axis = 0>(s, c)
            e = Reshape<allowzero = 1>(x, t)
            y = Relu(e)
        }
        """,
        "MaterializeReshapeTarget",
        ["Reshape", "Relu"],
    ),
    "materialize_reshape_target_with_copies": (
        """
        g (float[N, M, 6] x) => (float[N, M, 2, 3] y) {
            s = Shape<start = 0, end = 2>(x)
            c = Constant<value = int64[2] {2, 3}>()
            t = Concat<axis = 0>(s, c)
            e = Reshape(x, t)
            y = Relu(e)
        }
        """,
        "MaterializeReshapeTarget",
        ["Reshape", "Relu"],
    ),
}
for _op, _neutral in (("Mul", "1.0"), ("Div", "1.0"), ("Add", "0.0"), ("Sub", "0.0")):
    FIRES[f"{_op.lower()}_by_neutral"] = (
        f"""
        g (float[N, 4] x) => (float[N, 4] y) {{
            c = Constant<value = float {{{_neutral}}}>()
            e = {_op}(x, c)
            y = Relu(e)
        }}
        """,
        f"{_op}By{'One' if _neutral == '1.0' else 'Zero'}",
        ["Relu"],
    )
for _op, _neutral in (("Mul", "1.0"), ("Add", "0.0")):
    FIRES[f"{_op.lower()}_by_neutral_commuted"] = (
        f"""
        g (float[N, 4] x) => (float[N, 4] y) {{
            c = Constant<value = float[1, 4] {{{", ".join([_neutral] * 4)}}}>()
            e = {_op}(c, x)
            y = Relu(e)
        }}
        """,
        f"{_op}By{'One' if _neutral == '1.0' else 'Zero'}Commuted",
        ["Relu"],
    )
FIRES["add_zero_to_ints"] = (
    """
    g (int64[N, 4] x) => (int64[N, 4] y) {
        c = Constant<value = int64[4] {0, 0, 0, 0}>()
        e = Add(x, c)
        y = Abs(e)
    }
    """,
    "AddByZero",
    ["Abs"],
)


def _rules_run(body: str, driver: str = "onnxscript"):
    m = model(body)
    before = proto(m)
    rules = apply_rules(m, driver=driver)
    return before, m, rules


def _fired(rules) -> dict[str, int]:
    return {name: r.fired for name, r in rules.items() if r.fired}


def _cases(table: dict) -> list:
    return [
        pytest.param(case, driver, id=f"{case}-{driver}")
        for case in sorted(table)
        for driver in RULE_DRIVERS
    ]


@pytest.mark.parametrize(("case", "driver"), _cases(FIRES))
def test_rule_fires_and_keeps_outputs(case, driver):
    body, rule, remaining = FIRES[case]
    before, after, rules = _rules_run(body, driver)
    assert _fired(rules) == {rule: 1}, {n: r.declined for n, r in rules.items() if r.declined}
    assert ops(after) == remaining
    sizes = [{"N": 0, "M": 2}, {"N": 1, "M": 1}, {"N": 3, "M": 0}] if "M" in body else SIZES_N
    assert_equivalent(before, after, sizes)


@pytest.mark.parametrize("driver", RULE_DRIVERS)
@pytest.mark.parametrize("allowzero", ["", "_of_an_allowzero_reshape"])
def test_materialized_reshape_target_copies_proven_dims(allowzero, driver):
    case = "materialize_reshape_target" + (allowzero or "_with_copies")
    _, after, _ = _rules_run(FIRES[case][0], driver)
    assert reshape_targets(after) == [[0, 0, 2, 3]]
    (reshape,) = (n for n in after.graph if n.op_type == "Reshape")
    allowzero_attr = reshape.attributes.get("allowzero")
    assert allowzero_attr is None or allowzero_attr.as_int() == 0


# name: (graph, rule, reason)
DECLINES = {
    "expand_broadcasting_up": (
        """
        g (float[N, 4] x, float[M, 1, 1] z) => (float[M, N, 4] y) {
            s = Shape(z)
            e = Expand(x, s)
            y = Relu(e)
        }
        """,
        "ExpandToOwnShape",
        "output shape is not proven equal to the input shape",
    ),
    "expand_to_a_dim_maybe_not_one": (
        """
        g (float[N, 1] x, float[M] z) => (float[N, M] y) {
            s = Shape(z)
            e = Expand(x, s)
            y = Relu(e)
        }
        """,
        "ExpandToOwnShape",
        "output shape is not proven equal to the input shape",
    ),
    "tile_by_two": (
        """
        g (float[N, 4] x) => (float[N, 8] y) {
            r = Constant<value = int64[2] {1, 2}>()
            e = Tile(x, r)
            y = Relu(e)
        }
        """,
        "TileToOwnShape",
        "output shape is not proven equal to the input shape",
    ),
    # Same shape, reversed elements: the steps, not the shape, must decide.
    "slice_reversing_with_an_equal_shape": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            st = Constant<value = int64[1] {-1}>()
            en = Constant<value = int64[1] {-9223372036854775807}>()
            ax = Constant<value = int64[1] {1}>()
            sp = Constant<value = int64[1] {-1}>()
            e = Slice(x, st, en, ax, sp)
            y = Relu(e)
        }
        """,
        "SliceCoveringAxes",
        "steps are not proven to be all 1",
    ),
    # Same shape, shifted elements.
    "pad_one_then_crop_one": (
        """
        g (float[N] x) => (float[N] y) {
            p = Constant<value = int64[2] {1, -1}>()
            e = Pad(x, p)
            y = Relu(e)
        }
        """,
        "PadByZeros",
        "pads are not proven to be all 0",
    ),
    "cast_to_another_type": (
        """
        g (float[N, 4] x) => (int64[N, 4] y) {
            e = Cast<to = 7>(x)
            y = Abs(e)
        }
        """,
        "CastToOwnType",
        "the input dtype is not proven equal to 'to'",
    ),
    "where_on_a_runtime_condition": (
        """
        g (bool[N, 4] c, float[N, 4] x, float[N, 4] z) => (float[N, 4] y) {
            e = Where(c, x, z)
            y = Relu(e)
        }
        """,
        "WhereOnProvenCondition",
        "the condition is not proven constant",
    ),
    "where_on_a_mixed_condition": (
        """
        g (float[3, 4] x, float[3, 4] z) => (float[3, 4] y) {
            s = Shape(x)
            k = Constant<value = int64[2] {3, 5}>()
            eq = Equal(s, k)
            e = Where(eq, x, z)
            y = Relu(e)
        }
        """,
        "WhereOnProvenCondition",
        "the condition is proven but mixed",
    ),
    "mul_by_ones_that_broadcast_the_shape_up": (
        """
        g (float[N, 4] x) => (float[3, N, 4] y) {
            c = Constant<value = float[3, 1, 1] {1.0, 1.0, 1.0}>()
            e = Mul(x, c)
            y = Relu(e)
        }
        """,
        "MulByOne",
        "output shape is not proven equal to the input shape",
    ),
    "add_zeros_that_broadcast_the_shape_up": (
        """
        g (float[N, 1] x) => (float[N, 4] y) {
            c = Constant<value = float[4] {0.0, 0.0, 0.0, 0.0}>()
            e = Add(x, c)
            y = Relu(e)
        }
        """,
        "AddByZero",
        "output shape is not proven equal to the input shape",
    ),
    "mul_by_two": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            c = Constant<value = float {2.0}>()
            e = Mul(x, c)
            y = Relu(e)
        }
        """,
        "MulByOne",
        "the other operand is not proven to be all 1",
    ),
    "materialize_reshape_target_already_constant": (
        """
        g (float[N, 6] x) => (float[N, 2, 3] y) {
            t = Constant<value = int64[3] {0, 2, 3}>()
            e = Reshape(x, t)
            y = Relu(e)
        }
        """,
        "MaterializeReshapeTarget",
        "the target is already a constant",
    ),
    "materialize_reshape_target_minus_one_next_to_maybe_zero": (
        """
        g (float[N, M, 6] x) => (float[N, ?] y) {
            s = Shape<start = 0, end = 1>(x)
            m = Shape<start = 1, end = 2>(x)
            six = Constant<value = int64[1] {6}>()
            m6 = Mul(m, six)
            t = Concat<axis = 0>(s, m6)
            e = Reshape(x, t)
            y = Relu(e)
        }
        """,
        "MaterializeReshapeTarget",
        "a -1 next to a dim not proven >= 1",
    ),
    # [N, 0, 3] -> [N, 3, 0] with allowzero=1: a constant 0 would copy x's dim 2, the 3
    # (found by a mutation audit: only fuzz seed 150 had a 0 output dim).
    "materialize_reshape_target_with_a_zero_dim": (
        """
        g (float[N, 0, 3] x) => (float[N, 3, 0] y) {
            n = Shape<start = 0, end = 1>(x)
            three = Shape<start = 2>(x)
            zero = Shape<start = 1, end = 2>(x)
            t = Concat<axis = 0>(n, three, zero)
            e = Reshape<allowzero = 1>(x, t)
            y = Relu(e)
        }
        """,
        "MaterializeReshapeTarget",
        "an output dim is 0 (0 would copy an input dim)",
    ),
}


@pytest.mark.parametrize(("case", "driver"), _cases(DECLINES))
def test_rule_declines_with_reason(case, driver):
    body, rule, reason = DECLINES[case]
    _, after, rules = _rules_run(body, driver)
    assert rules[rule].fired == 0
    assert rules[rule].declined[reason] >= 1, rules[rule].declined
    assert ops(after) == ops(model(body))


def test_sub_from_zero_is_not_a_neutral_element():
    # 0 - x is -x: only Mul and Add commute.
    body = """
        g (float[N, 4] x) => (float[N, 4] y) {
            c = Constant<value = float {0.0}>()
            e = Sub(c, x)
            y = Relu(e)
        }
    """
    _, after, rules = _rules_run(body)
    assert _fired(rules) == {}
    assert ops(after) == ["Sub", "Relu"]


@pytest.mark.parametrize(
    ("case", "sizes"),
    [("slice_reversing_with_an_equal_shape", {"N": 3}), ("pad_one_then_crop_one", {"N": 3})],
)
def test_declined_same_shape_ops_do_change_the_elements(case, sizes):
    """Why shape equality alone is not enough for Slice and Pad."""
    m = model(DECLINES[case][0])
    x = np.arange(1, 1 + 4 * sizes["N"], dtype=np.float32).reshape(sizes["N"], -1)
    if case == "pad_one_then_crop_one":
        x = x[:, 0]
    (y,) = run(m, {"x": x})
    assert y.shape == x.shape
    assert not np.array_equal(y, np.maximum(x, 0))


def test_neutral_element_float_convention_signs_of_zeros():
    """``-0.0 + 0.0`` is ``+0.0``: the rewrite keeps ``-0.0`` (IEEE-equal, documented)."""
    body = """
        g (float[N] x) => (float[N] y) {
            c = Constant<value = float {0.0}>()
            y = Add(x, c)
        }
    """
    before, after, rules = _rules_run(body)
    assert rules["AddByZero"].fired == 1
    x = np.array([-0.0, 0.0, 1.5], np.float32)
    (expected,), (actual,) = run(before, {"x": x}), run(after, {"x": x})
    assert np.array_equal(actual, expected)
    assert np.signbit(actual[0]) and not np.signbit(expected[0])


def test_rules_record_onnxscript_match_failures():
    """The declined reason is the message of onnxscript's ``MatchResult.fail``."""
    from onnxscript.rewriter import pattern

    m = model(DECLINES["tile_by_two"][0])
    rules = shape_rules(analyze(m))
    tracer = pattern.MatchingTracer()
    rules.apply_to_model(m, tracer=tracer)
    reasons = [
        r.match_result.reason
        for rule_results in tracer.best_matches_map.values()
        for r in rule_results
    ]
    assert "output shape is not proven equal to the input shape" in reasons


# ------------------------------------------------------------------------------------
# Squeeze with an empty ``axes`` input: onnxruntime squeezes every 1, the reference
# implementation squeezes nothing; the inferred shape follows the reference.
# ------------------------------------------------------------------------------------
EMPTY_AXES_SQUEEZE = """
    g (float[N, 4] x) => (float[N, 4] y) {
        a = Constant<value = int64[0] {}>()
        e = Squeeze(x, a)
        y = Relu(e)
    }
"""


@pytest.mark.parametrize("driver", RULE_DRIVERS)
def test_squeeze_with_empty_axes_is_not_removed_when_onnxruntime_would_squeeze(driver):
    before, after, _ = _rules_run(EMPTY_AXES_SQUEEZE, driver)
    assert "Squeeze" in ops(after)
    assert_equivalent(before, after, SIZES_N)


def test_squeeze_with_empty_axes_survives_optimize():
    before = proto(model(EMPTY_AXES_SQUEEZE))
    after = optimize(model(EMPTY_AXES_SQUEEZE))
    # At N=1 onnxruntime gives [4], where the spec's reading gives [1, 4].
    assert run(before, {"x": np.ones((1, 4), np.float32)})[0].shape == (4,)
    assert_equivalent(before, after, SIZES_N)


GRAPH_OUTPUT_EXPAND = """
    g (float[N, 4] x) => (float[N, 4] y) {
        s = Shape(x)
        y = Expand(x, s)
    }
"""


def test_dispatch_declines_a_graph_output_that_would_become_an_input():
    _, after, rules = _rules_run(GRAPH_OUTPUT_EXPAND, "dispatch")
    assert rules["ExpandToOwnShape"].fired == 0
    (reason,) = rules["ExpandToOwnShape"].declined
    assert reason.startswith("the output is a graph output")
    assert [v.name for v in after.graph.outputs] == ["y"]
    assert [v.name for v in after.graph.inputs] == ["x"]


def test_onnxscript_driver_keeps_a_graph_output_through_identity():
    before, after, rules = _rules_run(GRAPH_OUTPUT_EXPAND, "onnxscript")
    assert rules["ExpandToOwnShape"].fired == 1
    assert ops(after) == []
    assert [v.name for v in after.graph.outputs] == ["y"]
    assert_equivalent(before, after, SIZES_N)


# A branch output that a rule forwards to a value of the enclosing graph: onnxruntime
# rejects a subgraph that returns an outer-scope value directly.
BRANCH_OUTPUT_FROM_OUTER_SCOPE = """
    g (float[N, 4] x, bool c) => (float[?, 4] y) {
        r = Relu(x)
        y = If(c) <
            then_branch = t () => (float[?, 4] ty) {
                s = Shape(r)
                ty = Expand(r, s)
            },
            else_branch = f () => (float[?, 4] fy) {
                fy = Neg(r)
            }
        >
    }
"""


@pytest.mark.parametrize("driver", RULE_DRIVERS)
def test_a_branch_output_is_not_forwarded_to_an_outer_scope_value(driver):
    before, after, _ = _rules_run(BRANCH_OUTPUT_FROM_OUTER_SCOPE, driver)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        assert_same_outputs(run(after, feeds), run(before, feeds))


def test_optimize_keeps_a_branch_returning_an_outer_scope_value_valid():
    before = proto(model(BRANCH_OUTPUT_FROM_OUTER_SCOPE))
    after = optimize(model(BRANCH_OUTPUT_FROM_OUTER_SCOPE))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        assert_same_outputs(run(after, feeds), run(before, feeds))
