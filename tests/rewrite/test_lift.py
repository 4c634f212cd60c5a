"""LiftScalarArithmeticPass: scalar integer arithmetic that is only unsqueezed runs on ``[1]``.

Firing cases run before and after in onnxruntime (sizes 0 and 1, both parities);
declining cases name their reason or show which nodes stay scalar.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import LiftScalarArithmeticPass, optimize
from onnx_symdims.rewrite._lift import _topological
from tests.rewrite._rewrite_testing import apply_pass, assert_equivalent, model, ops, proto

SIZES = [{"N": n, "H": h, "W": w} for n, h, w in ((1, 0, 0), (2, 1, 3), (1, 2, 5), (3, 7, 8))]

FIRES = {
    # Swin's window padding: h//2 + (h//2)%2 and (h//2)%2, each Reshape'd to [-1].
    "swin_window_padding": (
        """
        g (float[N, H, W] x) => (float[?, ?, ?] y, float[?, ?, ?] z) {
            h = Shape<start = 1, end = 2>(x)
            s = Squeeze(h)
            two = Constant<value = int64 {2}>()
            half = Div(s, two)
            pad = Mod(half, two)
            padded = Add(half, pad)
            minus_one = Constant<value = int64[1] {-1}>()
            pad_v = Reshape(pad, minus_one)
            padded_v = Reshape(padded, minus_one)
            zero = Constant<value = int64[1] {0}>()
            pads = Concat<axis = 0>(zero, zero, zero, zero, pad_v, zero)
            y = Pad(x, pads)
            one = Constant<value = int64[1] {1}>()
            z = Slice(x, zero, padded_v, one)
        }
        """,
        ["Shape", "Div", "Mod", "Add", "Concat", "Pad", "Slice"],
        3,  # the Squeeze and both Reshapes
    ),
    # Gather(Shape(x), 1) with a scalar index: the index becomes [1].
    "gather_of_a_shape": (
        """
        g (float[N, H, W] x) => (float[?, ?] y) {
            s = Shape(x)
            one = Constant<value = int64 {1}>()
            two = Constant<value = int64 {2}>()
            h = Gather(s, one)
            w = Gather(s, two)
            hw = Mul(h, w)
            axes = Constant<value = int64[1] {0}>()
            hw_v = Unsqueeze(hw, axes)
            zero = Constant<value = int64 {0}>()
            n = Gather(s, zero)
            n_v = Unsqueeze(n, axes)
            target = Concat<axis = 0>(n_v, hw_v)
            y = Reshape(x, target)
        }
        """,
        ["Shape", "Gather", "Gather", "Mul", "Gather", "Concat", "Reshape"],
        2,
    ),
    # An operand that stays a scalar (a graph input) is broadcast against the [1] one.
    "a_scalar_operand_stays": (
        """
        g (float[N, H] x, int64 k) => (float[?, ?] y) {
            h = Shape<start = 1, end = 2>(x)
            s = Squeeze(h)
            m = Min(s, k)
            axes = Constant<value = int64[1] {0}>()
            m_v = Unsqueeze(m, axes)
            zero = Constant<value = int64[1] {0}>()
            starts = Concat<axis = 0>(zero, zero)
            big = Constant<value = int64[1] {9223372036854775807}>()
            ends = Concat<axis = 0>(big, m_v)
            y = Slice(x, starts, ends)
        }
        """,
        ["Shape", "Min", "Concat", "Concat", "Slice"],
        2,
    ),
}


@pytest.mark.parametrize("case", FIRES)
def test_lift_scalar_arithmetic_fires(case):
    body, expected_ops, removed = FIRES[case]
    before, m, rewrite = apply_pass(LiftScalarArithmeticPass, body)
    assert rewrite.fired["lift_scalar_arithmetic"] == removed
    assert ops(m) == expected_ops
    given = {"k": lambda sizes: np.array(sizes["W"], np.int64)}
    assert_equivalent(before, m, SIZES, given=given)


def _half(outputs: str, tail: str, inputs: str = "float[N, H] x") -> str:
    """``half = H // 2`` of ``x[N, H]``, then ``tail``."""
    return f"""
        g ({inputs}) => ({outputs}) {{
            h = Shape<start = 1, end = 2>(x)
            s = Squeeze(h)
            two = Constant<value = int64 {{2}}>()
            half = Div(s, two)
            {tail}
        }}
    """


#: ``[-1, H // 2]`` as a Reshape target, the scalar unsqueezed for it.
_TARGET = """axes = Constant<value = int64[1] {0}>()
            half_v = Unsqueeze(half, axes)
            minus_one = Constant<value = int64[1] {-1}>()
            target = Concat<axis = 0>(minus_one, half_v)"""

DECLINES = {
    # A Range bound must be a scalar: the value, and everything computing it, stays.
    "also_a_range_bound": (
        _half(
            "float[?, ?] y, int64[?] r",
            _TARGET
            + """
            y = Reshape(x, target)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            r = Range(zero, half, one)""",
        ),
        "a value is also used as a scalar",
    ),
    # A graph output keeps its shape [].
    "a_graph_output": (
        _half("float[?, ?] y, int64 half", _TARGET + "\n            y = Reshape(x, target)"),
        "a value is a graph output (it keeps its shape)",
    ),
    # Read inside a branch: a use the pass does not rewrite.
    "read_by_a_subgraph": (
        _half(
            "float[?, ?] y",
            _TARGET
            + """
            y = If(c) <
                then_branch = t () => (float[?, ?] r) { r = Reshape(x, target) },
                else_branch = e () => (float[?, ?] r) {
                    u = Unsqueeze(half, axes)
                    t2 = Concat<axis = 0>(u, minus_one)
                    r = Reshape(x, t2)
                }
            >""",
            inputs="float[N, H] x, bool c",
        ),
        "a value is also used as a scalar",
    ),
}


