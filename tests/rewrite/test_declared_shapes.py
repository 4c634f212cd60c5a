"""Declared shapes never justify a rewrite; onnxscript's unsound Reshape rule stays out.

A ``value_info`` or a graph output may claim "same shape" where the graph computes
another one (a stale export, a wrong annotation). onnxruntime does not check those
claims, so the original runs with the true shape, and a rewrite trusting the claim would
change the outputs. Each graph here declares the lie and is fed inputs where the truth
differs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnx_symdims.rewrite import analyze, optimize
from tests.rewrite._rewrite_testing import (
    RULE_DRIVERS,
    apply_rules,
    assert_same_outputs,
    model,
    ops,
    proto,
    run,
)

# name: (graph, op that must stay, feeds where the declared shape is false)
LIES = {
    "stale_value_info_on_expand": (
        """
        g (float[N, 4] x, int64[2] s) => (float[N, 4] y) <float[N, 4] e> {
            e = Expand(x, s)
            y = Relu(e)
        }
        """,
        "Expand",
        {"x": np.ones((1, 4), np.float32), "s": np.array([5, 4], np.int64)},
    ),
    "wrong_graph_output_on_expand": (
        """
        g (float[N, 4] x, int64[2] s) => (float[N, 4] e) {
            e = Expand(x, s)
        }
        """,
        "Expand",
        {"x": np.ones((1, 4), np.float32), "s": np.array([3, 4], np.int64)},
    ),
    "stale_value_info_on_reshape": (
        """
        g (float[N, 6] x, int64[2] t) => (float[?, ?] y) <float[N, 6] r> {
            r = Reshape(x, t)
            y = Relu(r)
        }
        """,
        "Reshape",
        {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "t": np.array([3, 4], np.int64)},
    ),
    "wrong_graph_output_on_reshape": (
        """
        g (float[N, 6] x, int64[2] t) => (float[N, 6] r) {
            r = Reshape(x, t)
        }
        """,
        "Reshape",
        {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "t": np.array([4, 3], np.int64)},
    ),
    "stale_value_info_on_tile": (
        """
        g (float[N, 4] x, int64[2] r) => (float[?, ?] y) <float[N, 4] t> {
            t = Tile(x, r)
            y = Relu(t)
        }
        """,
        "Tile",
        {"x": np.ones((2, 4), np.float32), "r": np.array([2, 1], np.int64)},
    ),
}


@pytest.mark.parametrize("driver", RULE_DRIVERS)
@pytest.mark.parametrize("case", sorted(LIES))
def test_declared_shapes_do_not_justify_rules(case, driver):
    body, kept, feeds = LIES[case]
    m = model(body)
    before = proto(m)
    apply_rules(m, driver=driver)
    assert kept in ops(m)
    assert_same_outputs(run(m, feeds), run(before, feeds))


@pytest.mark.parametrize("case", sorted(LIES))
def test_declared_shapes_do_not_justify_optimize(case):
    body, kept, feeds = LIES[case]
    before = proto(model(body))
    after = optimize(model(body))
    assert kept in ops(after)
    expected = run(before, feeds)
    # The original indeed computes a shape other than the declared one.
    assert expected[0].shape != feeds["x"].shape
    assert_same_outputs(run(after, feeds), expected)


def test_analyze_sets_declared_shapes_aside():
    m = model(LIES["stale_value_info_on_expand"][0])
    facts = analyze(m)
    (expand,) = (n for n in m.graph if n.op_type == "Expand")
    x = m.graph.inputs[0]
    assert not facts.same_shape(facts.shape(expand.outputs[0]), facts.shape(x))


# ------------------------------------------------------------------------------------
# onnxscript's MaterializeReshapeShape (left out of the pipeline)
# ------------------------------------------------------------------------------------
# The target [N, 0] is read with allowzero=1. With our shapes on the model, onnxscript's
# rule writes [-1, 0]: the -1 stands next to a 0, which onnxruntime rejects.
ZERO_NEXT_TO_SYMBOL = """
    g (float[N, 0, 3] x) => (float[N, 0] y) {
        s = Shape<start = 0, end = 1>(x)
        z = Constant<value = int64[1] {0}>()
        t = Concat<axis = 0>(s, z)
        r = Reshape<allowzero = 1>(x, t)
        y = Relu(r)
    }