@pytest.mark.parametrize("case", DECLINES)
def test_lift_scalar_arithmetic_declines(case):
    body, reason = DECLINES[case]
    before_ops = ops(model(body))
    _, m, rewrite = apply_pass(LiftScalarArithmeticPass, body)
    assert not rewrite.fired
    assert rewrite.declined[reason] >= 1
    assert ops(m) == before_ops


@pytest.mark.parametrize(
    "body",
    [
        # Float arithmetic is not lifted (onnxruntime's scalar kernels may round otherwise).
        """
        g (float[N, H] x, float f) => (float[?] y) {
            g2 = Mul(f, f)
            axes = Constant<value = int64[1] {0}>()
            y = Unsqueeze(g2, axes)
        }
        """,
        # A node of scalars alone has nothing of [1] to compute on: it stays.
        """
        g (float[N, H] x, int64 k) => (float[?, ?] y) {
            two = Constant<value = int64 {2}>()
            half = Div(k, two)
            axes = Constant<value = int64[1] {0}>()
            half_v = Unsqueeze(half, axes)
            minus_one = Constant<value = int64[1] {-1}>()
            target = Concat<axis = 0>(minus_one, half_v)
            y = Reshape(x, target)
        }
        """,
        # Unsqueeze to [1, 1] is not a [1] vector.
        """
        g (float[N, H] x) => (int64[?, ?] y) {
            h = Shape<start = 1, end = 2>(x)
            s = Squeeze(h)
            axes = Constant<value = int64[2] {0, 1}>()
            y = Unsqueeze(s, axes)
        }
        """,
    ],
)
def test_lift_scalar_arithmetic_leaves_other_scalars(body):
    before_ops = ops(model(body))
    _, m, rewrite = apply_pass(LiftScalarArithmeticPass, body)
    assert not rewrite.fired
    assert ops(m) == before_ops


def test_optimize_lifts_after_the_rounds_prove_the_scalars():
    """In the pipeline: the Squeeze and both Reshapes go, outputs unchanged."""
    body, _, _ = FIRES["swin_window_padding"]
    m = model(body)
    before = proto(m)
    result = optimize(m)
    assert "Squeeze" not in ops(result) and "Reshape" not in ops(result)
    assert_equivalent(before, result, SIZES)


#: Found by a mutation audit: each would be lifted wrongly with the check it names
#: weakened (a [1, 1] or [1] result becoming [1], a graph output losing its node).
NOT_A_ONE_ELEMENT_VECTOR = {
    # Unsqueeze to [1, 1]: not the [1] a lifted value has
    "unsqueezed_twice": _half(
        "int64[?, ?] y",
        """axes = Constant<value = int64[2] {0, 1}>()
            half_v = Unsqueeze(half, axes)
            y = Concat<axis = 0>(half_v, half_v)""",
    ),
    # Reshape to [1, 1]
    "reshaped_to_one_by_one": _half(
        "int64[?, ?] y",
        """target = Constant<value = int64[2] {1, 1}>()
            half_v = Reshape(half, target)
            y = Concat<axis = 0>(half_v, half_v)""",
    ),
    # The Squeeze of a [1, 1] tensor: its input is not the [1] the scalar becomes
    "squeeze_of_one_by_one": """
        g (float[N, H] x) => (int64[?] y) {
            h = Shape<start = 1, end = 2>(x)
            zero_v = Constant<value = int64[1] {0}>()
            hh = Unsqueeze(h, zero_v)
            s = Squeeze(hh)
            two = Constant<value = int64 {2}>()
            half = Div(s, two)
            half_v = Unsqueeze(half, zero_v)
            y = Concat<axis = 0>(half_v, half_v)
        }
    """,
    # The unsqueezed [1] is a graph output: its node stays (it keeps the output's name)
    "the_vector_is_a_graph_output": _half(
        "int64[1] half_v",
        """axes = Constant<value = int64[1] {0}>()
            half_v = Unsqueeze(half, axes)""",
    ),
}


@pytest.mark.parametrize("case", NOT_A_ONE_ELEMENT_VECTOR)
def test_lift_scalar_arithmetic_needs_a_one_element_vector_it_may_replace(case):
    body = NOT_A_ONE_ELEMENT_VECTOR[case]
    before_ops = ops(model(body))
    before, m, rewrite = apply_pass(LiftScalarArithmeticPass, body)
    assert not rewrite.fired
    assert ops(m) == before_ops
    assert_equivalent(before, m, SIZES)


def test_lifted_values_follow_the_graph_order_not_the_memory_order():
    """Values hash by identity: walking a set of them made the new nodes, and the names
    onnx-ir gives them, depend on where objects lived (segformer optimized after another
    model got other node names)."""
    m = model(FIRES["gather_of_a_shape"][0])
    position = {node: i for i, node in enumerate(m.graph)}
    values = [n.outputs[0] for n in m.graph if n.op_type in ("Gather", "Mul")]
    assert [v.name for v in values] == ["h", "w", "hw", "n"]
    assert _topological(values, position) == values  # each after the ones it reads
    assert _topological(values[::-1], position) == values