"""


def _materialize_reshape_shape_rule():
    from onnxscript import rewriter

    rules = [
        r
        for r in getattr(rewriter, "_DEFAULT_REWRITE_RULES", ())
        if getattr(r, "name", None) == "MaterializeReshapeShape"
    ]
    if not rules:
        pytest.skip("this onnxscript has no MaterializeReshapeShape rule")
    return rules[0]


def test_onnxscript_materialize_reshape_shape_breaks_the_model_with_our_shapes():
    """Why the pipeline leaves that rule out."""
    from onnxscript import rewriter

    import onnx_symdims

    m = model(ZERO_NEXT_TO_SYMBOL)
    x = np.zeros((2, 0, 3), np.float32)
    assert run(m, {"x": x})[0].shape == (2, 0)
    onnx_symdims.infer_symbolic_shapes(m)
    rewriter.rewrite(m, pattern_rewrite_rules=[_materialize_reshape_shape_rule()])
    (reshape,) = (n for n in m.graph if n.op_type == "Reshape")
    target = reshape.inputs[1].producer().attributes["value"].as_tensor().numpy().tolist()
    assert target == [-1, 0]
    with pytest.raises(Exception, match="cannot be 0 in combination with -1"):
        run(m, {"x": x})


@pytest.mark.parametrize("n", [0, 1, 2])
def test_optimize_keeps_the_zero_next_to_symbol_reshape_runnable(n):
    _materialize_reshape_shape_rule()  # the hazard exists in this onnxscript
    before = proto(model(ZERO_NEXT_TO_SYMBOL))
    after = optimize(model(ZERO_NEXT_TO_SYMBOL))
    feeds = {"x": np.zeros((n, 0, 3), np.float32)}
    assert_same_outputs(run(after, feeds), run(before, feeds))


def test_optimize_returns_a_model_onnx_checks():
    after = optimize(proto(model(ZERO_NEXT_TO_SYMBOL)))
    onnx.checker.check_model(after, full_check=True)


# ------------------------------------------------------------------------------------
# Initializers that are graph inputs: the user may feed other values
# ------------------------------------------------------------------------------------
OVERRIDABLE = {
    "reshape_target": (
        """
        g (float[N, 4] x, int64[2] t) => (float[?, ?] y) <int64[2] t = {0, 4}> {
            r = Reshape(x, t)
            y = Relu(r)
        }
        """,
        {"t": np.array([4, -1], np.int64)},
    ),
    "expand_target": (
        """
        g (float[N, 4] x, int64[2] s) => (float[?, ?] y) <int64[2] s = {1, 4}> {
            r = Expand(x, s)
            y = Relu(r)
        }
        """,
        {"x": np.ones((1, 4), np.float32), "s": np.array([3, 4], np.int64)},
    ),
    "mul_by_one": (
        """
        g (float[N, 4] x, float k) => (float[N, 4] y) <float k = {1.0}> {
            e = Mul(x, k)
            y = Relu(e)
        }
        """,
        {"k": np.array(3.0, np.float32)},
    ),
    "add_zero": (
        """
        g (float[N, 4] x, float k) => (float[N, 4] y) <float k = {0.0}> {
            e = Add(k, x)
            y = Relu(e)
        }
        """,
        {"k": np.array(-0.5, np.float32)},
    ),
}


@pytest.mark.parametrize("case", sorted(OVERRIDABLE))
def test_overridable_initializers_are_not_constants(case):
    """onnxscript's own ``x * 1`` / ``x + 0`` rules read such an initializer as a
    constant; the pipeline leaves them out (``NeutralElement`` never does)."""
    body, fed = OVERRIDABLE[case]
    before = proto(model(body))
    after = optimize(model(body))
    assert [v.name for v in after.graph.inputs] == [i.name for i in before.graph.input]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for feeds in ({"x": x}, {"x": x, **fed}):
        assert_same_outputs(run(after, feeds), run(before, feeds))
